#!/bin/bash
# Operators win: terminate, pause and resume take effect on a busy workflow
# (a DO_WHILE of trivial LAMBDAs that saves as fast as weftd can), through
# the weft client and the REST API, with locking off (fencing alone), with
# the redis lock module (with and without fencing), and with two daemons
# sharing the work. A command
# that never lands would answer 409 after 10 s of lost fence races.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/redis_lib.sh"
command -v curl >/dev/null 2>&1 || { echo "curl not installed: skipping"; exit 77; }
start_redis

cat >"$TMP/busy.lua" <<'L'
local w = require "weft"
return w.workflow { name = "busy",
  w.do_while { ref = "spin", max = 1000000, condition = "return true",
    w.lambda { ref = "tick", script = "return 1" } } }
L

# status ID: the workflow's stored status
status() { rcli HGET "${WEFT_KEY_PREFIX}{$1}" status; }
# iterations ID: how many body tasks the loop has scheduled so far
iterations() { rcli HGET "${WEFT_KEY_PREFIX}{$1}" doc | grep -o '"tick__[0-9]*"' | wc -l; }
# busy ID: started, and looping (some iterations done)
start_busy() {
    run_weft start "$TMP/busy.lua"
    id=$last
    wait_for 20 sh -c "[ \$(redis-cli -p $REDIS_PORT HGET '${WEFT_KEY_PREFIX}{$id}' doc | grep -o '\"tick__[0-9]*\"' | wc -l) -ge 20 ]" ||
        not_ok "the busy loop did not get going ($(iterations "$id") iterations)"
}
# timed NAME SECONDS CMD...: CMD succeeds within SECONDS
timed() {
    name=$1 limit=$2
    shift 2
    t0=$(date +%s%3N)
    "$@"
    r=$?
    t1=$(date +%s%3N)
    if [ "$r" = 0 ] && [ $((t1 - t0)) -lt $((limit * 1000)) ]; then ok "$name ($((t1 - t0)) ms)"; else
        not_ok "$name: exit $r after $((t1 - t0)) ms"; printf '# %s\n' "$errout" "$(cat "$TMP/body" 2>/dev/null)" | head -5; fi
}
weft_ok() { run_weft "$@"; [ "$rc" = 0 ]; }
api_ok() { # METHOD PATH: 200
    c=$(curl -s -o "$TMP/body" -w '%{http_code}' -X "$1" "$API$2")
    [ "$c" = 200 ]
}
# still ID: the loop schedules no new iteration over a second
still() {
    a=$(iterations "$1"); sleep 1; b=$(iterations "$1")
    [ "$a" = "$b" ]
}
# has_event ID TEXT: the status lane holds an event containing TEXT
has_event() { rcli XRANGE "${WEFT_KEY_PREFIX}{$1}:ev" - + | grep -q "$2"; }

round() { # LABEL: every operator command against busy loops on the daemons running now
    label=$1
    start_busy
    timed "$label: weft terminate on a busy loop" 8 weft_ok terminate "$id" --reason "stop it"
    [ "$(status "$id")" = TERMINATED ] && ok "$label: it is TERMINATED" || not_ok "$label: status $(status "$id")"
    has_event "$id" '"status":"TERMINATED"' && ok "$label: its event is on the status lane" || not_ok "$label: no TERMINATED event"
    has_event "$id" '"status":"CANCELED"' && ok "$label: its running task was canceled" || not_ok "$label: no CANCELED event"
    run_weft status "$id" -o json
    case $out in *'stop it'*) ok "$label: with the operator's reason" ;; *) not_ok "$label: reason lost (exit $rc): $(printf "%.300s" "$out$errout")" ;; esac

    start_busy
    timed "$label: weft pause on a busy loop" 8 weft_ok pause "$id"
    [ "$(status "$id")" = PAUSED ] && ok "$label: it is PAUSED" || not_ok "$label: status $(status "$id")"
    still "$id" && ok "$label: a paused loop stops scheduling" || not_ok "$label: still looping while PAUSED"
    timed "$label: weft resume" 8 weft_ok resume "$id"
    wait_for 10 sh -c "[ \"\$(redis-cli -p $REDIS_PORT HGET '${WEFT_KEY_PREFIX}{$id}' status)\" = RUNNING ]"
    still "$id" && not_ok "$label: the resumed loop does not run" || ok "$label: the resumed loop runs again"
    timed "$label: weft pause again" 8 weft_ok pause "$id"
    timed "$label: weft resume again" 8 weft_ok resume "$id"
    timed "$label: DELETE /api/workflow/<id> on a busy loop" 8 api_ok DELETE "/api/workflow/$id?reason=api%20stop"
    [ "$(status "$id")" = TERMINATED ] && ok "$label: TERMINATED through the API" || not_ok "$label: status $(status "$id")"

    start_busy
    timed "$label: PUT .../pause on a busy loop" 8 api_ok PUT "/api/workflow/$id/pause"
    [ "$(status "$id")" = PAUSED ] && ok "$label: PAUSED through the API" || not_ok "$label: status $(status "$id")"
    timed "$label: PUT .../resume" 8 api_ok PUT "/api/workflow/$id/resume"
    still "$id" && not_ok "$label: the resumed loop does not run" || ok "$label: resumed through the API"
    timed "$label: weft terminate through --api" 8 weft_ok terminate "$id" --api "$API"
    [ "$(status "$id")" = TERMINATED ] && ok "$label: TERMINATED through weft --api" || not_ok "$label: status $(status "$id")"
    run_weft terminate "$id"
    expect_rc "$label: terminating it again" 1
    expect_err "$label: terminating it again" "already TERMINATED"
}

# 1. no lock: fencing alone
start_weftd d1 --workers 2 --api 127.0.0.1:0
API="http://$(api_of d1)"
round "fencing only"
run_weft pause "$id" --timeout abc
expect_rc "a bad --timeout" 2
expect_err "a bad --timeout" "--timeout: expected seconds"
start_busy
timed "weft pause --timeout 5" 8 weft_ok pause "$id" --timeout 5
timed "weft terminate --timeout 5" 8 weft_ok terminate "$id" --timeout 5

# 2. a sub-workflow that is busy: terminating its parent terminates it
run_weft register "$TMP/busy.lua"
cat >"$TMP/parent.lua" <<'L'
local w = require "weft"
return w.workflow { name = "parent", w.sub_workflow { ref = "child", name = "busy" } }
L
run_weft start "$TMP/parent.lua"
pid=$last
wait_for 20 sh -c "redis-cli -p $REDIS_PORT HGET '${WEFT_KEY_PREFIX}{$pid}' doc | grep -q subWorkflowId" || not_ok "no child started"
cid=$(rcli HGET "${WEFT_KEY_PREFIX}{$pid}" doc | grep -o '"subWorkflowId":"[^"]*"' | head -n 1 | cut -d'"' -f4)
wait_for 20 sh -c "[ \$(redis-cli -p $REDIS_PORT HGET '${WEFT_KEY_PREFIX}{$cid}' doc | grep -o '\"tick__[0-9]*\"' | wc -l) -ge 20 ]"
timed "terminate a parent whose child is busy" 8 weft_ok terminate "$pid"
wait_for 10 sh -c "[ \"\$(redis-cli -p $REDIS_PORT HGET '${WEFT_KEY_PREFIX}{$cid}' status)\" = TERMINATED ]" &&
    ok "the busy child is TERMINATED too" || not_ok "child $cid: $(status "$cid")"
# and a busy child terminated by an operator tells its parent
run_weft start "$TMP/parent.lua"
pid=$last
wait_for 20 sh -c "redis-cli -p $REDIS_PORT HGET '${WEFT_KEY_PREFIX}{$pid}' doc | grep -q subWorkflowId"
cid=$(rcli HGET "${WEFT_KEY_PREFIX}{$pid}" doc | grep -o '"subWorkflowId":"[^"]*"' | head -n 1 | cut -d'"' -f4)
wait_for 20 sh -c "[ \$(redis-cli -p $REDIS_PORT HGET '${WEFT_KEY_PREFIX}{$cid}' doc | grep -o '\"tick__[0-9]*\"' | wc -l) -ge 20 ]"
timed "terminate a busy child" 8 weft_ok terminate "$cid"
wait_for 10 sh -c "[ \"\$(redis-cli -p $REDIS_PORT HGET '${WEFT_KEY_PREFIX}{$pid}' status)\" = FAILED ]" &&
    ok "its parent heard of it (FAILED)" || not_ok "parent $pid: $(status "$pid")"
stop_weftd_clean d1

# 3. the redis lock module
start_weftd d2 --workers 2 --api 127.0.0.1:0 --lock redis
API="http://$(api_of d2)"
round "redis lock"
stop_weftd_clean d2

# 4. fencing off: the redis lock alone guards each workflow (the REST API takes it too)
start_weftd d5 --workers 2 --api 127.0.0.1:0 --lock redis --set fencing=false
API="http://$(api_of d5)"
round "lock without fencing"
stop_weftd_clean d5

# 5. two daemons (no lock) working on the same workflows
start_weftd d3 --workers 2 --api 127.0.0.1:0
start_weftd d4 --workers 2
API="http://$(api_of d3)"
round "two daemons"
stop_weftd_clean d3
stop_weftd_clean d4
finish
