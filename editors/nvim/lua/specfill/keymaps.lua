-- Insert-mode keys: each acts on the suggestion shown, or falls back to the key's own meaning.
local M = {}

local ghost = require('specfill.ghost')

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

--- Insert-mode keys (the `keymaps` option); with `builtin`, Neovim's own inline completion.
function M.set(keys, builtin)
  if builtin then
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

return M
