-- Commands only; require('specfill').setup{} starts the server.
vim.api.nvim_create_user_command('SpecfillStats', function() require('specfill').stats() end,
  { desc = 'specfill: show the server statistics' })
vim.api.nvim_create_user_command('SpecfillToggle', function(args) require('specfill').toggle(args.bang) end,
  { bang = true, desc = "specfill: suggestions off or on for this buffer's filetype (! everywhere); ends a snooze" })
vim.api.nvim_create_user_command('SpecfillSnooze', function(args)
  require('specfill').snooze(tonumber(args.args))
end, { nargs = '?', desc = 'specfill: pause suggestions for N minutes (default 5)' })
vim.api.nvim_create_user_command('SpecfillRestart', function() require('specfill').restart() end,
  { desc = 'specfill: restart the language server' })
vim.api.nvim_create_user_command('SpecfillLog', function() require('specfill').show_log() end,
  { desc = 'specfill: show the server log (logLevel setting)' })
vim.api.nvim_create_user_command('SpecfillInstall', function(args)
  if args.bang then
    if not require('specfill.install').cancel() then
      vim.notify('specfill: no install is running')
    end
    return
  end
  require('specfill').install()
end, { bang = true, desc = 'specfill: install or repair the server (! cancels a running install)' })
vim.api.nvim_create_user_command('SpecfillModel', function(args)
  if args.bang then
    if not require('specfill.models').cancel() then
      vim.notify('specfill: no download is running')
    end
    return
  end
  require('specfill.models').choose(args.args)
end, { bang = true, nargs = '?', desc = 'specfill: choose a model, downloaded on request (! cancels a download)' })
