-- create.lua: create an execution unless its id is taken, recording in its
-- outbox the queue steps of its start (applied by the caller in the same
-- round trip, or later by rs_exec_flush): a wake of the decider queue, or,
-- when the starter made the first decision, that task's push and a later
-- wake. The start's events go to the status lane as save.lua writes them.
-- KEYS[1] P{<wfid>}      execution hash
-- KEYS[2] P{<wfid>}:out  outbox
-- KEYS[3] P{<wfid>}:ev   status stream (and the Pub/Sub channel)
-- ARGV[1] doc JSON   ARGV[2] def JSON   ARGV[3] defkey   ARGV[4] status
-- ARGV[5] what a search reads of a run not ended (field "ix": "<start>:<version>:
--         <name length>:<name><correlation id>", as an index entry has it)
-- ARGV[6] stream max length   ARGV[7] n = number of steps
-- ARGV[8 .. 7+n]  steps "<kind>|<type>|<taskid>|<at>"
-- ARGV[8+n]       optional: the start's events (JSON texts, one per line)
-- Returns 1 when created, 0 when the id exists.
if redis.call('EXISTS', KEYS[1]) == 1 then
    return 0
end
redis.call('HSET', KEYS[1], 'doc', ARGV[1], 'def', ARGV[2], 'defkey', ARGV[3],
           'status', ARGV[4], 'fence', '1', 'ix', ARGV[5])
local n = tonumber(ARGV[7])
if n > 0 then
    local z = {}
    for i = 8, 7 + n do
        z[#z + 1] = '1'
        z[#z + 1] = '1|' .. ARGV[i]
    end
    redis.call('ZADD', KEYS[2], unpack(z))
end
local ev = ARGV[8 + n]
if ev then
    redis.call('XADD', KEYS[3], 'MAXLEN', '~', ARGV[6], '*', 'json', ev)
    redis.call('PUBLISH', KEYS[3], ev)
end
return 1
