-- save.lua: fenced save of an execution.
-- KEYS[1] P{<wfid>}      execution hash
-- KEYS[2] P{<wfid>}:out  outbox (queue steps, scored by the fence that decided them)
-- KEYS[3] P{<wfid>}:ev   status stream
-- ARGV[1] expected fence ("*" = unfenced: fencing switched off)   ARGV[2] doc JSON   ARGV[3] status
-- ARGV[4] terminal ("1" or "0")   ARGV[5] retention ms   ARGV[6] stream max length
-- ARGV[7] Pub/Sub channel   ARGV[8] n = number of steps
-- ARGV[9 .. 8+n]  steps "<kind>|<type>|<taskid>|<at>"
-- ARGV[9+n ..]    events (JSON texts)
-- Returns {1, new fence, leftover...} on success, where leftover are outbox
-- entries of earlier saves not applied yet ("<fence>|<kind>|<type>|<taskid>|<at>");
-- {0, stored fence} when the fence moved; {-1} when there is no such execution.
local cur = redis.call('HGET', KEYS[1], 'fence')
if not cur then
    return {-1}
end
if ARGV[1] ~= '*' and cur ~= ARGV[1] then
    return {0, tonumber(cur)}
end
local leftover = redis.call('ZRANGE', KEYS[2], 0, -1)
local fence = redis.call('HINCRBY', KEYS[1], 'fence', 1)
redis.call('HSET', KEYS[1], 'doc', ARGV[2], 'status', ARGV[3])
local n = tonumber(ARGV[8])
for i = 9, 8 + n do
    redis.call('ZADD', KEYS[2], fence, fence .. '|' .. ARGV[i])
end
for i = 9 + n, #ARGV do
    redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[6], '*', 'json', ARGV[i])
    redis.call('PUBLISH', ARGV[7], ARGV[i])
end
for i = 1, 3 do
    if ARGV[4] == '1' then
        redis.call('PEXPIRE', KEYS[i], ARGV[5])
    else
        redis.call('PERSIST', KEYS[i])
    end
end
local out = {1, fence}
for _, e in ipairs(leftover) do
    out[#out + 1] = e
end
return out
