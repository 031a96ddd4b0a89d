-- reap.lua: return members whose lease expired to the ready set.
-- KEYS[1] P{q:<type>}:ready   KEYS[2] P{q:<type>}:leases
-- KEYS[3] P{q:<type>}:lease   KEYS[4] P{q:<type>}:reaped
-- ARGV[1] now ms   ARGV[2] max reaps   ARGV[3] at most this many members per call
-- Returns {put back count, exhausted member...}: a member whose lease has now
-- expired more than max reaps times is not put back but listed, for the
-- caller to fail.
local now = tonumber(ARGV[1])
local max_reaps = tonumber(ARGV[2])
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, tonumber(ARGV[3]))
local out = {0}
for _, m in ipairs(expired) do
    redis.call('ZREM', KEYS[2], m)
    redis.call('HDEL', KEYS[3], m)
    local n = redis.call('HINCRBY', KEYS[4], m, 1)
    if n > max_reaps then
        redis.call('HDEL', KEYS[4], m)
        out[#out + 1] = m
    else
        redis.call('ZADD', KEYS[1], now, m)
        out[1] = out[1] + 1
    end
end
return out
