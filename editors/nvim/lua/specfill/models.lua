-- :SpecfillModel: the curated list as the server knows it (`specfill model list --json`), a
-- download on request with progress notifications and cancel (`specfill model pull NAME --json`),
-- then model.path, and model.draftPath when the user takes the model's draft partner. The choice
-- is kept in stdpath('data')/specfill/model.json for the next start (a model.path in setup{}
-- wins). A failed or cancelled download leaves the model in use as it was.
local M = {}

local jobs = require('specfill.jobs')

M.file = vim.fs.joinpath(vim.fn.stdpath('data'), 'specfill', 'model.json')
local job -- the running pull
local PROGRESS_EVERY_S = 1

local function notify(msg, level)
  vim.schedule(function() vim.notify('specfill: ' .. msg, level) end)
end

--- `specfill ARGS...` as the server command runs specfill (what comes before serve/attach).
local function specfill(...)
  local cmd = require('specfill').command()
  local out = {}
  for _, part in ipairs(type(cmd) == 'table' and cmd or { cmd }) do
    if part == 'serve' or part == 'attach' then
      break
    end
    table.insert(out, part)
  end
  return vim.list_extend(out, { ... })
end

--- The list: name, file, size_mb, memory_mb, draft, machine, pulled; or nil and why.
function M.list()
  local ok, out = pcall(function() return vim.system(specfill('model', 'list', '--json'), { text = true }):wait() end)
  if not ok or out.code ~= 0 then
    return nil, ('could not list the models: %s'):format(ok and vim.trim(out.stderr or '') or out)
  end
  return vim.json.decode(out.stdout)
end

--- The choice kept for the next start ({ path, draftPath }), or nil.
function M.saved()
  local ok, data = pcall(function() return vim.json.decode(table.concat(vim.fn.readfile(M.file), '\n')) end)
  return ok and type(data) == 'table' and data or nil
end

--- Settings with the kept choice, unless setup{} names a model itself.
function M.with_saved(settings)
  local saved = M.saved()
  if not saved or vim.tbl_get(settings, 'model', 'path') ~= nil then
    return settings
  end
  settings.model = vim.tbl_extend('force', settings.model or {}, { path = saved.path, draftPath = saved.draftPath })
  return settings
end

local function use(path, draft)
  vim.fn.mkdir(vim.fs.dirname(M.file), 'p')
  vim.fn.writefile({ vim.json.encode({ path = path, draftPath = draft }) }, M.file)
  require('specfill').configure({ model = { path = path, draftPath = draft } })
  notify(('now completing with %s%s; loading it takes a moment'):format(path == '' and 'the embedded model' or path,
    draft ~= '' and (' drafted by ' .. draft) or ''))
end

--- Download a model of the list (or an owner/name/file.gguf); on_done(true) once it is whole.
function M.pull(name, on_done)
  if job then
    notify('a download is running already (:SpecfillModel! cancels it)', vim.log.levels.WARN)
    return
  end
  notify(('downloading %s'):format(name))
  local outcome, last = nil, 0
  job = jobs.start(specfill('model', 'pull', name, '--json'), function(msg)
    if msg.event ~= 'progress' then
      outcome = msg
    elseif vim.uv.now() - last >= PROGRESS_EVERY_S * 1000 then
      last = vim.uv.now()
      notify(('downloading %s: %d / %d MB'):format(name, msg.done / 1e6, msg.total / 1e6))
    end
  end, function(result)
    job = nil
    if outcome and outcome.event == 'done' then
      return vim.schedule(function() on_done(true) end)
    elseif outcome and outcome.event == 'cancelled' then
      notify(('the download of %s was cancelled and the model in use stays; :SpecfillModel %s goes on from where '
        .. 'it stopped'):format(name, name))
    else
      notify(('%s (the model in use stays)'):format(outcome and outcome.message
        or ('the download stopped (exit %d): %s'):format(result.code, vim.trim(result.stderr or ''))),
        vim.log.levels.ERROR)
    end
    vim.schedule(function() on_done(false) end)
  end)
end

--- Cancel a running download; its part is kept for the next pull.
function M.cancel()
  return jobs.stop(job)
end

local function offer_draft(model, by_name)
  local partner = model.draft ~= '' and by_name[model.draft]
  if not partner then
    return use(model.name, '')
  end
  local question = ('%s can draft with %s (%.1f GB more%s): the same suggestions, sooner where it pays. Use it?')
    :format(model.name, partner.name, partner.size_mb / 1000, partner.pulled and ', already here' or '')
  vim.ui.select({ 'Use the draft', 'Not now' }, { prompt = question }, function(answer)
    if answer ~= 'Use the draft' then
      return use(model.name, '')
    end
    if partner.pulled then
      return use(model.name, partner.name)
    end
    M.pull(partner.name, function(ok) use(model.name, ok and partner.name or '') end)
  end)
end

local function take(model, by_name)
  if model.pulled then
    return offer_draft(model, by_name)
  end
  M.pull(model.name, function(ok)
    if ok then
      offer_draft(model, by_name)
    end
  end)
end

--- :SpecfillModel [NAME]: the menu, or straight to NAME (of the list, or owner/name/file.gguf).
function M.choose(name)
  local models, why = M.list()
  if not models then
    return notify(why, vim.log.levels.ERROR)
  end
  local by_name = {}
  for _, m in ipairs(models) do
    by_name[m.name] = m
  end
  if name and name ~= '' then
    if by_name[name] then
      return take(by_name[name], by_name)
    end
    return M.pull(name, function(ok)
      if ok then
        use(name, '')
      end
    end)
  end
  local embedded = { name = '', machine = 'the small model that comes with specfill: works offline, short suggestions' }
  table.insert(models, embedded)
  vim.ui.select(models, {
    prompt = 'specfill: choose a model (downloaded from Hugging Face on request)',
    format_item = function(m)
      if m == embedded then
        return 'SmolLM2-135M (embedded): ' .. m.machine
      end
      return ('%s  %.1f GB file, %.1f GB memory%s: %s'):format(m.name, m.size_mb / 1000, m.memory_mb / 1000,
        m.pulled and ', downloaded' or '', m.machine)
    end,
  }, function(m)
    if m == embedded then
      use('', '')
    elseif m then
      take(m, by_name)
    end
  end)
end

return M
