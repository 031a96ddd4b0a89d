#!/bin/bash
# A result for a task that was polled again (its lease expired, another
# worker has it) is refused unless it carries the current poll's identity:
# the workerId of that poll. A poll without ?workerid= gets one made up,
# in the Task's workerId, so a client that echoes it (Conductor's SDKs build
# their TaskResult from the Task) proves it is the current poller. A task
# polled once takes a result without workerId, as before.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/redis_lib.sh"

start_redis
start_weftd d1 --workers 1 --api 127.0.0.1:0
API="http://$(api_of d1)" || exit 1
post() { curl -s -o "$TMP/body" -w '%{http_code}' -X POST "$API$1" -H 'Content-Type: application/json' -d "$2"; }
run() { post /api/workflow '{"name":"late","workflowDef":{"name":"late","tasks":[{"name":"late_q","taskReferenceName":"t","type":"SIMPLE"}]}}' >/dev/null; cat "$TMP/body"; }
result() { # ID TASK STATUS [WORKER]
    w=${4:+,\"workerId\":\"$4\"}
    post /api/tasks "{\"workflowInstanceId\":\"$1\",\"taskId\":\"$2\",\"status\":\"$3\",\"outputData\":{\"by\":\"${4:-none}\"}$w}"
}
# expire ID TASK: its lease runs out now (the next poll returns it to the queue)
expire() { rcli ZADD "${WEFT_KEY_PREFIX}{q:late_q}:leases" XX 1 "$1|$2" >/dev/null; }

# polled once: a result without workerId is taken
id=$(run)
tid=$(curl -s "$API/api/tasks/poll/late_q?workerid=A" | jq -r .taskId)
code=$(result "$id" "$tid" COMPLETED)
[ "$code" = 200 ] && ok "polled once: a result without workerId is taken" || not_ok "polled once: $code $(cat "$TMP/body")"

# polled again after A's lease expired: A's late result without workerId is refused
id=$(run)
tid=$(curl -s "$API/api/tasks/poll/late_q?workerid=A" | jq -r .taskId)
expire "$id" "$tid"
t2=$(curl -s "$API/api/tasks/poll/late_q?workerid=B" | jq -r .taskId)
[ "$t2" = "$tid" ] && ok "B polls the task again" || not_ok "B got $t2, not $tid"
code=$(result "$id" "$tid" COMPLETED)
[ "$code" = 409 ] && ok "a late result without workerId: 409" || not_ok "without workerId: $code $(cat "$TMP/body")"
grep -q "workerId" "$TMP/body" && ok "the 409 says to send the workerId" || not_ok "409 says: $(cat "$TMP/body")"
code=$(result "$id" "$tid" COMPLETED A)
[ "$code" = 409 ] && ok "A's late result: 409" || not_ok "A: $code $(cat "$TMP/body")"
code=$(result "$id" "$tid" COMPLETED B)
[ "$code" = 200 ] && ok "B's result: 200" || not_ok "B: $code $(cat "$TMP/body")"
out=$(curl -s "$API/api/workflow/$id" | jq -c '.tasks[0] | [.status, .workerId, .outputData.by]')
[ "$out" = '["COMPLETED","B","B"]' ] && ok "B's output kept" || not_ok "task: $out"

# polls without workerid: each is told an identity, and only the current one is taken
id=$(run)
p1=$(curl -s "$API/api/tasks/poll/late_q")
tid=$(jq -r .taskId <<<"$p1")
w1=$(jq -r .workerId <<<"$p1")
case $w1 in anonymous-?*) ok "a poll without workerid is given one: $w1" ;; *) not_ok "its workerId: $w1" ;; esac
expire "$id" "$tid"
p2=$(curl -s "$API/api/tasks/poll/batch/late_q?count=1&timeout=100")
w2=$(jq -r '.[0].workerId' <<<"$p2")
[ "$w2" != "$w1" ] && [ -n "$w2" ] && ok "the next poll another: $w2" || not_ok "second poll's workerId: $w2"
code=$(result "$id" "$tid" COMPLETED "$w1")
[ "$code" = 409 ] && ok "the first poller's result: 409" || not_ok "first: $code $(cat "$TMP/body")"
code=$(result "$id" "$tid" COMPLETED)
[ "$code" = 409 ] && ok "a result without workerId: 409" || not_ok "none: $code $(cat "$TMP/body")"
code=$(result "$id" "$tid" COMPLETED "$w2")
[ "$code" = 200 ] && ok "the current poller's echoed workerId: 200" || not_ok "second: $code $(cat "$TMP/body")"
stop_weftd_clean d1
finish
