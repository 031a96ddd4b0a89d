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

# executions under our prefix by status: "COMPLETED=3001 ..." (summed over a
# cluster's primaries)
by_status() {
    on_primaries EVAL "local n = {}
for _, k in ipairs(redis.call('KEYS', ARGV[1])) do
  if redis.call('TYPE', k).ok == 'hash' then
    local s = redis.call('HGET', k, 'status')
    if s then n[s] = (n[s] or 0) + 1 end
  end
end
local r = {}
for s, c in pairs(n) do r[#r + 1] = s .. '=' .. c end
return r" 0 "${WEFT_KEY_PREFIX}{*}" | awk -F= 'NF == 2 { n[$1] += $2 } END { for (s in n) printf "%s=%d ", s, n[s] }'
}
has_status() { case " $(by_status) " in *" $1 "*) return 0 ;; esac; return 1; }

# 0. weft run reads the same limits from the environment
cat >"$TMP/retry.json" <<J
{"name":"retry","tasks":[{"name":"a","taskReferenceName":"a","type":"LAMBDA","retryCount":5,
 "inputParameters":{"scriptExpression":"return 1"}}]}
J
WEFT_MAX_RETRY_COUNT=2 run_weft run "$TMP/retry.json"
expect_rc "weft run: retryCount over WEFT_MAX_RETRY_COUNT" 2
expect_err "weft run: it names file, ref and limit" "retry.json: task 'a': retryCount 5 is over the limit of 2 (max_retry_count)"
cat >"$TMP/loop.json" <<J
{"name":"loop","tasks":[{"name":"loop","taskReferenceName":"loop","type":"DO_WHILE",
 "loopCondition":"return true","loopOver":[{"name":"s","taskReferenceName":"s","type":"LAMBDA",
 "inputParameters":{"scriptExpression":"return 1"}}]}]}
J
WEFT_MAX_LOOP_ITERATIONS=5 run_weft run "$TMP/loop.json" --quiet
expect_rc "weft run: an endless DO_WHILE stops" 1
expect_err "weft run: at WEFT_MAX_LOOP_ITERATIONS" "'loop' would run iteration 6, over the limit of 5 (max_loop_iterations"
WEFT_MAX_TASKS=many run_weft run "$TMP/loop.json"
expect_rc "weft run: a bad limit in the environment" 2
expect_err "weft run: names the key" "max_tasks"

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
on_primaries FLUSHDB >/dev/null
run_weft register "$TMP/deepw.json"
run_weft start deepw --input '{"n":3000}'; root=$last
wait_for 600 has_status RUNNING=3001 && ok "3,001 levels running" || not_ok "statuses: $(by_status)"
run_weft terminate "$root" --reason "enough"
expect_rc "terminate the root" 0
wait_for 300 has_status TERMINATED=3001 && ok "all 3,001 levels TERMINATED" || not_ok "statuses: $(by_status)"
# 3. a workflow that starts itself, terminated at its root while it spawns:
# the whole tree ends (also a child started just before its parent's end)
cat >"$TMP/selfy.json" <<J
{"name":"selfy","tasks":[{"name":"again","taskReferenceName":"again","type":"SUB_WORKFLOW",
 "subWorkflowParam":{"name":"selfy"}}]}
J
on_primaries FLUSHDB >/dev/null
run_weft register "$TMP/selfy.json"
run_weft start selfy; root=$last
running_at_least() { n=$(by_status | grep -o 'RUNNING=[0-9]*' | cut -d= -f2); [ "${n:-0}" -ge "$1" ]; }
wait_for 60 running_at_least 20 || not_ok "it does not spawn: $(by_status)"
run_weft terminate "$root"
expect_rc "terminate the root of a self-starting workflow" 0
no_running() { case " $(by_status) " in *" RUNNING="*) return 1 ;; esac; return 0; }
wait_for 60 no_running && ok "no level is left running" || not_ok "statuses: $(by_status)"
s1=$(by_status); sleep 2; s2=$(by_status)
[ "$s1" = "$s2" ] && ok "nothing new is started ($s2)" || not_ok "still spawning: $s1 then $s2"

for n in d1 d1b; do
    pid=$(eval "echo \${WEFTD_PID_$n:-}")
    [ -n "$pid" ] || continue
    kill -0 "$pid" 2>/dev/null && ok "weftd $n is still running" \
        || { not_ok "weftd $n died"; tail -n 30 "$TMP/$n.log" | sed 's/^/# /'; }
done
stop_weftd_clean d1

# 4. the same workflow under max_subworkflow_depth=10 fails at depth 11,
# naming the ref and the limit, and the failure goes up to the root
on_primaries FLUSHDB >/dev/null
run_weft register "$TMP/selfy.json"
start_weftd d2 --workers 2 --api 127.0.0.1:0 --set max_retry_count=3 \
    ${DEPTH_FLAGS2---set max_subworkflow_depth=10}
run_weft start selfy; root=$last
run_weft wait "$root" --timeout 60
expect_rc "a self-starting workflow fails at the depth limit" 1
run_weft status "$root" -o json
case $out in *"over the limit of 10 (max_subworkflow_depth)"*) ok "its reason names the limit" ;;
    *) not_ok "reason: $(printf '%s' "$out" | grep -o '"reasonForIncompletion":"[^"]*"' | head -1)" ;; esac
s=$(by_status)
[ "$s" = "FAILED=11 " ] && ok "the root and 10 levels below it FAILED" || not_ok "statuses: $s"

# 5. the daemon's limits hold for inline definitions through the REST API: 400
api="$(api_of d2)"
body=$(curl -s -w '\n%{http_code}' -X POST "http://$api/api/workflow" -H 'Content-Type: application/json' \
    -d '{"name":"r","workflowDef":{"name":"r","tasks":[{"name":"a","taskReferenceName":"a","type":"LAMBDA",
         "retryCount":4,"inputParameters":{"scriptExpression":"return 1"}}]}}')
case $body in *"retryCount 4 is over the limit of 3 (max_retry_count)"*400) ok "API: 400 naming the limit" ;;
    *) not_ok "API answered: $body" ;; esac

# 6. a workflow whose failure workflow is itself: bounded by the same limit
cat >"$TMP/fails.json" <<J
{"name":"fails","failureWorkflow":"fails","tasks":[{"name":"boom","taskReferenceName":"boom",
 "type":"LAMBDA","inputParameters":{"scriptExpression":"error('boom')"}}]}
J
on_primaries FLUSHDB >/dev/null
run_weft register "$TMP/fails.json"
run_weft start fails
wait_for 60 has_status FAILED=11 && ok "a self-starting failure workflow stops at 10 levels" \
    || not_ok "statuses: $(by_status)"
sleep 2
s=$(by_status)
[ "$s" = "FAILED=11 " ] && ok "and starts no more" || not_ok "statuses: $s"
grep -q "failure workflow 'fails' would be nested 11 deep, over the limit of 10 (max_subworkflow_depth)" "$TMP/d2.log" \
    && ok "weftd logs why the last one was not started" || not_ok "no log line"
stop_weftd_clean d2
finish
