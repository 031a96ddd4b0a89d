-- forget.lua: an execution found due is not there: off the decider queue,
-- once it has been missing for a while. It may be about to be created: on a
-- Redis Cluster a create's steps (its decider queue entry) can land before
-- create.lua itself, which a reshard's ASK or TRYAGAIN has sent again; a
-- decider that took the entry then finds nothing. So the first time, the
-- entry is kept, to be looked at again after ARGV[4] ms; it leaves when the
-- execution is found missing ARGV[3] ms or more after it first was.
-- KEYS[1] P{dq}:due   KEYS[2] P{dq}:gone (hash: id -> when first found
-- missing; it expires ten graces after its last write)
-- ARGV[1] id   ARGV[2] now ms   ARGV[3] grace ms   ARGV[4] look again in ms
-- Returns 1 when the entry left, else 0.
local id, now, grace = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local seen = tonumber(redis.call('HGET', KEYS[2], id))
-- a mark from long ago is another time it was missing (a start tried again)
if seen and now - seen > 3 * grace then
    seen = nil
end
if seen and now - seen >= grace then
    redis.call('HDEL', KEYS[2], id)
    redis.call('ZREM', KEYS[1], id)
    return 1
end
if not seen then
    redis.call('HSET', KEYS[2], id, ARGV[2])
    redis.call('PEXPIRE', KEYS[2], string.format('%d', 10 * grace))
end
-- XX: an entry that left meanwhile (the execution was created and ended)
-- stays gone
redis.call('ZADD', KEYS[1], 'XX', string.format('%d', now + tonumber(ARGV[4])), id)
return 0
