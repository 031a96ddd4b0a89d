#!/bin/bash
# Secrets are never stored. A secret set with `weft secret set` reaches the
# SIMPLE worker that polls its task and a sub-workflow's tasks, and comes back
# to weftd in every way it can: a worker's outputData (heartbeat and final),
# its reasonForIncompletion and logs, a `weft signal` straight to Redis, and a
# child workflow's lambda that returns it. Then every key under the prefix
# (but the secrets hash), every API answer about the runs and the daemon's log
# are searched for the raw value: none may hold it. The same for `weft run`
# (embedded), whose stdout and stderr are searched.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/redis_lib.sh"
for c in curl jq; do
    command -v "$c" >/dev/null 2>&1 || { echo "$c not installed: skipping"; exit 77; }
done
SECRET='S3cr3t-Tok-7f1e9a'

start_redis
# large payloads (over 1 KiB here) go to files: those are searched too
export WEFT_PAYLOAD_DIR="$TMP/payloads" WEFT_PAYLOAD_SOFT=1KiB
printf '%s\n' "$SECRET" | "$WEFT" secret set TOKEN >/dev/null || { echo "weft secret set failed"; exit 1; }
start_weftd d1 --workers 2 --api 127.0.0.1:0
API="http://$(api_of d1)" || exit 1

# no_secret_in FILE WHAT: FILE holds neither the raw secret nor its first 6
# characters (what a text cut short would leave)
no_secret_in() {
    if grep -q "${SECRET:0:6}" "$1"; then
        not_ok "$2 holds the raw secret"
        grep -n "${SECRET:0:6}" "$1" | head -n 10 | cut -c1-300 | sed 's/^/# /'
    else
        ok "$2 holds no raw secret"
    fi
}

# poll QUEUE: the task handed out (JSON) into $task, waiting up to 20 s
poll() {
    end=$(( $(date +%s) + 20 ))
    task=
    while [ -z "$task" ]; do
        task=$(curl -s "$API/api/tasks/poll/$1?workerid=w1")
        [ -n "$task" ] && break
        [ "$(date +%s)" -ge "$end" ] && return 1
        sleep 0.1
    done
}
post_result() { curl -s -o /dev/null -w '%{http_code}' -X POST "$API/api/tasks" -d "$1"; }

cat >"$TMP/leak.lua" <<'L'
local w = require "weft"
return w.workflow {
  name = "leak",
  output = { echoed = "${echo.output.got}", signalled = "${sig.output}",
             child = "${child.output}" },
  w.simple { ref = "echo", response_timeout = "30s",
             input = { token = "${secrets.TOKEN}", auth = "Bearer ${secrets.TOKEN}" } },
  w.simple { ref = "sig", input = { token = "${secrets.TOKEN}" } },
  w.sub_workflow { ref = "child", input = { token = "${secrets.TOKEN}", note = "key ${secrets.TOKEN}" },
    definition = w.workflow {
      name = "leak_child",
      output = { seen = "${look.output.result}", given = "${workflow.input.token}" },
      w.lambda { ref = "look", input = { t = "${workflow.input.token}", n = "${workflow.input.note}" },
                 script = "return { len = #input.t, same = input.t, note = input.n }" },
    } },
}
L
run_weft start "$TMP/leak.lua"
expect_rc "start leak.lua" 0
id=$last

# the worker: gets the secret, reports it back every way it can
poll echo || not_ok "echo was never handed out"
tid=$(jq -r .taskId <<<"$task")
[ "$(jq -r .inputData.token <<<"$task")" = "$SECRET" ] && ok "the worker is handed the secret" ||
    not_ok "the worker got token $(jq -c .inputData <<<"$task")"
[ "$(jq -r .inputData.auth <<<"$task")" = "Bearer $SECRET" ] && ok "inside text too" ||
    not_ok "the worker got auth $(jq -c .inputData.auth <<<"$task")"
code=$(post_result "{\"workflowInstanceId\":\"$id\",\"taskId\":\"$tid\",\"status\":\"IN_PROGRESS\",
  \"outputData\":{\"partial\":\"$SECRET\"},\"logs\":[{\"log\":\"using $SECRET\"}]}")
[ "$code" = 200 ] && ok "heartbeat with the secret: 200" || not_ok "heartbeat: HTTP $code"
partial=$(curl -s "$API/api/workflow/$id" | jq -r '.tasks[] | select(.referenceTaskName == "echo") | .outputData.partial')
[ "$partial" = "***" ] && ok "the heartbeat's output is masked" || not_ok "heartbeat output: $partial"
code=$(post_result "{\"workflowInstanceId\":\"$id\",\"taskId\":\"$tid\",\"status\":\"COMPLETED\",
  \"outputData\":{\"got\":\"$SECRET\",\"nested\":{\"list\":[\"a $SECRET b\",{\"$SECRET\":1}]},
  \"big\":\"$(printf 'b%.0s' $(seq 1 2000)) $SECRET\"},
  \"logs\":[{\"log\":\"done with $SECRET\"}]}")
[ "$code" = 200 ] && ok "result with the secret: 200" || not_ok "result: HTTP $code"

# sig: completed straight through Redis (no daemon API), echoing the secret
end=$(( $(date +%s) + 20 ))
until curl -s "$API/api/workflow/$id" | jq -e '.tasks[] | select(.referenceTaskName == "sig")' >/dev/null; do
    [ "$(date +%s)" -ge "$end" ] && break
    sleep 0.1
done
run_weft signal "$id" sig "{\"echo\":\"$SECRET\",\"text\":\"x${SECRET}y\"}"
expect_rc "weft signal with the secret in its payload" 0

wait_status "$id" COMPLETED && ok "leak COMPLETED" || not_ok "leak is $(wf_status "$id")"
wf=$(curl -s "$API/api/workflow/$id")
[ "$(jq -r .output.echoed <<<"$wf")" = "***" ] && ok "the worker's echo is masked" ||
    not_ok "output.echoed: $(jq -c .output.echoed <<<"$wf")"
[ "$(jq -r .output.signalled.echo <<<"$wf")" = "***" ] && ok "the signal's echo is masked" ||
    not_ok "output.signalled: $(jq -c .output.signalled <<<"$wf")"
[ "$(jq -r .output.child.seen.same <<<"$wf")" = "***" ] && [ "$(jq -r .output.child.seen.len <<<"$wf")" = 3 ] &&
    ok "the child's task is given the mask" || not_ok "child output: $(jq -c .output.child <<<"$wf")"
child=$(jq -r '.tasks[] | select(.referenceTaskName == "child") | .subWorkflowId // .outputData.subWorkflowId' <<<"$wf")
[ "$(jq -r '.tasks[] | select(.referenceTaskName == "echo") | .outputData.nested.list[1] | keys[0]' <<<"$wf")" = "***" ] &&
    ok "a member named by the secret is renamed" ||
    not_ok "echo output: $(jq -c '.tasks[] | select(.referenceTaskName == "echo") | .outputData' <<<"$wf")"
cwf=$(curl -s "$API/api/workflow/$child")
[ "$(jq -r .input.token <<<"$cwf")" = '***' ] && [ "$(jq -r .input.note <<<"$cwf")" = 'key ***' ] &&
    ok "the child's input is masked" || not_ok "child input: $(jq -c .input <<<"$cwf")"
[ "$(jq -r .output.seen.same <<<"$cwf")" = "***" ] && [ "$(jq -r .output.seen.note <<<"$cwf")" = "key ***" ] &&
    ok "the child's lambda output is masked" || not_ok "child output: $(jq -c .output <<<"$cwf")"

# a worker that fails with the secret in its reason and logs
cat >"$TMP/fail.lua" <<'L'
local w = require "weft"
return w.workflow {
  name = "leak_fail",
  w.simple { ref = "bad", input = { token = "${secrets.TOKEN}" } },
}
L
run_weft start "$TMP/fail.lua"
expect_rc "start fail.lua" 0
fid=$last
poll bad || not_ok "bad was never handed out"
ftid=$(jq -r .taskId <<<"$task")
code=$(post_result "{\"workflowInstanceId\":\"$fid\",\"taskId\":\"$ftid\",\"status\":\"FAILED_WITH_TERMINAL_ERROR\",
  \"reasonForIncompletion\":\"login with $SECRET refused\",\"logs\":[{\"log\":\"tried $SECRET\"}],
  \"outputData\":{\"tried\":\"$SECRET\"}}")
[ "$code" = 200 ] && ok "failure with the secret: 200" || not_ok "failure: HTTP $code"
wait_status "$fid" FAILED && ok "leak_fail FAILED" || not_ok "leak_fail is $(wf_status "$fid")"
fwf=$(curl -s "$API/api/workflow/$fid")
case $(jq -r '.tasks[0].reasonForIncompletion' <<<"$fwf") in
"login with *** refused") ok "the reason is masked" ;;
*) not_ok "reason: $(jq -c '.tasks[0].reasonForIncompletion' <<<"$fwf")" ;;
esac

# a reason cut at its limit (500 characters through the API, 511 for weft
# signal) is masked first: the cut leaves no beginning of the secret
long=$(printf 'x%.0s' $(seq 1 495))
run_weft start "$TMP/fail.lua"
cid=$last
poll bad || not_ok "bad was never handed out (2)"
code=$(post_result "{\"workflowInstanceId\":\"$cid\",\"taskId\":\"$(jq -r .taskId <<<"$task")\",
  \"status\":\"FAILED_WITH_TERMINAL_ERROR\",\"reasonForIncompletion\":\"$long $SECRET\"}")
[ "$code" = 200 ] && ok "a long reason with the secret at the cut: 200" || not_ok "long reason: HTTP $code"
wait_status "$cid" FAILED || not_ok "the long-reason workflow is $(wf_status "$cid")"
[ "$(curl -s "$API/api/workflow/$cid" | jq -r '.tasks[0].reasonForIncompletion')" = "$long ***" ] &&
    ok "the long reason is masked, then cut" ||
    not_ok "long reason: $(curl -s "$API/api/workflow/$cid" | jq -r '.tasks[0].reasonForIncompletion' | cut -c480-)"
run_weft start "$TMP/fail.lua"
sid=$last
wait_for 20 sh -c "curl -s '$API/api/workflow/$sid' | jq -e '.tasks[0]'"
run_weft signal "$sid" bad --status FAILED --reason "$long$(printf 'y%.0s' $(seq 1 9)) $SECRET"
expect_rc "weft signal FAILED with a long reason" 0
wait_status "$sid" FAILED || not_ok "the signalled workflow is $(wf_status "$sid")"

# a placeholder in a client's workflow input is text: a worker is not handed the secret
cat >"$TMP/inject_d.lua" <<'L'
local w = require "weft"
return w.workflow { name = "inject_d", input = { "url" },
  w.simple { ref = "inj", input = { url = "${workflow.input.url}" } } }
L
run_weft start "$TMP/inject_d.lua" --input '{"url":"http://x/${secrets.TOKEN}"}'
expect_rc "start inject_d.lua" 0
iid=$last
poll inj || not_ok "inj was never handed out"
[ "$(jq -r .inputData.url <<<"$task")" = 'http://x/${secrets.TOKEN}' ] &&
    ok "a placeholder in the workflow input is handed out as text" ||
    not_ok "the worker got url $(jq -c .inputData.url <<<"$task")"
code=$(post_result "{\"workflowInstanceId\":\"$iid\",\"taskId\":\"$(jq -r .taskId <<<"$task")\",\"status\":\"COMPLETED\"}")
[ "$code" = 200 ] && ok "inj completed" || not_ok "inj: HTTP $code"

# ---- where could it be: everything stored, every answer, the log ----
: >"$TMP/stored"
on_primaries --scan --pattern "${WEFT_KEY_PREFIX}*" >"$TMP/keys"
nkeys=0
while read -r k; do
    [ "$k" = "${WEFT_KEY_PREFIX}secrets" ] && continue
    nkeys=$((nkeys + 1))
    echo "== $k" >>"$TMP/stored"
    case $(rcli type "$k") in
    string) rcli get "$k" ;;
    hash) rcli hgetall "$k" ;;
    list) rcli lrange "$k" 0 -1 ;;
    set) rcli smembers "$k" ;;
    zset) rcli zrange "$k" 0 -1 withscores ;;
    stream) rcli xrange "$k" - + ;;
    esac >>"$TMP/stored"
    rcli --no-raw dump "$k" >>"$TMP/stored"
done <"$TMP/keys"
[ "$nkeys" -gt 5 ] && ok "searched $nkeys keys" || not_ok "only $nkeys keys under ${WEFT_KEY_PREFIX}"
grep -q "\"$child\"\\|$child" "$TMP/stored" && ok "the child is among them" || not_ok "child $child not stored?"
no_secret_in "$TMP/stored" "every key"
find "$TMP/payloads" -type f >"$TMP/payload_files" 2>/dev/null
[ -s "$TMP/payload_files" ] && ok "large payloads went to files" || not_ok "no payload files in $TMP/payloads"
xargs cat <"$TMP/payload_files" >"$TMP/payload_text" 2>/dev/null
no_secret_in "$TMP/payload_text" "every payload file"

: >"$TMP/answers"
for w in "$id" "$fid" "$child"; do
    curl -s "$API/api/workflow/$w" >>"$TMP/answers"
    curl -s -m 3 -N "$API/api/workflow/$w/events" >>"$TMP/answers"
    "$WEFT" status "$w" -o json >>"$TMP/answers" 2>&1
    "$WEFT" status "$w" --api "$API" -o json >>"$TMP/answers" 2>&1
done
curl -s "$API/api/workflow/search?freeText=leak" >>"$TMP/answers"
curl -s "$API/api/workflow/leak/correlated/x" >>"$TMP/answers"
grep -q "$child" "$TMP/answers" && ok "the answers name the child" || not_ok "answers lack the child"
no_secret_in "$TMP/answers" "every API and client answer"

stop_weftd_clean d1
no_secret_in "$TMP/d1.log" "the daemon's log"
grep -q "level=warn node=d1 workflow=$fid name=[a-z_]* task=bad type=SIMPLE status=FAILED_WITH_TERMINAL_ERROR reason=\"login with \*\*\* refused\" msg=\"task FAILED_WITH_TERMINAL_ERROR\"" "$TMP/d1.log" &&
    ok "the daemon logs the worker's failure, masked" || not_ok "no log line of bad's failure"

# ---- embedded: weft run ----
cat >"$TMP/embedded.lua" <<'L'
local w = require "weft"
return w.workflow {
  name = "embedded_leak",
  output = { child = "${child.output}", own = "${own.output.result}" },
  w.lambda { ref = "own", input = { t = "${secrets.TOKEN}" }, script = "return 'own ' .. input.t" },
  w.sub_workflow { ref = "child", input = { token = "${secrets.TOKEN}" },
    definition = w.workflow {
      name = "embedded_child",
      output = { seen = "${look.output.result}", given = "${workflow.input.token}" },
      w.lambda { ref = "look", input = { t = "${workflow.input.token}" },
                 script = "return { len = #input.t, same = input.t }" },
    } },
}
L
cat >"$TMP/inject.lua" <<'L'
local w = require "weft"
return w.workflow { name = "inject", input = { "t" },
  w.lambda { ref = "l", input = { t = "${workflow.input.t}" }, script = "return input.t:upper() .. ' ' .. #input.t" } }
L
WEFT_SECRET_TOKEN=$SECRET run_weft run "$TMP/embedded.lua"
expect_rc "weft run with a secret into a sub-workflow" 0
[ "$(jq -r .child.seen.same <<<"$last")" = "***" ] && [ "$(jq -r .own <<<"$last")" = "own ***" ] &&
    ok "embedded: the child's input and the task's output are masked" || not_ok "embedded output: $last"
cat "$TMP/out" "$TMP/err" >"$TMP/embedded.out"
# a placeholder in a client's input is text: no secret for the asking
WEFT_SECRET_TOKEN=$SECRET run_weft run "$TMP/inject.lua" --input '{"t":"${secrets.TOKEN}"}'
expect_rc "weft run with a placeholder in its input" 0
expect_json "embedded: the task gets the placeholder as text" '{"result":"${SECRETS.TOKEN} 16"}'
cat "$TMP/out" "$TMP/err" >>"$TMP/embedded.out"
# nor in a dynamic fork's tasks, which are data (here: the client's)
cat >"$TMP/inject_fork.lua" <<'L'
local w = require "weft"
return w.workflow { name = "inject_fork", input = { "tasks" },
  output = { got = "${fan_join.output.peek.result}" },
  w.dynamic_fork { ref = "fan", tasks = "${workflow.input.tasks}" } }
L
WEFT_SECRET_TOKEN=$SECRET run_weft run "$TMP/inject_fork.lua" --input \
    '{"tasks":[{"ref":"peek","type":"LAMBDA","input":{"t":"${secrets.TOKEN}"},"script":"return input.t:upper()"}]}'
expect_rc "weft run with a dynamic task that names a secret" 0
expect_json "embedded: a dynamic task gets the placeholder as text" '{"got":"${SECRETS.TOKEN}"}'
cat "$TMP/out" "$TMP/err" >>"$TMP/embedded.out"
no_secret_in "$TMP/embedded.out" "weft run's stdout and stderr"

finish
