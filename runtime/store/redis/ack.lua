-- ack.lua: drop a claim whose result was handled, if its lease is current.
-- KEYS[1] P{q:<type>}:leases   KEYS[2] P{q:<type>}:lease   KEYS[3] P{q:<type>}:reaped
-- ARGV[1] member   ARGV[2] token
-- Returns 1 when dropped, 0 when the lease is no longer current.
if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then
    return 0
end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[3], ARGV[1])
return 1
