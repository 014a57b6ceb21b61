-- What the server reports: its log (window/logMessage, kept for :SpecfillLog) and its
-- statistics (:SpecfillStats).
local M = {}

M.lines = {} -- the server's window/logMessage lines, newest last
local LINES = 2000
local LEVEL = { 'ERROR', 'WARN', 'INFO', 'LOG' }

--- The window/logMessage handler: keeps the line, then Neovim's own handler.
function M.on_log_message(err, result, ctx)
  table.insert(M.lines, ('%s [%s] %s'):format(os.date('%H:%M:%S'), LEVEL[result.type] or '?', result.message))
  if #M.lines > LINES then
    table.remove(M.lines, 1)
  end
  return vim.lsp.handlers['window/logMessage'](err, result, ctx)
end

--- Calls `callback(stats)` with the server's specfill/stats, or prints them.
function M.stats(callback)
  local client = require('specfill').client()
  if not client then
    vim.notify('specfill: the server is not running', vim.log.levels.WARN)
    return
  end
  client:request('specfill/stats', {}, function(err, result)
    if callback then
      return callback(result, err)
    end
    if err then
      vim.notify('specfill: ' .. err.message, vim.log.levels.ERROR)
      return
    end
    local lines = {
      ('model %s (%s), %s'):format(result.model or '-', result.family or '-', result.state),
      ('requests %d, cache hits %d, cancelled %d, shown %d, accepted %d'):format(result.requests,
        result.cache_hits, result.cancelled, result.shown, result.accepted),
      ('a new suggestion in p50 %s ms, p95 %s ms; every answer p50 %s ms; ttft p50 %s ms'):format(
        result.new_suggestion_ms.p50, result.new_suggestion_ms.p95, result.latency_ms.p50, result.ttft_ms.p50),
      ('accepted per step %s, acceptance rate %s'):format(result.accepted_per_step, result.acceptance_rate),
    }
    local d = result.draft
    if type(d) == 'table' then
      table.insert(lines, ('draft %s: acceptance %s, %s ms a token, speed-up %s'):format(vim.fs.basename(d.model),
        d.acceptance ~= vim.NIL and ('%.2f'):format(d.acceptance) or '-', d.ms_per_token,
        d.speedup ~= vim.NIL and (d.speedup .. 'x') or '- (nothing drafted yet)'))
    end
    vim.notify(table.concat(lines, '\n'))
  end)
end

--- The server's log (window/logMessage, at its logLevel setting) in a scratch buffer.
function M.show_log()
  vim.cmd('new')
  local buf = vim.api.nvim_get_current_buf()
  vim.bo[buf].buftype, vim.bo[buf].bufhidden, vim.bo[buf].swapfile = 'nofile', 'wipe', false
  vim.api.nvim_buf_set_name(buf, 'specfill://log')
  local lines = {}
  for _, entry in ipairs(M.lines) do
    vim.list_extend(lines, vim.split(entry, '\n', { plain = true }))
  end
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, #lines > 0 and lines or { '(nothing logged yet)' })
  vim.bo[buf].modifiable = false
end

return M
