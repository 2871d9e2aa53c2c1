-- The globals a script sees, made read-only as Redis makes them (its Lua has read-only
-- tables; stock Lua 5.1 does not): each protected table is emptied, its contents moved to a
-- hidden table its metatable reads through, and writes to it raise an error. Runs once per
-- interpreter, before any script; `...` is the table of the server's functions.
local impl = ...
local rawset_, rawget_, setmetatable_, getmetatable_, type_, error_, next_ =
  rawset, rawget, setmetatable, getmetatable, type, error, next
local loadstring_, load_, getfenv_, setfenv_, tostring_, select_, pcall_ =
  loadstring, load, getfenv, setfenv, tostring, select, pcall
local G = _G

-- Which metatables mark a protected table.
local marks = setmetatable_({}, {__mode = 'k'})

local READONLY = 'Attempt to modify a readonly table'
-- As a __newindex metamethod: level 2 is the code that assigned.
local function readonly_error()
  error_(READONLY, 2)
end

local function protect(t, missing)
  local hidden = {}
  for k, v in next_, t do hidden[k] = v end
  for k in next_, hidden do rawset_(t, k, nil) end
  if missing then
    setmetatable_(hidden, {__index = missing})
  end
  local mark = setmetatable_({}, {__index = function() return nil end, __newindex = readonly_error})
  local mt = {__index = hidden, __newindex = readonly_error, __metatable = mark}
  marks[mark] = true
  setmetatable_(t, mt)
  return hidden
end

local function protected(t)
  return type_(t) == 'table' and marks[getmetatable_(t)] == true
end

-- Base functions that would reach around the protection.
-- (C functions in Redis: their errors carry no position.)
setmetatable = function(t, mt)
  if protected(t) then error_(READONLY, 0) end
  return setmetatable_(t, mt)
end
rawset = function(t, k, v)
  if protected(t) then error_(READONLY, 0) end
  return rawset_(t, k, v)
end
-- Binary chunks are refused, as Redis refuses them.
local function text_only(chunk)
  return type_(chunk) ~= 'string' or chunk:byte(1) ~= 27
end
loadstring = function(s, name)
  if not text_only(s) then return nil, 'binary chunks are not allowed' end
  return loadstring_(s, name)
end
load = function(f, name)
  if type_(f) == 'string' and not text_only(f) then return nil, 'binary chunks are not allowed' end
  return load_(f, name)
end
setfenv = function(f, env)
  if f == 0 then error_('setfenv on the running thread is not allowed', 2) end
  return setfenv_(f, env)
end
-- Redis 7's pcall hands back the message of an error table, or of what redis.call raised.
local errtext = impl.errtext
local function settle(ok, ...)
  if ok then return ok, ... end
  local e = ...
  if type_(e) == 'userdata' then
    e = errtext(e) or e
  elseif type_(e) == 'table' then
    local m = e.err
    if type_(m) == 'string' or type_(m) == 'number' then e = m end
  end
  return false, e
end
pcall = function(...) return settle(pcall_(...)) end

dofile, loadfile, print = nil, nil, nil
-- What a library's code sees while FUNCTION LOAD runs it: only `redis`, holding
-- register_function (set by the server during a load), log and the version.
local lib_redis = {}
for _, k in next_, {'log', 'LOG_DEBUG', 'LOG_VERBOSE', 'LOG_NOTICE', 'LOG_WARNING',
                    'REDIS_VERSION', 'REDIS_VERSION_NUM'} do
  lib_redis[k] = G.redis[k]
end
local function missing(_, k)
  error_("Script attempted to access nonexistent global variable '" .. tostring_(k) .. "'", 2)
end
local lib_redis_hidden = protect(lib_redis, missing)
local load_globals = {redis = lib_redis}
protect(load_globals, missing)
for _, name in next_, {'redis', 'string', 'math', 'table', 'coroutine', 'cjson', 'bit', 'cmsgpack', 'struct'} do
  if rawget_(G, name) ~= nil then protect(G[name]) end
end
return protect(G, missing), load_globals, lib_redis_hidden
