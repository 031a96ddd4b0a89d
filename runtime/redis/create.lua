-- create.lua: create an execution unless its id is taken, and record in its
-- outbox that it must go on the decider queue (applied by the caller in the
-- same round trip, or later by rs_exec_flush).
-- KEYS[1] P{<wfid>}      execution hash
-- KEYS[2] P{<wfid>}:out  outbox
-- ARGV[1] doc JSON   ARGV[2] def JSON   ARGV[3] defkey   ARGV[4] status
-- ARGV[5] outbox step "wake|||<due ms>"
-- Returns 1 when created, 0 when the id exists.
if redis.call('EXISTS', KEYS[1]) == 1 then
    return 0
end
redis.call('HSET', KEYS[1], 'doc', ARGV[1], 'def', ARGV[2], 'defkey', ARGV[3],
           'status', ARGV[4], 'fence', 1)
redis.call('ZADD', KEYS[2], 1, '1|' .. ARGV[5])
return 1
