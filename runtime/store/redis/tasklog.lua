-- tasklog.lua: append log lines (TaskExecLog JSON texts) to a task's log in
-- its workflow's log hash, keeping the newest max; the hash lives as long
-- as the execution (save.lua gives it the execution's expiry at the end:
-- the execution's field "log" says it has one).
-- KEYS[1] P{<wfid>}   KEYS[2] P{<wfid>}:log
-- ARGV[1] task id   ARGV[2] max lines   ARGV[3 ..] the lines (no newline)
-- Returns the lines kept, or -1 when there is no such execution.
if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
-- marked: save.lua gives the log the execution's expiry at its end
redis.call('HSET', KEYS[1], 'log', 1)
local lines = {}
local cur = redis.call('HGET', KEYS[2], ARGV[1])
if cur then
    for l in string.gmatch(cur, '[^\n]+') do lines[#lines + 1] = l end
end
for k = 3, #ARGV do lines[#lines + 1] = ARGV[k] end
local from = math.max(1, #lines - tonumber(ARGV[2]) + 1)
redis.call('HSET', KEYS[2], ARGV[1], table.concat(lines, '\n', from))
local ttl = redis.call('PTTL', KEYS[1])
if ttl > 0 then redis.call('PEXPIRE', KEYS[2], ttl) end
return #lines - from + 1
