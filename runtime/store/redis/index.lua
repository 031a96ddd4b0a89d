-- index.lua: a run's entry in the execution index of its partition
-- (index_lib.lua), applied as a save's outbox step: only a newer save (by
-- fence) moves it, so a step applied late or twice changes nothing. An
-- ended run goes into the index's sets; one made to run again comes out of
-- them (a run not ended is found on the decider queue), its record kept for
-- the fence. Trims runs whose time is up on the way, now and then.
-- KEYS[1] P{<partition>}:ix
-- ARGV[1] workflow id   ARGV[2] fence of the save   ARGV[3] status
-- ARGV[4] start ms   ARGV[5] end ms (0: not ended)   ARGV[6] version
-- ARGV[7] workflow name   ARGV[8] correlation id ("" for none)
-- ARGV[9] now ms   ARGV[10] retention ms: an ended run is forgotten that
--         long after its end, as its keys expire
-- Returns 1 when applied, 0 when a save as new or newer was.
--@include index_lib.lua
local id, fence = ARGV[1], tonumber(ARGV[2])
local status, start, ended, name, corr = ARGV[3], ARGV[4], ARGV[5], ARGV[7], ARGV[8]
local old = redis.call('HGET', IX, id)
if old then
    local r = ix_parse(old)
    if r and r.fence >= fence then return 0 end
    ix_unlink(id, r)
end
redis.call('HSET', IX, id, table.concat({fence, status, start, ended, ARGV[6], #name, name .. corr}, '|'))
if ended ~= '0' then
    redis.call('ZADD', IX .. ':s:' .. status, start, id)
    redis.call('ZADD', IX .. ':n:' .. name, start, id)
    if corr ~= '' then redis.call('ZADD', IX .. ':c', 0, corr .. '\0' .. id) end
    redis.call('ZADD', IX .. ':e', tonumber(ended) + tonumber(ARGV[10]), id)
    -- one end in 8 (by its time) trims up to 80: each write's share of it,
    -- one ZRANGEBYSCORE in 8
    if tonumber(ended) % 8 == 0 then ix_trim(tonumber(ARGV[9]), 80) end
end
return 1
