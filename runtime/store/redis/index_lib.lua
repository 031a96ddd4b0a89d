-- index_lib.lua: the execution index of one partition, shared by search.lua
-- and due.lua (--@include, after `local IX = <the index key>`): the runs that
-- ended (one not ended is found on the decider queue). IX is P{<partition>}:ix,
-- a hash of run id -> record
--   "<fence>|<status>|<start>|<end>|<version>|<name length>|<name><correlation id>"
-- (end 0: made to run again, in no set). Beside it, in the same hash tag:
--   :log  what the saves' outbox steps appended (one RPUSH, no script), not
--         yet folded into the rest: 6 elements an entry, made by the store
--         (outbox.c) so that a fold parses nothing but a fence, and that only
--         for a run it has seen before: id, record, set key ("" for a run made
--         to run again), start, expiry, correlation member ("" for none)
--   :sn:<status>:<name>  the ended runs of a status and workflow name, by start
--   :sets the keys of those sets (a set emptied by a trim leaves)
--   :c    "<correlation id>\0<id>" at score 0 (by ZRANGEBYLEX)
--   :ends the ended runs in the order folded, 5 elements each: expiry (its
--         end plus the retention of the save that ended it, as its keys),
--         record, id, set key, correlation member; trimmed from the head
--         while the time is up (a run whose record is another since, left)
-- A step is appended whatever its fence: a fold keeps a record unless the
-- one kept has a newer fence, so a step applied late changes nothing, and
-- one applied twice writes the same again.
local LOG, SETS, CORR, EXP = IX .. ':log', IX .. ':sets', IX .. ':c', IX .. ':ends'
local LOG_N, EXP_N = 6, 5

local function ix_parse(rec)
    local f, st, s, e, v, nl, rest =
        string.match(rec, '^(%d+)|([%u_]+)|(%d+)|(%d+)|(%-?%d+)|(%d+)|(.*)$')
    if not f then return nil end
    nl = tonumber(nl)
    return {fence = tonumber(f), status = st, start = tonumber(s), ended = tonumber(e),
            version = tonumber(v), name = string.sub(rest, 1, nl),
            corr = string.sub(rest, nl + 1)}
end

-- a record's fence (0 when unreadable)
local function ix_fence(rec)
    return tonumber(string.match(rec, '^%d+')) or 0
end

local function ix_set(status, name)
    return IX .. ':sn:' .. status .. ':' .. name
end

-- append a, b to the list of key in calls (the arguments of one command per key)
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

-- take run id (record r, parsed) out of its sets; its :ends entry stays,
-- passed over when trimmed (its record no longer the one kept)
local function ix_unlink(id, r)
    if r and r.ended > 0 then
        redis.call('ZREM', ix_set(r.status, r.name), id)
        if r.corr ~= '' then redis.call('ZREM', CORR, r.corr .. '\0' .. id) end
    end
end

-- forget up to max runs whose time is up (from the head of :ends)
local function ix_trim(now, max)
    local head = redis.call('LINDEX', EXP, 0)
    if not head or (tonumber(head) or 0) > now then return 0 end
    local old = redis.call('LRANGE', EXP, 0, max * EXP_N - 1)
    local n, ids, at = 0, {}, {}
    while n + EXP_N <= #old and (tonumber(old[n + 1]) or 0) <= now do
        ids[#ids + 1] = old[n + 3]
        at[#ids] = n
        n = n + EXP_N
    end
    if n == 0 then return 0 end
    local recs, zrem, corr, hdel = ix_records(ids), {}, {}, {}
    for i, id in ipairs(ids) do
        local b = at[i]
        if recs[i] == old[b + 2] then
            ix_add(zrem, old[b + 4], id)
            if old[b + 5] ~= '' then corr[#corr + 1] = old[b + 5] end
            hdel[#hdel + 1] = id
        end
    end
    for key, args in pairs(zrem) do
        ix_flush('ZREM', key, args)
        if redis.call('EXISTS', key) == 0 then redis.call('SREM', SETS, key) end
    end
    if #corr > 0 then ix_flush('ZREM', CORR, corr) end
    if #hdel > 0 then ix_flush('HDEL', IX, hdel) end
    redis.call('LTRIM', EXP, n, -1)
    return n / EXP_N
end

-- Fold up to max entries of :log into the rest (the newest record of each
-- run, unless the one kept is newer), then trim as many; how many were taken.
-- They leave the log last: a fold that fails on the way loses none (the
-- next one writes again what this one did, the same).
local function ix_fold(max, now)
    local got = redis.call('LRANGE', LOG, 0, max * LOG_N - 1)
    if #got == 0 then return 0 end
    local at, ids = {}, {}
    for b = 0, #got - LOG_N, LOG_N do
        local id = got[b + 1]
        local prev = at[id]
        if not prev then
            ids[#ids + 1] = id
            at[id] = b
        elseif ix_fence(got[b + 2]) > ix_fence(got[prev + 2]) then
            at[id] = b
        end
    end
    local kept = ix_records(ids)
    local hset, zadd, corr, exp = {}, {}, {}, {}
    for i, id in ipairs(ids) do
        local b = at[id]
        local old, key = kept[i], got[b + 3]
        -- an end whose time is up is not written (its keys are gone: a step
        -- applied that late); one as new as the record kept is written again,
        -- the same (after a fold that failed)
        if (key == '' or (tonumber(got[b + 5]) or 0) > now) and
            (not old or ix_fence(old) <= ix_fence(got[b + 2])) then
            if old then ix_unlink(id, ix_parse(old)) end
            hset[#hset + 1] = id
            hset[#hset + 1] = got[b + 2]
            if key ~= '' then
                ix_add(zadd, key, got[b + 4], id)
                if got[b + 6] ~= '' then
                    corr[#corr + 1] = '0'
                    corr[#corr + 1] = got[b + 6]
                end
                local e = #exp
                exp[e + 1], exp[e + 2], exp[e + 3], exp[e + 4], exp[e + 5] =
                    got[b + 5], got[b + 2], id, key, got[b + 6]
            end
        end
    end
    if #hset > 0 then ix_flush('HSET', IX, hset) end
    local sets = {}
    for key, args in pairs(zadd) do
        ix_flush('ZADD', key, args)
        sets[#sets + 1] = key
    end
    if #sets > 0 then ix_flush('SADD', SETS, sets) end
    if #corr > 0 then ix_flush('ZADD', CORR, corr) end
    if #exp > 0 then ix_flush('RPUSH', EXP, exp) end
    redis.call('LTRIM', LOG, #got, -1)
    ix_trim(now, math.floor(#got / LOG_N) + 16)
    return math.floor(#got / LOG_N)
end
