-- :checkhealth specfill
local M = {}

function M.check()
  local health = vim.health
  health.start('specfill')
  if vim.fn.has('nvim-0.11') == 1 then
    local v = vim.version()
    health.ok(('Neovim %d.%d.%d'):format(v.major, v.minor, v.patch))
  else
    health.error('Neovim 0.11 or newer is needed (vim.lsp.config / vim.lsp.enable)')
  end
  local specfill = require('specfill')
  local install = require('specfill.install')
  local installed = install.installed()
  if installed then
    local wanted = install.source_version()
    local report = (wanted and installed.version ~= wanted) and health.warn or health.ok
    report(('installed server %s in %s (llama.cpp %s build, %s)'):format(installed.version, install.dir,
      installed.build, installed.batch_invariant and 'batch-invariant' or 'not batch-invariant'),
      wanted and installed.version ~= wanted and { 'this plugin is ' .. wanted .. ': run :SpecfillInstall' } or nil)
  else
    health.info(('no server installed in %s (:SpecfillInstall)'):format(install.dir))
  end
  local cmd = specfill.command()
  local exe = vim.fn.exepath(cmd[1])
  if exe == '' then
    health.error(('server executable %q not found'):format(cmd[1]),
      { 'run :SpecfillInstall, or set server.path in setup{}, or put `specfill` on PATH' })
    return
  end
  health.ok('server executable: ' .. exe)
  local model = vim.tbl_get(specfill.settings, 'model', 'path') or ''
  -- The same command with `check` for `serve` or `attach`: it checks the model file and the build.
  local last = #cmd
  for i = 2, #cmd do
    if cmd[i] == 'serve' or cmd[i] == 'attach' then
      last = i - 1
      break
    end
  end
  local args = vim.list_extend({ exe }, vim.list_slice(cmd, 2, last))
  table.insert(args, 'check')
  if model ~= '' then
    vim.list_extend(args, { '--model', model })
  end
  local result = vim.system(args, { text = true }):wait(60000)
  if result.code == 0 then
    for line in vim.gsplit(vim.trim(result.stdout), '\n') do
      health.ok(line)
    end
  else
    health.error('model check failed: ' .. vim.trim(result.stderr or ''), { 'set model.path to a GGUF file' })
  end
  local client = specfill.client()
  if client then
    local stats = client:request_sync('specfill/stats', {}, 5000)
    if stats and stats.result then
      local r = stats.result
      local report = r.state == 'ready' and health.ok or (r.state == 'loading' and health.info or health.error)
      report(('server running (client %s): %s %s'):format(client.id, r.state, r.model or ''))
      if r.shared then
        health.info(('shared server: %d session(s) use it (`specfill status` lists them)'):format(r.sessions or 0))
      else
        health.info('a server of its own (server.shared is false)')
      end
      health.info('suggestions here: ' .. specfill.status())
    else
      health.warn('server running but not answering specfill/stats')
    end
  else
    health.info('server not started yet: open a file (setup{} must have run)')
  end
end

return M
