-- forget.lua: an execution found due is not there: off the decider queue,
-- once it has been missing for a while. It may be about to be created: on a
-- Redis Cluster a create's steps (its decider queue entry) can land before
-- create.lua itself, which a reshard's ASK or TRYAGAIN has sent again; a
-- decider that took the entry then finds nothing. So the entry is kept, to
-- be looked at again after ARGV[3] ms, and leaves when the execution is
-- found missing ARGV[2] ms or more after it first was.
-- KEYS[1] P{dq}:due
-- KEYS[2] P{dq}:gone  hash: id -> "<first>:<last>", when it was found
--         missing first and last (it expires ten graces after its last write)
-- ARGV[1] id   ARGV[2] grace ms   ARGV[3] look again in ms
-- Times are Redis's (TIME): the deciders' clocks may differ.
-- Returns 1 when the entry left, else 0.
local id, grace, again = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local first, last
local mark = redis.call('HGET', KEYS[2], id)
if mark then
    first, last = string.match(mark, '^(%d+):(%d+)$')
    first, last = tonumber(first), tonumber(last)
end
-- a mark not renewed for a grace is of another time it was missing (the
-- execution was found since)
if not last or now - last > grace then
    first = now
end
if now - first >= grace then
    redis.call('HDEL', KEYS[2], id)
    redis.call('ZREM', KEYS[1], id)
    return 1
end
redis.call('HSET', KEYS[2], id, string.format('%d:%d', first, now))
redis.call('PEXPIRE', KEYS[2], string.format('%d', 10 * grace))
-- XX: an entry that left meanwhile (the execution was created and ended)
-- stays gone
redis.call('ZADD', KEYS[1], 'XX', string.format('%d', now + again), id)
return 0
