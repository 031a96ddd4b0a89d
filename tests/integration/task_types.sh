#!/bin/bash
# Nothing waits forever by accident. A weftd that loads no task type does not
# start (and names every directory it searched); /health says what a daemon
# serves and /ready is ready only once the store answers. A task type no
# plugin provides, no live weftd serves and no TaskDef names is refused when
# a definition is registered or started: over REST (400), and by weft start,
# register and validate (exit 2), naming the type, the ref and the known
# types. SIMPLE tasks are for external workers and always accepted.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/redis_lib.sh"
SLEEP_PLUGINS="$BUILD/tests/plugins/sleep"

# 1. no plugins: weftd exits non-zero at once, naming what it searched
mkdir -p "$TMP/empty1" "$TMP/empty2"
start_redis
timeout 20 "$WEFTD" --id none --no-api --plugin-path "$TMP/empty1:$TMP/empty2" >"$TMP/none.log" 2>&1
rc=$?
[ "$rc" = 2 ] && ok "weftd without plugins exits 2" ||
    not_ok "weftd without plugins: exit $rc (124: still running after 20 s)"
for d in "$TMP/empty1" "$TMP/empty2"; do
    grep -q "no task type.*$d" "$TMP/none.log" && ok "its message names $d" ||
        { not_ok "its message lacks $d"; sed 's/^/# /' "$TMP/none.log" | tail -n 5; }
done
grep -q 'started:' "$TMP/none.log" && not_ok "it said started" || ok "it never said started"
# external types alone and no API to hand them out: nothing to serve either
mkdir -p "$TMP/simple_only"
cp "$BUILD/plugins/simple/.libs/simple.so" "$TMP/simple_only/"
timeout 20 "$WEFTD" --id simple --no-api --plugin-path "$TMP/simple_only" >"$TMP/simple.log" 2>&1
rc=$?
[ "$rc" = 2 ] && grep -q "nothing to serve" "$TMP/simple.log" && ok "SIMPLE alone without the API: exit 2, nothing to serve" ||
    { not_ok "SIMPLE alone without the API: exit $rc"; tail -n 3 "$TMP/simple.log" | sed 's/^/# /'; }

# 2. /health names the types served; /ready waits for the store
start_weftd d1 --workers 2 --api 127.0.0.1:0
API="http://$(api_of d1)" || exit 1
h=$(curl -s "$API/health")
for t in LAMBDA HTTP WAIT SIMPLE; do
    echo "$h" | jq -e --arg t "$t" '.serves | index($t)' >/dev/null && ok "/health serves $t" ||
        not_ok "/health lacks $t: $h"
done
echo "$h" | jq -e '.serves | index("DECISION")' >/dev/null && ok "/health lists the control flow it decides" ||
    not_ok "/health lacks DECISION: $h"
code=$(curl -s -o "$TMP/ready" -w '%{http_code}' "$API/ready")
[ "$code" = 200 ] && jq -e '.ready == true' "$TMP/ready" >/dev/null && ok "/ready: 200 ready" ||
    not_ok "/ready: $code $(cat "$TMP/ready")"
kill -STOP "$REDIS_PID"
code=$(curl -s -m 30 -o "$TMP/ready" -w '%{http_code}' "$API/ready")
kill -CONT "$REDIS_PID"
[ "$code" = 503 ] && jq -e '.ready == false and (.reason | test("store"))' "$TMP/ready" >/dev/null &&
    ok "/ready: 503 while the store does not answer" || not_ok "/ready, Redis stalled: $code $(cat "$TMP/ready")"
wait_for 20 sh -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' '$API/ready')\" = 200 ]" &&
    ok "/ready: 200 again once it answers" || not_ok "/ready stays $(curl -s "$API/ready")"

# 3. unknown types over REST: start and register refused, naming type, ref and known types
expect_400() { # NAME METHOD PATH BODY TEXT...
    name=$1 m=$2 p=$3 b=$4; shift 4
    code=$(curl -s -o "$TMP/body" -w '%{http_code}' -X "$m" "$API$p" -H 'Content-Type: application/json' -d "$b")
    if [ "$code" != 400 ]; then not_ok "$name: $code $(head -c 300 "$TMP/body")"; return; fi
    for want in "$@"; do
        grep -qF -- "$want" "$TMP/body" && ok "$name: 400 says '$want'" ||
            not_ok "$name: 400 lacks '$want': $(head -c 400 "$TMP/body")"
    done
}
def() { printf '{"name":"%s","tasks":[{"name":"%s","taskReferenceName":"%s","type":"%s"}]}' "$1" "$2" "$2" "$3"; }
for t in INLINE JSON_JQ_TRANSFORM NOOP LAMDBA; do
    expect_400 "start inline $t" POST /api/workflow "{\"name\":\"u\",\"workflowDef\":$(def u "r_$t" "$t")}" \
        "task type $t" "'r_$t'" "LAMBDA" "SIMPLE"
done
expect_400 "register" POST /api/metadata/workflow "$(def reg1 x NOBODY_SERVES_THIS)" "NOBODY_SERVES_THIS" "'x'"
expect_400 "register a list" PUT /api/metadata/workflow "[$(def reg2 ok SIMPLE),$(def reg3 y NOBODY_SERVES_THIS)]" \
    "NOBODY_SERVES_THIS" "'y'"
code=$(curl -s -o /dev/null -w '%{http_code}' "$API/api/metadata/workflow/reg2")
[ "$code" = 404 ] && ok "a refused list stores none of it" || not_ok "reg2 stored ($code)"
# a nested task, in a fork branch
fork='{"name":"fk","tasks":[{"name":"f","taskReferenceName":"f","type":"FORK_JOIN","forkTasks":[[{"name":"a","taskReferenceName":"a","type":"SIMPLE"}],[{"name":"b","taskReferenceName":"deep","type":"NOPE_TYPE"}]]},{"name":"j","taskReferenceName":"j","type":"JOIN","joinOn":["a","deep"]}]}'
expect_400 "a nested task" POST /api/workflow "{\"name\":\"fk\",\"workflowDef\":$fork}" "NOPE_TYPE" "'deep'"

# SIMPLE (named or not) is accepted as before
code=$(curl -s -o "$TMP/body" -w '%{http_code}' -X POST "$API/api/workflow" -H 'Content-Type: application/json' \
    -d "{\"name\":\"s\",\"workflowDef\":$(def s ext_queue SIMPLE)}")
[ "$code" = 200 ] && ok "SIMPLE accepted" || not_ok "SIMPLE: $code $(cat "$TMP/body")"

# 4. the CLI: start, register, validate refuse it, exit 2, naming file, line, ref and type
cat >"$TMP/unknown.lua" <<'L'
local w = require "weft"
return w.workflow { name = "unknown",
  w.lambda { ref = "fine", script = "return 1" },
  w.task { ref = "odd", type = "NOBODY_SERVES_THIS" } }
L
for cmd in start register validate; do
    run_weft $cmd "$TMP/unknown.lua"
    expect_rc "weft $cmd" 2
    expect_err "weft $cmd" "unknown.lua:4: task 'odd'"
    expect_err "weft $cmd" "NOBODY_SERVES_THIS"
    expect_err "weft $cmd" "LAMBDA"
done
run_weft start "$TMP/unknown.lua" --api "$API"
expect_rc "weft start --api" 2
expect_err "weft start --api" "NOBODY_SERVES_THIS"

# 5. a type some live weftd serves is accepted, in a domain too; once that
# daemon is gone it is refused again
start_weftd d2 --workers 1 --plugin-path "$SLEEP_PLUGINS"
wait_for 20 grep -q 'started:' "$TMP/d2.log" || { not_ok "d2 did not start"; cat "$TMP/d2.log"; }
nap='{"name":"nap","tasks":[{"name":"n","taskReferenceName":"n","type":"FX_SLEEP","ms":1}]}'
id=$(curl -s -X POST "$API/api/workflow" -H 'Content-Type: application/json' -d "{\"name\":\"nap\",\"workflowDef\":$nap}")
wait_status "$id" COMPLETED && ok "a type another daemon serves runs" || not_ok "nap: $id $(wf_status "$id")"
cat >"$TMP/nap.lua" <<'L'
local w = require "weft"
return w.workflow { name = "napl", w.task { ref = "n", type = "FX_SLEEP", ms = 1 } }
L
run_weft start "$TMP/nap.lua"
expect_rc "weft start of a type another daemon serves" 0
kill_weftd d2
start_weftd d3 --workers 1 --plugin-path "$SLEEP_PLUGINS" --domain blue
wait_for 20 grep -q 'started:' "$TMP/d3.log" || { not_ok "d3 did not start"; cat "$TMP/d3.log"; }
# d2's entry is there but old
rcli HSET "${WEFT_KEY_PREFIX}daemons" d2 '{"types":["FX_SLEEP"],"seen":1000}' >/dev/null
id=$(curl -s -X POST "$API/api/workflow" -H 'Content-Type: application/json' \
    -d "{\"name\":\"nap\",\"taskToDomain\":{\"n\":\"blue\"},\"workflowDef\":$nap}")
wait_status "$id" COMPLETED && ok "a type served only in a domain runs" || not_ok "nap in blue: $id $(wf_status "$id")"
kill_weftd d3
rcli HSET "${WEFT_KEY_PREFIX}daemons" d3 '{"types":["blue:FX_SLEEP"],"seen":1000}' >/dev/null
expect_400 "once no live daemon serves it" POST /api/workflow "{\"name\":\"nap\",\"workflowDef\":$nap}" "FX_SLEEP" "'n'"

# 6. a TaskDef of the type's name: accepted (an external worker's type), and
# while nothing serves it weft status says so
curl -s -X POST "$API/api/metadata/taskdefs" -H 'Content-Type: application/json' -d '[{"name":"NOBODY_SERVES_THIS"}]' >/dev/null
run_weft start "$TMP/unknown.lua"
expect_rc "with a TaskDef of its name" 0
id=$last
wait_for 10 sh -c "'$WEFT' status $id -o json | grep -q unservedTaskTypes"
run_weft status "$id" -o json
case $out in *'"unservedTaskTypes"'*NOBODY_SERVES_THIS*) ok "status names the unserved type" ;; *) not_ok "status: $out" ;; esac

# 7. registered while served, started after: refused at start by name
rcli HSET "${WEFT_KEY_PREFIX}daemons" d9 "{\"types\":[\"GONE_SOON\"],\"seen\":$(date +%s)000}" >/dev/null
code=$(curl -s -o "$TMP/body" -w '%{http_code}' -X POST "$API/api/metadata/workflow" -H 'Content-Type: application/json' \
    -d "$(def later g GONE_SOON)")
[ "$code" = 200 ] && ok "registered while served" || not_ok "register while served: $code $(cat "$TMP/body")"
rcli HSET "${WEFT_KEY_PREFIX}daemons" d9 '{"types":["GONE_SOON"],"seen":1000}' >/dev/null
expect_400 "start by name once unserved" POST /api/workflow/later '{}' "GONE_SOON" "'g'"
run_weft start later
expect_rc "weft start NAME once unserved" 2
expect_err "weft start NAME once unserved" "GONE_SOON"

# 7b. a TaskDef of the task's name (Conductor's rule) serves as well as one of its type's
curl -s -X POST "$API/api/metadata/taskdefs" -H 'Content-Type: application/json' -d '[{"name":"encode"}]' >/dev/null
code=$(curl -s -o "$TMP/body" -w '%{http_code}' -X POST "$API/api/metadata/workflow" -H 'Content-Type: application/json' \
    -d "$(def vid encode VIDEO_ENCODE)")
[ "$code" = 200 ] && ok "a TaskDef of the task's name" || not_ok "TaskDef by task name: $code $(cat "$TMP/body")"

# 7c. domains at start: the queue taskToDomain sends a task to must be served
start_weftd d4 --workers 1 --plugin-path "$SLEEP_PLUGINS" --domain blue
wait_for 20 grep -q 'started:' "$TMP/d4.log" || { not_ok "d4 did not start"; cat "$TMP/d4.log"; }
expect_400 "served only in a domain, started without one" POST /api/workflow "{\"name\":\"nap\",\"workflowDef\":$nap}" \
    "FX_SLEEP" "outside a task domain"
expect_400 "sent to a domain nobody serves" POST /api/workflow \
    "{\"name\":\"nap\",\"taskToDomain\":{\"n\":\"green\"},\"workflowDef\":$nap}" "FX_SLEEP" "green"
# 7d. an idempotent start again returns its run, whatever is served now
id=$(curl -s -X POST "$API/api/workflow" -H 'Content-Type: application/json' \
    -d "{\"name\":\"nap\",\"idempotencyKey\":\"k1\",\"taskToDomain\":{\"n\":\"blue\"},\"workflowDef\":$nap}")
wait_status "$id" COMPLETED && ok "a start with a key runs" || not_ok "keyed start: $id"
kill_weftd d4
rcli HSET "${WEFT_KEY_PREFIX}daemons" d4 '{"types":["blue:FX_SLEEP"],"seen":1000}' >/dev/null
again=$(curl -s -X POST "$API/api/workflow" -H 'Content-Type: application/json' \
    -d "{\"name\":\"nap\",\"idempotencyKey\":\"k1\",\"taskToDomain\":{\"n\":\"blue\"},\"workflowDef\":$nap}")
[ "$again" = "$id" ] && ok "the same start again: the same run, though nothing serves it now" ||
    not_ok "keyed start again: $again, first $id"
# 7e. a failure workflow is started even while its type is not served (refused, it
# would be lost): it runs once a daemon serves it
rcli HSET "${WEFT_KEY_PREFIX}daemons" d9 "{\"types\":[\"FX_SLEEP\"],\"seen\":$(date +%s)000}" >/dev/null
curl -s -o /dev/null -X POST "$API/api/metadata/workflow" -H 'Content-Type: application/json' \
    -d '{"name":"onfail","tasks":[{"name":"n","taskReferenceName":"n","type":"FX_SLEEP","ms":1}]}'
curl -s -o /dev/null -X POST "$API/api/metadata/workflow" -H 'Content-Type: application/json' \
    -d '{"name":"failing","failureWorkflow":"onfail","tasks":[{"name":"t","taskReferenceName":"t","type":"TERMINATE","inputParameters":{"terminationStatus":"FAILED","terminationReason":"boom"}}]}'
rcli HSET "${WEFT_KEY_PREFIX}daemons" d9 '{"types":["FX_SLEEP"],"seen":1000}' >/dev/null
id=$(curl -s -X POST "$API/api/workflow/failing" -H 'Content-Type: application/json' -d '{}')
wait_status "$id" FAILED || not_ok "failing did not fail: $(wf_status "$id")"
start_weftd d5 --workers 1 --plugin-path "$SLEEP_PLUGINS"
wait_for 20 sh -c "curl -s '$API/api/workflow/search?query=workflowType%3Donfail%20AND%20status%3DCOMPLETED' | jq -e '.totalHits == 1'" &&
    ok "the failure workflow ran once its type was served" ||
    not_ok "failure workflow: $(curl -s "$API/api/workflow/search?query=workflowType%3Donfail" | jq -c '[.totalHits, .results[0].status]')"
kill_weftd d5

# 7f. a client without plugins: control flow is what live daemons decide, and
# SIMPLE is for external workers wherever it is started
cat >"$TMP/dec.lua" <<'L'
local w = require "weft"
return w.workflow { name = "dec", output = { v = "${s.output.result}" },
  w.lambda { ref = "l", script = "return 'x'" },
  w.decision { ref = "d", on = "${l.output.result}",
    cases = { x = { w.lambda { ref = "s", script = "return 1" } } } },
  w.simple { ref = "ext_q" } }
L
WEFT_PLUGIN_PATH="$TMP/empty1" run_weft start "$TMP/dec.lua"
expect_rc "a client without plugins starts control flow and SIMPLE" 0

# 8. an inline sub-workflow with an unknown type fails its task, naming it
sub='{"name":"sub","tasks":[{"name":"c","taskReferenceName":"c","type":"SUB_WORKFLOW","subWorkflowParam":{"name":"kid","workflowDefinition":{"name":"kid","tasks":[{"name":"k","taskReferenceName":"k","type":"NOPE_KID"}]}}}]}'
id=$(curl -s -X POST "$API/api/workflow" -H 'Content-Type: application/json' -d "{\"name\":\"sub\",\"workflowDef\":$sub}")
wait_status "$id" FAILED && ok "a child of an unknown type fails its parent" || not_ok "sub: $id $(wf_status "$id")"
curl -s "$API/api/workflow/$id" | grep -q NOPE_KID && ok "the reason names the child's type" ||
    not_ok "reason: $(curl -s "$API/api/workflow/$id" | jq -c '.tasks[0].reasonForIncompletion')"

stop_weftd_clean d1
finish
