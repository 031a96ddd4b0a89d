-- reap.lua: return members whose lease expired to the ready set, giving
-- back the slots they held.
--@include queue_lib.lua
-- ARGV[2] now ms   ARGV[3] max reaps   ARGV[4] at most this many members per call
-- Returns {put back count, exhausted member...}: a member whose lease has now
-- expired more than max reaps times is not put back but listed, for the
-- caller to fail.
local now = tonumber(ARGV[2])
local max_reaps = tonumber(ARGV[3])
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, tonumber(ARGV[4]))
local out = {0}
for _, m in ipairs(expired) do
    redis.call('ZREM', KEYS[2], m)
    redis.call('HDEL', KEYS[3], m)
    q_release(m)
    local n = redis.call('HINCRBY', KEYS[4], m, 1)
    if n > max_reaps then
        redis.call('HDEL', KEYS[4], m)
        q_forget(m)
        out[#out + 1] = m
    else
        redis.call('ZADD', KEYS[1], now, m)
        out[1] = out[1] + 1
    end
end
return out
