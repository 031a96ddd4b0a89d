-- due.lua: take executions due for a decider, holding them for a while so
-- other deciders skip them meanwhile; on the way, fold the partition's
-- execution index log into its sets when it has grown (index_lib.lua), so
-- a run's end costs its save one RPUSH and the index's sets are written
-- in bulk.
-- KEYS[1] P{dq}:due   KEYS[2] P{dq}:ix (the same hash tag)
-- ARGV[1] now ms ("0": Redis's clock, for a poll queued behind a wait)
-- ARGV[2] max   ARGV[3] hold ms
-- Returns {id...}.
local IX = KEYS[2]
--@include index_lib.lua
local now, now_s = tonumber(ARGV[1]), ARGV[1]
if now == 0 then
    local t = redis.call('TIME')
    now = t[1] * 1000 + math.floor(t[2] / 1000)
    now_s = string.format('%d', now)
end
-- The index's trouble (a key of another type) never stops the deciders: a
-- fold that fails leaves its entries in the log and its error in :fold_error
-- for a minute, when folds are tried again (searches fail with it meanwhile).
local len = redis.pcall('LLEN', LOG)
if type(len) == 'number' and len >= 64 * LOG_N and redis.call('EXISTS', IX .. ':fold_error') == 0 then
    local ok, err = pcall(ix_fold, 256, now)
    if not ok then
        redis.call('SET', IX .. ':fold_error', type(err) == 'table' and tostring(err.err) or tostring(err),
                   'PX', 60000)
    end
end
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_s, 'LIMIT', 0, ARGV[2])
-- (a number's text made once: Lua's is a floating-point printf at each use)
local later = string.format('%d', now + tonumber(ARGV[3]))
for _, id in ipairs(ids) do
    redis.call('ZADD', KEYS[1], later, id)
end
return ids
