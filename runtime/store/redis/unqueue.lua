-- unqueue.lua: take a member off a queue, whether ready, due, waiting on a
-- limit or leased (giving back the slot it held), with its controls.
--@include queue_lib.lua
-- ARGV[2] member "<wfid>|<taskid>"
-- Returns 1 when it was queued, 0 when not.
local m = ARGV[2]
local in_due = redis.call('ZREM', K_DUE, m)
local n = redis.call('ZREM', KEYS[1], m) + redis.call('ZREM', KEYS[2], m) + in_due
redis.call('HDEL', KEYS[3], m)
redis.call('HDEL', KEYS[4], m)
local p, _, _, _, name = q_spec(m)
if p then
    n = n + q_unpark_member(m, name)
    if in_due == 1 and name ~= '' then
        q_unpark(name, 1) -- it may be the one a given-back slot let through: the next one
    end
    redis.call('HDEL', K_META, m)
end
q_release(m)
if n > 0 then
    return 1
end
return 0
