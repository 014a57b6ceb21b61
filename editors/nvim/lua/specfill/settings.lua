-- The server settings a user gives setup{} or configure(): checked against the one schema
-- (schema.lua, generated from the server's settings.py) before the plugin reads server.* itself
-- and sends them, and merged as the schema says.
local M = {}

local schema = require('specfill.schema')

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

-- Settings merged as the schema says: groups and maps by key, lists replaced whole.
function M.merge(into, from, prefix)
  for key, value in pairs(from) do
    local name = prefix and (prefix .. '.' .. key) or key
    local entry = schema[name]
    if type(value) == 'table' and not (entry and entry.type == 'array') and type(into[key]) == 'table' then
      M.merge(into[key], value, name)
    else
      into[key] = value
    end
  end
  return into
end

return M
