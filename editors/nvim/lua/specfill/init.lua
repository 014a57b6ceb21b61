-- specfill for Neovim: starts the specfill language server and shows its inline suggestions.
--
--   require('specfill').setup {
--     completion = { maxTokens = 32 },      -- any server setting (:help specfill-settings)
--     keymaps = { accept = '<Tab>' },       -- plugin options below
--   }
local M = {}

local schema = require('specfill.schema')
local ghost = require('specfill.ghost')
local install = require('specfill.install')
local settings = require('specfill.settings')
local keymaps = require('specfill.keymaps')
local controls = require('specfill.controls')
local report = require('specfill.report')

-- Plugin options; every other top-level key is a server setting group from the schema.
M.defaults = {
  -- Command that starts the server; nil = { server.path or 'specfill', 'attach' } (server.shared; else 'serve').
  cmd = nil,
  -- Filetypes to attach to; nil = every file.
  filetypes = nil,
  -- Wait after a keystroke before asking the server (it debounces too: completion.debounceMs).
  debounce_ms = 30,
  -- Highlight group of the ghost text.
  hl_group = 'Comment',
  -- Insert-mode keys; false disables one. Each falls back to the key's own meaning when no
  -- suggestion is shown.
  keymaps = {
    accept = '<Tab>',
    accept_word = '<M-Right>',
    accept_line = '<M-Down>',
    next = '<M-]>',
    prev = '<M-[>',
    dismiss = '<C-]>',
    -- Ask for a suggestion now; with completion.trigger manual, the only way to get one.
    trigger = '<M-\\>',
  },
  -- Use Neovim's own vim.lsp.inline_completion where it exists (0.12+).
  builtin = vim.lsp.inline_completion ~= nil,
}

M.config = vim.deepcopy(M.defaults)
M.log = report.lines -- the server's window/logMessage lines, newest last (:SpecfillLog)
M.settings = {} -- server settings as sent: nested, camelCase, only what the user set

--- The server command: `cmd`, else server.path, else `specfill` on PATH, else the server
--- install() put under stdpath('data')/specfill.
function M.command()
  if M.config.cmd then
    return M.config.cmd
  end
  local exe
  local path = vim.tbl_get(M.settings, 'server', 'path')
  if path and path ~= '' then
    exe = path
  elseif vim.fn.executable('specfill') == 1 then
    exe = 'specfill'
  else
    local installed = install.installed()
    exe = installed and installed.server or 'specfill'
  end
  local function setting(name)
    local value = vim.tbl_get(M.settings, 'server', name)
    if value == nil then
      return schema['server.' .. name].default
    end
    return value
  end
  if not setting('shared') then
    return { exe, 'serve' }
  end
  -- One server for every Neovim and VS Code window of this user and install.
  return { exe, 'attach', '--idle-exit', tostring(setting('idleMinutes') * 60) }
end

--- Install or repair the server (see :help specfill-install); { sync = true } for build hooks.
function M.install(opts)
  opts = opts or {}
  local on_done = opts.on_done
  opts.on_done = function(ok, result)
    if ok and not opts.sync then
      vim.schedule(function() M.setup(M.opts) end) -- start the server just installed
    end
    if on_done then
      on_done(ok, result)
    end
  end
  return install.install(opts)
end

function M.client()
  return vim.lsp.get_clients({ name = 'specfill' })[1]
end

local function follow(current)
  ghost.manual = vim.tbl_get(current, 'completion', 'trigger') == 'manual'
  ghost.wanted = function(bufnr) return M.language_on(vim.bo[bufnr].filetype) end
end

function M.setup(opts)
  opts = opts or {}
  M.opts = opts
  local plugin, server = {}, {}
  for key, value in pairs(opts) do
    if M.defaults[key] ~= nil or key == 'cmd' or key == 'filetypes' then
      plugin[key] = value
    else
      server[key] = value
    end
  end
  M.config = vim.tbl_deep_extend('force', vim.deepcopy(M.defaults), plugin)
  local problems
  M.settings, problems = settings.validate(server)
  M.settings = require('specfill.models').with_saved(M.settings)
  for _, p in ipairs(problems) do
    vim.notify('specfill: ' .. p, vim.log.levels.WARN)
  end
  ghost.debounce_ms, ghost.hl_group = M.config.debounce_ms, M.config.hl_group
  follow(M.settings)

  local cmd = M.command()
  if vim.fn.executable(cmd[1]) ~= 1 then
    if install.running() then
      return -- setup() runs again when the install is done
    end
    vim.notify(('specfill: the server is not installed (%q not found): run :SpecfillInstall, or set server.path ' ..
      '(:checkhealth specfill)'):format(cmd[1]), vim.log.levels.ERROR)
    return
  end
  local installed, wanted = install.installed(), install.source_version()
  if installed and cmd[1] == installed.server and wanted and installed.version ~= wanted then
    vim.notify(('specfill: the installed server is %s and this plugin %s: run :SpecfillInstall to update it')
      :format(installed.version, wanted), vim.log.levels.WARN)
  end
  vim.lsp.config('specfill', {
    cmd = cmd,
    filetypes = M.config.filetypes,
    -- Only real files; the root is their repository (or folder), but one server serves all
    -- roots: each server holds a model in memory.
    root_dir = function(bufnr, on_dir)
      local name = vim.api.nvim_buf_get_name(bufnr)
      if name ~= '' then
        on_dir(vim.fs.root(bufnr, { '.git' }) or vim.fs.dirname(name))
      end
    end,
    reuse_client = function(client, config)
      return client.name == config.name
    end,
    init_options = M.settings,
    settings = { specfill = M.settings },
    handlers = {
      ['window/logMessage'] = report.on_log_message,
      ['specfill/inlineCompletion/refresh'] = ghost.on_refresh,
    },
    on_exit = function(code, signal)
      if code ~= 0 and not M.stopping then
        M.lost = true -- the next keystroke starts it again
        vim.schedule(function()
          vim.notify(('specfill: the server stopped (exit %d%s); the next keystroke starts it again'):format(
            code, signal ~= 0 and (', signal ' .. signal) or ''), vim.log.levels.WARN)
        end)
      end
    end,
    on_attach = function(client, bufnr)
      if M.config.builtin then
        vim.lsp.inline_completion.enable(true, { bufnr = bufnr })
      else
        ghost.attach(client, bufnr)
      end
    end,
  })
  vim.lsp.enable('specfill')
  keymaps.set(M.config.keymaps, M.config.builtin)
  vim.api.nvim_create_autocmd('TextChangedI', {
    group = vim.api.nvim_create_augroup('specfill-restart', { clear = true }),
    callback = function()
      if M.lost and not M.client() then
        M.lost = false
        M.restart()
      end
    end,
  })
end

--- Changes server settings while running (workspace/didChangeConfiguration).
function M.configure(changes)
  local valid, problems = settings.validate(changes)
  for _, p in ipairs(problems) do
    vim.notify('specfill: ' .. p, vim.log.levels.WARN)
  end
  M.settings = settings.merge(vim.deepcopy(M.settings), valid)
  follow(M.settings)
  local client = M.client()
  if client then
    client.settings = { specfill = M.settings }
    client:notify('workspace/didChangeConfiguration', { settings = { specfill = M.settings } })
  end
end

function M.restart()
  M.stopping = true
  vim.lsp.enable('specfill', false)
  vim.defer_fn(function()
    M.stopping = false
    vim.lsp.enable('specfill')
  end, 500)
end

-- The controls and reports, where users and statuslines have always found them.
M.validate = settings.validate
M.language_on, M.toggle, M.snooze, M.status = controls.language_on, controls.toggle, controls.snooze, controls.status
M.stats, M.show_log = report.stats, report.show_log
M.ghost = ghost
return M
