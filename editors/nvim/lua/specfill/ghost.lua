-- Ghost text for Neovim 0.11 (no vim.lsp.inline_completion yet): debounce, cancel the
-- in-flight request, show one extmark, accept all / a word / a line, cycle candidates.
local M = {}

local ns = vim.api.nvim_create_namespace('specfill')
local INVOKED, AUTOMATIC = 1, 2

-- Per buffer: client, timer, request id, items, index, anchor {row, col} (0-based, bytes)
-- and the text still to show there.
local buffers = {}
M.enabled = true
M.manual = false -- completion.trigger manual: only the trigger key asks
M.wanted = function(_) return true end -- suggestions are on for this buffer's filetype
M.debounce_ms = 30
M.hl_group = 'Comment'

local function state(bufnr)
  return buffers[bufnr]
end

local function item_text(item)
  local t = item.insertText
  if type(t) == 'table' then
    t = t.value
  end
  return t or ''
end

local function cursor()
  local pos = vim.api.nvim_win_get_cursor(0)
  return pos[1] - 1, pos[2]
end

function M.clear(bufnr)
  local s = state(bufnr)
  vim.api.nvim_buf_clear_namespace(bufnr, ns, 0, -1)
  if s then
    s.items, s.index, s.anchor, s.text = nil, nil, nil, nil
  end
end

local function render(bufnr)
  local s = state(bufnr)
  vim.api.nvim_buf_clear_namespace(bufnr, ns, 0, -1)
  if not (s and s.text and s.text ~= '') then
    return
  end
  local lines = vim.split(s.text, '\n', { plain = true })
  local opts = {
    id = 1,
    virt_text = { { lines[1], M.hl_group } },
    virt_text_pos = 'inline',
    hl_mode = 'combine',
  }
  if #lines > 1 then
    opts.virt_lines = {}
    for i = 2, #lines do
      table.insert(opts.virt_lines, { { lines[i], M.hl_group } })
    end
  end
  vim.api.nvim_buf_set_extmark(bufnr, ns, s.anchor[1], s.anchor[2], opts)
end

-- The suggestion of the current item, anchored at the cursor; the byte column its range
-- ends at (the server may replace closing brackets after the cursor).
local function show(bufnr, items, index, again)
  local s = state(bufnr)
  local row, col = cursor()
  s.items, s.index = items, index
  local item = items[index]
  s.anchor, s.text, s.end_col = { row, col }, item_text(item), col
  s.tick = vim.api.nvim_buf_get_changedtick(bufnr)
  if item.range then
    local line = vim.api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ''
    local ok, end_col = pcall(vim.str_byteindex, line, s.client.offset_encoding, item.range['end'].character, false)
    if ok and item.range['end'].line == row and end_col >= col then
      s.end_col = end_col
    end
  end
  render(bufnr)
  if not again then -- a refresh shows the same suggestion, grown
    s.client:notify('specfill/didShow', { uri = vim.uri_from_bufnr(bufnr) })
  end
end

local function distinct(items)
  local out, seen = {}, {}
  for _, item in ipairs(items or {}) do
    local t = item_text(item)
    if t ~= '' and not seen[t] then
      seen[t] = true
      table.insert(out, item)
    end
  end
  return out
end

function M.request(bufnr, trigger, again)
  local s = state(bufnr)
  if not (s and M.enabled) or vim.api.nvim_get_mode().mode:sub(1, 1) ~= 'i' then
    return
  end
  if (M.manual and trigger ~= INVOKED) or not M.wanted(bufnr) then
    return
  end
  if s.request_id then
    s.client:cancel_request(s.request_id)
    s.request_id = nil
  end
  local params = vim.lsp.util.make_position_params(0, s.client.offset_encoding)
  params.context = { triggerKind = trigger or AUTOMATIC }
  local tick = vim.api.nvim_buf_get_changedtick(bufnr)
  local row, col = cursor()
  s.asked = { tick = tick, row = row, col = col, trigger = params.context.triggerKind }
  local ok, id -- declared first: the callback below reads this request's id
  ok, id = s.client:request('textDocument/inlineCompletion', params, function(err, result)
    -- A cancelled or replaced request's answer may still come (the server answered before it
    -- read the cancel): stale, as are answers from before the user typed or moved on.
    if s.request_id ~= id then
      return
    end
    s.request_id = nil
    local now_row, now_col = cursor()
    if err or vim.api.nvim_get_current_buf() ~= bufnr or vim.api.nvim_buf_get_changedtick(bufnr) ~= tick
      or now_row ~= row or now_col ~= col or vim.api.nvim_get_mode().mode:sub(1, 1) ~= 'i' then
      return
    end
    local items = distinct(result and (result.items or result) or {})
    if #items == 0 then
      if trigger ~= INVOKED then
        M.clear(bufnr)
      end
      return
    end
    show(bufnr, items, 1, again)
  end, bufnr)
  if ok then
    s.request_id = id
  end
end

-- After a keystroke: keep the ghost text if the user typed what it said (no flicker), then
-- ask again after the debounce; the server answers a typed-through suggestion from its cache.
local function on_change(bufnr)
  local s = state(bufnr)
  if not s then
    return
  end
  local row, col = cursor()
  s.tick = vim.api.nvim_buf_get_changedtick(bufnr)
  if s.text and s.anchor[1] == row and col >= s.anchor[2] then
    local line = vim.api.nvim_buf_get_lines(bufnr, row, row + 1, false)[1] or ''
    local typed = line:sub(s.anchor[2] + 1, col)
    if s.text:sub(1, #typed) == typed and #s.text > #typed then
      s.end_col = s.end_col + #typed
      s.anchor, s.text = { row, col }, s.text:sub(#typed + 1)
      render(bufnr)
    else
      M.clear(bufnr)
    end
  else
    M.clear(bufnr)
  end
  s.timer:stop()
  s.timer:start(M.debounce_ms, 0, vim.schedule_wrap(function()
    if vim.api.nvim_get_current_buf() == bufnr then
      M.request(bufnr, AUTOMATIC)
    end
  end))
end

-- specfill/inlineCompletion/refresh: a suggestion the server answered in part (a slow line) is
-- whole now; ask again, as the request it renews, if nothing moved since (its cache answers).
function M.on_refresh(_, params)
  local bufnr = vim.api.nvim_get_current_buf()
  local s = state(bufnr)
  local asked = s and s.asked
  if not asked or not params or params.uri ~= vim.uri_from_bufnr(bufnr) then
    return
  end
  local row, col = cursor()
  if asked.tick == vim.api.nvim_buf_get_changedtick(bufnr) and asked.row == row and asked.col == col then
    M.request(bufnr, asked.trigger, true)
  end
end

--- Asks for suggestions here now (an Invoked request: the server sends its candidates).
function M.trigger(bufnr)
  M.request(bufnr or vim.api.nvim_get_current_buf(), INVOKED)
  return true
end

function M.visible(bufnr)
  local s = state(bufnr or vim.api.nvim_get_current_buf())
  return s ~= nil and s.text ~= nil and s.text ~= ''
end

function M.current(bufnr)
  local s = state(bufnr or vim.api.nvim_get_current_buf())
  return s and s.text
end

-- Insert `part` (a prefix of the ghost text) at the anchor; `whole` also replaces the
-- range's tail (closing brackets) and runs the item's command (the server counts it).
local function insert(bufnr, part, whole)
  local s = state(bufnr)
  local row, col = s.anchor[1], s.anchor[2]
  local lines = vim.split(part, '\n', { plain = true })
  local end_col = whole and s.end_col or col
  vim.api.nvim_buf_set_text(bufnr, row, col, row, end_col, lines)
  local last_row = row + #lines - 1
  local last_col = (#lines == 1 and col or 0) + #lines[#lines]
  vim.api.nvim_win_set_cursor(0, { last_row + 1, last_col })
  local item = s.items[s.index]
  if whole then
    M.clear(bufnr)
    if item.command then
      s.client:exec_cmd(item.command, { bufnr = bufnr })
    else
      s.client:notify('specfill/didAccept', { acceptedLength = #part })
    end
  else
    s.client:notify('specfill/didAccept', { acceptedLength = #part })
    s.anchor, s.text = { last_row, last_col }, s.text:sub(#part + 1)
    s.end_col = s.end_col - col + last_col
    if #lines > 1 then
      s.end_col = last_col
    end
    render(bufnr)
  end
end

-- Accept the part of the ghost text that `pick` chooses (nil: all of it). Returns false
-- when nothing is shown, so the key keeps its own meaning.
local function accept_part(bufnr, pick)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  if not M.visible(bufnr) then
    return false
  end
  local text = state(bufnr).text
  local part = pick and pick(text) or text
  insert(bufnr, part, part == text)
  return true
end

function M.accept(bufnr)
  return accept_part(bufnr, nil)
end

function M.accept_word(bufnr)
  return accept_part(bufnr, function(text)
    return text:match('^%s*[%w_]+') or text:match('^%s*[^%w_%s]+') or text:match('^%s+')
  end)
end

function M.accept_line(bufnr)
  return accept_part(bufnr, function(text)
    return text:match('^\n?[^\n]*')
  end)
end

-- next/previous: cycle the candidates; with one, ask the server for more (Invoked).
function M.cycle(bufnr, step)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  local s = state(bufnr)
  if not s then
    return false
  end
  if s.items and #s.items > 1 then
    local index = (s.index - 1 + step) % #s.items + 1
    local anchor = s.anchor
    local row, col = cursor()
    if anchor[1] ~= row or anchor[2] ~= col then
      return false
    end
    show(bufnr, s.items, index)
  else
    M.request(bufnr, INVOKED)
  end
  return true
end

function M.dismiss(bufnr)
  bufnr = bufnr or vim.api.nvim_get_current_buf()
  if not M.visible(bufnr) then
    return false
  end
  M.clear(bufnr)
  return true
end

function M.candidates(bufnr)
  local s = state(bufnr or vim.api.nvim_get_current_buf())
  return s and s.items and #s.items or 0
end

function M.attach(client, bufnr)
  if buffers[bufnr] then
    buffers[bufnr].client = client
    return
  end
  buffers[bufnr] = { client = client, timer = vim.uv.new_timer() }
  vim.schedule(function() M.focus(bufnr) end) -- attached to the buffer the cursor is in: landed
  local group = vim.api.nvim_create_augroup('specfill.buf' .. bufnr, { clear = true })
  vim.api.nvim_create_autocmd('TextChangedI', {
    group = group, buffer = bufnr, desc = 'specfill: keep or drop the ghost text, ask again',
    callback = function() on_change(bufnr) end,
  })
  vim.api.nvim_create_autocmd('InsertEnter', {
    group = group, buffer = bufnr, desc = 'specfill: ask for a suggestion',
    callback = function() on_change(bufnr) end,
  })
  vim.api.nvim_create_autocmd('CursorMovedI', {
    group = group, buffer = bufnr, desc = 'specfill: drop ghost text the cursor left',
    callback = function()
      -- Fires before TextChangedI when a keystroke moved the cursor: leave that to on_change.
      local s = state(bufnr)
      local row, col = cursor()
      if s and s.anchor and s.tick == vim.api.nvim_buf_get_changedtick(bufnr)
        and (s.anchor[1] ~= row or s.anchor[2] ~= col) then
        M.clear(bufnr)
      end
    end,
  })
  vim.api.nvim_create_autocmd({ 'InsertLeave', 'BufLeave' }, {
    group = group, buffer = bufnr, desc = 'specfill: hide the ghost text',
    callback = function()
      local s = state(bufnr)
      if s then
        s.timer:stop()
        if s.request_id then
          s.client:cancel_request(s.request_id)
          s.request_id = nil
        end
      end
      M.clear(bufnr)
    end,
  })
  -- Where the cursor lands or rests: the server reads that place's prompt while idle, so the
  -- first suggestion there comes from the full prompt (specfill/didFocus).
  vim.api.nvim_create_autocmd({ 'BufEnter', 'CursorHold', 'CursorHoldI' }, {
    group = group, buffer = bufnr, desc = 'specfill: tell the server where the cursor rests',
    callback = function() M.focus(bufnr) end,
  })
  vim.api.nvim_create_autocmd('BufWipeout', {
    group = group, buffer = bufnr, desc = 'specfill: forget the buffer',
    callback = function() M.detach(bufnr) end,
  })
end

function M.focus(bufnr)
  local s = state(bufnr)
  if not (s and M.enabled) or vim.api.nvim_get_current_buf() ~= bufnr then
    return
  end
  local params = vim.lsp.util.make_position_params(0, s.client.offset_encoding)
  s.client:notify('specfill/didFocus', { textDocument = params.textDocument, position = params.position })
end

function M.detach(bufnr)
  local s = buffers[bufnr]
  if s then
    s.timer:stop()
    s.timer:close()
    buffers[bufnr] = nil
    pcall(vim.api.nvim_del_augroup_by_name, 'specfill.buf' .. bufnr)
  end
end

M.namespace = ns
return M
