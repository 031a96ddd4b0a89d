-- flush.lua: the outbox entries left for the sweeper, oldest first.
-- KEYS[1] P{<wfid>}:out  outbox
-- ARGV[1] at most this many entries
-- Returns {entry...}, each "<fence>|<kind>|<type>|<taskid>|<at>"; the caller
-- applies them and removes from the outbox exactly the entries it read.
return redis.call('ZRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)
