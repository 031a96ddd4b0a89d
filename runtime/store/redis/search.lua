-- search.lua: the ended runs of one partition's execution index
-- (index_lib.lua) that match a query, the first `limit` of them in the
-- order asked; the caller merges the partitions (and the runs not ended,
-- from the decider queue). Folds the index's log into its sets first (a
-- search sees every run whose end was saved), and trims runs whose time is
-- up.
-- KEYS[1] P{<partition>}:ix
-- ARGV[1] now ms
-- ARGV[2] start time after (ms, exclusive; "" none)   ARGV[3] before ("" none)
-- ARGV[4] sort key: "start" or "end"   ARGV[5] "1" ascending, else descending
-- ARGV[6] limit   ARGV[7] correlation id ("" any)
-- ARGV[8] free text: a run id or a correlation id ("" none)
-- ARGV[9] version ("" any)
-- ARGV[10] n statuses (ended ones), the statuses, then m names, the names
--          (none: any; a value given twice counts once)
-- Returns {total, id, key, id, key, ...}: how many match, and the first
-- limit of them with their sort key.
local IX = KEYS[1]
--@include index_lib.lua
local now = tonumber(ARGV[1])
local lo, hi = '-inf', '+inf'
local lo_n, hi_n = -math.huge, math.huge
if ARGV[2] ~= '' then lo, lo_n = '(' .. ARGV[2], tonumber(ARGV[2]) end
if ARGV[3] ~= '' then hi, hi_n = '(' .. ARGV[3], tonumber(ARGV[3]) end
local by_end, asc, limit = ARGV[4] == 'end', ARGV[5] == '1', tonumber(ARGV[6])
local corr, free, version = ARGV[7], ARGV[8], ARGV[9]
local statuses, names, want_status, want_name = {}, {}, {}, {}
-- a list of ARGV from i (its count first) into list and set, each value once
local function list_at(i, list, set)
    local n = tonumber(ARGV[i])
    for k = 1, n do
        local v = ARGV[i + k]
        -- (a status is a word of capitals: no other can name a set)
        if not set[v] and (i > 10 or string.match(v, '^[%u_]+$')) then
            set[v] = true
            list[#list + 1] = v
        end
    end
    return i + n + 1
end
list_at(list_at(10, statuses, want_status), names, want_name)
if #statuses == 0 and tonumber(ARGV[10]) > 0 then return {0} end

for _ = 1, 40 do
    if ix_fold(1000, now) < 1000 then break end
end
ix_trim(now, 100)

local function before(a, b)
    if a[2] ~= b[2] then
        if asc then return a[2] < b[2] end
        return a[2] > b[2]
    end
    if asc then return a[1] < b[1] end
    return a[1] > b[1]
end

local function answer(total, hits)
    table.sort(hits, before)
    local out = {total}
    for k = 1, math.min(limit, #hits) do
        out[#out + 1] = hits[k][1]
        out[#out + 1] = hits[k][2]
    end
    return out
end

local function count(keys)
    local n = 0
    for _, k in ipairs(keys) do n = n + redis.call('ZCOUNT', k, lo, hi) end
    return n
end

-- the sets to read: each status asked (or each ended one) with each name
-- asked (or each name that has runs)
local keys = {}
local in_statuses = #statuses > 0 and statuses or {'COMPLETED', 'FAILED', 'TIMED_OUT', 'TERMINATED'}
if #names > 0 then
    for _, st in ipairs(in_statuses) do
        for _, name in ipairs(names) do keys[#keys + 1] = ix_set(st, name) end
    end
else
    local all = redis.call('SMEMBERS', SETS)
    for _, st in ipairs(in_statuses) do
        local prefix = ix_set(st, '')
        for _, k in ipairs(all) do
            if string.sub(k, 1, #prefix) == prefix then keys[#keys + 1] = k end
        end
    end
end

-- The first `limit` members of the sets in start time's order: a few from
-- each set, then more from a set only while the last read of it could still
-- be among them (with many names, not limit from each).
local function first_of(sets)
    local got, more, full = {}, {}, {}
    if limit < 1 then return {} end
    local per = math.min(limit, math.max(16, math.ceil(2 * limit / math.max(#sets, 1))))
    for i = 1, #sets do
        got[i], more[i] = {}, per
    end
    while true do
        for i, k in ipairs(sets) do
            local n = more[i]
            if n then
                local r, t = nil, got[i]
                if asc then
                    r = redis.call('ZRANGEBYSCORE', k, lo, hi, 'WITHSCORES', 'LIMIT', #t, n)
                else
                    r = redis.call('ZREVRANGEBYSCORE', k, hi, lo, 'WITHSCORES', 'LIMIT', #t, n)
                end
                for j = 1, #r, 2 do t[#t + 1] = {r[j], tonumber(r[j + 1])} end
                more[i], full[i] = nil, #r == 2 * n
            end
        end
        local hits, again = {}, false
        for i = 1, #sets do
            for _, h in ipairs(got[i]) do hits[#hits + 1] = h end
        end
        table.sort(hits, before)
        local cut = hits[limit]
        for i = 1, #sets do
            local t = got[i]
            if full[i] and (not cut or before(t[#t], cut)) then
                more[i], again = math.max(#t, 16), true
            end
        end
        if not again then return hits end
    end
end

-- filters the sets answer alone, in start time's order
if corr == '' and free == '' and version == '' and not by_end then
    return answer(count(keys), first_of(keys))
end

-- else each candidate's record is read: the candidates of the narrowest filter
local ids = {}
local function by_corr(c)
    local got = redis.call('ZRANGEBYLEX', CORR, '[' .. c .. '\0', '[' .. c .. '\1')
    for _, m in ipairs(got) do
        local id = string.sub(m, #c + 2)
        if id ~= '' then ids[#ids + 1] = id end
    end
end
if free ~= '' then
    if redis.call('HEXISTS', IX, free) == 1 then ids[1] = free end
    by_corr(free)
elseif corr ~= '' then
    by_corr(corr)
else
    for _, k in ipairs(keys) do
        for _, id in ipairs(redis.call('ZRANGEBYSCORE', k, lo, hi)) do ids[#ids + 1] = id end
    end
end
local hits, seen, recs = {}, {}, ix_records(ids)
for i, id in ipairs(ids) do
    local rec = not seen[id] and recs[i]
    seen[id] = true
    local r = rec and ix_parse(rec)
    if r and r.ended > 0 and (#statuses == 0 or want_status[r.status]) and (#names == 0 or want_name[r.name]) and
        r.start > lo_n and r.start < hi_n and (corr == '' or r.corr == corr) and
        (version == '' or r.version == tonumber(version)) then
        hits[#hits + 1] = {id, by_end and r.ended or r.start}
    end
end
return answer(#hits, hits)
