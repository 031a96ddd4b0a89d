-- claim.lua: lease up to max members that are visible now.
-- KEYS[1] P{q:<type>}:ready   KEYS[2] P{q:<type>}:leases   KEYS[3] P{q:<type>}:lease
-- ARGV[1] now ms ("0": Redis's clock, for a poll queued behind a wait)
-- ARGV[2] lease ms   ARGV[3] max   ARGV[4] token seed (random, per call)
-- Returns {member, token, member, token, ...}; token = seed .. ":" .. counter.
local now = tonumber(ARGV[1])
if now == 0 then
    local t = redis.call('TIME')
    now = t[1] * 1000 + math.floor(t[2] / 1000)
end
local expiry = now + tonumber(ARGV[2])
local got = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for i, m in ipairs(got) do
    local token = ARGV[4] .. ':' .. i
    redis.call('ZREM', KEYS[1], m)
    redis.call('ZADD', KEYS[2], expiry, m)
    redis.call('HSET', KEYS[3], m, token)
    out[#out + 1] = m
    out[#out + 1] = token
end
return out
