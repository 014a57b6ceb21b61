-- Everyday controls: suggestions per filetype (completion.languages), everywhere
-- (completion.enable), a snooze (this Neovim's alone), and a statusline word for them.
local M = {}

local schema = require('specfill.schema')
local ghost = require('specfill.ghost')

local function specfill()
  return require('specfill') -- settings live there; required late, as it requires this module
end

--- Whether suggestions are on for a filetype (completion.languages over its defaults).
function M.language_on(filetype)
  local languages = vim.tbl_extend('force', schema['completion.languages'].default,
    vim.tbl_get(specfill().settings, 'completion', 'languages') or {})
  local on = languages[filetype]
  if on == nil then
    on = languages['*']
  end
  return on
end

local snooze_timer, snoozed_until
local function end_snooze()
  if snooze_timer then
    snooze_timer:stop()
    snooze_timer:close()
    snooze_timer = nil
  end
  snoozed_until = nil
end

--- Turns suggestions off or on: for the current buffer's filetype (completion.languages),
--- or with `everywhere` for every file (completion.enable). Ends a snooze.
function M.toggle(everywhere)
  local bufnr = vim.api.nvim_get_current_buf()
  if snoozed_until then
    end_snooze()
    ghost.enabled = true
    vim.notify('specfill: snooze ended, suggestions on')
    return
  end
  if everywhere then
    local on = vim.tbl_get(specfill().settings, 'completion', 'enable')
    if on == nil then
      on = schema['completion.enable'].default
    end
    ghost.enabled = not on
    ghost.clear(bufnr)
    specfill().configure({ completion = { enable = ghost.enabled } })
    vim.notify('specfill: suggestions ' .. (ghost.enabled and 'on' or 'off'))
    return
  end
  local ft = vim.bo[bufnr].filetype
  local on = not M.language_on(ft)
  ghost.clear(bufnr)
  specfill().configure({ completion = { languages = { [ft] = on } } })
  vim.notify(('specfill: suggestions %s for %s'):format(on and 'on' or 'off', ft))
end

--- Pauses suggestions for `minutes` (default 5); :SpecfillToggle ends it early.
function M.snooze(minutes)
  minutes = minutes or 5
  end_snooze()
  ghost.enabled = false
  ghost.clear(vim.api.nvim_get_current_buf())
  snoozed_until = os.time() + minutes * 60
  snooze_timer = vim.uv.new_timer()
  snooze_timer:start(minutes * 60000, 0, vim.schedule_wrap(function()
    end_snooze()
    ghost.enabled = true
  end))
  vim.notify(('specfill: snoozed for %d minutes'):format(minutes))
end

--- For a statusline: "specfill snoozed 4m", "specfill off (markdown)", "specfill".
function M.status()
  if snoozed_until then
    return ('specfill snoozed %dm'):format(math.ceil((snoozed_until - os.time()) / 60))
  end
  if vim.tbl_get(specfill().settings, 'completion', 'enable') == false then
    return 'specfill off'
  end
  local ft = vim.bo.filetype
  if not M.language_on(ft) then
    return ('specfill off (%s)'):format(ft)
  end
  return 'specfill'
end

return M
