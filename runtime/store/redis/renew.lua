-- renew.lua: extend a lease if it is still the current one.
-- KEYS[1] P{q:<type>}:leases   KEYS[2] P{q:<type>}:lease
-- ARGV[1] member   ARGV[2] token   ARGV[3] new expiry ms
-- Returns 1 when renewed, 0 when the lease is no longer current.
if redis.call('HGET', KEYS[2], ARGV[1]) ~= ARGV[2] then
    return 0
end
if not redis.call('ZSCORE', KEYS[1], ARGV[1]) then
    return 0
end
redis.call('ZADD', KEYS[1], 'XX', ARGV[3], ARGV[1])
return 1
