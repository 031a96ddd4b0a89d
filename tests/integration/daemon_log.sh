#!/bin/bash
# The daemon says what happens: task failures, retries and timeouts and every
# workflow end (COMPLETED, FAILED, TIMED_OUT, TERMINATED) are logged with the
# workflow id, the task ref and the reason, in weftd's line format; a plugin's
# log line carries the plugin's name in the same format; SIGHUP is logged and
# weftd goes on working.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/redis_lib.sh"
PLUGINS="$BUILD/tests/plugins/sleep:"   # the sleep fixture, then weft's own plugins
TS='ts=[0-9-]*T[0-9:.]*Z'

start_redis
echo 'return { log_level = "info" }' >"$TMP/weftd.lua"
start_weftd d1 --config "$TMP/weftd.lua" --workers 2 --plugin-path "$PLUGINS" --api 127.0.0.1:0
API="http://$(api_of d1)" || exit 1

# expect_line NAME REGEX: a line of d1's log matches REGEX (waits up to 10 s)
expect_line() {
    if wait_for 10 grep -q -- "$2" "$TMP/d1.log"; then ok "$1"; else
        not_ok "$1: no line like: $2"; grep -v 'level=debug' "$TMP/d1.log" | tail -n 15 | sed 's/^/# /'; fi
}
# expect_msg NAME LEVEL FIELDS MSG: a whole line of d1's, at LEVEL, with
# FIELDS (logfmt, as written) before msg, saying MSG
expect_msg() { expect_line "$1" "^$TS level=$2 node=d1 $3 msg=\"$4\"\$"; }
# start_wf NAME TASKS: start the workflow NAME made of TASKS (Lua); its id in $id
start_wf() {
    printf 'local w = require "weft"\nreturn w.workflow { name = "%s",\n%s }\n' "$1" "$2" >"$TMP/$1.lua"
    run_weft start "$TMP/$1.lua"
    expect_rc "start $1" 0
    id=$last
}

# 1. a task that fails once and is retried: the failure, the retry, the end
start_wf flaky_wf 'w.lambda { ref = "flaky", retry = { count = 2, delay = "100ms" },
  input = { n = "${flaky.retryCount}" },
  script = "if input.n == 0 then error([[first try fails]]) end return input.n" }'
flaky=$id
expect_msg "task failure: warn, workflow id, ref, type, reason as fields" warn \
    "workflow=$flaky name=flaky_wf task=flaky type=LAMBDA status=FAILED reason=\"lambda 'flaky':1: first try fails\"" \
    "task FAILED"
expect_msg "retry: info, workflow id, ref, attempt" info \
    "workflow=$flaky name=flaky_wf task=flaky type=LAMBDA" "task retry 1 of 2"
expect_msg "workflow COMPLETED: info" info "workflow=$flaky name=flaky_wf status=COMPLETED" \
    "workflow COMPLETED"

# 2. a task that fails for good fails its workflow
start_wf fails_wf 'w.lambda { ref = "boom", script = "error([[no way]])" }'
expect_msg "workflow FAILED: warn, with the task's reason" warn \
    "workflow=$id name=fails_wf status=FAILED reason=\"task 'boom' (LAMBDA) failed: lambda 'boom':1: no way\"" \
    "workflow FAILED"

# 3. a task that runs too long times out, and so does its workflow
start_wf slow_wf 'w.wait { ref = "forever", timeout = "1s" }'
expect_msg "task timeout: warn, ref and reason" warn \
    "workflow=$id name=slow_wf task=forever type=WAIT status=TIMED_OUT reason=\"task timed out after 1s\"" \
    "task TIMED_OUT"
expect_msg "workflow TIMED_OUT: warn" warn \
    "workflow=$id name=slow_wf status=TIMED_OUT reason=\"task 'forever' (WAIT) timed out: task timed out after 1s\"" \
    "workflow TIMED_OUT"

# 4. an operator ends one through the daemon's API (one that goes straight to
# Redis, without --api, is not seen by any daemon: the client reports it)
start_wf waits_wf 'w.wait { ref = "hold" }'
run_weft terminate "$id" --reason "operator says stop" --api "$API"
expect_rc "terminate" 0
expect_msg "workflow TERMINATED: warn, with the operator's reason" warn \
    "workflow=$id name=waits_wf status=TERMINATED reason=\"operator says stop\"" "workflow TERMINATED"

# 5. a plugin's log line: the daemon's format, the plugin's name
start_wf say_wf 'w.task { ref = "nap", type = "FX_SLEEP", ms = 1, say = "hello from the fixture" }'
expect_line "plugin line: daemon format, plugin name" \
    "^$TS level=info node=d1 plugin=fx_sleep msg=\"slept 1 ms: hello from the fixture\"$"

# a plain success logs nothing at info per task
if grep "$flaky" "$TMP/d1.log" | grep -v 'level=debug' | grep -q 'COMPLETED msg="workflow COMPLETED"$' &&
    [ "$(grep "$flaky" "$TMP/d1.log" | grep -vc 'level=debug')" -eq 3 ]; then
    ok "flaky_wf: three lines (failure, retry, end), none for the success"
else
    not_ok "flaky_wf's lines:"; grep "$flaky" "$TMP/d1.log" | sed 's/^/# /'
fi

# 6. SIGHUP: the configuration is read again and log_level applied; logged,
# and weftd goes on
echo 'return { log_level = "debug" }' >"$TMP/weftd.lua"
kill -HUP "$(weftd_pid d1)"
expect_line "SIGHUP: log_level reloaded, logged" \
    "^$TS level=info node=d1 msg=\"SIGHUP received: log_level debug (was info); other settings take a restart\"\$"
curl -s "$API/health" >/dev/null
expect_line "debug lines follow" "^$TS level=debug node=d1 method=GET path=/health status=200 ms=[0-9]* msg=\"api request\""
echo 'return { log_level = "loud" }' >"$TMP/weftd.lua"
kill -HUP "$(weftd_pid d1)"
expect_line "a bad configuration is logged and left" \
    "^$TS level=warn node=d1 msg=\"SIGHUP received: configuration not reloaded: .*loud"
sleep 0.5
kill -0 "$(weftd_pid d1)" 2>/dev/null && ok "weftd lives on after SIGHUP" || not_ok "SIGHUP ended weftd"
run_weft start "$SRC/examples/hello.lua" --input '{"name":"hup"}'
run_weft wait "$last" --timeout 20
expect_json "and still runs workflows" '{"greeting":"hello, hup!"}'

stop_weftd_clean d1

# 7. log_format = json: each line one JSON object, the fields as members
start_weftd d2 --workers 1 --set log_format=json --set log_level=debug --plugin-path "$PLUGINS" \
    --api 127.0.0.1:0
if wait_for 10 grep -q '"msg":"started:' "$TMP/d2.log"; then
    line=$(grep -m1 '"msg":"started:' "$TMP/d2.log")
    case $line in
    '{"ts":"'*'","level":"info","node":"d2","msg":"started: '*'"}')
        "$JSONEQ" "$line" "$line" && ok "log_format=json: the started line is one JSON object" ||
            not_ok "log_format=json: not JSON: $line" ;;
    *) not_ok "log_format=json: started line: $line" ;;
    esac
else
    not_ok "log_format=json: no started line"; tail -n 5 "$TMP/d2.log" | sed 's/^/# /'
fi
# numbers are JSON numbers: an API request's status and ms
api2=$(grep -m1 -o '"msg":"started: [^"]*api=127\.0\.0\.1:[0-9]*' "$TMP/d2.log" | sed 's/.*api=//')
curl -s -o /dev/null "http://$api2/health"
if wait_for 10 grep -q '"path":"/health".*"msg":"api request"' "$TMP/d2.log"; then
    line=$(grep -m1 '"path":"/health".*"msg":"api request"' "$TMP/d2.log")
    [ "$(jq -r '[(.status | type), .status, (.ms | type), (.ms >= 0)] | join(" ")' <<<"$line")" = "number 200 number true" ] &&
        ok "log_format=json: an API request's status and ms are JSON numbers" ||
        not_ok "log_format=json: status and ms: $line"
else
    not_ok "log_format=json: no api request line for /health (api $api2)"; tail -n 5 "$TMP/d2.log" | sed 's/^/# /'
fi
run_weft start "$TMP/fails_wf.lua"
fid=$last
run_weft wait "$fid" --timeout 20
if wait_for 10 grep -q "\"workflow\":\"$fid\".*\"msg\":\"workflow FAILED\"" "$TMP/d2.log"; then
    line=$(grep -m1 "\"workflow\":\"$fid\".*\"msg\":\"workflow FAILED\"" "$TMP/d2.log")
    "$JSONEQ" "$line" "$line" && ok "log_format=json: a workflow's end with its reason" ||
        not_ok "log_format=json: not JSON: $line"
    [ "$(jq -r '[.workflow, .name, .status, (.reason | test("no way"))] | join(" ")' <<<"$line")" = "$fid fails_wf FAILED true" ] &&
        ok "log_format=json: workflow, name, status and reason are members" || not_ok "log_format=json: $line"
else
    not_ok "log_format=json: no line for $fid's end"; grep -v '"level":"debug"' "$TMP/d2.log" | tail -n 5 | sed 's/^/# /'
fi
kill_weftd d2
"$BUILD/runtime/weftd" --set log_format=xml >"$TMP/bad.log" 2>&1
rc=$?
[ "$rc" != 0 ] && grep -q "log_format: expected one of logfmt|json (got 'xml')" "$TMP/bad.log" &&
    ok "log_format=xml is refused, naming the choices" || not_ok "log_format=xml: exit $rc: $(cat "$TMP/bad.log")"
finish
