-- due.lua: take executions due for a decider, holding them for a while so
-- other deciders skip them meanwhile.
-- KEYS[1] P{dq}:due
-- ARGV[1] now ms   ARGV[2] max   ARGV[3] hold ms
-- Returns {id...}.
local now = tonumber(ARGV[1])
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
local later = now + tonumber(ARGV[3])
for _, id in ipairs(ids) do
    redis.call('ZADD', KEYS[1], later, id)
end
return ids
