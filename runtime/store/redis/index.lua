-- index.lua: a run's entry in the execution index of its partition
-- (index_lib.lua), applied as a save's outbox step: only a newer save (by
-- fence) moves it, so a step applied late or twice changes nothing. Trims
-- a few runs past the retention on the way.
-- KEYS[1] P{<partition>}:ix
-- ARGV[1] workflow id   ARGV[2] fence of the save   ARGV[3] status
-- ARGV[4] start ms, 0 to keep the entry's start, version, name and
--         correlation id (a run whose document could not be read)
-- ARGV[5] end ms (0: not ended)   ARGV[6] version
-- ARGV[7] workflow name   ARGV[8] correlation id ("" for none)
-- ARGV[9] now ms   ARGV[10] retention ms: an ended run is forgotten that
--         long after its end, as its keys expire
-- Returns 1 when applied, 0 when a save as new or newer was.
--@include index_lib.lua
local id, fence = ARGV[1], tonumber(ARGV[2])
local status, start, ended, version, name, corr = ARGV[3], ARGV[4], ARGV[5], ARGV[6], ARGV[7],
    ARGV[8]
local old = redis.call('HGET', IX, id)
if old then
    local r = ix_parse(old)
    if r and r.fence >= fence then return 0 end
    ix_unlink(id, r)
    if r and start == '0' then
        start, version, name, corr = r.start, r.version, r.name, r.corr
    end
end
redis.call('HSET', IX, id, table.concat({fence, status, start, ended, version, #name, name .. corr}, '|'))
redis.call('ZADD', IX .. ':s:' .. status, start, id)
redis.call('ZADD', IX .. ':n:' .. name, start, id)
if corr ~= '' then redis.call('ZADD', IX .. ':c', 0, corr .. '\0' .. id) end
if ended ~= '0' then redis.call('ZADD', IX .. ':e', tonumber(ended) + tonumber(ARGV[10]), id) end
ix_trim(tonumber(ARGV[9]), 10)
return 1
