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
M.log = {} -- the server's window/logMessage lines, newest last (:SpecfillLog)
local LOG_LINES = 2000
local LEVEL = { 'ERROR', 'WARN', 'INFO', 'LOG' }
M.settings = {} -- server settings as sent: nested, camelCase, only what the user set

local function is_group(key)
  for name in pairs(schema) do
    if name == key or vim.startswith(name, key .. '.') then
      return true
    end
  end
  return false
end

local lua_type = { string = 'string', integer = 'number', number = 'number', boolean = 'boolean',
  array = 'table', object = 'table' }

-- A list of strings, or a map of names to booleans, as the schema says.
local function elements_ok(entry, value)
  if entry.type == 'array' then
    return vim.islist(value) and vim.iter(value):all(function(v) return type(v) == 'string' end)
  elseif entry.type == 'object' then
    for k, v in pairs(value) do
      if type(k) ~= 'string' or type(v) ~= 'boolean' then
        return false
      end
    end
  end
  return true
end

--- Checks user settings against the schema; returns the valid ones and a list of problems.
function M.validate(settings, prefix, problems)
  local out = {}
  problems = problems or {}
  for key, value in pairs(settings) do
    local name = prefix and (prefix .. '.' .. key) or key
    local entry = schema[name]
    if entry then
      local ok = type(value) == lua_type[entry.type]
        and (entry.type ~= 'integer' or math.floor(value) == value)
        and (type(value) ~= 'table' or elements_ok(entry, value))
        and (not entry.enum or vim.tbl_contains(entry.enum, value))
        and (not entry.minimum or value >= entry.minimum)
        and (not entry.maximum or value <= entry.maximum)
      if ok then
        out[key] = (entry.type == 'object' and next(value) == nil) and vim.empty_dict() or value
      else
        table.insert(problems, ('%s: invalid value %s (default %s)'):format(name, vim.inspect(value),
          vim.inspect(entry.default)))
      end
    elseif type(value) == 'table' and is_group(name) then
      out[key] = M.validate(value, name, problems)
    else
      table.insert(problems, name .. ': unknown setting')
    end
  end
  if next(out) == nil then
    out = vim.empty_dict() -- an object on the wire, not []
  end
  return out, problems
end

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

local function map(lhs, fn, fallback_key)
  if not lhs then
    return
  end
  vim.keymap.set('i', lhs, function()
    if not fn() then
      vim.api.nvim_feedkeys(vim.keycode(fallback_key or lhs), 'n', false)
    end
  end, { desc = 'specfill', silent = true })
end

local function set_keymaps(keys)
  if M.config.builtin then
    local ic = vim.lsp.inline_completion
    map(keys.accept, function() return ic.get() end)
    map(keys.next, function() ic.select({ count = 1 }) return true end)
    map(keys.prev, function() ic.select({ count = -1 }) return true end)
    return
  end
  map(keys.accept, ghost.accept)
  map(keys.accept_word, ghost.accept_word)
  map(keys.accept_line, ghost.accept_line)
  map(keys.next, function() return ghost.cycle(nil, 1) end)
  map(keys.prev, function() return ghost.cycle(nil, -1) end)
  map(keys.dismiss, ghost.dismiss)
  map(keys.trigger, function() return ghost.trigger() end)
end

-- Settings merged as the schema says: groups and maps by key, lists replaced whole.
local function merge(into, from, prefix)
  for key, value in pairs(from) do
    local name = prefix and (prefix .. '.' .. key) or key
    local entry = schema[name]
    if type(value) == 'table' and not (entry and entry.type == 'array') and type(into[key]) == 'table' then
      merge(into[key], value, name)
    else
      into[key] = value
    end
  end
  return into
end

local function follow(settings)
  ghost.manual = vim.tbl_get(settings, 'completion', 'trigger') == 'manual'
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
  M.settings, problems = M.validate(server)
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
      ['window/logMessage'] = function(err, result, ctx)
        table.insert(M.log, ('%s [%s] %s'):format(os.date('%H:%M:%S'), LEVEL[result.type] or '?', result.message))
        if #M.log > LOG_LINES then
          table.remove(M.log, 1)
        end
        return vim.lsp.handlers['window/logMessage'](err, result, ctx)
      end,
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
  set_keymaps(M.config.keymaps)
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
function M.configure(settings)
  local valid, problems = M.validate(settings)
  for _, p in ipairs(problems) do
    vim.notify('specfill: ' .. p, vim.log.levels.WARN)
  end
  M.settings = merge(vim.deepcopy(M.settings), valid)
  follow(M.settings)
  local client = M.client()
  if client then
    client.settings = { specfill = M.settings }
    client:notify('workspace/didChangeConfiguration', { settings = { specfill = M.settings } })
  end
end

--- Whether suggestions are on for a filetype (completion.languages over its defaults).
function M.language_on(filetype)
  local languages = vim.tbl_extend('force', schema['completion.languages'].default,
    vim.tbl_get(M.settings, 'completion', 'languages') or {})
  local on = languages[filetype]
  if on == nil then
    on = languages['*']
  end
  return on
end

local snooze_timer
local function end_snooze()
  if snooze_timer then
    snooze_timer:stop()
    snooze_timer:close()
    snooze_timer = nil
  end
  M.snoozed_until = nil
end

--- Turns suggestions off or on: for the current buffer's filetype (completion.languages),
--- or with `everywhere` for every file (completion.enable). Ends a snooze.
function M.toggle(everywhere)
  local bufnr = vim.api.nvim_get_current_buf()
  if M.snoozed_until then
    end_snooze()
    ghost.enabled = true
    vim.notify('specfill: snooze ended, suggestions on')
    return
  end
  if everywhere then
    local on = vim.tbl_get(M.settings, 'completion', 'enable')
    if on == nil then
      on = schema['completion.enable'].default
    end
    ghost.enabled = not on
    ghost.clear(bufnr)
    M.configure({ completion = { enable = ghost.enabled } })
    vim.notify('specfill: suggestions ' .. (ghost.enabled and 'on' or 'off'))
    return
  end
  local ft = vim.bo[bufnr].filetype
  local on = not M.language_on(ft)
  ghost.clear(bufnr)
  M.configure({ completion = { languages = { [ft] = on } } })
  vim.notify(('specfill: suggestions %s for %s'):format(on and 'on' or 'off', ft))
end

--- Pauses suggestions for `minutes` (default 5); :SpecfillToggle ends it early.
function M.snooze(minutes)
  minutes = minutes or 5
  end_snooze()
  ghost.enabled = false
  ghost.clear(vim.api.nvim_get_current_buf())
  M.snoozed_until = os.time() + minutes * 60
  snooze_timer = vim.uv.new_timer()
  snooze_timer:start(minutes * 60000, 0, vim.schedule_wrap(function()
    end_snooze()
    ghost.enabled = true
  end))
  vim.notify(('specfill: snoozed for %d minutes'):format(minutes))
end

--- For a statusline: "specfill snoozed 4m", "specfill off (markdown)", "specfill".
function M.status()
  if M.snoozed_until then
    return ('specfill snoozed %dm'):format(math.ceil((M.snoozed_until - os.time()) / 60))
  end
  if vim.tbl_get(M.settings, 'completion', 'enable') == false then
    return 'specfill off'
  end
  local ft = vim.bo.filetype
  if not M.language_on(ft) then
    return ('specfill off (%s)'):format(ft)
  end
  return 'specfill'
end

--- Calls `callback(stats)` with the server's specfill/stats, or prints them.
function M.stats(callback)
  local client = M.client()
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
      ('latency p50 %s ms, p95 %s ms; ttft p50 %s ms'):format(result.latency_ms.p50, result.latency_ms.p95,
        result.ttft_ms.p50),
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
  for _, entry in ipairs(M.log) do
    vim.list_extend(lines, vim.split(entry, '\n', { plain = true }))
  end
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, #lines > 0 and lines or { '(nothing logged yet)' })
  vim.bo[buf].modifiable = false
end

function M.restart()
  M.stopping = true
  vim.lsp.enable('specfill', false)
  vim.defer_fn(function()
    M.stopping = false
    vim.lsp.enable('specfill')
  end, 500)
end

M.ghost = ghost
return M
