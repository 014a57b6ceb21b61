-- `make run`: Neovim with specfill on a sample file. Type in insert mode; <Tab> accepts,
-- <M-Right> a word, <M-Down> a line, <C-]> dismisses; :SpecfillStats, :SpecfillToggle.
vim.opt.swapfile = false
require('specfill').setup({
  server = { path = os.getenv('SPECFILL_SERVER') or 'specfill' },
})
vim.api.nvim_create_autocmd('LspProgress', {
  desc = 'specfill: show model loading',
  callback = function(ev)
    local value = ev.data.params.value
    if value.kind == 'end' or value.kind == 'begin' then
      vim.api.nvim_echo({ { 'specfill: ' .. (value.message or value.title or '') } }, false, {})
    end
  end,
})
vim.api.nvim_echo({ { 'specfill: go to the end, open a line (o) and type; <Tab> accepts' } }, false, {})
