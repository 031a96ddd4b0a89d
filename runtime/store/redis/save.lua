-- save.lua: fenced save of an execution.
-- KEYS[1] P{<wfid>}      execution hash
-- KEYS[2] P{<wfid>}:out  outbox (queue steps, scored by the fence that decided them)
-- KEYS[3] P{<wfid>}:ev   status stream
-- ARGV[1] expected fence; "*<fence loaded>" (or "*") = unfenced: fencing
--         switched off, the last writer wins, but not over an operator
--         command applied after its copy was loaded (field "cmdf": the fence
--         of that save)
-- ARGV[2] doc JSON   ARGV[3] status
-- ARGV[4] "1": terminal (the keys expire after the retention), "2": revived
--         (a finished execution made to run again: they are kept again), else "0"
-- ARGV[5] retention ms   ARGV[6] stream max length
-- ARGV[7] Pub/Sub channel   ARGV[8] n = number of steps
-- ARGV[9] the operator command (field "cmd") the saver loaded and applied,
--         "" for none, "*" to drop any (a save that overrides it)
-- ARGV[10 .. 9+n] steps "<kind>|<type>|<taskid>|<at>"
-- ARGV[10+n]      optional: the save's events (JSON texts, one per line), as
--                 one stream entry (field "json") and one message
-- Returns {1, new fence, leftover...} on success, where leftover are outbox
-- entries of earlier saves not applied yet ("<fence>|<kind>|<type>|<taskid>|<at>");
-- {0, stored fence} when the fence moved; {0, stored fence, 1} when an
-- operator command waits that the saver has not applied (whatever the
-- fence: so a command lands at the next save of any decider, which reloads
-- and applies it first), or an unfenced saver's copy predates one applied;
-- {-1} when there is no such execution.
-- unpack() has a limit on values: a large fan-out goes in parts
local function call_in_parts(head, args, per)
    for i = 1, #args, per do
        local c = {}
        for _, v in ipairs(head) do c[#c + 1] = v end
        for j = i, math.min(i + per - 1, #args) do c[#c + 1] = args[j] end
        redis.call(unpack(c))
    end
end

local got = redis.call('HMGET', KEYS[1], 'fence', 'cmd', 'cmdf', 'log')
local cur, cmd, cmdf, has_log = got[1], got[2], got[3], got[4]
if not cur then
    return {-1}
end
if cmd and ARGV[9] ~= cmd and ARGV[9] ~= '*' then
    return {0, tonumber(cur), 1}
end
if string.sub(ARGV[1], 1, 1) == '*' then
    local seen = tonumber(string.sub(ARGV[1], 2))
    if seen and cmdf and tonumber(cmdf) > seen and ARGV[9] ~= '*' then
        return {0, tonumber(cur), 1}
    end
elseif cur ~= ARGV[1] then
    return {0, tonumber(cur)}
end
local leftover = redis.call('ZRANGE', KEYS[2], 0, -1)
local fence = tonumber(cur) + 1
-- its text made once (Lua makes a number's with a floating-point printf at
-- each use)
local fs = string.format('%d', fence)
redis.call('HSET', KEYS[1], 'doc', ARGV[2], 'status', ARGV[3], 'fence', fs)
if cmd then
    redis.call('HDEL', KEYS[1], 'cmd')
    redis.call('HSET', KEYS[1], 'cmdf', fs)
end
local n = tonumber(ARGV[8])
if n > 0 then
    local z = {}
    for i = 10, 9 + n do
        z[#z + 1] = fs
        z[#z + 1] = fs .. '|' .. ARGV[i]
    end
    call_in_parts({'ZADD', KEYS[2]}, z, 2000)
end
local ev = ARGV[10 + n]
if ev then
    redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[6], '*', 'json', ev)
    redis.call('PUBLISH', ARGV[7], ev)
end
-- the tasks' logs (tasklog.lua marks a run that has some: field "log") end
-- with the execution
local logs = KEYS[1] .. ':log'
if ARGV[4] == '1' then
    redis.call('PEXPIRE', KEYS[1], ARGV[5])
    redis.call('PEXPIRE', KEYS[2], ARGV[5])
    if has_log then redis.call('PEXPIRE', logs, ARGV[5]) end
    -- the finished stream, written once more and packed: Redis gives a
    -- stream's newest node a whole listpack (4 KB) up front, a restored
    -- stream only what it holds
    local packed = redis.call('DUMP', KEYS[3])
    if packed then
        redis.call('RESTORE', KEYS[3], ARGV[5], packed, 'REPLACE')
    end
elseif ARGV[4] == '2' then
    for i = 1, 3 do
        redis.call('PERSIST', KEYS[i])
    end
    if has_log then redis.call('PERSIST', logs) end
end
local out = {1, fence}
for _, e in ipairs(leftover) do
    out[#out + 1] = e
end
return out
