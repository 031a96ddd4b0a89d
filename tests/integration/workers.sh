#!/bin/bash
# The external workers of examples/workers against weftd's REST API:
# worker.py (Python, standard library) serves "greet", worker.sh (curl + jq)
# serves "shout", and examples/workers/workflow.lua, started and waited for with
# the weft client through the API, answers {"greeting":"HELLO, ANN"}. Then a
# worker that polls a task and dies without answering loses it to the task's
# response timeout, and a real worker finishes it.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/redis_lib.sh"
for c in curl jq python3; do
    command -v "$c" >/dev/null 2>&1 || { echo "$c not installed: skipping"; exit 77; }
done
EX="$SRC/examples/workers"
WORKER_PIDS=
trap 'for p in $WORKER_PIDS; do kill -- -"$p" 2>/dev/null; done; cleanup_procs; rm -rf "$TMP"' EXIT

start_redis
start_weftd d1 --workers 2 --api 127.0.0.1:0
API="http://$(api_of d1)" || exit 1

# start_worker NAME CMD...: in its own process group (stop_worker ends the
# worker's curl too, not only its shell); its output goes to $TMP/NAME.log
start_worker() {
    name=$1; shift
    set -m
    WEFT_API_URL="$API" "$@" >"$TMP/$name.log" 2>&1 &
    set +m
    eval "WORKER_$name=$!"
    WORKER_PIDS="$WORKER_PIDS $!"
}
stop_worker() {
    pid=$(eval "echo \$WORKER_$1")
    kill -- -"$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
    WORKER_PIDS=$(printf '%s\n' $WORKER_PIDS | grep -vx "$pid" | tr '\n' ' ')
}
start_workers() {
    start_worker py python3 "$EX/worker.py"
    start_worker sh sh "$EX/worker.sh"
}
stop_workers() { stop_worker py; stop_worker sh; }

# ---- the example as documented ----
start_workers
run_weft start "$EX/workflow.lua" --input '{"name":"ann"}' --api "$API"
expect_rc "weft start workflow.lua --api" 0
id=$last
run_weft wait "$id" --timeout 30 --api "$API"
expect_rc "weft wait --api" 0
expect_json "worker.py then worker.sh" '{"greeting":"HELLO, ANN"}'
wf=$(curl -s "$API/api/workflow/$id")
case $(jq -r '[.tasks[] | "\(.referenceTaskName)=\(.status)"] | join(" ")' <<<"$wf") in
"greet=COMPLETED shout=COMPLETED") ok "one attempt each" ;;
*) not_ok "tasks: $(jq -c '[.tasks[] | [.referenceTaskName, .status]]' <<<"$wf")" ;;
esac
case $(jq -r '.tasks[0].workerId' <<<"$wf") in py-*) ok "greet done by worker.py" ;; *) not_ok "greet's worker: $(jq -r '.tasks[0].workerId' <<<"$wf")" ;; esac
case $(jq -r '.tasks[1].workerId' <<<"$wf") in sh-*) ok "shout done by worker.sh" ;; *) not_ok "shout's worker: $(jq -r '.tasks[1].workerId' <<<"$wf")" ;; esac
[ "$(jq -c .tasks[0].outputData <<<"$wf")" = '{"text":"hello, ann"}' ] && ok "greet's output" ||
    not_ok "greet's output: $(jq -c .tasks[0].outputData <<<"$wf")"
stop_workers

# ---- a worker that dies mid-task ----
# The example with a 2 s response timeout on greet instead of 30 s (its retry
# policy, two retries 1 s apart, as written).
sed '/ref = "greet"/,/response_timeout/ s/response_timeout = "30s"/response_timeout = "2s"/' \
    "$EX/workflow.lua" >"$TMP/workflow.lua"
run_weft compile "$TMP/workflow.lua"
case $(jq -c '[.tasks[] | [.taskReferenceName, .taskDefinition.responseTimeoutSeconds, .taskDefinition.retryCount]]' <<<"$out") in
'[["greet",2,2],["shout",30,null]]') ok "greet's response timeout shortened to 2 s" ;;
*) not_ok "could not shorten greet's response timeout in $EX/workflow.lua"; finish; exit 1 ;;
esac
run_weft start "$TMP/workflow.lua" --input '{"name":"ann"}' --api "$API"
expect_rc "start the workflow again" 0
id=$last
# the doomed worker: polls, gets the task, and is never heard from again
dead=$(curl -s "$API/api/tasks/poll/batch/greet?workerid=doomed&count=1&timeout=5000")
tid=$(jq -r '.[0].taskId // empty' <<<"$dead")
t0=$(date +%s%3N)
[ -n "$tid" ] && ok "a worker polls greet and dies" || { not_ok "the doomed poll got $dead"; finish; exit 1; }
again=$(curl -s "$API/api/tasks/poll/batch/greet?workerid=other&count=1&timeout=500")
[ "$again" = "[]" ] && ok "while it is held, nobody else gets it" || not_ok "polled again: $again"
start_workers
run_weft wait "$id" --timeout 30 --api "$API"
t1=$(date +%s%3N)
expect_rc "weft wait after the worker died" 0
expect_json "the real workers finish it" '{"greeting":"HELLO, ANN"}'
[ $((t1 - t0)) -ge 2000 ] && ok "not before the response timeout ($((t1 - t0)) ms)" ||
    not_ok "done after $((t1 - t0)) ms, before the 2 s response timeout"
wf=$(curl -s "$API/api/workflow/$id")
greets=$(jq -c '[.tasks[] | select(.referenceTaskName == "greet") | [.status, .workerId, .retryCount]]' <<<"$wf")
case $greets in
'[["TIMED_OUT","doomed",0],["COMPLETED","py-'*'",1]]') ok "greet: timed out with the dead worker, retried by worker.py" ;;
*) not_ok "greet's attempts: $greets" ;;
esac
reason=$(jq -r '.tasks[0].reasonForIncompletion' <<<"$wf")
case $reason in *responseTimeout*) ok "the reason: $reason" ;; *) not_ok "the first attempt's reason: $reason" ;; esac
late=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$API/api/tasks" -H 'Content-Type: application/json' \
    -d "{\"workflowInstanceId\":\"$id\",\"taskId\":\"$tid\",\"workerId\":\"doomed\",\"status\":\"COMPLETED\",\"outputData\":{}}")
[ "$late" = 409 ] && ok "a late result from the dead worker is refused (409)" || not_ok "late result: HTTP $late"
stop_workers

for w in py sh; do
    if grep -q . "$TMP/$w.log"; then not_ok "worker.$w said:"; sed 's/^/# /' "$TMP/$w.log" | tail -n 10; else ok "worker.$w ran quietly"; fi
done
stop_weftd_clean d1
finish
