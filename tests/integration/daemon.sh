#!/bin/bash
# weftd against a real redis-server: the examples run to the same outputs as
# embedded; client commands (start by file and by name, status, wait, watch,
# terminate, pause/resume, retry, restart, signal, idempotent start) behave.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/redis_lib.sh"
start_redis
start_weftd d1 --workers 2

run_wf() { # FILE INPUT -> sets $id, then waits: $last = output, $rc
    run_weft start "$SRC/examples/$1" --input "$2"
    id=$last
    run_weft wait "$id" --timeout 30
}
example() { # FILE INPUT EXPECTED [EXIT]
    run_wf "$1" "$2"
    expect_rc "weftd $1 $2" "${4:-0}"
    expect_json "weftd $1 $2" "$3"
}
example hello.lua '{"name":"weft"}' '{"greeting":"hello, weft!"}'
example fork.lua '{"user":"ann"}' \
    '{"sent":{"email":{"result":"mail to ann"},"sms":{"result":"sms of 160 chars"}}}'
example dynamic_fork.lua '{"n":3}' \
    '{"results":{"square_1":{"result":1},"square_2":{"result":4},"square_3":{"result":9}}}'
example do_while.lua '{"times":3}' '{"iterations":3,"last":30,"total":30}'
example decision.lua '{"amount":150,"country":"FR"}' \
    '{"route":"big","region":"FR","approved":false,"note":"needs review"}'
example terminate.lua '{"stop":true}' '{"stopped":true}'
example wait.lua '{}' '{"waited":"COMPLETED","after":"done"}'
example retry.lua '{}' '{"flaky":"ok on attempt 2","flaky_attempt":2,"broken":"COMPLETED_WITH_ERRORS"}'
example conductor.json '{"kind":"a"}' \
    '{"selected":"a","joined":{"left":{"result":"L"},"right":{"result":"R:a"}},"flag":"A"}'

# sub-workflows by name come from registered definitions
run_weft register "$SRC/examples/child.lua"
expect_rc "register child" 0
case $out in *"registered child version 1"*) ok "register says what it stored" ;; *) not_ok "register: $out" ;; esac
example sub_workflow.lua '{"x":3}' '{"by_name":6,"inline":36}'

# start by name: the latest version unless --version
cat >"$TMP/v.lua" <<'L'
local w = require "weft"
return w.workflow { name = "versioned", version = VERSION, output = { v = "${t.output.result}" },
  w.lambda { ref = "t", script = "return VERSION" } }
L
sed 's/VERSION/1/g' "$TMP/v.lua" >"$TMP/v1.lua"; sed 's/VERSION/2/g' "$TMP/v.lua" >"$TMP/v2.lua"
run_weft register "$TMP/v1.lua"; run_weft register "$TMP/v2.lua"
run_weft start versioned; id=$last; run_weft wait "$id" --timeout 20
expect_json "start by name takes the latest" '{"v":2}'
run_weft start versioned --version 1; id=$last; run_weft wait "$id" --timeout 20
expect_json "start by name --version 1" '{"v":1}'
run_weft start no_such_workflow
expect_rc "start an unregistered name" 2
expect_err "start an unregistered name" "no_such_workflow"

# status: Conductor's Workflow JSON
run_wf hello.lua '{"name":"s"}'
run_weft status "$id" -o json
expect_rc "status" 0
for f in '"workflowId"' '"status": "COMPLETED"' '"tasks"' '"taskId"' '"referenceTaskName": "greet"' \
    '"taskType": "LAMBDA"' '"retryCount"' '"output"' '"input"' '"variables"' '"startTime"' '"endTime"'; do
    case $out in *"$f"*) ok "status has $f" ;; *) not_ok "status lacks $f" ;; esac
done
run_weft status 00000000-0000-0000-0000-000000000000
expect_rc "status of an unknown id" 2
expect_err "status of an unknown id" "00000000-0000-0000-0000-000000000000"

# idempotent start
run_weft start "$SRC/examples/hello.lua" --idempotency-key order-42 --input '{"name":"a"}'
first=$last
run_weft start "$SRC/examples/hello.lua" --idempotency-key order-42 --input '{"name":"a"}'
[ "$last" = "$first" ] && ok "same idempotency key, same id" || not_ok "ids differ: $first $last"
[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && ok "start prints only the id" || not_ok "start printed: $out"

# signal completes a WAIT without a duration; watch streams the transitions
cat >"$TMP/gate.lua" <<'L'
local w = require "weft"
return w.workflow { name = "gate", output = { got = "${gate.output.answer}" },
  w.wait { ref = "gate" },
  w.lambda { ref = "after", script = "return 1" } }
L
run_weft start "$TMP/gate.lua"; id=$last
wait_for 10 sh -c "'$WEFT' status $id -o json | grep -q '\"referenceTaskName\": \"gate\"'"
run_weft wait "$id" --timeout 1
expect_rc "wait times out on a blocked workflow" 3
run_weft signal "$id" gate '{"answer":42}'
expect_rc "signal" 0
run_weft wait "$id" --timeout 20
expect_json "signal payload is the task output" '{"got":42}'
run_weft watch "$id" -o json
expect_rc "watch" 0
case $out in *'"referenceTaskName":"gate"'*'"status":"COMPLETED"'*) ok "watch shows task transitions" ;;
    *) not_ok "watch: $out" ;; esac
case $(printf '%s\n' "$out" | tail -n 1) in *'"status":"COMPLETED"'*) ok "watch ends with the workflow's end" ;;
    *) not_ok "watch last line: $(printf '%s\n' "$out" | tail -n 1)" ;; esac

# terminate, then retry; pause and resume; restart
run_weft start "$TMP/gate.lua"; id=$last
wait_for 10 sh -c "'$WEFT' status $id -o json | grep -q IN_PROGRESS"
run_weft terminate "$id" --reason "operator said so"
expect_rc "terminate" 0
run_weft wait "$id" --timeout 10
expect_rc "terminated workflow waits to exit 1" 1
expect_err "terminate reason" "operator said so"
run_weft terminate "$id"
expect_rc "terminate twice" 1
run_weft retry "$id"
expect_rc "retry a terminated workflow" 0
wait_for 10 sh -c "'$WEFT' status $id -o json | grep -q '\"status\": \"RUNNING\"'" && ok "retried workflow runs" || not_ok "retried workflow not running"
run_weft pause "$id"; expect_rc "pause" 0
run_weft pause "$id"; expect_rc "pause twice" 1
run_weft signal "$id" gate '{"answer":7}'
sleep 0.5
run_weft status "$id" -o json
case $out in *'"status": "PAUSED"'*) ok "paused workflow stays paused" ;; *) not_ok "not paused: $out" ;; esac
run_weft resume "$id"; expect_rc "resume" 0
run_weft wait "$id" --timeout 20
expect_json "resumed workflow completes" '{"got":7}'
run_weft restart "$id"; expect_rc "restart" 0
# the gate is there once a decider ran the restarted workflow
wait_for 10 sh -c "'$WEFT' status $id -o json | grep -q IN_PROGRESS"
run_weft signal "$id" gate '{"answer":8}'
wait_for 10 sh -c "'$WEFT' status $id -o json | grep -q '\"status\": \"COMPLETED\"'"
run_weft wait "$id" --timeout 20
expect_json "restarted workflow ran again" '{"got":8}'

# (a task type nobody serves: task_types.sh)

# a corrupt stored execution fails that workflow with a reason; the daemon goes on
run_weft start "$TMP/gate.lua"; id=$last
wait_for 10 sh -c "'$WEFT' status $id -o json | grep -q IN_PROGRESS"
rcli HSET "${WEFT_KEY_PREFIX}{$id}" doc '{"id": broken' >/dev/null
rcli ZADD "$(dq_key "$id")" 0 "$id" >/dev/null
wait_for 15 sh -c "redis-cli -p $REDIS_PORT HGET '${WEFT_KEY_PREFIX}{$id}' status | grep -q FAILED" \
    && ok "corrupt execution failed" || not_ok "corrupt execution not failed"
run_weft status "$id" -o json
case $out in *"corrupt"*) ok "its reason says corrupt" ;; *) not_ok "status of corrupt: $out" ;; esac
example hello.lua '{"name":"after"}' '{"greeting":"hello, after!"}'

# a key of the wrong type under the prefix: a clear error, no crash
rcli SET "${WEFT_KEY_PREFIX}{wrongtype}" x >/dev/null
run_weft status wrongtype
expect_rc "wrong-type key" 2
expect_err "wrong-type key" "wrongtype"
kill -0 "$(weftd_pid d1)" && ok "weftd still running" || not_ok "weftd died"

# secrets: set from stdin, resolved only when a task runs, never stored or shown
printf 'tok-%s-value\n' "$$" | "$WEFT" secret set API_TOKEN
expect_rc_last=$?
[ "$expect_rc_last" = 0 ] && ok "secret set" || not_ok "secret set failed"
run_weft secret list
case $out in *API_TOKEN*) ok "secret list names it" ;; *) not_ok "secret list: $out" ;; esac
case $out in *tok-*) not_ok "secret list shows the value" ;; *) ok "secret list hides the value" ;; esac
cat >"$TMP/secret.lua" <<'L'
local w = require "weft"
return w.workflow { name = "secret", output = { said = "${use.output.result.said}", n = "${use.output.result.n}" },
  w.lambda { ref = "use", input = { auth = "Bearer ${secrets.API_TOKEN}" },
             script = "return { said = 'sent ' .. input.auth, n = #input.auth }" } }
L
run_weft start "$TMP/secret.lua"; id=$last
run_weft wait "$id" --timeout 20
expect_json "the task saw the secret; its output is redacted" '{"said":"sent Bearer ***","n":'$(( 17 + ${#$} ))'}'
run_weft status "$id" -o json
case $out in *"tok-$$-value"*) not_ok "status shows the secret" ;; *'${secrets.API_TOKEN}'*) ok "stored input keeps the placeholder" ;; *) not_ok "status: $out" ;; esac
leaks=0
for key in $(on_primaries --scan --pattern "${WEFT_KEY_PREFIX}*"); do
    case $key in *secrets) continue ;; esac
    case $(rcli TYPE "$key") in
    hash) v=$(rcli HGETALL "$key") ;; string) v=$(rcli GET "$key") ;;
    stream) v=$(rcli XRANGE "$key" - +) ;; zset) v=$(rcli ZRANGE "$key" 0 -1) ;; *) v= ;;
    esac
    case $v in *"tok-$$-value"*) leaks=$((leaks + 1)); echo "# secret found in $key" ;; esac
done
[ $leaks -eq 0 ] && ok "no Redis key but the secrets hash holds the value" || not_ok "$leaks keys hold the secret"
grep -q "tok-$$-value" "$TMP/d1.log" && not_ok "the log shows the secret" || ok "the log does not show it"
run_weft secret delete API_TOKEN; expect_rc "secret delete" 0
run_weft start "$TMP/secret.lua"; id=$last
run_weft wait "$id" --timeout 20
expect_rc "a missing secret fails the task" 1
expect_err "a missing secret fails the task" "secret 'API_TOKEN' is not set"

# SIGTERM: a clean stop
kill_weftd d1 TERM
grep -q 'msg="stopped"' "$TMP/d1.log" && ok "weftd stops cleanly on SIGTERM" || { not_ok "no clean stop"; tail -5 "$TMP/d1.log"; }
finish
