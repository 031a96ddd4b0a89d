-- unqueue.lua: take a member off a queue, whether ready or leased.
-- KEYS[1] P{q:<type>}:ready   KEYS[2] P{q:<type>}:leases
-- KEYS[3] P{q:<type>}:lease   KEYS[4] P{q:<type>}:reaped
-- ARGV[1] member "<wfid>|<taskid>"
-- Returns 1 when it was queued, 0 when not.
local n = redis.call('ZREM', KEYS[1], ARGV[1]) + redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
redis.call('HDEL', KEYS[4], ARGV[1])
if n > 0 then
    return 1
end
return 0
