-- queue_lib.lua: what the queue scripts share ("--@include queue_lib.lua").
-- Every queue script takes the same keys, all under the queue's hash tag:
-- KEYS[1] P{q:<type>}:ready   members by the time they become visible
-- KEYS[2] P{q:<type>}:leases  leased members by lease expiry
-- KEYS[3] P{q:<type>}:lease   member -> its current lease token
-- KEYS[4] P{q:<type>}:reaped  member -> how often its lease expired
-- and ARGV[1] P{q:<type>}:, the prefix of the keys of queue controls, named
-- here (in the same hash tag: one slot) so that a queue without controls
-- pays for four keys, not ten:
--   due     visible members with controls around: by due score
--           ((99 - priority) * SPAN + visible-at: higher first, FIFO in one)
--   meta    member -> "<priority>:<count>:<per ms>:<concurrency>:<name>"
--   lim     per name: c:<name> slots held, ws:/wn:<name> the rate window's
--           start and claims, rn:/rw:<name> its count and length; "parked":
--           members waiting in parks, all names
--   held    leased member -> the name whose slot it holds
--   wake    name -> when its rate window ends, while members wait on it
--   park:<name>  members waiting on that name's limits, by due score
local QP = ARGV[1]
local K_DUE, K_META, K_LIM, K_HELD = QP .. 'due', QP .. 'meta', QP .. 'lim', QP .. 'held'
local K_WAKE, K_PARK = QP .. 'wake', QP .. 'park:'
local SPAN = 4398046511104 -- 2^42 ms (past the year 2100): one priority's band of scores

-- m's controls: priority, rate count, window ms, concurrency, name ('' when
-- it has no limits); nil when it has none.
local function q_spec(m)
    local s = redis.call('HGET', K_META, m)
    if not s then
        return nil
    end
    local p, n, w, c, name = string.match(s, '^(%d+):(%d+):(%d+):(%d+):(.*)$')
    if not p then
        return nil
    end
    w = tonumber(w)
    if w < 1 then
        w = 1000 -- (never written so: a window is at least 1 ms)
    end
    return tonumber(p), tonumber(n), w, tonumber(c), name
end

-- Up to n members waiting on name back to due.
local function q_unpark(name, n)
    local back = redis.call('ZPOPMIN', K_PARK .. name, n)
    for i = 1, #back, 2 do
        redis.call('ZADD', K_DUE, back[i + 1], back[i])
    end
    if #back > 0 then
        redis.call('HINCRBY', K_LIM, 'parked', -#back / 2)
    end
end

-- Give back the slot m holds (once: held says whether it still does) and
-- bring the first member waiting on that name back to due.
local function q_release(m)
    local name = redis.call('HGET', K_HELD, m)
    if not name then
        return
    end
    redis.call('HDEL', K_HELD, m)
    redis.call('HINCRBY', K_LIM, 'c:' .. name, -1)
    q_unpark(name, 1)
end

-- Take m out of its name's park if it waits there (it was pushed again
-- while parked): 1 when it did.
local function q_unpark_member(m, name)
    if name and name ~= '' and redis.call('ZREM', K_PARK .. name, m) == 1 then
        redis.call('HINCRBY', K_LIM, 'parked', -1)
        return 1
    end
    return 0
end

-- m is done with its queue: its controls go, unless it is queued again
-- (a save that pushes it anew runs before its ack), due or parked.
local function q_forget(m)
    if redis.call('ZSCORE', KEYS[1], m) or redis.call('ZSCORE', K_DUE, m) then
        return
    end
    local p, _, _, _, name = q_spec(m)
    if p and name ~= '' and redis.call('ZSCORE', K_PARK .. name, m) then
        return
    end
    redis.call('HDEL', K_META, m)
end
