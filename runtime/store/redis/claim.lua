-- claim.lua: lease up to max members that are visible now: the highest
-- priority first and FIFO within one, within their names' limits (a
-- member over one waits in its name's park, not failed).
-- KEYS[1..4] and ARGV[1]: as queue_lib.lua says (included below, past the
-- path of a queue without controls, which needs none of it)
-- ARGV[2] now ms ("0": Redis's clock, for a poll queued behind a wait)
-- ARGV[3] lease ms   ARGV[4] max   ARGV[5] token seed (random, per call)
-- ARGV[6] on the base queue: how long (ms) the poll's time is kept in
-- P{q:<type>}:polled, written at most once a second; "0" on a shard: not
-- Returns {member, token, controlled, ...}; token = seed .. ":" .. counter,
-- controlled 1 when the member has controls (its ack runs ack.lua).
local now, now_s = tonumber(ARGV[2]), ARGV[2]
if now == 0 then
    local t = redis.call('TIME')
    now = t[1] * 1000 + math.floor(t[2] / 1000)
    now_s = string.format('%d', now)
end
-- numbers go to Redis as text made once with %d: Lua makes a number text
-- with a floating-point printf at each use, the dearest part of a claim
local expiry = string.format('%d', now + tonumber(ARGV[3]))
local max = tonumber(ARGV[4])
local out = {}
if ARGV[6] ~= '0' then
    -- every poll of every worker would be a write: one a second is plenty
    local last = tonumber(redis.call('GET', ARGV[1] .. 'polled')) or 0
    if now - last >= 1000 then
        redis.call('SET', ARGV[1] .. 'polled', now_s, 'PX', ARGV[6])
    end
end
local function lease(m, ctl)
    local token = ARGV[5] .. ':' .. string.format('%d', #out / 3 + 1)
    redis.call('ZADD', KEYS[2], expiry, m)
    redis.call('HSET', KEYS[3], m, token)
    out[#out + 1] = m
    out[#out + 1] = token
    out[#out + 1] = ctl
end
if redis.call('EXISTS', ARGV[1] .. 'due', ARGV[1] .. 'meta') == 0 then
    -- nothing here has controls: by visible-at, as they come
    local got = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now_s, 'LIMIT', 0, ARGV[4])
    for _, m in ipairs(got) do
        redis.call('ZREM', KEYS[1], m)
        lease(m, 0)
    end
    return out
end
-- controls around: the shared code (named keys, q_spec ...) from here on
--@include queue_lib.lua
-- rate windows that ended: a window's count of their waiting members back
local ended = redis.call('ZRANGEBYSCORE', K_WAKE, '-inf', now, 'LIMIT', 0, 100)
for _, name in ipairs(ended) do
    local n = tonumber(redis.call('HGET', K_LIM, 'rn:' .. name) or '1')
    local w = tonumber(redis.call('HGET', K_LIM, 'rw:' .. name) or '1000')
    q_unpark(name, n)
    if redis.call('EXISTS', K_PARK .. name) == 1 then
        redis.call('ZADD', K_WAKE, now - now % w + w, name)
    else
        redis.call('ZREM', K_WAKE, name)
    end
end
-- members visible now: into due, by priority and then visible-at
local vis = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0, 1000)
for i = 1, #vis, 2 do
    local p, _, _, _, name = q_spec(vis[i])
    q_unpark_member(vis[i], name) -- pushed again while it waited: one place
    redis.call('ZADD', K_DUE, (99 - (p or 0)) * SPAN + tonumber(vis[i + 1]), vis[i])
    redis.call('ZREM', KEYS[1], vis[i])
end
local looked = 0
while #out < 3 * max and looked < 1000 do
    local head = redis.call('ZRANGE', K_DUE, 0, 0, 'WITHSCORES')
    if #head == 0 then
        break
    end
    local m, score = head[1], head[2]
    looked = looked + 1
    redis.call('ZREM', K_DUE, m)
    local p, n, w, c, name = q_spec(m)
    local wait = false
    if name and name ~= '' then
        if c > 0 and tonumber(redis.call('HGET', K_LIM, 'c:' .. name) or '0') >= c then
            wait = true -- a slot given back brings it back (q_release)
        elseif n > 0 then
            local ws = now - now % w
            if tonumber(redis.call('HGET', K_LIM, 'ws:' .. name) or '-1') ~= ws then
                redis.call('HSET', K_LIM, 'ws:' .. name, ws, 'wn:' .. name, 0)
            end
            if tonumber(redis.call('HGET', K_LIM, 'wn:' .. name)) >= n then
                wait = true -- the window's end brings it back
                redis.call('HSET', K_LIM, 'rn:' .. name, n, 'rw:' .. name, w)
                redis.call('ZADD', K_WAKE, 'NX', ws + w, name)
            end
        end
        if wait then
            if redis.call('ZADD', K_PARK .. name, score, m) == 1 then
                redis.call('HINCRBY', K_LIM, 'parked', 1)
            end
        else
            -- (claimed again while leased, pushed anew: its one slot counts once)
            if c > 0 and redis.call('HSETNX', K_HELD, m, name) == 1 then
                redis.call('HINCRBY', K_LIM, 'c:' .. name, 1)
            end
            if n > 0 then
                redis.call('HINCRBY', K_LIM, 'wn:' .. name, 1)
            end
        end
    end
    if not wait then
        lease(m, p and 1 or 0)
    end
end
return out
