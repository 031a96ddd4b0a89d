#!/bin/bash
# weftd's REST API against a real redis-server: every status code, auth on
# and off, starting (by name, inline JSON, inline Lua), reading, operator
# calls, metadata, the external-worker protocol (poll, long poll, results,
# response timeout, callbacks, heartbeats), Server-Sent Events, /metrics,
# /health, a half-open client, and the weft client's --api mode.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/redis_lib.sh"
command -v curl >/dev/null 2>&1 || { echo "curl not installed: skipping"; exit 77; }
start_redis
start_weftd d1 --workers 2 --api 127.0.0.1:0

API="http://$(api_of d1)"
case $API in http://127.0.0.1:[0-9]*) ok "weftd logs the port it picked ($API)" ;; *) not_ok "no api= in the log"; finish; exit 1 ;; esac

# http METHOD PATH [CURL ARGS...]: sets $code, $body, $hdrs
http() {
    m=$1 p=$2
    shift 2
    code=$(curl -s -o "$TMP/body" -D "$TMP/hdrs" -w '%{http_code}' -X "$m" "$API$p" "$@")
    body=$(cat "$TMP/body")
    hdrs=$(tr -d '\r' <"$TMP/hdrs")
}
expect_code() { # NAME CODE
    if [ "$code" = "$2" ]; then ok "$1: $2"; else
        not_ok "$1: HTTP $code, wanted $2"; printf '# body: %.400s\n' "$body"; fi
}
expect_body() { # NAME TEXT: the body contains TEXT
    case $body in *"$2"*) ok "$1: has '$2'" ;; *) not_ok "$1: body lacks '$2'"; printf '# body: %.400s\n' "$body" ;; esac
}
expect_header() { # NAME TEXT
    case $hdrs in *"$2"*) ok "$1: header '$2'" ;; *) not_ok "$1: no header '$2'"; printf '# %s\n' "$hdrs" ;; esac
}
# jstr KEY: the first "KEY":"value" of $body
jstr() { printf '%s' "$body" | grep -o "\"$1\":\"[^\"]*\"" | head -n 1 | sed 's/.*:"\(.*\)"/\1/'; }
jnum() { printf '%s' "$body" | grep -o "\"$1\":[0-9.]*" | head -n 1 | cut -d: -f2; }
ms() { date +%s%3N; }
wf_status() { # ID: the workflow's status
    http GET "/api/workflow/$1?includeTasks=false"
    jstr status
}
wait_status() { # ID STATUS [SECONDS]
    end=$(( $(date +%s) + ${3:-20} ))
    while [ "$(wf_status "$1")" != "$2" ]; do
        [ "$(date +%s)" -ge "$end" ] && return 1
        sleep 0.1
    done
}

# ---- health, unknown paths, methods ----
http GET /health
expect_code "health" 200
expect_body "health" '"status":"UP"'
expect_body "health" '"redis":"UP"'
http GET /api/nothing/here
expect_code "unknown path" 404
expect_body "unknown path" '"retryable":false'
http GET /nope
expect_code "unknown path outside /api" 404
http POST /health
expect_code "wrong method" 405
expect_header "405" "Allow: GET"
http PATCH /api/workflow
expect_code "unknown method" 405
expect_header "405 on /api/workflow" "Allow: POST"
http GET /api/tasks/poll/batch/x -X DELETE
expect_code "DELETE on a poll (no route for it)" 404
expect_body "DELETE on a poll" "no such route: DELETE /api/tasks/poll/batch/x"
http GET /api/workflow/x/pause
expect_code "GET on pause" 405
expect_header "405 on pause" "Allow: PUT"

# ---- metadata ----
cat >"$TMP/ext.json" <<'J'
{"name":"ext","version":1,"tasks":[{"name":"ext_work","taskReferenceName":"work","type":"SIMPLE",
  "inputParameters":{"x":"${workflow.input.x}"}}],"outputParameters":{"r":"${work.output.r}"}}
J
http POST /api/metadata/workflow --data-binary @"$TMP/ext.json"
expect_code "register a definition" 200
http GET /api/metadata/workflow/ext
expect_code "get a definition" 200
expect_body "get a definition" '"name":"ext"'
http GET '/api/metadata/workflow/ext?version=7'
expect_code "get a missing version" 404
http GET /api/metadata/workflow/no_such_def
expect_code "get an unknown definition" 404
expect_body "get an unknown definition" "no_such_def"
http PUT /api/metadata/workflow -d '[{"name":"ext","version":2,"tasks":[{"name":"ext_work","taskReferenceName":"work"}]},
  {"name":"other","tasks":[{"name":"o","taskReferenceName":"o","type":"SIMPLE"}]}]'
expect_code "register a list (PUT)" 200
http GET /api/metadata/workflow
expect_code "list definitions" 200
expect_body "list definitions" '"name":"ext","version":1'
expect_body "list definitions" '"name":"ext","version":2'
expect_body "list definitions" '"name":"other"'
http GET /api/metadata/workflow/ext
expect_body "latest version by default" '"version":2'
http POST /api/metadata/workflow -d '{"name":"bad","tasks":[{"name":"a"}]}'
expect_code "register a bad definition" 400
expect_body "register a bad definition" "taskReferenceName"
http POST /api/metadata/workflow -d '{"name":"bad", "tasks": [}'
expect_code "malformed JSON" 400
expect_body "malformed JSON" "line 1"
http PUT /api/metadata/workflow -d '{"name":"x"}'
expect_code "PUT needs a list" 400
http POST /api/metadata/workflow -d '[1, 2'
expect_code "truncated JSON" 400

http POST /api/metadata/taskdefs -d '[{"name":"td_task","retryCount":0,"responseTimeoutSeconds":7,"timeoutSeconds":60}]'
expect_code "register task definitions" 200
http GET /api/metadata/taskdefs/td_task
expect_code "get a task definition" 200
expect_body "get a task definition" '"responseTimeoutSeconds":7'
http GET /api/metadata/taskdefs/nope
expect_code "unknown task definition" 404
http GET /api/metadata/taskdefs
expect_body "list task definitions" '"name":"td_task"'
http POST /api/metadata/taskdefs -d '[{"name":"bad_td","retryCount":-1}]'
expect_code "a bad task definition" 400
expect_body "a bad task definition" "retryCount"
http POST /api/metadata/taskdefs -d '[{"retryCount":1}]'
expect_code "a task definition without a name" 400

# ---- starting ----
http POST /api/workflow/ext -d '{"x":1}'
expect_code "start by name" 200
expect_header "start by name" "Content-Type: text/plain"
id1=$body
http POST '/api/workflow/ext?version=1&correlationId=corr-1' -d '{"x":2}'
expect_code "start by name, version, correlation id" 200
id2=$body
http GET "/api/workflow/$id2"
expect_body "correlation id kept" '"correlationId":"corr-1"'
expect_body "version 1 chosen" '"workflowVersion":1'
http POST /api/workflow/no_such_def -d '{}'
expect_code "start an unknown name" 404
http POST /api/workflow/ext -d '[1]'
expect_code "input must be an object" 400
http POST /api/workflow/ext -d '{"x":'
expect_code "start with malformed input" 400
http POST /api/workflow -d '{"name":"other","input":{"a":1},"idempotencyKey":"k-1"}'
expect_code "StartWorkflowRequest by name" 200
idem1=$body
http POST /api/workflow -d '{"name":"other","input":{"a":1},"idempotencyKey":"k-1"}'
[ "$body" = "$idem1" ] && ok "idempotencyKey: the same id again" || not_ok "idempotencyKey: $idem1 then $body"
http POST /api/workflow -d '{"input":{}}'
expect_code "StartWorkflowRequest without name or definition" 400
http POST /api/workflow -d '{"name":"other","input":"x"}'
expect_code "StartWorkflowRequest with a string input" 400
http POST /api/workflow -d '{"workflowDef":{"name":"inline","tasks":[{"name":"inline_q","taskReferenceName":"iq","type":"SIMPLE"}]},"input":{"v":3}}'
expect_code "start with an inline Conductor definition" 200
id_inline=$body
http GET "/api/workflow/$id_inline"
expect_body "inline definition runs" '"workflowName":"inline"'
http POST /api/workflow -d '{"workflowDef":{"name":"broken","tasks":[{"name":"a","taskReferenceName":"a","type":"NO_SUCH_KIND","x":{}}],"timeoutSeconds":"soon"}}'
expect_code "inline definition with an error" 400
cat >"$TMP/lua.json" <<'J'
{"workflowDef": "local w = require 'weft'\nreturn w.workflow { name = 'lua_inline', output = { sum = '${add.output.result}' },\n  w.lambda { ref = 'add', script = 'return input.a + input.b', input = { a = '${workflow.input.a}', b = '${workflow.input.b}' } } }",
 "input": {"a": 2, "b": 40}}
J
http POST /api/workflow --data-binary @"$TMP/lua.json"
expect_code "start with inline Lua source" 200
id_lua=$body
wait_status "$id_lua" COMPLETED && ok "inline Lua workflow completes" || not_ok "inline Lua: $(wf_status "$id_lua")"
http GET "/api/workflow/$id_lua"
expect_body "inline Lua output" '"output":{"sum":42}'
http POST /api/workflow -d '{"workflowDef": "local w = require \"weft\"\nreturn w.workflow { name = \"x\",\n  w.lambda { ref = \"a\" }, w.lambda { ref = \"a\", script = \"return 1\" } }"}'
expect_code "inline Lua with an error" 400
expect_body "inline Lua error names the chunk and line" "workflowDef:"
http POST /api/workflow -d '{"workflowDef": 7}'
expect_code "workflowDef of the wrong type" 400

# ---- reading ----
http GET "/api/workflow/$id1"
expect_code "get" 200
expect_body "get" "\"workflowId\":\"$id1\""
expect_body "get with tasks" '"tasks":[{'
http GET "/api/workflow/$id1?includeTasks=false"
expect_code "get without tasks" 200
case $body in *'"tasks":[{"taskId"'*) not_ok "includeTasks=false still has tasks" ;; *) ok "includeTasks=false drops the tasks" ;; esac
http GET /api/workflow/00000000-0000-0000-0000-000000000000
expect_code "get an unknown id" 404
expect_body "get an unknown id" "00000000-0000-0000-0000-000000000000"

# ---- external workers: poll, result ----
http GET '/api/tasks/poll/nothing_queued?workerid=w0'
expect_code "poll an empty queue" 204
http GET '/api/tasks/queue/sizes?taskType=ext_work&taskType=nothing_queued'
expect_code "queue sizes" 200
expect_body "queue sizes" '"nothing_queued":0'
expect_body "queue sizes" '"ext_work":'
http GET '/api/tasks/poll/ext_work?workerid=w1'
expect_code "poll" 200
expect_header "poll" "Content-Type: application/json"
for f in '"taskId"' '"workflowInstanceId"' '"inputData":{' '"status":"IN_PROGRESS"' '"pollCount":1' \
    '"workerId":"w1"' '"taskType":"SIMPLE"' '"referenceTaskName":"work"' '"responseTimeoutSeconds":600' \
    '"callbackAfterSeconds":0' '"startTime"'; do
    expect_body "polled task" "$f"
done
tid=$(jstr taskId)
wid=$(jstr workflowInstanceId)
http POST /api/tasks -d "{\"workflowInstanceId\":\"$wid\",\"taskId\":\"$tid\",\"status\":\"COMPLETED\",\"outputData\":{\"r\":\"done\"},\"workerId\":\"w1\"}"
expect_code "report COMPLETED" 200
[ "$body" = "$tid" ] && ok "POST /api/tasks answers the task id" || not_ok "POST /api/tasks answered '$body'"
wait_status "$wid" COMPLETED && ok "the workflow completes after the result" || not_ok "workflow $wid: $(wf_status "$wid")"
http GET "/api/workflow/$wid"
expect_body "the worker's output is the workflow's" '"output":{"r":"done"}'
http POST /api/tasks -d "{\"workflowInstanceId\":\"$wid\",\"taskId\":\"$tid\",\"status\":\"COMPLETED\",\"outputData\":{}}"
expect_code "a result for a finished task" 409
http POST /api/tasks -d "{\"workflowInstanceId\":\"00000000-0000-0000-0000-000000000000\",\"taskId\":\"$tid\",\"status\":\"COMPLETED\"}"
expect_code "a result for an unknown workflow" 404
http POST /api/tasks -d "{\"workflowInstanceId\":\"$id_inline\",\"taskId\":\"no-such-task\",\"status\":\"COMPLETED\"}"
expect_code "a result for an unknown task" 404
http POST /api/tasks -d "{\"workflowInstanceId\":\"$wid\",\"status\":\"COMPLETED\"}"
expect_code "a TaskResult without taskId" 400
http POST /api/tasks -d "{\"workflowInstanceId\":\"$wid\",\"taskId\":\"$tid\",\"status\":\"DONE\"}"
expect_code "a TaskResult with a bad status" 400
http POST /api/tasks -d "{\"workflowInstanceId\":\"$wid\",\"taskId\":\"$tid\",\"status\":\"COMPLETED\",\"outputData\":[1]}"
expect_code "outputData must be an object" 400
http POST /api/tasks -d 'not json'
expect_code "a TaskResult that is not JSON" 400
http POST /api/tasks/update-v2 -d '{}'
expect_code "update-v2 (clients fall back on 404)" 404

# a result from a worker whose claim another poll took over is discarded
http GET '/api/tasks/poll/ext_work?workerid=wA'
tidA=$(jstr taskId); widA=$(jstr workflowInstanceId)
if [ -n "$tidA" ]; then
    http POST /api/tasks -d "{\"workflowInstanceId\":\"$widA\",\"taskId\":\"$tidA\",\"status\":\"COMPLETED\",\"workerId\":\"someone-else\"}"
    expect_code "a result from a worker that does not hold the task" 409
    expect_body "409 says who holds it" "wA"
    http POST /api/tasks -d "{\"workflowInstanceId\":\"$widA\",\"taskId\":\"$tidA\",\"status\":\"FAILED_WITH_TERMINAL_ERROR\",\"reasonForIncompletion\":\"cannot\",\"workerId\":\"wA\"}"
    expect_code "report FAILED_WITH_TERMINAL_ERROR" 200
    wait_status "$widA" FAILED && ok "a terminal error fails the workflow" || not_ok "workflow $widA: $(wf_status "$widA")"
    http GET "/api/workflow/$widA"
    expect_body "the reason is kept" "cannot"
else
    not_ok "no second ext_work task to poll"
fi

# update by reference: POST /api/tasks/{wfId}/{taskRef}/{status}, the body is the output
http POST /api/tasks/"$id_inline"/iq/COMPLETED -d '{"by":"ref"}'
expect_code "update by ref" 200
wait_status "$id_inline" COMPLETED && ok "update by ref completes the workflow" || not_ok "inline: $(wf_status "$id_inline")"
http GET "/api/workflow/$id_inline"
expect_body "update by ref output" '"by":"ref"'
http POST /api/tasks/"$id_inline"/iq/SKIPPED -d '{}'
expect_code "update by ref with a bad status" 400
http POST /api/tasks/"$id_inline"/iq/COMPLETED -d '{}'
expect_code "update by ref: the workflow ended" 409
http POST /api/tasks/"$id1"/no_ref/COMPLETED -d '{}'
expect_code "update by ref of an unknown ref" 404
http POST /api/tasks/00000000-0000-0000-0000-000000000000/iq/COMPLETED -d '{}'
expect_code "update by ref of an unknown workflow" 404

# ---- batch poll: long polling ----
t0=$(ms)
http GET '/api/tasks/poll/batch/lp_queue?workerid=w&count=2&timeout=800'
t1=$(ms)
expect_code "batch poll of an empty queue" 200
[ "$body" = "[]" ] && ok "batch poll: [] when empty" || not_ok "batch poll empty: $body"
[ $((t1 - t0)) -ge 700 ] && [ $((t1 - t0)) -lt 5000 ] && ok "batch poll waited ~800 ms ($((t1 - t0)) ms)" ||
    not_ok "batch poll waited $((t1 - t0)) ms for timeout=800"
http GET '/api/tasks/poll/batch/lp_queue?count=0'
expect_code "batch poll count=0" 400
http GET '/api/tasks/poll/batch/lp_queue?timeout=abc'
expect_code "batch poll timeout=abc" 400
lp='{"workflowDef":{"name":"lp","tasks":[{"name":"lp_queue","taskReferenceName":"lp1","type":"SIMPLE"}]}}'
(sleep 0.7; curl -s -X POST "$API/api/workflow" -d "$lp" >"$TMP/lp_id") &
starter=$!
t0=$(ms)
http GET '/api/tasks/poll/batch/lp_queue?workerid=w&count=5&timeout=8000'
t1=$(ms)
wait $starter
expect_body "a long poll gets a task started while it waits" '"referenceTaskName":"lp1"'
[ $((t1 - t0)) -lt 6000 ] && ok "the long poll returned when the task came ($((t1 - t0)) ms)" ||
    not_ok "long poll took $((t1 - t0)) ms"
case $body in '[{'*'}]') ok "batch poll answers a list" ;; *) not_ok "batch poll: $body" ;; esac
lp_tid=$(jstr taskId); lp_wid=$(jstr workflowInstanceId)
http POST /api/tasks -d "{\"workflowInstanceId\":\"$lp_wid\",\"taskId\":\"$lp_tid\",\"status\":\"COMPLETED\",\"outputData\":{}}"
expect_code "complete the long-polled task" 200

# ---- response timeout: a worker that never answers loses the task ----
http POST /api/workflow -d '{"workflowDef":{"name":"rto","tasks":[{"name":"rto_q","taskReferenceName":"slow","type":"SIMPLE",
  "taskDefinition":{"responseTimeoutSeconds":1,"retryCount":1,"retryDelaySeconds":0,"timeoutPolicy":"RETRY"}}]}}'
expect_code "start a workflow with a 1 s response timeout" 200
rto_wid=$body
wait_for 10 sh -c "curl -s '$API/api/tasks/queue/sizes?taskType=rto_q' | grep -q '\"rto_q\":1'"
http GET '/api/tasks/poll/rto_q?workerid=silent'
expect_code "the silent worker polls" 200
expect_body "the lease follows the response timeout" '"responseTimeoutSeconds":1'
tid_silent=$(jstr taskId)
got=
for _ in $(seq 1 60); do
    http GET '/api/tasks/poll/rto_q?workerid=second'
    [ "$code" = 200 ] && { got=1; break; }
    sleep 0.1
done
[ -n "$got" ] && ok "after the response timeout another poll gets the task" || not_ok "no task after the response timeout"
tid_second=$(jstr taskId)
[ -n "$tid_second" ] && [ "$tid_second" != "$tid_silent" ] && ok "it is the retry (a new task instance)" ||
    not_ok "second task $tid_second vs $tid_silent"
expect_body "the retry counts" '"retryCount":1'
http POST /api/tasks -d "{\"workflowInstanceId\":\"$rto_wid\",\"taskId\":\"$tid_silent\",\"status\":\"COMPLETED\",\"workerId\":\"silent\"}"
expect_code "the silent worker's late result" 409
http POST /api/tasks -d "{\"workflowInstanceId\":\"$rto_wid\",\"taskId\":\"$tid_second\",\"status\":\"COMPLETED\",\"workerId\":\"second\",\"outputData\":{\"ok\":1}}"
expect_code "the second worker's result" 200
wait_status "$rto_wid" COMPLETED && ok "the workflow completes with the retried task" || not_ok "rto: $(wf_status "$rto_wid")"
http GET "/api/workflow/$rto_wid"
expect_body "the first attempt timed out" '"status":"TIMED_OUT"'

# ---- IN_PROGRESS: callbackAfterSeconds, heartbeats ----
http POST /api/workflow -d '{"workflowDef":{"name":"cb","tasks":[{"name":"cb_q","taskReferenceName":"long","type":"SIMPLE"}]}}'
cb_wid=$body
wait_for 10 sh -c "curl -s '$API/api/tasks/queue/sizes?taskType=cb_q' | grep -q '\"cb_q\":1'"
http GET '/api/tasks/poll/cb_q?workerid=wcb'
cb_tid=$(jstr taskId)
http POST /api/tasks -d "{\"workflowInstanceId\":\"$cb_wid\",\"taskId\":\"$cb_tid\",\"status\":\"IN_PROGRESS\",\"outputData\":{\"step\":1},\"workerId\":\"wcb\"}"
expect_code "a heartbeat (IN_PROGRESS)" 200
http GET '/api/tasks/poll/cb_q?workerid=wcb'
expect_code "a task with a heartbeat stays with its worker" 204
t0=$(ms)
http POST /api/tasks -d "{\"workflowInstanceId\":\"$cb_wid\",\"taskId\":\"$cb_tid\",\"status\":\"IN_PROGRESS\",\"callbackAfterSeconds\":1,\"outputData\":{\"step\":2},\"workerId\":\"wcb\"}"
expect_code "IN_PROGRESS with callbackAfterSeconds" 200
http GET '/api/tasks/poll/cb_q?workerid=wcb'
expect_code "invisible during the callback delay" 204
got=
for _ in $(seq 1 50); do
    http GET '/api/tasks/poll/cb_q?workerid=wcb'
    [ "$code" = 200 ] && { got=1; break; }
    sleep 0.1
done
t1=$(ms)
[ -n "$got" ] && ok "the task comes back after the callback delay" || not_ok "the task did not come back"
[ $((t1 - t0)) -ge 900 ] && ok "not before 1 s ($((t1 - t0)) ms)" || not_ok "back after $((t1 - t0)) ms"
[ "$(jstr taskId)" = "$cb_tid" ] && ok "the same task instance" || not_ok "another task: $(jstr taskId)"
expect_body "its output is kept" '"outputData":{"step":2}'
expect_body "polled again" '"pollCount":2'
http POST /api/tasks -d "{\"workflowInstanceId\":\"$cb_wid\",\"taskId\":\"$cb_tid\",\"status\":\"COMPLETED\",\"outputData\":{\"step\":3},\"workerId\":\"wcb\"}"
wait_status "$cb_wid" COMPLETED && ok "callback workflow completes" || not_ok "cb: $(wf_status "$cb_wid")"

# registered TaskDefs reach SIMPLE tasks without their own taskDefinition
http POST /api/workflow -d '{"workflowDef":{"name":"tdw","tasks":[{"name":"td_task","taskReferenceName":"t"}]}}'
td_wid=$body
http GET "/api/workflow/$td_wid"
expect_body "the registered TaskDef is embedded at start" '"taskDefinition":{"name":"td_task","retryCount":0,"responseTimeoutSeconds":7'

# ---- operator calls ----
http POST /api/workflow -d '{"workflowDef":{"name":"ops","tasks":[{"name":"ops_q","taskReferenceName":"hold","type":"SIMPLE"}]}}'
ops=$body
wait_for 10 sh -c "curl -s '$API/api/workflow/$ops' | grep -q '\"referenceTaskName\":\"hold\"'"
http PUT "/api/workflow/$ops/pause"
expect_code "pause" 200
[ "$(wf_status "$ops")" = PAUSED ] && ok "paused" || not_ok "not paused: $(wf_status "$ops")"
http PUT "/api/workflow/$ops/pause"
expect_code "pause twice" 409
http PUT "/api/workflow/$ops/resume"
expect_code "resume" 200
http PUT "/api/workflow/$ops/resume"
expect_code "resume a running workflow" 409
http POST "/api/workflow/$ops/restart"
expect_code "restart a running workflow" 409
http POST "/api/workflow/$ops/retry"
expect_code "retry a running workflow" 409
http DELETE "/api/workflow/$ops?reason=operator%20said%20so"
expect_code "terminate" 200
http GET "/api/workflow/$ops"
expect_body "terminated" '"status":"TERMINATED"'
expect_body "terminate reason" "operator said so"
http DELETE "/api/workflow/$ops"
expect_code "terminate twice" 409
http POST "/api/workflow/$ops/retry"
expect_code "retry" 200
[ "$(wf_status "$ops")" = RUNNING ] && ok "retried workflow runs" || not_ok "after retry: $(wf_status "$ops")"
http DELETE "/api/workflow/$ops"
http POST "/api/workflow/$ops/restart"
expect_code "restart" 200
wait_for 10 sh -c "curl -s '$API/api/workflow/$ops' | grep -q '\"referenceTaskName\":\"hold\"'" && ok "restarted workflow schedules again" || not_ok "restart"
http PUT /api/workflow/00000000-0000-0000-0000-000000000000/pause
expect_code "pause an unknown id" 404
http POST /api/workflow/00000000-0000-0000-0000-000000000000/restart
expect_code "restart an unknown id" 404
http GET "/api/workflow/$ops/pause"
expect_code "GET on pause" 405
expect_header "GET on pause" "Allow: PUT"
http DELETE "/api/workflow/$ops"

# ---- Server-Sent Events ----
curl -s -N --max-time 10 "$API/api/workflow/$cb_wid/events" >"$TMP/sse1"
rc=$?
[ "$rc" = 0 ] && ok "the event stream of an ended workflow closes by itself" || not_ok "sse: curl exit $rc"
grep -q '^id: [0-9]*-[0-9]*-[0-9]*$' "$TMP/sse1" && ok "events carry ids" || not_ok "no id lines"
grep -q '^data: {.*"status":"SCHEDULED"' "$TMP/sse1" && ok "history: SCHEDULED" || not_ok "no SCHEDULED event"
grep -q '^data: {.*"status":"IN_PROGRESS"' "$TMP/sse1" && ok "history: IN_PROGRESS" || not_ok "no IN_PROGRESS event"
last_data=$(grep '^data: ' "$TMP/sse1" | tail -n 1)
case $last_data in *'"status":"COMPLETED","output"'*) ok "the stream ends with the workflow's end" ;; *) not_ok "last event: $last_data" ;; esac
n_all=$(grep -c '^id: ' "$TMP/sse1")
second=$(grep '^id: ' "$TMP/sse1" | sed -n 2p | cut -c5-)
curl -s -N --max-time 10 -H "Last-Event-ID: $second" "$API/api/workflow/$cb_wid/events" >"$TMP/sse2"
n_rest=$(grep -c '^id: ' "$TMP/sse2")
[ "$n_rest" = $((n_all - 2)) ] && ok "Last-Event-ID resumes after that event ($n_rest of $n_all)" ||
    not_ok "resume: $n_rest events after the 2nd of $n_all"
grep -q "^id: $second\$" "$TMP/sse2" && not_ok "resumed stream repeats $second" || ok "the resumed stream skips what was seen"
http GET "/api/workflow/$cb_wid/events" -H 'Last-Event-ID: garbage'
expect_code "a bad Last-Event-ID" 400
http GET /api/workflow/00000000-0000-0000-0000-000000000000/events
expect_code "events of an unknown id" 404
# live: the stream follows a running workflow and closes after its end
http POST /api/workflow -d '{"workflowDef":{"name":"live","tasks":[{"name":"live_q","taskReferenceName":"l","type":"SIMPLE"}]}}'
live=$body
curl -s -N --max-time 20 "$API/api/workflow/$live/events" >"$TMP/sse3" &
sse_pid=$!
sleep 0.5
wait_for 10 sh -c "curl -s '$API/api/tasks/queue/sizes?taskType=live_q' | grep -q '\"live_q\":1'"
http GET '/api/tasks/poll/live_q'
http POST /api/tasks -d "{\"workflowInstanceId\":\"$live\",\"taskId\":\"$(jstr taskId)\",\"status\":\"COMPLETED\"}"
t0=$(ms)
wait $sse_pid
rc=$?
t1=$(ms)
[ "$rc" = 0 ] && [ $((t1 - t0)) -lt 10000 ] && ok "a live stream closes after the end ($((t1 - t0)) ms)" ||
    not_ok "live stream: curl exit $rc after $((t1 - t0)) ms"
grep -q '"status":"COMPLETED","output"' "$TMP/sse3" && ok "the live stream saw the end" || not_ok "live: $(cat "$TMP/sse3")"
grep -q 'Content-Type: text/event-stream' <(curl -s -i --max-time 5 "$API/api/workflow/$live/events") &&
    ok "events: Content-Type text/event-stream" || not_ok "events content type"

# ---- a half-open client does not block others ----
port=${API##*:}
exec 5<>"/dev/tcp/127.0.0.1/$port"
printf 'POST /api/workflow HTTP/1.1\r\nHost: x\r\nContent-Length: 500\r\n\r\n{"name":' >&5
exec 6<>"/dev/tcp/127.0.0.1/$port"
printf 'GET /heal' >&6
t0=$(ms)
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 3 "$API/health")
t1=$(ms)
[ "$code" = 200 ] && [ $((t1 - t0)) -lt 2000 ] && ok "half-open clients do not block others ($((t1 - t0)) ms)" ||
    not_ok "with half-open clients: $code after $((t1 - t0)) ms"
http GET '/api/tasks/poll/batch/idle_q?timeout=1500' &
bp=$!
sleep 0.2
t0=$(ms)
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 3 "$API/api/workflow/$live")
t1=$(ms)
[ "$code" = 200 ] && [ $((t1 - t0)) -lt 1000 ] && ok "a long poll does not block others" || not_ok "during a long poll: $code after $((t1 - t0)) ms"
wait $bp
exec 5>&- 6>&-

# ---- the weft client through the API ----
run_api() { run_weft "$@" --api "$API"; }
run_api start "$SRC/examples/hello.lua" --input '{"name":"api"}'
expect_rc "weft start FILE --api" 0
cid=$last
run_api wait "$cid" --timeout 20
expect_rc "weft wait --api" 0
expect_json "weft wait --api" '{"greeting":"hello, api!"}'
run_api status "$cid" -o json
expect_rc "weft status --api" 0
case $out in *'"status": "COMPLETED"'*) ok "weft status --api prints the workflow" ;; *) not_ok "status: $out" ;; esac
run_api status 00000000-0000-0000-0000-000000000000
expect_rc "weft status --api of an unknown id" 2
expect_err "weft status --api of an unknown id" "no workflow"
run_api watch "$cid" -o json
expect_rc "weft watch --api" 0
case $(printf '%s\n' "$out" | tail -n 1) in *'"status":"COMPLETED"'*) ok "weft watch --api ends with the end" ;;
    *) not_ok "watch --api: $out" ;; esac
run_api register "$SRC/examples/child.lua"
expect_rc "weft register --api" 0
case $out in *"registered child version 1"*) ok "weft register --api says what it stored" ;; *) not_ok "register: $out" ;; esac
run_api start child --input '{"x":4}'
expect_rc "weft start NAME --api" 0
run_api wait "$last" --timeout 20
expect_rc "start by name through the API runs" 0
run_api start no_such_workflow
expect_rc "weft start --api of an unknown name" 2
cat >"$TMP/gate.lua" <<'L'
local w = require "weft"
return w.workflow { name = "gate", output = { got = "${gate.output.answer}" },
  w.wait { ref = "gate" },
  w.lambda { ref = "after", script = "return 1" } }
L
run_api start "$TMP/gate.lua"
gid=$last
wait_for 10 sh -c "curl -s '$API/api/workflow/$gid' | grep -q '\"referenceTaskName\":\"gate\",\"taskReferenceName\":\"gate\",\"status\":\"IN_PROGRESS\"'"
run_api wait "$gid" --timeout 1
expect_rc "weft wait --api times out" 3
run_api pause "$gid"; expect_rc "weft pause --api" 0
run_api pause "$gid"; expect_rc "weft pause --api twice" 1
run_api resume "$gid"; expect_rc "weft resume --api" 0
run_api signal "$gid" gate '{"answer":42}'
expect_rc "weft signal --api" 0
run_api wait "$gid" --timeout 20
expect_json "signal payload through the API" '{"got":42}'
run_api signal "$gid" gate '{"answer":1}'
expect_rc "weft signal --api of an ended workflow" 1
run_api restart "$gid"; expect_rc "weft restart --api" 0
wait_for 10 sh -c "curl -s '$API/api/workflow/$gid' | grep -q '\"referenceTaskName\":\"gate\",\"taskReferenceName\":\"gate\",\"status\":\"IN_PROGRESS\"'"
run_api terminate "$gid" --reason "enough"; expect_rc "weft terminate --api" 0
run_api wait "$gid" --timeout 10
expect_rc "a terminated workflow waits to exit 1" 1
expect_err "terminate --api reason" "enough"
run_api terminate "$gid"; expect_rc "weft terminate --api twice" 1
run_api retry "$gid"; expect_rc "weft retry --api" 0
# the retried gate is there once a decider ran the workflow (a signal before
# it lands on the old one: seen on a cluster, where that takes longer)
wait_for 10 sh -c "curl -s '$API/api/workflow/$gid' | grep -q '\"referenceTaskName\":\"gate\",\"taskReferenceName\":\"gate\",\"status\":\"IN_PROGRESS\"'"
run_api signal "$gid" gate '{"answer":5}' --status FAILED --reason "said no"
expect_rc "weft signal --api --status FAILED" 0
run_api wait "$gid" --timeout 10
expect_rc "a failed signal fails the workflow" 1
expect_err "the signal's reason" "said no"
run_api resume 00000000-0000-0000-0000-000000000000
expect_rc "weft resume --api of an unknown id" 2
WEFT_API_URL="$API/api" run_weft status "$cid"
expect_rc "WEFT_API_URL (with /api) works too" 0
run_weft status "$cid" --api "http://127.0.0.1:1"
expect_rc "weft --api to nothing: unreachable" 4
run_api secret list
expect_rc "secrets stay in Redis" 2

# ---- /metrics ----
http GET /metrics
expect_code "metrics" 200
expect_header "metrics" "Content-Type: text/plain; version=0.0.4"
for m in weft_workflows_started_total weft_workflows_ended_total weft_tasks_total weft_task_duration_seconds_bucket \
    weft_task_duration_seconds_sum weft_task_duration_seconds_count weft_queue_depth weft_lease_reaps_total \
    weft_api_requests_total '# TYPE weft_task_duration_seconds histogram'; do
    expect_body "metrics" "$m"
done
started=$(printf '%s\n' "$body" | sed -n 's/^weft_workflows_started_total \([0-9]*\)$/\1/p')
[ "${started:-0}" -ge 10 ] && ok "workflows started: $started" || not_ok "workflows started: '$started'"
completed=$(printf '%s\n' "$body" | sed -n 's/^weft_workflows_ended_total{status="COMPLETED"} \([0-9]*\)$/\1/p')
[ "${completed:-0}" -ge 5 ] && ok "workflows completed: $completed" || not_ok "completed: '$completed'"
expect_body "metrics: SIMPLE results" 'weft_tasks_total{type="SIMPLE",status="COMPLETED"}'
expect_body "metrics: LAMBDA runs" 'weft_tasks_total{type="LAMBDA",status="COMPLETED"}'
expect_body "metrics: +Inf bucket" 'le="+Inf"'
expect_body "metrics: a polled queue's depth" 'weft_queue_depth{queue="ext_work"}'
expect_body "metrics: 404s counted" 'weft_api_requests_total{code="404"}'
inf=$(printf '%s\n' "$body" | sed -n 's/^weft_task_duration_seconds_bucket{type="LAMBDA",le="+Inf"} \([0-9]*\)$/\1/p')
cnt=$(printf '%s\n' "$body" | sed -n 's/^weft_task_duration_seconds_count{type="LAMBDA"} \([0-9]*\)$/\1/p')
[ -n "$inf" ] && [ "$inf" = "$cnt" ] && [ "$inf" -ge 1 ] && ok "histogram +Inf = count ($cnt)" || not_ok "histogram: +Inf '$inf' count '$cnt'"
# started and ended counted the same way, from the saves: runs started
# through Redis (weft start), the REST API and as sub-workflows are each
# counted once, by the daemon that saves them (on a key prefix of its own)
cat >"$TMP/m1.lua" <<'L'
local w = require "weft"
return w.workflow { name = "m1", w.lambda { ref = "a", script = "return { n = 1 }" } }
L
cat >"$TMP/m2.lua" <<'L'
local w = require "weft"
return w.workflow { name = "m2", w.sub_workflow { ref = "c", definition = w.workflow {
    name = "m2c", w.lambda { ref = "b", script = "return { n = 2 }" } } } }
L
mp="m$$:"
WEFT_KEY_PREFIX=$mp start_weftd dm --workers 2 --api 127.0.0.1:0
MAPI="http://$(api_of dm)"
mids=
for f in m1 m1 m2; do
    WEFT_KEY_PREFIX=$mp run_weft start "$TMP/$f.lua"
    mids="$mids $last"
done
WEFT_KEY_PREFIX=$mp run_weft start "$TMP/m1.lua" --api "$MAPI"
mid=$last
for id in $mids $mid; do
    WEFT_KEY_PREFIX=$mp run_weft wait "$id" --timeout 20
    [ "$rc" = 0 ] || not_ok "run $id: exit $rc, $last $errout"
done
# (a run's end is counted right after its save, which wait saw)
mcount() {
    mbody=$(curl -s "$MAPI/metrics")
    mstarted=$(printf '%s\n' "$mbody" | sed -n 's/^weft_workflows_started_total \([0-9]*\)$/\1/p')
    mended=$(printf '%s\n' "$mbody" | awk '/^weft_workflows_ended_total\{/ { n += $2 } END { print n + 0 }')
    [ "$mended" -ge 5 ]
}
wait_for 10 mcount
mcount
[ "$mstarted" = 5 ] && [ "$mended" = 5 ] &&
    ok "runs started through Redis, the API and as a sub-workflow: 5 started, 5 ended" ||
    not_ok "metrics of 5 runs: started '$mstarted', ended '$mended'"
# the runs not ended, in the whole store: none now; one that waits; none again
unfinished() { curl -s "$MAPI/metrics" | sed -n 's/^weft_workflows_unfinished \([0-9]*\)$/\1/p'; }
[ "$(unfinished)" = 0 ] && ok "weft_workflows_unfinished 0 once all ended" ||
    not_ok "weft_workflows_unfinished: '$(unfinished)', wanted 0"
cat >"$TMP/m3.lua" <<'L'
local w = require "weft"
return w.workflow { name = "m3", w.wait { ref = "hold" } }
L
WEFT_KEY_PREFIX=$mp run_weft start "$TMP/m3.lua"
hold=$last
wait_for 10 sh -c "[ \"\$(curl -s '$MAPI/metrics' | sed -n 's/^weft_workflows_unfinished \([0-9]*\)$/\1/p')\" = 1 ]" &&
    ok "weft_workflows_unfinished 1 while a run waits" || not_ok "weft_workflows_unfinished: '$(unfinished)', wanted 1"
WEFT_KEY_PREFIX=$mp run_weft terminate "$hold"
wait_for 10 sh -c "[ \"\$(curl -s '$MAPI/metrics' | sed -n 's/^weft_workflows_unfinished \([0-9]*\)$/\1/p')\" = 0 ]" &&
    ok "weft_workflows_unfinished 0 once it is terminated" || not_ok "weft_workflows_unfinished: '$(unfinished)', wanted 0"
kill_weftd dm

expect_body "metrics: sub-millisecond task buckets" 'weft_task_duration_seconds_bucket{type="LAMBDA",le="0.0001"}'
expect_body "metrics: workflow durations are a histogram" '# TYPE weft_workflow_duration_seconds histogram'
# every end counted has its duration, by name and status: the counts add up
durs=$(printf '%s\n' "$body" | awk '/^weft_workflow_duration_seconds_count\{name="[^"]*",status="COMPLETED"\} / { n += $2 } END { print n + 0 }')
[ "$durs" = "$completed" ] && ok "workflow durations: $durs COMPLETED, as many as ended" ||
    not_ok "workflow durations: $durs COMPLETED counted, $completed ended"
expect_body "metrics: a workflow's duration by its name" 'weft_workflow_duration_seconds_bucket{name="'
expect_body "metrics: the build" "weft_build_info{version=\"$("$WEFT" --version | sed -n 's/^weft \([^ ]*\).*/\1/p')\""
for m in process_cpu_seconds_total process_resident_memory_bytes process_virtual_memory_bytes \
    process_start_time_seconds process_open_fds process_max_fds; do
    expect_body "metrics: $m" "$m "
done
fds=$(printf '%s\n' "$body" | sed -n 's/^process_open_fds \([0-9]*\)$/\1/p')
[ "${fds:-0}" -gt 3 ] && ok "process_open_fds: $fds" || not_ok "process_open_fds: '$fds'"
st=$(printf '%s\n' "$body" | sed -n 's/^process_start_time_seconds \([0-9]*\).*$/\1/p')
now=$(date +%s)
[ -n "$st" ] && [ "$st" -le "$now" ] && [ "$st" -gt $((now - 86400)) ] && ok "process_start_time_seconds is today" ||
    not_ok "process_start_time_seconds: '$st' (now $now)"

# ---- auth and limits (a second daemon) ----
WEFT_API_TOKEN=s3cret-token start_weftd d2 --workers 1 --api 127.0.0.1:0 --set api_body_limit=64KiB
API1=$API
API="http://$(api_of d2)"
http GET /api/metadata/workflow
expect_code "no token" 401
expect_header "no token" "WWW-Authenticate: Bearer"
case $body in *s3cret*) not_ok "401 echoes the token" ;; *) ok "401 does not echo the token" ;; esac
http GET /api/metadata/workflow -H 'Authorization: Bearer wrong'
expect_code "wrong token" 401
http GET /api/metadata/workflow -H 'Authorization: Bearer s3cret-toke'
expect_code "a prefix of the token" 401
http GET /api/metadata/workflow -H 'Authorization: Basic czNjcmV0LXRva2Vu'
expect_code "Basic instead of Bearer" 401
http GET /api/nothing -H 'Authorization: Bearer wrong'
expect_code "unknown /api path without the token" 401
http GET /api/metadata/workflow -H 'Authorization: Bearer s3cret-token'
expect_code "the right token" 200
# Conductor's SDKs: trade key and secret at /api/token, then send X-Authorization
http POST /api/token -d '{"keyId":"k","keySecret":"wrong"}'
expect_code "/api/token with a wrong secret" 401
expect_header "/api/token with a wrong secret" "WWW-Authenticate: Bearer"
http POST /api/token -d '{"keyId":"k","keySecret":"s3cret-token"}'
expect_code "/api/token with the secret" 200
case $body in *'"token":"s3cret-token"'*) ok "/api/token hands out the token" ;; *) not_ok "/api/token: $body" ;; esac
http GET /api/metadata/workflow -H 'X-Authorization: s3cret-token'
expect_code "X-Authorization with the token" 200
http GET /api/metadata/workflow -H 'X-Authorization: nope'
expect_code "X-Authorization with a wrong token" 401
http GET /health
expect_code "/health needs no token" 200
http GET /metrics
expect_code "/metrics needs no token" 200
head -c 100000 /dev/zero | tr '\0' 'a' >"$TMP/big"
http POST /api/workflow -H 'Authorization: Bearer s3cret-token' --data-binary @"$TMP/big"
expect_code "a body over the limit (Content-Length)" 413
expect_body "413 names the limit" "65536"
http POST /api/workflow -H 'Authorization: Bearer s3cret-token' -H 'Transfer-Encoding: chunked' --data-binary @"$TMP/big"
expect_code "a body over the limit (chunked)" 413
http POST /api/workflow -H 'Authorization: Bearer s3cret-token' -d '{"name":"ext"}'
expect_code "a body under the limit" 200
WEFT_API_TOKEN=s3cret-token run_weft status "$body" --api "$API"
expect_rc "weft --api sends WEFT_API_TOKEN" 0
WEFT_API_TOKEN=nope run_weft status "$body" --api "$API"
expect_rc "weft --api with a wrong token: refused" 4
grep -q 's3cret-token' "$TMP/d2.log" && not_ok "the token is in the log" || ok "the token is not logged"

# ---- /health after Redis is gone; bad input never crashes ----
API=$API1
for p in /api/workflow/%00 "/api/workflow/a%7Cb" /api/tasks/poll/a%7Cb '/api/metadata/workflow/x?version=-1' \
    '/api/tasks/queue/sizes?taskType=a%7Cb' /api/workflow/x/y/z/w/v/u/t/s/r; do
    curl -s -o /dev/null --max-time 5 "$API$p"
done
curl -s -o /dev/null --max-time 5 -X POST "$API/api/tasks" -d '{"workflowInstanceId":"a|b","taskId":"x","status":"COMPLETED"}'
curl -s -o /dev/null --max-time 5 -X POST "$API/api/workflow" -d "$(printf '[%.0s' $(seq 1 200))"
http GET /health
expect_code "odd requests leave the daemon up" 200
kill_redis
http GET /health
expect_code "health with Redis gone" 503
expect_body "health with Redis gone" '"redis":"DOWN"'
http GET "/api/workflow/$cid"
expect_code "a call with Redis gone" 503
expect_body "a call with Redis gone" '"retryable":true'
start_redis
wait_for 10 sh -c "curl -s -o /dev/null -w '%{http_code}' '$API/health' | grep -q 200" && ok "health comes back with Redis" || not_ok "health after Redis restart"

kill_weftd d1 TERM
rc=$?
[ "$rc" = 0 ] && ok "weftd with the API stops cleanly" || not_ok "weftd d1 exit $rc"
kill_weftd d2 TERM
grep -l -E 'AddressSanitizer|LeakSanitizer|runtime error:' "$TMP/d1.log" "$TMP/d2.log" >/dev/null &&
    not_ok "sanitizer reports: $(grep -h -E -A3 'Sanitizer|runtime error:' "$TMP/d1.log" "$TMP/d2.log" | head -8)" ||
    ok "no sanitizer reports from the daemons"
errs=$(grep 'level=error' "$TMP/d1.log" | grep -v -i 'redis\|connection refused')
[ -z "$errs" ] && ok "no unexpected errors logged" || not_ok "errors in the log: $(printf '%s' "$errs" | head -3)"
finish
