-- index_lib.lua: the execution index of one partition, shared by search.lua
-- and due.lua (--@include, after `local IX = <the index key>`): the runs that
-- ended (one not ended is found on the decider queue). IX is P{<partition>}:ix,
-- a hash of run id -> record
--   "<fence>|<status>|<start>|<end>|<version>|<name length>|<name><correlation id>"
-- (end 0: made to run again, in no set). Beside it, in the same hash tag:
--   :log  what the saves' outbox steps appended (RPUSH, no script): entries
--         "<id length>|<id><expiry>|<record>", not yet folded into the sets
--   :sn:<status>:<name>  the ended runs of a status and name, by start time
--   :names  the workflow names that have such sets
--   :c    "<correlation id>\0<id>" at score 0 (by ZRANGEBYLEX)
--   :e    "<expiry>|<fence>|<id>" in the order folded: an ended run and when
--         it expires (its end plus the retention of the save that ended it,
--         as its keys); trimmed from the head while its time is up
-- A step is appended whatever its fence: the fold keeps a record only when
-- its fence is newer than the one it has, so a step applied late or twice
-- changes nothing.
local LOG, NAMES, CORR, EXP = IX .. ':log', IX .. ':names', IX .. ':c', IX .. ':e'

local function ix_parse(rec)
    local f, st, s, e, v, nl, rest =
        string.match(rec, '^(%d+)|([%u_]+)|(%d+)|(%d+)|(%-?%d+)|(%d+)|(.*)$')
    if not f then return nil end
    nl = tonumber(nl)
    return {fence = tonumber(f), status = st, start = tonumber(s), ended = tonumber(e),
            version = tonumber(v), name = string.sub(rest, 1, nl),
            corr = string.sub(rest, nl + 1)}
end

local function ix_set(status, name)
    return IX .. ':sn:' .. status .. ':' .. name
end

-- take run id (record r) out of the sets; its :e entry stays, passed over
-- when trimmed (its fence no longer the record's)
local function ix_unlink(id, r)
    if r.ended > 0 then
        redis.call('ZREM', ix_set(r.status, r.name), id)
        if r.corr ~= '' then redis.call('ZREM', CORR, r.corr .. '\0' .. id) end
    end
end

-- the commands of a set of calls grouped by key, args appended as they come
local function ix_add(calls, key, a, b)
    local t = calls[key]
    if not t then
        t = {}
        calls[key] = t
    end
    t[#t + 1] = a
    if b then t[#t + 1] = b end
end

-- cmd key args... in chunks (unpack's stack is small)
local function ix_flush(cmd, key, args)
    for i = 1, #args, 1000 do
        redis.call(cmd, key, unpack(args, i, math.min(i + 999, #args)))
    end
end

-- the records of ids (HMGET in chunks), in their order (false: none)
local function ix_records(ids)
    local got = {}
    for i = 1, #ids, 1000 do
        local part = redis.call('HMGET', IX, unpack(ids, i, math.min(i + 999, #ids)))
        for k = 1, #part do got[i + k - 1] = part[k] end
    end
    return got
end

-- forget up to max runs whose time is up (from the head of :e)
local function ix_trim(now, max)
    local old = redis.call('LRANGE', EXP, 0, max - 1)
    local n, ids, fences = 0, {}, {}
    for _, m in ipairs(old) do
        local exp, fence, id = string.match(m, '^(%d+)|(%d+)|(.+)$')
        if exp and tonumber(exp) > now then break end
        n = n + 1
        if exp then
            ids[#ids + 1] = id
            fences[#ids] = tonumber(fence)
        end
    end
    if n == 0 then return 0 end
    local recs, zrem, corr, hdel, names = ix_records(ids), {}, {}, {}, {}
    for i, id in ipairs(ids) do
        local r = recs[i] and ix_parse(recs[i])
        if r and r.fence == fences[i] then
            if r.ended > 0 then
                ix_add(zrem, ix_set(r.status, r.name), id)
                if r.corr ~= '' then corr[#corr + 1] = r.corr .. '\0' .. id end
            end
            hdel[#hdel + 1] = id
            names[r.name] = true
        end
    end
    for key, args in pairs(zrem) do ix_flush('ZREM', key, args) end
    if #corr > 0 then ix_flush('ZREM', CORR, corr) end
    if #hdel > 0 then ix_flush('HDEL', IX, hdel) end
    redis.call('LTRIM', EXP, n, -1)
    -- a name with no run left in any set leaves :names
    for name in pairs(names) do
        if redis.call('EXISTS', ix_set('COMPLETED', name), ix_set('FAILED', name),
                      ix_set('TIMED_OUT', name), ix_set('TERMINATED', name)) == 0 then
            redis.call('SREM', NAMES, name)
        end
    end
    return n
end

-- Fold up to max entries of :log into the sets (the newest record of each
-- run, if newer than the one kept), then trim; how many were taken. A
-- malformed entry is dropped.
local function ix_fold(max, now)
    local got = redis.call('LPOP', LOG, max)
    if not got then return 0 end
    local best, ids = {}, {}
    for _, m in ipairs(got) do
        local il, rest = string.match(m, '^(%d+)|(.*)$')
        il = il and tonumber(il)
        if il and il > 0 and il <= #rest then
            local id = string.sub(rest, 1, il)
            local exp, rec = string.match(string.sub(rest, il + 1), '^(%d+)|(.*)$')
            local r = rec and ix_parse(rec)
            if r then
                r.rec, r.exp = rec, exp
                local b = best[id]
                if not b then ids[#ids + 1] = id end
                if not b or r.fence > b.fence then best[id] = r end
            end
        end
    end
    if #ids == 0 then return #got end
    local kept = ix_records(ids)
    local hset, zadd, corr, exp, names, named = {}, {}, {}, {}, {}, {}
    for i, id in ipairs(ids) do
        local r, old = best[id], kept[i] and ix_parse(kept[i])
        if not old or old.fence < r.fence then
            if old then ix_unlink(id, old) end
            hset[#hset + 1] = id
            hset[#hset + 1] = r.rec
            if r.ended > 0 then
                ix_add(zadd, ix_set(r.status, r.name), r.start, id)
                if not named[r.name] then
                    named[r.name] = true
                    names[#names + 1] = r.name
                end
                if r.corr ~= '' then
                    corr[#corr + 1] = 0
                    corr[#corr + 1] = r.corr .. '\0' .. id
                end
                exp[#exp + 1] = r.exp .. '|' .. r.fence .. '|' .. id
            end
        end
    end
    if #hset > 0 then ix_flush('HSET', IX, hset) end
    for key, args in pairs(zadd) do ix_flush('ZADD', key, args) end
    if #names > 0 then ix_flush('SADD', NAMES, names) end
    if #corr > 0 then ix_flush('ZADD', CORR, corr) end
    if #exp > 0 then ix_flush('RPUSH', EXP, exp) end
    ix_trim(now, #got + 16)
    return #got
end
