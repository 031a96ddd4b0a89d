#!/bin/bash
# Bounded recursion against weftd and real Redis (issue 10 item 4): a
# 3,000-deep chain of sub-workflows completes, and terminating its root
# terminates all 3,001 levels, with no C recursion per level (ASan's stack
# is what catches it); a workflow that starts itself stops at the depth
# limit, and terminating its root terminates its whole tree.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/redis_lib.sh"
export WEFT_KEY_PREFIX="depth$$:"
start_redis

# deep(n): n-1 > = 0 starts deep(n-1); the leaf ends (deep) or waits (deepw)
deep_def() { # NAME LEAF
    cat <<J
{"name":"$1","tasks":[
 {"name":"dec","taskReferenceName":"dec","type":"LAMBDA",
  "inputParameters":{"n":"\${workflow.input.n}","scriptExpression":"return input.n - 1"}},
 {"name":"d","taskReferenceName":"d","type":"DECISION",
  "caseExpression":"if input.n >= 0 then return 'more' end return 'leaf'",
  "inputParameters":{"n":"\${dec.output.result}"},"defaultCase":[$2],
  "decisionCases":{"more":[{"name":"next","taskReferenceName":"next","type":"SUB_WORKFLOW",
   "subWorkflowParam":{"name":"$1"},"inputParameters":{"n":"\${dec.output.result}"}}]}}]}
J
}
deep_def deep "" >"$TMP/deep.json"
deep_def deepw '{"name":"hold","taskReferenceName":"hold","type":"WAIT"}' >"$TMP/deepw.json"

# executions under our prefix by status: "COMPLETED=3001 ..."
by_status() {
    rcli EVAL "local n = {}
for _, k in ipairs(redis.call('KEYS', ARGV[1])) do
  if redis.call('TYPE', k).ok == 'hash' then
    local s = redis.call('HGET', k, 'status')
    if s then n[s] = (n[s] or 0) + 1 end
  end
end
local r = {}
for s, c in pairs(n) do r[#r + 1] = s .. '=' .. c end
table.sort(r)
return r" 0 "${WEFT_KEY_PREFIX}{*}" | tr '\n' ' '
}
has_status() { case " $(by_status) " in *" $1 "*) return 0 ;; esac; return 1; }

for f in deep deepw; do
    run_weft register "$TMP/$f.json"; expect_rc "register $f" 0
done
start_weftd d1 --workers 2 ${DEPTH_FLAGS---set max_subworkflow_depth=5000}

# 1. 3,001 levels: the leaf's end completes every parent up to the root
run_weft start deep --input '{"n":3000}'; id=$last
run_weft wait "$id" --timeout 300
expect_rc "a 3,001-level chain completes" 0
kill -0 "$(weftd_pid d1)" 2>/dev/null && ok "weftd is still running" \
    || { not_ok "weftd died"; tail -n 30 "$TMP/d1.log" | sed 's/^/# /'; start_weftd d1b --workers 2; }
s=$(by_status)
[ "$s" = "COMPLETED=3001 " ] && ok "all 3,001 levels COMPLETED" || not_ok "statuses: $s"

# 2. terminating the root of a 3,001-level tree waiting at its leaf
rcli FLUSHDB >/dev/null
run_weft register "$TMP/deepw.json"
run_weft start deepw --input '{"n":3000}'; root=$last
wait_for 600 has_status RUNNING=3001 && ok "3,001 levels running" || not_ok "statuses: $(by_status)"
run_weft terminate "$root" --reason "enough"
expect_rc "terminate the root" 0
wait_for 300 has_status TERMINATED=3001 && ok "all 3,001 levels TERMINATED" || not_ok "statuses: $(by_status)"
for n in d1 d1b; do
    pid=$(eval "echo \${WEFTD_PID_$n:-}")
    [ -n "$pid" ] || continue
    kill -0 "$pid" 2>/dev/null && ok "weftd $n is still running" \
        || { not_ok "weftd $n died"; tail -n 30 "$TMP/$n.log" | sed 's/^/# /'; }
done
stop_weftd_clean d1
finish
