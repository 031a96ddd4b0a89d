#!/bin/bash
# Finding runs through weftd's REST API against a real redis-server (and,
# from cluster.sh, a Redis Cluster): the execution index behind
# /api/workflow/search and search-v2 (Conductor's query subset, freeText,
# sort, pages), /running/{name}, /{name}/correlated/{id}; a task by its id;
# task logs (TaskResult logs and POST /log: kept, capped, cut, secrets
# masked); the index following retries and trimmed with the retention;
# unknown routes.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/redis_lib.sh"
command -v curl >/dev/null 2>&1 || { echo "curl not installed: skipping"; exit 77; }
command -v jq >/dev/null 2>&1 || { echo "jq not installed: skipping"; exit 77; }
SECRET='Pa55-Search-91c2d'
start_redis
printf '%s\n' "$SECRET" | "$WEFT" secret set LOGTOKEN >/dev/null || { echo "weft secret set failed"; exit 1; }
start_weftd d1 --workers 2 --api 127.0.0.1:0
API="http://$(api_of d1)" || exit 1

# get PATH: $code and $body
get() { code=$(curl -s -o "$TMP/body" -w '%{http_code}' "$API$1"); body=$(cat "$TMP/body"); }
post() { code=$(curl -s -o "$TMP/body" -w '%{http_code}' -X POST "$API$1" --data-binary "$2"); body=$(cat "$TMP/body"); }
expect_code() { # NAME CODE
    if [ "$code" = "$2" ]; then ok "$1: $2"; else
        not_ok "$1: HTTP $code, wanted $2"; printf '# body: %.400s\n' "$body"; fi
}
expect_eq() { # NAME GOT WANTED
    if [ "$2" = "$3" ]; then ok "$1: $3"; else not_ok "$1: got '$2', wanted '$3'"; fi
}
expect_body() { # NAME TEXT
    case $body in *"$2"*) ok "$1: says '$2'" ;; *) not_ok "$1: body lacks '$2'"; printf '# body: %.400s\n' "$body" ;; esac
}
# search QUERY-STRING: GET /api/workflow/search?QUERY-STRING (already URL-encoded)
search() { get "/api/workflow/search?$1"; }
enc() { jq -rn --arg v "$1" '$v|@uri'; }
# wait_hits QUERY-STRING N: until the search counts N (the index follows a
# save by its steps, a moment after)
wait_hits() {
    end=$(( $(date +%s) + 10 ))
    while :; do
        search "$1"
        [ "$(jq -r .totalHits <<<"$body")" = "$2" ] && return 0
        [ "$(date +%s)" -ge "$end" ] && return 1
        sleep 0.1
    done
}

cat >"$TMP/good.lua" <<'L'
local w = require "weft"
return w.workflow { name = "s_good", version = 2, output = { r = "${l.output.result}" },
  w.lambda { ref = "l", script = [[ return 1 ]] } }
L
cat >"$TMP/bad.lua" <<'L'
local w = require "weft"
return w.workflow { name = "s_bad",
  w.lambda { ref = "explode", script = [[ error("kaboom") ]] } }
L
cat >"$TMP/ext.lua" <<'L'
local w = require "weft"
return w.workflow { name = "s_ext",
  w.simple { ref = "job", name = "s_job", input = { token = "${secrets.LOGTOKEN}" } } }
L

t0=$(date +%s%3N)
good=
for i in 1 2 3; do
    run_weft start "$TMP/good.lua" --correlation-id "order-$i"
    good="$good $last"
done
sleep 0.05
t1=$(date +%s%3N)
run_weft start "$TMP/bad.lua" --correlation-id "order-9"
bad1=$last
run_weft start "$TMP/bad.lua"
bad2=$last
run_weft start "$TMP/ext.lua" --correlation-id "shared id"
ext1=$last
run_weft start "$TMP/ext.lua" --correlation-id "shared id"
ext2=$last
for id in $good; do wait_status "$id" COMPLETED || not_ok "$id did not complete"; done
wait_status "$bad1" FAILED && wait_status "$bad2" FAILED && ok "two runs failed" || not_ok "runs did not fail"

# ---- search: Conductor's query subset ----
wait_hits "query=$(enc 'status IN (FAILED)')" 2 && ok "status IN (FAILED): totalHits 2" ||
    not_ok "status IN (FAILED): $body"
expect_eq "the failed runs, newest first" "$(jq -r '[.results[].workflowId]|join(" ")' <<<"$body")" "$bad2 $bad1"
expect_eq "a FAILED summary: status" "$(jq -r '.results[0].status' <<<"$body")" FAILED
expect_eq "a FAILED summary: its failed task" "$(jq -r '.results[0].failedReferenceTaskNames' <<<"$body")" explode
case $(jq -r '.results[0].reasonForIncompletion' <<<"$body") in *kaboom*) ok "a FAILED summary: its reason" ;; *)
    not_ok "reason: $body" ;; esac
for f in workflowType version workflowId startTime updateTime endTime status input output executionTime \
    failedTaskNames priority; do
    [ "$(jq "(.results[0] | has(\"$f\"))" <<<"$body")" = true ] && ok "WorkflowSummary has $f" ||
        not_ok "WorkflowSummary lacks $f"
done
case $(jq -r '.results[0].startTime' <<<"$body") in 20[0-9][0-9]-[01][0-9]-[0-3][0-9]T*Z) ok "startTime as Conductor writes it" ;; *)
    not_ok "startTime $(jq -r '.results[0].startTime' <<<"$body")" ;; esac

wait_hits "query=$(enc "workflowType IN (s_good) AND status = 'COMPLETED'")" 3 &&
    ok "workflowType IN (s_good) AND status = COMPLETED: 3" || not_ok "s_good COMPLETED: $body"
expect_eq "their version" "$(jq -r '[.results[].version]|unique|join(",")' <<<"$body")" 2
expect_eq "their output (a JSON text)" "$(jq -r '.results[0].output' <<<"$body")" '{"r":1}'
search "query=$(enc 'workflowType IN (s_good, s_bad)')"
expect_eq "workflowType IN (two names)" "$(jq -r .totalHits <<<"$body")" 5
search "query=$(enc "correlationId = 'order-2'")"
expect_eq "correlationId = 'order-2'" "$(jq -r '[.totalHits, .results[0].correlationId]|join(" ")' <<<"$body")" "1 order-2"
search "query=$(enc "correlationId='shared id' AND status IN (RUNNING)")"
expect_eq "a correlation id with a space, and a status" "$(jq -r .totalHits <<<"$body")" 2
search "query=$(enc 'version = 2')"
expect_eq "version = 2" "$(jq -r .totalHits <<<"$body")" 3
search "freeText=$bad1"
expect_eq "freeText: a run id" "$(jq -r '[.totalHits, .results[0].workflowId]|join(" ")' <<<"$body")" "1 $bad1"
search "freeText=order-9"
expect_eq "freeText: a correlation id" "$(jq -r '.results[0].workflowId' <<<"$body")" "$bad1"
search "freeText=*&size=0"
expect_eq "freeText=* (any), size 0: only the count" "$(jq -c '[.totalHits, .results]' <<<"$body")" '[7,[]]'
search "query=$(enc "startTime > $t1")"
expect_eq "startTime > (after the good ones)" "$(jq -r .totalHits <<<"$body")" 4
search "query=$(enc "startTime < $t1 AND startTime >= $t0")"
expect_eq "startTime between" "$(jq -r .totalHits <<<"$body")" 3
search "query=$(enc "startTime > $t1 AND workflowType = s_bad AND status IN (FAILED, RUNNING)")"
expect_eq "three filters" "$(jq -r .totalHits <<<"$body")" 2

# sort and pages
search "sort=startTime:ASC&size=100"
asc=$(jq -r '[.results[].workflowId]|join(" ")' <<<"$body")
search "sort=startTime:DESC&size=100"
desc=$(jq -r '[.results[].workflowId]|reverse|join(" ")' <<<"$body")
expect_eq "ASC is DESC reversed" "$asc" "$desc"
search "sort=startTime:ASC&start=2&size=3"
expect_eq "a page: start 2, size 3" "$(jq -r '[.results[].workflowId]|join(" ")' <<<"$body")" "$(cut -d' ' -f3-5 <<<"$asc")"
expect_eq "a page counts them all" "$(jq -r .totalHits <<<"$body")" 7
search "sort=endTime:ASC&query=$(enc 'status IN (COMPLETED, FAILED)')"
ends=$(jq -r '[.results[].endTime]|join(" ")' <<<"$body")
expect_eq "sort=endTime:ASC" "$ends" "$(tr ' ' '\n' <<<"$ends" | sort | tr '\n' ' ' | sed 's/ $//')"

# search-v2: Workflow objects without their tasks
get "/api/workflow/search-v2?query=$(enc 'status IN (FAILED)')"
expect_code "search-v2" 200
expect_eq "search-v2: Workflow objects, no tasks" "$(jq -c '[.totalHits, (.results|map(.status)|unique), (.results|map(.tasks|length)|add)]' <<<"$body")" '[2,["FAILED"],0]'

# bad queries: 400 naming what is wrong
search "query=$(enc 'colour = red')"
expect_code "an unknown field" 400
expect_body "an unknown field" "unknown field 'colour' at position 1"
search "query=$(enc "correlationId = 'open")"
expect_code "an unclosed quote" 400
expect_body "an unclosed quote" "not closed"
search "query=$(enc "workflowType IN ($(seq -s, 1 33))")"
expect_code "an IN list of 33 values" 400
expect_body "an IN list of 33 values" "lists more than 32 values"
search "query=$(enc 'status IN (DONE)')"
expect_code "an unknown status" 400
expect_body "an unknown status" "status 'DONE' is none of"
search "query=$(enc 'status = FAILED OR status = RUNNING')"
expect_code "OR" 400
expect_body "OR" "expected AND at position 17, not 'OR'"
search "query=$(enc 'startTime > yesterday')"
expect_code "a time that is no number" 400
search "query=$(enc 'startTime <= 9223372036854775807')"
expect_code "a time past the year 33658" 400
search "query=$(enc 'status IN (FAILED, FAILED)')"
expect_eq "a status given twice counts once" "$(jq -r .totalHits <<<"$body")" 2
search "size=1001"
expect_code "size over 1000" 400
search "start=9500&size=1000"
expect_code "start + size over 10000" 400
expect_body "start + size over 10000" "at most 10000"
search "sort=workflowId:ASC"
expect_code "a sort field not kept" 400

# ---- running and correlated ----
get "/api/workflow/running/s_ext"
expect_eq "running/s_ext: both" "$(jq -r 'sort|join(" ")' <<<"$body")" "$(tr ' ' '\n' <<<"$ext1 $ext2" | sort | tr '\n' ' ' | sed 's/ $//')"
get "/api/workflow/running/s_good"
expect_eq "running/s_good: none (they ended)" "$body" "[]"
if [ -z "${WEFT_TEST_CLUSTER:-}" ]; then
    # 1001 runs not ended (their hash's fields and decider-queue entries, as a
    # create writes them): running/ answers the newest 1000
    for i in $(seq 1000 2000); do
        printf 'HSET %s{fake-%d} status RUNNING ix %d:1:6:s_many\n' "$WEFT_KEY_PREFIX" "$i" "$i"
        printf 'ZADD %s{dq}:due 9999999999999 fake-%d\n' "$WEFT_KEY_PREFIX" "$i"
    done | rcli >/dev/null
    get "/api/workflow/running/s_many"
    expect_eq "running/: at most 1000, newest first" "$(jq -r '[length, .[0], .[999]]|join(" ")' <<<"$body")" \
        "1000 fake-2000 fake-1001"
    for i in $(seq 1000 2000); do
        printf 'DEL %s{fake-%d}\nZREM %s{dq}:due fake-%d\n' "$WEFT_KEY_PREFIX" "$i" "$WEFT_KEY_PREFIX" "$i"
    done | rcli >/dev/null
fi
get "/api/workflow/running/s_good?version=7"
expect_eq "running, another version" "$body" "[]"
get "/api/workflow/s_ext/correlated/$(enc 'shared id')"
expect_eq "correlated: both, without tasks" "$(jq -c '[length, (map(.tasks|length)|add)]' <<<"$body")" '[2,0]'
get "/api/workflow/s_ext/correlated/$(enc 'shared id')?includeTasks=true"
expect_eq "correlated with their tasks" "$(jq -c 'map(.tasks|length)' <<<"$body")" '[1,1]'
get "/api/workflow/s_good/correlated/order-1"
expect_eq "correlated: ended ones left out" "$body" "[]"
get "/api/workflow/s_good/correlated/order-1?includeClosed=true"
expect_eq "correlated, includeClosed=true" "$(jq -r '.[0].correlationId' <<<"$body")" order-1

# ---- a task by its id, and its log ----
task=$(curl -s "$API/api/tasks/poll/s_job?workerid=w1")
tid=$(jq -r .taskId <<<"$task")
twf=$(jq -r .workflowInstanceId <<<"$task")
case $tid in "$twf".????????????????) ok "a task id carries its workflow's" ;; *) not_ok "task id $tid" ;; esac
get "/api/tasks/$tid"
expect_code "GET /api/tasks/{taskId}" 200
expect_eq "the task" "$(jq -r '[.taskId, .workflowInstanceId, .status, .referenceTaskName]|join(" ")' <<<"$body")" "$tid $twf IN_PROGRESS job"
get "/api/tasks/not-a-task-id"
expect_code "a task id of another form" 404
expect_body "a task id of another form" "no task not-a-task-id"
get "/api/tasks/$twf.0123456789abcdef"
expect_code "no such task in its workflow" 404
expect_body "no such task in its workflow" "no task $twf.0123456789abcdef in workflow $twf"
get "/api/tasks/00000000-0000-4000-8000-000000000000.0123456789abcdef"
expect_code "a task of no workflow" 404
expect_body "a task of no workflow" "is not stored"

post "/api/tasks/$tid/log" "raw text, with $SECRET inside"
expect_code "POST /log: raw text" 200
post "/api/tasks/$tid/log" '"a JSON string"'
expect_code "POST /log: a JSON string" 200
post "/api/tasks/$tid/log" '{"level":"info"}'
expect_code "POST /log: text that looks like JSON is text" 200
post "/api/tasks/$tid/log" ''
expect_code "POST /log: nothing" 400
post "/api/tasks/$twf.0123456789abcdef/log" 'x'
expect_code "POST /log to no such task" 404
long=$(head -c 6000 /dev/zero | tr '\0' 'y')
post "/api/tasks/$tid/log" "$long"
expect_code "POST /log: a 6000-byte line" 200
post /api/tasks "{\"workflowInstanceId\":\"$twf\",\"taskId\":\"$tid\",\"status\":\"IN_PROGRESS\",\"callbackAfterSeconds\":600,
  \"logs\":[{\"log\":\"from the result $SECRET\",\"createdTime\":1700000000000},\"a plain one\"]}"
expect_code "a TaskResult with logs" 200
post /api/tasks "{\"workflowInstanceId\":\"$twf\",\"taskId\":\"$tid\",\"status\":\"IN_PROGRESS\",\"logs\":[7]}"
expect_code "a TaskResult whose logs hold a number" 400
expect_body "a TaskResult whose logs hold a number" "logs[0]"
get "/api/tasks/$tid/log"
expect_code "GET /log" 200
expect_eq "the log: in order" "$(jq -r '.[0].log, .[1].log, .[2].log, .[4].log, .[5].log' <<<"$body" | tr '\n' '|')" \
    'raw text, with *** inside|a JSON string|{"level":"info"}|from the result ***|a plain one|'
expect_eq "the log: TaskExecLog fields" "$(jq -c '.[4] | [.taskId == "'"$tid"'", .createdTime]' <<<"$body")" '[true,1700000000000]'
expect_eq "a long line cut at 4096 bytes" "$(jq -r '.[3].log | [length, endswith("...")] | join(" ")' <<<"$body")" "4096 true"
case $body in *"${SECRET:0:6}"*) not_ok "the log holds the secret" ;; *) ok "the log holds no secret" ;; esac
for i in $(seq 1 210); do printf '"line %d"\n' "$i"; done | while read -r l; do
    curl -s -o /dev/null -X POST "$API/api/tasks/$tid/log" --data-binary "$l"
done
get "/api/tasks/$tid/log"
expect_eq "the newest 200 lines kept" "$(jq -r '[length, .[0].log, .[199].log]|join(" ")' <<<"$body")" "200 line 11 line 210"
post "/api/tasks/$tid/log" '"quoted" and more'
get "/api/tasks/$tid/log"
expect_eq "a body that only begins as a JSON string is text" "$(jq -r '.[199].log' <<<"$body")" '"quoted" and more'
# a result with more logs than a task keeps: each checked, the newest kept
post /api/tasks "{\"workflowInstanceId\":\"$twf\",\"taskId\":\"$tid\",\"status\":\"IN_PROGRESS\",
  \"logs\":[7$(for i in $(seq 1 250); do printf ',"r%d"' "$i"; done)]}"
expect_code "250 logs, the first a number" 400
expect_body "250 logs, the first a number" "logs[0]"
post /api/tasks "{\"workflowInstanceId\":\"$twf\",\"taskId\":\"$tid\",\"status\":\"IN_PROGRESS\",
  \"logs\":[\"r0\"$(for i in $(seq 1 250); do printf ',"r%d"' "$i"; done)]}"
expect_code "a result with 251 logs" 200
get "/api/tasks/$tid/log"
expect_eq "its newest 200 kept" "$(jq -r '[length, .[0].log, .[199].log]|join(" ")' <<<"$body")" "200 r51 r250"
post /api/tasks "{\"workflowInstanceId\":\"$twf\",\"taskId\":\"$tid\",\"status\":\"COMPLETED\"}"
expect_code "complete the task" 200
wait_status "$twf" COMPLETED && ok "its run completed" || not_ok "its run did not complete"
log_key="${WEFT_KEY_PREFIX}{$twf}:log"
ttl=$(rcli PTTL "$log_key")
[ "$ttl" -gt 0 ] 2>/dev/null && ok "the log expires with its run (PTTL $ttl)" || not_ok "the log's PTTL: $ttl"

# ---- the index follows a run made to run again ----
post "/api/workflow/$bad1/retry" ''
expect_code "retry a failed run" 200
wait_status "$bad1" FAILED && ok "it failed again" || not_ok "the retried run did not fail again"
wait_hits "query=$(enc 'status IN (FAILED)')" 2 && ok "still 2 FAILED in the index" || not_ok "FAILED after a retry: $body"
other=$ext1
[ "$twf" = "$ext1" ] && other=$ext2 # (which of the two a poll hands out first is the queue's business)
search "query=$(enc 'status IN (RUNNING)')"
expect_eq "and only s_ext's other run RUNNING" "$(jq -r '[.results[].workflowId]|join(" ")' <<<"$body")" "$other"

# ---- weft list: over Redis and through the API ----
for via in redis api; do
    set -- ; [ $via = api ] && set -- --api "$API"
    COLUMNS=200 run_weft list --status FAILED "$@"
    expect_rc "weft list --status FAILED ($via)" 0
    case $out in *"$bad1"*"s_bad v1"*FAILED*kaboom*) ok "weft list ($via): a row per run, with its reason" ;; *)
        not_ok "weft list ($via): $out" ;; esac
    expect_eq "weft list ($via): how many of how many" "$(tail -n 1 <<<"$out")" "2 of 2 runs"
    case $(head -n 1 <<<"$out") in ID*WORKFLOW*STATUS*STARTED*TOOK*CORRELATION*REASON) ok "weft list ($via): its header" ;; *)
        not_ok "header: $(head -n 1 <<<"$out")" ;; esac
    run_weft list --name s_good,s_ext --limit 2 -o json "$@"
    expect_eq "weft list --name a,b --limit 2 -o json ($via)" "$(jq -c '[.totalHits, (.results|length)]' <<<"$out")" '[5,2]'
    run_weft list --since 1h --correlation-id order-2 "$@"
    expect_eq "weft list --since 1h --correlation-id ($via)" "$(tail -n 1 <<<"$out")" "1 of 1 run"
    run_weft list --status DONE "$@"
    expect_rc "weft list --status DONE ($via)" 2
    expect_err "weft list --status DONE ($via)" "--status DONE: use RUNNING"
done
run_weft list --limit 0
expect_rc "weft list --limit 0" 2
run_weft list --limit 1001
expect_rc "weft list --limit 1001" 2
expect_err "weft list --limit 1001" "from 1 to 1000"
run_weft list --since soon
expect_rc "weft list --since soon" 2
expect_err "weft list --since soon" "a duration such as"
run_weft list --status FAILED --name nothing_like_it
expect_eq "weft list: none" "$out" "(no runs)"
run_weft list --redis redis://127.0.0.1:1
expect_rc "weft list, Redis unreachable" 4
# a correlation id of 5000 bytes that are no UTF-8 (0x80): cut to its column
# like any other, within the buffer (found by helper-23: fit() copied them unbounded)
run_weft start "$TMP/good.lua" --correlation-id "$(head -c 5000 /dev/zero | tr '\0' '\200')"
odd=$last
wait_status "$odd" COMPLETED || not_ok "$odd did not complete"
run_weft list --limit 1000
expect_rc "weft list with a 5000-byte correlation id of 0x80 bytes" 0
case $out in *"$odd"*) ok "weft list shows that run" ;; *) not_ok "weft list: $out" ;; esac
run_weft list --limit 1000 --api "$API"
expect_rc "the same through the API" 0

# ---- unknown routes and methods ----
get "/api/nothing/here"
expect_code "an unknown route" 404
expect_body "an unknown route" "no such route: GET /api/nothing/here"
code=$(curl -s -o "$TMP/body" -w '%{http_code}' -X PUT "$API/api/workflow/search")
body=$(cat "$TMP/body")
expect_code "PUT on search" 405
expect_body "PUT on search" "allowed: GET"

stop_weftd_clean d1

# ---- the retention trims the index ----
if [ -z "${WEFT_TEST_CLUSTER:-}" ]; then
    export WEFT_KEY_PREFIX="r$$:"
    start_weftd d2 --workers 2 --api 127.0.0.1:0 --set retention=2s
    API="http://$(api_of d2)" || exit 1
    run_weft start "$TMP/good.lua"
    gone=$last
    wait_status "$gone" COMPLETED || not_ok "$gone did not complete"
    wait_hits "freeText=$gone" 1 && ok "a run kept 2 s is found" || not_ok "not found: $body"
    sleep 2.5
    search "freeText=$gone"
    expect_eq "after its retention it is gone from the index" "$(jq -r .totalHits <<<"$body")" 0
    expect_eq "and no index key remains" "$(rcli --scan --pattern "${WEFT_KEY_PREFIX}*ix*" | while read -r k; do
        rcli EXISTS "$k"; done | grep -c 1)" 0
    stop_weftd_clean d2
fi
finish
