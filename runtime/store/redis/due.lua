-- due.lua: take executions due for a decider, holding them for a while so
-- other deciders skip them meanwhile.
-- KEYS[1] P{dq}:due
-- ARGV[1] now ms ("0": Redis's clock, for a poll queued behind a wait)
-- ARGV[2] max   ARGV[3] hold ms
-- Returns {id...}.
local now = tonumber(ARGV[1])
if now == 0 then
    local t = redis.call('TIME')
    now = t[1] * 1000 + math.floor(t[2] / 1000)
end
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
local later = now + tonumber(ARGV[3])
for _, id in ipairs(ids) do
    redis.call('ZADD', KEYS[1], later, id)
end
return ids
