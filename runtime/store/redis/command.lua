-- command.lua: record an operator command (terminate, pause, resume) for an
-- execution. save.lua refuses every save that has not applied it, so the
-- next save of any decider (or of the operator's own client) reloads and
-- applies it first: an operator never loses a race to a busy decider.
-- KEYS[1] P{<wfid>}   execution hash
-- ARGV[1] the command "<token>|<kind>|<reason>"   ARGV[2] kind
-- Returns {1} recorded; {2, pending} the same kind waits already (pending is
-- it: the caller waits for that one); {3, pending} another command waits
-- (apply it first, then ask again); {0, status} the status does not allow
-- the command; {-1} no such execution.
local got = redis.call('HMGET', KEYS[1], 'status', 'cmd')
local status, pending = got[1], got[2]
if not status then
    return {-1}
end
if pending then
    local kind = string.match(pending, '^[^|]*|([^|]*)')
    if kind == ARGV[2] then
        return {2, pending}
    end
    if ARGV[2] ~= 'terminate' then
        return {3, pending}
    end
    -- terminate overrides a waiting pause or resume
else
    local ended = status == 'COMPLETED' or status == 'FAILED' or status == 'TIMED_OUT' or
                  status == 'TERMINATED'
    if (ARGV[2] == 'terminate' and ended) or (ARGV[2] == 'pause' and status ~= 'RUNNING') or
       (ARGV[2] == 'resume' and status ~= 'PAUSED') then
        return {0, status}
    end
end
redis.call('HSET', KEYS[1], 'cmd', ARGV[1])
return {1}
