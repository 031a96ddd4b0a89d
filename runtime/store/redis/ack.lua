-- ack.lua: drop a claim whose result was handled, if its lease is current;
-- the slot it held (its name's concurrency) is given back.
--@include queue_lib.lua
-- ARGV[2] member   ARGV[3] token
-- ARGV[4] "back" with ARGV[5] now ms: the claim is given back unused (the
-- member is ready again at once, first in line, its controls and its count
-- of expired leases kept); else it is done.
-- Returns 1 when dropped, 0 when the lease is no longer current.
local m = ARGV[2]
if redis.call('HGET', KEYS[3], m) ~= ARGV[3] then
    return 0
end
redis.call('ZREM', KEYS[2], m)
redis.call('HDEL', KEYS[3], m)
if ARGV[4] ~= 'back' then
    redis.call('HDEL', KEYS[4], m)
end
q_release(m)
if ARGV[4] == 'back' then
    -- unused: its claim in the rate window is given back too
    local now = tonumber(ARGV[5])
    local p, n, w, _, name = q_spec(m)
    if p and n > 0 and name ~= '' and
        tonumber(redis.call('HGET', K_LIM, 'ws:' .. name) or '-1') == now - now % w and
        tonumber(redis.call('HGET', K_LIM, 'wn:' .. name) or '0') > 0 then
        redis.call('HINCRBY', K_LIM, 'wn:' .. name, -1)
    end
    redis.call('ZADD', KEYS[1], 0, m) -- it was first in line when claimed
else
    q_forget(m)
end
return 1
