#!/bin/bash
# Queue controls on weftd, measured rather than trusted: the order REST polls
# hand out tasks by workflow priority, a rate limit's windows, a concurrency
# limit under two daemons' workers and under REST pollers on both daemons, and
# a slot held by a daemon killed with SIGKILL, freed once when its lease is
# reaped.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/redis_lib.sh"
for c in curl jq; do
    command -v "$c" >/dev/null 2>&1 || { echo "$c not installed: skipping"; exit 77; }
done
HTTPD="$BUILD/tests/httpd"
[ -x "$HTTPD" ] || { echo "# $HTTPD is not built"; exit 77; }
"$HTTPD" "$TMP/port" &
httpd_pid=$!
POLLERS=
trap 'for p in $POLLERS; do kill "$p" 2>/dev/null; done; kill "$httpd_pid" 2>/dev/null;
      wait "$httpd_pid" 2>/dev/null; cleanup_procs; rm -rf "$TMP"' EXIT
wait_for 10 test -s "$TMP/port" || { echo "# tests/httpd did not start"; exit 1; }
BASE="http://127.0.0.1:$(cat "$TMP/port")"

# every queue here is split in shards (the base queue holds the tasks with a
# priority or limits), but pq's, whose test wants FIFO over all its tasks
export WEFT_QUEUE_SHARDS="${WEFT_QUEUE_SHARDS:-4,pq=1}"
start_redis
start_weftd d1 --workers 2 --api 127.0.0.1:0 --set lease=2s
shards_are() { [ "$(rcli HGET "${WEFT_KEY_PREFIX}layout" queue_shards)" = "$1" ]; }
wait_for 10 shards_are "$WEFT_QUEUE_SHARDS" && ok "queue shards: $WEFT_QUEUE_SHARDS" ||
    not_ok "layout: $(rcli HGETALL "${WEFT_KEY_PREFIX}layout" | tr '\n' ' ')"
start_weftd d2 --workers 2 --api 127.0.0.1:0 --set lease=2s
A1="http://$(api_of d1)" || exit 1
A2="http://$(api_of d2)" || exit 1

now_ms() { date +%s%3N; }

# wf NAME BODY: $TMP/NAME.lua, a workflow NAME whose tasks are BODY
wf() {
    cat >"$TMP/$1.lua" <<EOF
local w = require "weft"
return w.workflow { name = "$1",
$2
}
EOF
}

# queued TYPE N: until the queue of TYPE holds N tasks
queued() { [ "$(curl -s "$A1/api/tasks/queue/sizes?taskType=$1" | jq ".\"$1\"")" = "$2" ]; }

# done API ID: the workflow ID is COMPLETED
done_() { [ "$(curl -s "$1/api/workflow/$2" | jq -r .status)" = COMPLETED ]; }

# complete API TASK_JSON
complete() {
    curl -s -o /dev/null -X POST "$1/api/tasks" -H 'Content-Type: application/json' -d "$(jq -c \
        '{workflowInstanceId, taskId, workerId, status: "COMPLETED", outputData: {}}' <<<"$2")"
}

# ---- priority: higher first among due tasks, FIFO within one ----
wf pq 'w.simple { ref = "t", name = "pq" }'
ids=
for p in 0 0 0 99; do
    run_weft start "$TMP/pq.lua" --api "$A1" --priority $p
    expect_rc "weft start --priority $p" 0
    ids="$ids $last"
done
set -- $ids
want="$4 $1 $2 $3"
wait_for 10 queued pq 4 || not_ok "the four pq tasks were not queued"
got=$(curl -s "$A2/api/tasks/poll/batch/pq?workerid=w&count=4&timeout=1000")
order=$(jq -r '[.[].workflowInstanceId] | join(" ")' <<<"$got")
[ "$order" = "$want" ] && ok "polled: priority 99 first, then the 0s in start order" ||
    not_ok "poll order $order, want $want"
for i in 0 1 2 3; do complete "$A2" "$(jq -c ".[$i]" <<<"$got")"; done
for id in $ids; do
    wait_for 10 done_ "$A1" "$id" || not_ok "pq workflow $id: $(curl -s "$A1/api/workflow/$id" | jq -r .status)"
done
ok "the four pq workflows completed"
[ "$(curl -s "$A1/api/workflow/$4" | jq .priority)" = 99 ] && ok "GET shows priority 99" ||
    not_ok "GET priority: $(curl -s "$A1/api/workflow/$4" | jq .priority)"
run_weft start "$TMP/pq.lua" --api "$A1" --priority 100
expect_rc "--priority 100 refused" 2
expect_err "names the option" "--priority must be a whole number from 0 to 99"
code=$(curl -s -o "$TMP/body" -w '%{http_code}' -X POST "$A1/api/workflow" -H 'Content-Type: application/json' \
    -d '{"name":"none","priority":-1,"workflowDef":{"name":"p","tasks":[{"name":"x","taskReferenceName":"x","type":"SIMPLE"}]}}')
[ "$code" = 400 ] && grep -q 'priority must be a whole number from 0 to 99' "$TMP/body" &&
    ok "a StartWorkflowRequest with priority -1: 400 naming priority" ||
    not_ok "priority -1: $code $(cat "$TMP/body")"

# a sub-workflow's own priority (Conductor's subWorkflowParam.priority)
wf sq1 'w.simple { ref = "t", name = "sq" }'
wf sp 'w.sub_workflow { ref = "c", priority = 99,
  definition = w.workflow { name = "spk", w.simple { ref = "t", name = "sq" } } }'
run_weft start "$TMP/sq1.lua" --api "$A1"
plain=$last
run_weft start "$TMP/sp.lua" --api "$A1"
parent=$last
wait_for 10 queued sq 2 || not_ok "the two sq tasks were not queued"
got=$(curl -s "$A2/api/tasks/poll/batch/sq?workerid=w&count=2&timeout=1000")
kid=$(jq -r '.[0].workflowInstanceId' <<<"$got")
[ "$kid" != "$plain" ] && [ "$(curl -s "$A1/api/workflow/$kid" | jq -c '[.priority, .parentWorkflowId]')" = "[99,\"$parent\"]" ] &&
    ok "the priority-99 sub-workflow's task is polled before an earlier priority-0 one" ||
    not_ok "sub-workflow priority: first polled $(jq -c '[.[].workflowInstanceId]' <<<"$got"), plain $plain"
for i in 0 1; do complete "$A2" "$(jq -c ".[$i]" <<<"$got")"; done

# ---- start delay: a task not claimable yet says until when ----
wf sd 'w.simple { ref = "t", name = "sdq", start_delay = "30s" }'
run_weft start "$TMP/sd.lua" --api "$A1"
sid=$last
run_weft status "$sid" --api "$A1" -o json
case $out in *"not claimable for "[23]?.?" s more (its startDelay or retry delay)"*) ok "weft status: a task in its 30 s startDelay says so" ;;
*) not_ok "weft status of a delayed task: $(jq -c '[.tasks[] | .reasonForIncompletion]' <<<"$out")" ;; esac
got=$(curl -s "$A2/api/tasks/poll/batch/sdq?workerid=w&count=1&timeout=300")
[ "$got" = "[]" ] && ok "a task within its startDelay is not polled" || not_ok "startDelay task polled: $got"
curl -s -o /dev/null -X DELETE "$A1/api/workflow/$sid"

# ---- rate limit: at most 2 claims per 1 s window, the rest stay queued ----
wf rq "w.fork { ref = 'f',
  $(for i in 1 2 3 4 5 6; do printf "{ w.simple { ref = 'r%d', name = 'rq', rate_limit = { count = 2, per = '1s' } } },\n" $i; done)
}"
run_weft start "$TMP/rq.lua" --api "$A1"
expect_rc "start six rate-limited tasks" 0
rid=$last
wait_for 10 queued rq 6 || not_ok "the six rq tasks were not queued"
: >"$TMP/rq.claims"
# the first window: 2 claimed; the rest wait, and say so
while [ $(( $(now_ms) % 1000 )) -lt 100 ] || [ $(( $(now_ms) % 1000 )) -gt 700 ]; do sleep 0.02; done
t=$(now_ms)
first=$(curl -s "$A2/api/tasks/poll/batch/rq?workerid=w&count=6&timeout=0")
echo "$((t / 1000)) $(jq length <<<"$first")" >>"$TMP/rq.claims"
q=$(curl -s "$A2/api/queue/rq")
[ "$(jq -c '[.ready, .leased, .waiting, .limits.rq.windowClaims]' <<<"$q")" = "[4,2,4,2]" ] &&
    ok "GET /api/queue/rq: 4 queued, 2 leased, 4 waiting on the limit, 2 claims in the window" ||
    not_ok "GET /api/queue/rq: $q"
curl -s "$A2/metrics" >"$TMP/metrics"
grep -q '^weft_queue_waiting{queue="rq"} 4$' "$TMP/metrics" &&
    grep -q '^weft_queue_window_claims{queue="rq",name="rq"} 2$' "$TMP/metrics" &&
    ok "/metrics: weft_queue_waiting and weft_queue_window_claims for rq" ||
    not_ok "/metrics: $(grep 'queue="rq"' "$TMP/metrics" | tr '\n' ';')"
run_weft status "$rid" --api "$A1" -o json
case $out in *"used its rate limit (2 per 1000 ms) in this window"*) ok "weft status says why a task waits" ;;
*) not_ok "weft status: $(jq -c '[.tasks[] | .reasonForIncompletion]' <<<"$out")" ;; esac
for i in 0 1; do complete "$A2" "$(jq -c ".[$i]" <<<"$first")"; done
end=$(( $(now_ms) + 6000 ))
while [ "$(now_ms)" -lt "$end" ]; do
    t=$(now_ms)
    # poll only well inside a window, so a claim and its reply share one
    ms=$((t % 1000))
    if [ $ms -lt 100 ] || [ $ms -gt 850 ]; then sleep 0.05; continue; fi
    got=$(curl -s "$A2/api/tasks/poll/batch/rq?workerid=w&count=6&timeout=0")
    n=$(jq length <<<"$got")
    [ "$n" -gt 0 ] && echo "$((t / 1000)) $n" >>"$TMP/rq.claims"
    for i in $(seq 0 $((n - 1))); do complete "$A2" "$(jq -c ".[$i]" <<<"$got")"; done
    [ "$(awk '{s += $2} END {print s + 0}' "$TMP/rq.claims")" -ge 6 ] && break
    sleep 0.05
done
per=$(awk '{c[$1] += $2} END {m = 0; for (k in c) if (c[k] > m) m = c[k]; print m}' "$TMP/rq.claims")
windows=$(awk '{c[$1] += $2} END {print length(c)}' "$TMP/rq.claims")
total=$(awk '{s += $2} END {print s + 0}' "$TMP/rq.claims")
[ "$total" = 6 ] && [ "$per" = 2 ] && [ "$windows" = 3 ] &&
    ok "rate limit: 6 claims, 2 in each of 3 windows" ||
    not_ok "rate limit: $total claims, at most $per in one window, $windows windows: $(tr '\n' ';' <"$TMP/rq.claims")"
wait_for 10 done_ "$A1" "$rid" &&
    ok "the rate-limited workflow completed" || not_ok "rq workflow: $(curl -s "$A1/api/workflow/$rid" | jq -r .status)"

# ---- concurrency under the daemons' own workers: HTTP calls one at a time ----
# four workflows of one 400 ms call each, started 50 ms apart: without the
# limit the daemons' four workers would run them side by side
wf cq "w.http { ref = 'h', name = 'callapi', uri = '$BASE/slow?ms=400', concurrency = 1 }"
cids=
for i in 1 2 3 4; do
    run_weft start "$TMP/cq.lua" --api "$A1"
    [ "$rc" = 0 ] || not_ok "start call $i: exit $rc: $errout"
    cids="$cids $last"
    sleep 0.05
done
: >"$TMP/cq.times"
for id in $cids; do
    wait_for 30 done_ "$A1" "$id" || not_ok "cq workflow $id: $(curl -s "$A1/api/workflow/$id" | jq -r .status)"
    curl -s "$A1/api/workflow/$id" | jq -r '.tasks[] | select(.taskType == "HTTP") | "\(.startTime) \(.endTime) \(.workerId)"' >>"$TMP/cq.times"
done
sort -n -o "$TMP/cq.times" "$TMP/cq.times"
overlaps=$(awk 'NR > 1 && $1 < end {n++} {end = $2} END {print n + 0}' "$TMP/cq.times")
[ "$(wc -l <"$TMP/cq.times")" = 4 ] && [ "$overlaps" = 0 ] &&
    ok "concurrency 1: four HTTP calls, none overlapping" ||
    not_ok "concurrency 1: $overlaps overlaps in $(tr '\n' ';' <"$TMP/cq.times")"

# ---- concurrency under REST pollers on both daemons: at most 2 at once ----
wf cp "w.fork { ref = 'f',
  $(for i in 1 2 3 4 5 6; do printf "{ w.simple { ref = 'c%d', name = 'cp', concurrency = 2 } },\n" $i; done)
}"
run_weft start "$TMP/cp.lua" --api "$A1"
expect_rc "start six tasks limited to two at once" 0
pid_=$last
wait_for 10 queued cp 6 || not_ok "the six cp tasks were not queued"
poller() { # API LOG: take a task, hold it 300 ms, complete it
    while :; do
        got=$(curl -s "$1/api/tasks/poll/batch/cp?workerid=p$$&count=1&timeout=200")
        [ "$(jq length <<<"$got" 2>/dev/null)" = 1 ] || continue
        echo "$(now_ms) 1" >>"$2"
        sleep 0.3
        echo "$(now_ms) -1" >>"$2"
        complete "$1" "$(jq -c '.[0]' <<<"$got")"
    done
}
for a in "$A1" "$A2" "$A1" "$A2"; do
    poller "$a" "$TMP/cp.$RANDOM.log" &
    POLLERS="$POLLERS $!"
done
wait_for 30 done_ "$A1" "$pid_" ||
    not_ok "cp workflow: $(curl -s "$A1/api/workflow/$pid_" | jq -r .status)"
for p in $POLLERS; do kill "$p" 2>/dev/null; done
POLLERS=
# the most held at once, by the pollers' own clocks: a slot is released only
# after the result is taken, so the server held each at least this long
max=$(cat "$TMP"/cp.*.log | sort -n -k1,1 -k2,2 | awk '{n += $2; if (n > m) m = n} END {print m + 0}')
took=$(cat "$TMP"/cp.*.log | awk '$2 == 1' | wc -l)
[ "$took" = 6 ] && [ "$max" -le 2 ] && [ "$max" -ge 1 ] &&
    ok "concurrency 2 with four pollers on two daemons: at most $max at once" ||
    not_ok "concurrency 2: $took taken, $max at once"

# the slots a name holds, in /metrics
wf mh "w.fork { ref = 'f',
  { w.simple { ref = 'a', name = 'mh', concurrency = 1 } },
  { w.simple { ref = 'b', name = 'mh', concurrency = 1 } }
}"
run_weft start "$TMP/mh.lua" --api "$A1"
mid=$last
wait_for 10 queued mh 2 || not_ok "the two mh tasks were not queued"
one=$(curl -s "$A2/api/tasks/poll/batch/mh?workerid=w&count=2&timeout=300")
curl -s "$A2/metrics" >"$TMP/metrics"
[ "$(jq length <<<"$one")" = 1 ] && grep -q '^weft_queue_slots_held{queue="mh",name="mh"} 1$' "$TMP/metrics" &&
    grep -q '^weft_queue_waiting{queue="mh"} 1$' "$TMP/metrics" &&
    ok "/metrics: weft_queue_slots_held 1 and weft_queue_waiting 1 for mh" ||
    not_ok "mh: polled $(jq length <<<"$one"); metrics: $(grep 'queue="mh"' "$TMP/metrics" | tr '\n' ';')"
complete "$A2" "$(jq -c '.[0]' <<<"$one")"
two=$(curl -s "$A2/api/tasks/poll/batch/mh?workerid=w&count=2&timeout=1000")
complete "$A2" "$(jq -c '.[0]' <<<"$two")"
wait_for 10 done_ "$A1" "$mid" || not_ok "mh workflow: $(curl -s "$A1/api/workflow/$mid" | jq -r .status)"

# ---- task domains: a task in a domain goes only to its domain's pollers ----
wf dq 'w.simple { ref = "t", name = "dq" }'
run_weft start "$TMP/dq.lua" --api "$A1" --domain "dq=blue"
expect_rc "weft start --domain dq=blue" 0
did=$last
wait_for 10 sh -c "curl -s '$A1/api/workflow/$did' | jq -e '.tasks[0].domain == \"blue\"'" &&
    ok "the task is in domain blue" || not_ok "task domain: $(curl -s "$A1/api/workflow/$did" | jq -c '.tasks[0].domain')"
got=$(curl -s "$A2/api/tasks/poll/batch/dq?workerid=plain&count=1&timeout=300")
[ "$got" = "[]" ] && ok "a poll without a domain gets nothing" || not_ok "a plain poll got $got"
got=$(curl -s "$A2/api/tasks/poll/batch/dq?workerid=red&count=1&timeout=300&domain=red")
[ "$got" = "[]" ] && ok "a poll of domain red gets nothing" || not_ok "a red poll got $got"
got=$(curl -s "$A2/api/tasks/poll/batch/dq?workerid=blue&count=1&timeout=1000&domain=blue")
[ "$(jq -r '.[0].workflowInstanceId' <<<"$got")" = "$did" ] && ok "a poll of domain blue gets it" ||
    not_ok "a blue poll got $got"
complete "$A2" "$(jq -c '.[0]' <<<"$got")"
wait_for 10 done_ "$A1" "$did" && ok "the blue workflow completed" || not_ok "blue workflow not completed"
# a list falls back: red has a worker polling now (just above), green has none
run_weft start "$TMP/dq.lua" --api "$A1" --domain "*=green,red,NO_DOMAIN"
rid2=$last
wait_for 10 sh -c "curl -s '$A1/api/workflow/$rid2' | jq -e '.tasks[0].domain == \"red\"'" &&
    ok "*=green,red,NO_DOMAIN: red, the first with a worker polling" ||
    not_ok "fallback domain: $(curl -s "$A1/api/workflow/$rid2" | jq -c '.tasks[0].domain')"
got=$(curl -s "$A2/api/tasks/poll/batch/dq?workerid=red&count=1&timeout=1000&domain=red")
complete "$A2" "$(jq -c '.[0]' <<<"$got")"
run_weft start "$TMP/dq.lua" --api "$A1" --domain "*=green,NO_DOMAIN"
nid=$last
got=$(curl -s "$A2/api/tasks/poll/batch/dq?workerid=plain&count=1&timeout=1000")
[ "$(jq -r '.[0].workflowInstanceId' <<<"$got")" = "$nid" ] &&
    ok "*=green,NO_DOMAIN with nobody on green: no domain" || not_ok "a plain poll got $got"
complete "$A2" "$(jq -c '.[0]' <<<"$got")"
run_weft start "$TMP/dq.lua" --api "$A1" --domain "dq=bad domain!"
expect_rc "a bad domain is refused" 2
code=$(curl -s -o "$TMP/body" -w '%{http_code}' "$A1/api/tasks/poll/dq?domain=a:b")
[ "$code" = 400 ] && ok "a poll with domain a:b: 400" || not_ok "poll domain a:b: $code $(cat "$TMP/body")"
# weftd's own workers: a LAMBDA in domain blue waits for a daemon serving blue
wf dl 'w.lambda { ref = "l", name = "lam", script = "return 7" }'
run_weft start "$TMP/dl.lua" --api "$A1" --domain "lam=blue"
lid=$last
sleep 1
[ "$(curl -s "$A1/api/workflow/$lid" | jq -r .status)" = RUNNING ] &&
    ok "no daemon serves blue: the LAMBDA waits" || not_ok "blue LAMBDA: $(curl -s "$A1/api/workflow/$lid" | jq -r .status)"
start_weftd db --workers 1 --domain blue --set lease=2s
wait_for 10 done_ "$A1" "$lid" && ok "weftd --domain blue ran it" ||
    not_ok "blue LAMBDA after weftd --domain blue: $(curl -s "$A1/api/workflow/$lid" | jq -r .status)"
kill_weftd db

# ---- review 12b: task domains on odd input ----
# a plain task whose name holds ':' must not share a domain's queue: "blue:dq"
# (a task named so, no domain) is not dq in domain blue
run_weft start "$TMP/dq.lua" --api "$A1" --domain "dq=blue"
cid=$last
wait_for 10 sh -c "curl -s '$A1/api/workflow/$cid' | jq -e '.tasks[0].domain == \"blue\"'" ||
    not_ok "rev12b: dq not queued in blue"
code=$(curl -s -o "$TMP/body" -w '%{http_code}' "$A2/api/tasks/poll/batch/blue:dq?workerid=plain&count=1&timeout=300")
got=$(cat "$TMP/body")
[ "$code" = 400 ] || [ "$got" = "[]" ] && ok "rev12b: a plain poll of task 'blue:dq' does not get dq's blue task ($code)" ||
    not_ok "rev12b: a plain poll of task 'blue:dq' got domain blue's dq task: $got"
wf colon 'w.simple { ref = "t", name = "blue:dq" }'
run_weft start "$TMP/colon.lua" --api "$A1"
expect_rc "a task named blue:dq is refused" 2
expect_err "and why" "a queue name may not hold ':'"
got=$(curl -s "$A2/api/tasks/poll/batch/dq?workerid=blue&count=1&timeout=300&domain=blue")
for t in $(jq -c '.[]' <<<"$got"); do complete "$A2" "$t"; done
# a valid list longer than resolve_domain's 512-byte copy: with nobody
# polling, the task goes to the last domain named, not a cut-off prefix
long=
for c in a b c d e f g h i; do long="$long${long:+,}$(printf "$c%.0s" $(seq 60))"; done
code=$(curl -s -o "$TMP/body" -w '%{http_code}' -X POST "$A1/api/workflow" -H 'Content-Type: application/json' \
    -d "{\"name\":\"x\",\"taskToDomain\":{\"tl\":\"$long\"},\"workflowDef\":{\"name\":\"tl\",\"tasks\":[{\"name\":\"tl\",\"taskReferenceName\":\"t\",\"type\":\"SIMPLE\"}]}}")
if [ "$code" = 400 ]; then
    ok "rev12b: a 548-byte domain list is refused"
else
    tid=$(cat "$TMP/body")
    wait_for 10 sh -c "curl -s '$A1/api/workflow/$tid' | jq -e '.tasks[0].domain != null'" >/dev/null
    dom=$(curl -s "$A1/api/workflow/$tid" | jq -r '.tasks[0].domain')
    case ",$long," in
    *",$dom,"*) ok "rev12b: a long domain list: the task's domain is one of those named" ;;
    *) not_ok "rev12b: a long domain list put the task in domain '$dom' (${#dom} bytes), which nobody named" ;;
    esac
fi
# a queue name plus domain over the store's 127 bytes: the start is refused
# or the task fails with a reason, the workflow is not left RUNNING with
# nothing queued
n100=$(printf 'n%.0s' $(seq 100))
d64=$(printf 'd%.0s' $(seq 64))
code=$(curl -s -o "$TMP/body" -w '%{http_code}' -X POST "$A1/api/workflow" -H 'Content-Type: application/json' \
    -d "{\"name\":\"x\",\"taskToDomain\":{\"$n100\":\"$d64\"},\"workflowDef\":{\"name\":\"ol\",\"tasks\":[{\"name\":\"olfirst\",\"taskReferenceName\":\"a\",\"type\":\"SIMPLE\"},{\"name\":\"$n100\",\"taskReferenceName\":\"b\",\"type\":\"SIMPLE\"}]}}")
if [ "$code" = 400 ]; then
    ok "rev12b: a domain queue over the name limit is refused at the start"
else
    oid=$(cat "$TMP/body")
    got=$(curl -s "$A2/api/tasks/poll/batch/olfirst?workerid=w&count=1&timeout=2000")
    complete "$A2" "$(jq -c '.[0]' <<<"$got")"
    sleep 3
    st=$(curl -s "$A1/api/workflow/$oid" | jq -c '{status, n: (.tasks | length)}')
    case $st in
    *'"FAILED"'* | *'"n":2'*) ok "rev12b: a domain queue over the name limit: $st" ;;
    *) not_ok "rev12b: a domain queue over the name limit leaves the workflow $st, nothing queued (weftd retries the save forever)" ;;
    esac
    curl -s -o /dev/null -X DELETE "$A1/api/workflow/$oid"
fi
# polls of made-up domains leave no keys behind for good (unauthenticated
# callers could grow Redis without bound)
for i in 1 2 3 4 5 6 7 8 9 10; do
    curl -s -o /dev/null "$A1/api/tasks/poll/nosuchq?domain=rnd$i"
done
left=0
for k in $(redis-cli -p "$REDIS_PORT" --scan --pattern "${WEFT_KEY_PREFIX}{q:rnd*:nosuchq}*"); do
    [ "$(redis-cli -p "$REDIS_PORT" PTTL "$k")" = -1 ] && left=$((left + 1))
done
[ "$left" = 0 ] && ok "rev12b: polls of 10 made-up domains keep no key for good" ||
    not_ok "rev12b: polls of 10 made-up domains left $left keys without a TTL"
# a domain with a space passes the check (trimmed) but is used untrimmed
code=$(curl -s -o "$TMP/body" -w '%{http_code}' "$A1/api/queue/dq?domain=%20blue")
[ "$code" = 400 ] || [ "$(jq -r .queue "$TMP/body")" = blue:dq ] &&
    ok "rev12b: ?domain=%20blue is refused or means blue" ||
    not_ok "rev12b: ?domain=%20blue is queue '$(jq -r .queue "$TMP/body")' ($code): a poller configured so never gets blue's tasks"
# weft status: a LAMBDA queued in a domain no daemon serves says so (the
# plain LAMBDA queue is served by d1/d2, not nobody:LAMBDA)
run_weft start "$TMP/dl.lua" --api "$A1" --domain "lam=nobody"
uid=$last
sleep 1
run_weft status "$uid" -o json
[ "$(jq -r '.tasks[0].reasonForIncompletion // "" | test("serve")' <<<"$out")" = true ] &&
    ok "rev12b: weft status: the LAMBDA in domain nobody is unserved" ||
    not_ok "rev12b: weft status of a LAMBDA in domain nobody: $(jq -c '{unservedTaskTypes, r: .tasks[0].reasonForIncompletion}' <<<"$out")"
curl -s -o /dev/null -X DELETE "$A1/api/workflow/$uid"

# GET /api/workflow of 20 queued tasks on a queue without controls: no
# store call per task (be461ff's op_say_waiting asks each member's place,
# one round trip of 4 commands per task)
br=$(for i in $(seq 20); do printf '[{"name":"fk","taskReferenceName":"f%d","type":"SIMPLE"}],' "$i"; done)
fid=$(curl -s -X POST "$A1/api/workflow" -H 'Content-Type: application/json' -d "{\"name\":\"x\",\"workflowDef\":{\"name\":\"fk\",\"tasks\":[{\"name\":\"fork\",\"taskReferenceName\":\"fork\",\"type\":\"FORK_JOIN\",\"forkTasks\":[${br%,}]},{\"name\":\"join\",\"taskReferenceName\":\"join\",\"type\":\"JOIN\"}]}}")
wait_for 10 queued fk 20 || not_ok "rev12b: the 20 fk tasks were not queued"
zs() { redis-cli -p "$REDIS_PORT" INFO commandstats | tr -d '\r' | sed -n 's/^cmdstat_zscore:calls=\([0-9]*\),.*/\1/p'; }
z0=$(zs)
curl -s -o /dev/null "$A1/api/workflow/$fid"
z1=$(zs)
[ $(( ${z1:-0} - ${z0:-0} )) -lt 20 ] && ok "rev12b: GET of 20 queued plain tasks: $(( ${z1:-0} - ${z0:-0} )) ZSCOREs" ||
    not_ok "rev12b: GET of 20 queued plain tasks (no controls) made $(( ${z1:-0} - ${z0:-0} )) ZSCOREs, 20 round trips"
curl -s -o /dev/null -X DELETE "$A1/api/workflow/$fid"

# "*" (Conductor's: every task *a worker polls*; system tasks are left out)
# puts a timed WAIT in blue:WAIT, which no weftd without --domain blue serves:
# the workflow of a client using "*" for its workers never ends
wid=$(curl -s -X POST "$A1/api/workflow" -H 'Content-Type: application/json' \
    -d '{"name":"x","taskToDomain":{"*":"blue"},"workflowDef":{"name":"ws","tasks":[{"name":"wt","taskReferenceName":"w","type":"WAIT","inputParameters":{"duration":"1 seconds"}}]}}')
wait_for 10 done_ "$A1" "$wid" && ok "rev12b: *=blue: a 1 s WAIT completes on plain daemons" ||
    not_ok "rev12b: *=blue: a 1 s WAIT is $(curl -s "$A1/api/workflow/$wid" | jq -c '[.status, .tasks[0].status, .tasks[0].domain]') after 10 s (queued in blue:WAIT)"
curl -s -o /dev/null -X DELETE "$A1/api/workflow/$wid"

# a fallback list is looked up per task and per domain, one HGET round trip
# each, inside the decision (the decider calls the store): a fork of 20 with
# "*=a,b,c" and nobody polling makes 60
br=$(for i in $(seq 20); do printf '[{"name":"fk2","taskReferenceName":"f%d","type":"SIMPLE"}],' "$i"; done)
hg() { redis-cli -p "$REDIS_PORT" INFO commandstats | tr -d '\r' | sed -n 's/^cmdstat_hget:calls=\([0-9]*\),.*/\1/p'; }
h0=$(hg)
fid=$(curl -s -X POST "$A1/api/workflow" -H 'Content-Type: application/json' -d "{\"name\":\"x\",\"taskToDomain\":{\"*\":\"a,b,c\"},\"workflowDef\":{\"name\":\"fk2\",\"tasks\":[{\"name\":\"fork\",\"taskReferenceName\":\"fork\",\"type\":\"FORK_JOIN\",\"forkTasks\":[${br%,}]},{\"name\":\"join\",\"taskReferenceName\":\"join\",\"type\":\"JOIN\"}]}}")
wait_for 10 queued c:fk2 20 || not_ok "rev12b: the 20 fk2 tasks were not queued in c"
h1=$(hg)
[ $(( ${h1:-0} - ${h0:-0} )) -lt 20 ] && ok "rev12b: *=a,b,c over 20 forked tasks: $(( ${h1:-0} - ${h0:-0} )) HGETs" ||
    not_ok "rev12b: *=a,b,c over 20 forked tasks: $(( ${h1:-0} - ${h0:-0} )) HGETs (one round trip each, in the decision)"
curl -s -o /dev/null -X DELETE "$A1/api/workflow/$fid"

# ---- a slot held by a daemon killed with SIGKILL is freed once ----
kill_weftd d2
wf kq "w.fork { ref = 'f',
  { w.http { ref = 'k1', name = 'killq', uri = '$BASE/slow?ms=1500', concurrency = 1 } },
  { w.http { ref = 'k2', name = 'killq', uri = '$BASE/slow?ms=1500', concurrency = 1 } }
}"
run_weft start "$TMP/kq.lua" --api "$A1"
expect_rc "start two calls limited to one, on d1 alone" 0
kid=$last
# a call runs within a claim (its IN_PROGRESS is saved with its result):
# the slot it holds is what shows it started
wait_for 10 sh -c "[ \"\$(redis-cli -p $REDIS_PORT HLEN '${WEFT_KEY_PREFIX}{q:HTTP}:held')\" = 1 ]" ||
    not_ok "no killq call started"
kill_weftd d1 KILL
ok "d1 killed while it held killq's only slot"
start_weftd d3 --workers 2 --api 127.0.0.1:0 --set lease=2s
A3="http://$(api_of d3)" || exit 1
wait_for 30 done_ "$A3" "$kid" &&
    ok "d3 finished both calls after d1's lease was reaped" ||
    not_ok "kq workflow: $(curl -s "$A3/api/workflow/$kid" | jq -c '[.status, [.tasks[] | .status]]')"
held=$(rcli HGET "${WEFT_KEY_PREFIX}{q:HTTP}:lim" c:killq)
[ "${held:-0}" = 0 ] && ok "killq's slots all free again (freed once: $held)" ||
    not_ok "killq's slot count is $held after both calls"
stop_weftd_clean d3
finish
