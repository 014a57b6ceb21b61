-- Child processes that report in JSON lines (the server's installer, `specfill model pull`):
-- each decoded line goes to on_message; SIGTERM stops one cleanly, leaving nothing half-made
-- in use.
local M = {}

--- Starts `cmd`; on_exit(result) as vim.system calls it (nil: the caller waits).
function M.start(cmd, on_message, on_exit)
  local pending = ''
  return vim.system(cmd, { text = true, stdout = function(_, data)
    pending = pending .. (data or '')
    while true do
      local line, rest = pending:match('^([^\n]*)\n(.*)$')
      if not line then
        break
      end
      pending = rest
      local ok, msg = pcall(vim.json.decode, line)
      if ok and type(msg) == 'table' then
        on_message(msg)
      end
    end
  end }, on_exit)
end

--- Stops a running job; false when there is none.
function M.stop(job)
  if not job then
    return false
  end
  job:kill(15)
  return true
end

return M
