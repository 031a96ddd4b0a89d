#!/bin/bash
# No Lua context outlives its limits on a real weftd, whatever a script does
# with xpcall handlers, sort comparators or patterns: LAMBDA, decision expr,
# loop condition, inline definitions through the API, definition files
# through the CLI. More scripts than worker threads, so one stuck script
# would leave a thread pinned and later work waiting; SIGTERM still stops
# the daemon.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/redis_lib.sh"
command -v curl >/dev/null 2>&1 || { echo "curl not installed: skipping"; exit 77; }
command -v jq >/dev/null 2>&1 || { echo "jq not installed: skipping"; exit 77; }
start_redis
start_weftd d1 --workers 2 --api 127.0.0.1:0 --set lua_instructions=3000000 --set lua_result=1MiB
API="http://$(api_of d1)" || exit 1

# start NAME LUA_SOURCE: POST an inline Lua definition; sets $code, $body
start() {
    jq -n --arg n "$1" --arg src "$2" '{name: $n, workflowDef: $src}' >"$TMP/req"
    code=$(curl -s -o "$TMP/body" -w '%{http_code}' -X POST "$API/api/workflow" \
        -H 'Content-Type: application/json' --data-binary @"$TMP/req")
    body=$(cat "$TMP/body")
}
status_of() { curl -s "$API/api/workflow/$1?includeTasks=false" | jq -r .status; }
reason_of() { curl -s "$API/api/workflow/$1?includeTasks=false" | jq -r .reasonForIncompletion; }

LOOP_HANDLER="xpcall(function() error('x') end, function() while true do end end)"
SORT_HANDLER="xpcall(function() table.sort({3, 2, 1}, function(a, b) while true do end end) end, function() while true do end end)"
PATTERN="return string.rep('a', 3000):find(string.rep('.-', 6) .. 'b')"

# name|Lua definition whose one script never ends by itself
cases=(
  "lambda_xpcall|w.lambda { ref = 'a', script = [[ $LOOP_HANDLER ]] }"
  "lambda_sort|w.lambda { ref = 'a', script = [[ $SORT_HANDLER ]] }"
  "lambda_pattern|w.lambda { ref = 'a', script = [[ $PATTERN ]] }"
  "decision_expr|w.decision { ref = 'd', on = 1, expr = [[ $LOOP_HANDLER ]], cases = { x = { w.lambda { ref = 'x', script = 'return 1' } } } }"
  "loop_condition|w.do_while { ref = 'l', max = 3, condition = [[ $LOOP_HANDLER ]], w.lambda { ref = 'b', script = 'return 1' } }"
)
ids=()
for c in "${cases[@]}"; do
    name=${c%%|*}
    start "$name" "local w = require 'weft' return w.workflow { name = '$name', ${c#*|} }"
    if [ "$code" = 200 ]; then ok "$name: started"; ids+=("$name=$body"); else
        not_ok "$name: HTTP $code: $body"; fi
done
for entry in "${ids[@]}"; do
    name=${entry%%=*} id=$(printf '%s' "${entry#*=}" | tr -d '"')
    end=$(( $(date +%s) + 90 ))
    while [ "$(status_of "$id")" = RUNNING ] && [ "$(date +%s)" -lt "$end" ]; do sleep 0.2; done
    st=$(status_of "$id") reason=$(reason_of "$id")
    case "$st|$reason" in
        FAILED*"instruction limit (3000000) exceeded"*) ok "$name: FAILED with the configured limit ($reason)" ;;
        *) not_ok "$name: $st, reason '$reason'" ;;
    esac
done

# lua_result: 1,000 references to one 1 MiB string stop at the first
start big_result "local w = require 'weft' return w.workflow { name = 'big_result', w.lambda { ref = 'a', script = [[ local s = ('x'):rep(1 << 20) local t = {} for i = 1, 1000 do t[i] = s end return t ]] } }"
id=$(printf '%s' "$body" | tr -d '"')
wait_for 30 sh -c "[ \"\$(curl -s '$API/api/workflow/$id?includeTasks=false' | jq -r .status)\" = FAILED ]"
case "$(reason_of "$id")" in
    *"result[1]: over the result size limit (1048576 bytes as JSON)"*) ok "a result over lua_result fails the task, naming the limit" ;;
    *) not_ok "big result: $(status_of "$id"): $(reason_of "$id")" ;;
esac

# the threads are usable afterwards
start ok_after "local w = require 'weft' return w.workflow { name = 'ok_after', w.lambda { ref = 'a', script = 'return 41 + 1' } }"
id=$(printf '%s' "$body" | tr -d '"')
wait_for 30 sh -c "[ \"\$(curl -s '$API/api/workflow/$id?includeTasks=false' | jq -r .status)\" = COMPLETED ]" &&
    ok "a workflow after them completes" || not_ok "a workflow after them: $(status_of "$id")"

# an inline definition that loops while it is evaluated is refused, naming the limit
start def_loop "local w = require 'weft' $LOOP_HANDLER return w.workflow { name = 'def_loop', w.lambda { ref = 'a', script = 'return 1' } }"
case "$code|$body" in
    400*"workflowDef"*"limit ("*) ok "inline definition that loops: 400 naming the limit" ;;
    *) not_ok "inline definition that loops: HTTP $code: $body" ;;
esac
start def_pattern "local w = require 'weft' ${PATTERN/return /local _ = } return w.workflow { name = 'def_pattern', w.lambda { ref = 'a', script = 'return 1' } }"
case "$code|$body" in
    400*"limit ("*) ok "inline definition with a runaway pattern: 400 naming the limit" ;;
    *) not_ok "inline definition with a runaway pattern: HTTP $code: $body" ;;
esac

# definition files through the CLI
printf "local w = require 'weft'\n%s\nreturn w.workflow { name = 'f', w.lambda { ref = 'a', script = 'return 1' } }\n" \
    "$SORT_HANDLER" >"$TMP/loop.lua"
for cmd in validate compile run; do
    timeout 60 "$WEFT" $cmd "$TMP/loop.lua" >"$TMP/out" 2>"$TMP/err"
    rc=$? errout=$(cat "$TMP/err")
    case "$rc|$errout" in
        2*"loop.lua"*"limit ("*) ok "weft $cmd of a looping definition file: exit 2 naming file and limit" ;;
        *) not_ok "weft $cmd of a looping definition file: exit $rc: $errout" ;;
    esac
done
timeout 60 "$WEFT" start "$TMP/loop.lua" >"$TMP/out" 2>"$TMP/err"
rc=$? errout=$(cat "$TMP/err")
case "$rc|$errout" in
    2*"limit ("*) ok "weft start of a looping definition file: exit 2 naming the limit" ;;
    *) not_ok "weft start of a looping definition file: exit $rc: $errout" ;;
esac

# SIGTERM still stops it
pid=$(weftd_pid d1)
t0=$(date +%s)
kill -TERM "$pid"
end=$(( t0 + 30 ))
while kill -0 "$pid" 2>/dev/null && [ "$(date +%s)" -lt "$end" ]; do sleep 0.1; done
if kill -0 "$pid" 2>/dev/null; then not_ok "weftd still runs 30 s after SIGTERM"; else
    ok "weftd stops on SIGTERM"; fi
wait "$pid" 2>/dev/null
if grep -q 'Sanitizer\|runtime error:' "$TMP/d1.log"; then
    not_ok "weftd's log has sanitizer reports"; grep -A 20 'Sanitizer\|runtime error:' "$TMP/d1.log" | head -n 40 | sed 's/^/# /'
fi

# lua_memory and lua_time are the ones that stop scripts too (a daemon whose
# instruction limit is far away)
start_weftd d2 --workers 1 --api 127.0.0.1:0 --set lua_memory=1MiB --set lua_time=300ms \
    --set lua_instructions=2000000000
API="http://$(api_of d2)" || exit 1
# expect_limit NAME SCRIPT TEXT: a LAMBDA running SCRIPT fails with TEXT
expect_limit() {
    start "$1" "local w = require 'weft' return w.workflow { name = '$1', w.lambda { ref = 'a', script = [[ $2 ]] } }"
    id=$(printf '%s' "$body" | tr -d '"')
    wait_for 60 sh -c "[ \"\$(curl -s '$API/api/workflow/$id?includeTasks=false' | jq -r .status)\" = FAILED ]"
    case "$(reason_of "$id")" in
        *"$3"*) ok "$1: FAILED with '$3'" ;;
        *) not_ok "$1: $(status_of "$id"): $(reason_of "$id")" ;;
    esac
}
expect_limit lua_memory "local t = {} for i = 1, 1e6 do t[i] = ('x'):rep(64) .. i end return #t" \
    "memory limit (1048576 bytes) exceeded"
expect_limit lua_time "local n = 0 while true do n = n + 1 end" "time limit (300 ms) exceeded"
kill_weftd d2
finish
