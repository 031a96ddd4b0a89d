-- check.lua: whether a lease is still the current one.
-- KEYS[1] P{q:<type>}:lease
-- ARGV[1] member   ARGV[2] token
-- Returns 1 when current, 0 otherwise.
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
    return 1
end
return 0
