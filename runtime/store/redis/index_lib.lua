-- index_lib.lua: the execution index of one partition, shared by index.lua
-- and search.lua (--@include): the runs that ended (one not ended is found
-- on the decider queue). KEYS[1] is P{<partition>}:ix, a hash of run id ->
-- record "<fence>|<status>|<start>|<end>|<version>|<name length>|<name><correlation id>"
-- (end 0: made to run again, in no set). Beside it, in the same hash tag:
--   :s:<status>  the runs of a status, scored by start time
--   :n:<name>    the runs of a workflow name, scored by start time
--   :c           "<correlation id>\0<id>" at score 0 (by ZRANGEBYLEX)
--   :e           the ended runs, scored by when they expire (their end plus the
--                retention of the save that ended them, as their keys)
local IX = KEYS[1]

local function ix_parse(rec)
    local f, st, s, e, v, nl, rest =
        string.match(rec, '^(%d+)|([%u_]+)|(%d+)|(%d+)|(%-?%d+)|(%d+)|(.*)$')
    if not f then return nil end
    nl = tonumber(nl)
    return {fence = tonumber(f), status = st, start = tonumber(s), ended = tonumber(e),
            version = tonumber(v), name = string.sub(rest, 1, nl),
            corr = string.sub(rest, nl + 1)}
end

-- take run id (record r, or unreadable: nil) out of every set
local function ix_unlink(id, r)
    if r then
        redis.call('ZREM', IX .. ':s:' .. r.status, id)
        redis.call('ZREM', IX .. ':n:' .. r.name, id)
        if r.corr ~= '' then redis.call('ZREM', IX .. ':c', r.corr .. '\0' .. id) end
    end
    redis.call('ZREM', IX .. ':e', id)
end

-- forget up to max runs whose time is up
local function ix_trim(now, max)
    local old = redis.call('ZRANGEBYSCORE', IX .. ':e', '-inf', now, 'LIMIT', 0, max)
    for _, id in ipairs(old) do
        local rec = redis.call('HGET', IX, id)
        ix_unlink(id, rec and ix_parse(rec))
        redis.call('HDEL', IX, id)
    end
end
