-- Installing the server under stdpath('data')/specfill, from the checkout this plugin lives in:
-- a Python 3.11+ environment, specfill, llama.cpp built with the project's flags (or a built wheel
-- pip finds: pip's own configuration applies) and the default model. The shared installer
-- (editors/install/specfill_install.py) writes installed.json last, so a half-done install is
-- never used.
local M = {}

local jobs = require('specfill.jobs')

M.dir = vim.fs.joinpath(vim.fn.stdpath('data'), 'specfill')
local here = debug.getinfo(1, 'S').source:sub(2) -- <checkout>/editors/nvim/lua/specfill/install.lua
local plugin_root = vim.fs.dirname(vim.fs.dirname(vim.fs.dirname(here))) -- editors/nvim
M.source = vim.fs.dirname(vim.fs.dirname(plugin_root)) -- the checkout
M.script = vim.fs.joinpath(vim.fs.dirname(plugin_root), 'install', 'specfill_install.py')
local PYTHONS = { 'python3.13', 'python3.12', 'python3.11', 'python3', 'python' }
local job = nil

--- The installed server ({ version, server, build, ... }) if it is whole, else nil.
function M.installed()
  local f = io.open(vim.fs.joinpath(M.dir, 'installed.json'), 'r')
  if not f then
    return nil
  end
  local ok, info = pcall(vim.json.decode, f:read('*a'))
  f:close()
  if ok and type(info) == 'table' and info.server and vim.fn.executable(info.server) == 1 then
    return info
  end
  return nil
end

--- The version of the checkout the plugin lives in (pyproject.toml), or nil.
function M.source_version()
  local f = io.open(vim.fs.joinpath(M.source, 'pyproject.toml'), 'r')
  if not f then
    return nil
  end
  local text = f:read('*a')
  f:close()
  return text:match('\nversion = "([^"]+)"')
end

--- A Python 3.11+ to install with: `configured`, else the first good one on PATH; or nil, why.
function M.find_python(configured)
  local seen = {}
  for _, exe in ipairs(configured and configured ~= '' and { configured } or PYTHONS) do
    if vim.fn.executable(exe) == 1 then
      local out = vim.system({ exe, '-c', 'import sys; print("%d.%d" % sys.version_info[:2])' }, { text = true })
        :wait(10000)
      local major, minor = (out.stdout or ''):match('(%d+)%.(%d+)')
      major, minor = tonumber(major), tonumber(minor)
      if major and (major > 3 or (major == 3 and minor >= 11)) then
        return exe
      end
      if major then
        table.insert(seen, ('%s %d.%d'):format(exe, major, minor))
      end
    end
  end
  local found = #seen > 0 and (' (found: ' .. table.concat(seen, ', ') .. ')') or ''
  if configured and configured ~= '' then
    return nil, ('server.python is %s, which is not a Python 3.11 or newer%s'):format(configured, found)
  end
  return nil, ('specfill needs Python 3.11 or newer to install its server, and none is on PATH%s: install one, '
    .. 'or set server.python in setup{} to its path'):format(found)
end

local function headless()
  return #vim.api.nvim_list_uis() == 0
end

--- Install (or repair) the server. opts: sync (wait, for plugin managers' build hooks; a failure
--- in a headless Neovim exits it with status 1), python, source, on_done(ok, info_or_error).
function M.install(opts)
  opts = opts or {}
  local report = opts.sync and headless() and function(msg) io.stdout:write('specfill: ' .. msg .. '\n') end
    or function(msg, level) vim.schedule(function() vim.notify('specfill: ' .. msg, level) end) end
  local function finish(ok, result)
    if ok then
      report(('server %s installed in %s (%s build)'):format(result.version, M.dir, result.build))
    else
      report(result, vim.log.levels.ERROR)
    end
    if opts.on_done then
      opts.on_done(ok, result)
    end
    if opts.sync and headless() and not ok then
      vim.cmd('cquit 1')
    end
    return ok, result
  end
  if job then
    return finish(false, 'an install is already running')
  end
  local python, why = M.find_python(opts.python or vim.tbl_get(require('specfill').settings, 'server', 'python'))
  if not python then
    return finish(false, why)
  end
  local source = opts.source or M.source
  if vim.fn.filereadable(vim.fs.joinpath(source, 'pyproject.toml')) ~= 1 and not source:match('%.whl$') then
    return finish(false, ('no specfill checkout at %s: pass install({ source = <checkout or wheel> })'):format(source))
  end
  report(('installing the server into %s with %s'):format(M.dir, python))
  local outcome = nil
  local t0 = vim.uv.hrtime()
  local function on_message(msg)
    if msg.step then
      report(('%s (%d s)'):format(msg.message, (vim.uv.hrtime() - t0) / 1e9))
    else
      outcome = msg
    end
  end
  local kind = source:match('%.whl$') and '--wheel' or '--source'
  local function done(result)
    job = nil
    if result.code == 0 and outcome and outcome.done then
      return finish(true, outcome)
    end
    return finish(false, outcome and outcome.error or ('the installer stopped (exit %d): %s'):format(result.code,
      vim.trim(result.stderr or '')))
  end
  job = jobs.start({ python, M.script, '--dir', M.dir, kind, source }, on_message, not opts.sync and done or nil)
  if opts.sync then
    return done(job:wait())
  end
  return true
end

--- Cancel a running install: the installer stops pip and leaves nothing that could be used.
function M.cancel()
  return jobs.stop(job)
end

function M.running()
  return job ~= nil
end

return M
