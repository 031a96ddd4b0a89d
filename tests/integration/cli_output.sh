#!/bin/bash
# weft status and weft watch for people, -o json for scripts, colours only on
# a terminal, and exit codes that tell a server that cannot be used (4) from
# an unknown id (2), over Redis and through --api, against real processes.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/redis_lib.sh"
start_redis
start_weftd d1 --workers 2 --api 127.0.0.1:0
API="http://$(api_of d1)" || { not_ok "weftd did not start"; finish; exit 1; }
ESC=$(printf '\033')

cat >"$TMP/fail.lua" <<'L'
local w = require "weft"
return w.workflow { name = "failing", version = 3,
  w.lambda { ref = "first", script = "return 1" },
  w.lambda { ref = "boom", retry = { count = 1, delay = "10ms" },
    script = "error('kaboom: ' .. string.rep('the reason goes on and on ', 10) .. 'THE-END')" } }
L
cat >"$TMP/gate.lua" <<'L'
local w = require "weft"
return w.workflow { name = "gate", w.wait { ref = "gate" }, w.lambda { ref = "after", script = "return 1" } }
L

run_weft start "$TMP/fail.lua" --correlation-id corr-77
fid=$last
run_weft wait "$fid" --timeout 30
expect_rc "the failing workflow fails" 1

# ---- status: a summary and a task table ----
COLUMNS=100 run_weft status "$fid"
expect_rc "weft status of a failed workflow" 0
text=$out
line() { printf '%s\n' "$text" | grep -E "$1" | head -n 1; }
[ "$(line '^workflow ')" = "workflow     failing (version 3)" ] && ok "status: name and version" ||
    not_ok "status: workflow line '$(line '^workflow ')'"
[ "$(line '^id ')" = "id           $fid" ] && ok "status: the id" || not_ok "status: id line '$(line '^id ')'"
[ "$(line '^status ')" = "status       FAILED" ] && ok "status: FAILED" || not_ok "status line '$(line '^status ')'"
[ "$(line '^correlation ')" = "correlation  corr-77" ] && ok "status: the correlation id" ||
    not_ok "status: correlation line '$(line '^correlation ')'"
date_re='[0-9]{4}-[01][0-9]-[0-3][0-9] [0-2][0-9]:[0-5][0-9]:[0-6][0-9]\.[0-9]{3} '
line "^started +$date_re" | grep -q . && ok "status: a readable start time" || not_ok "status: no start time: $text"
line "^ended +$date_re" | grep -q . && ok "status: a readable end time" || not_ok "status: no end time: $text"
dur_re='([0-9]+ms|[0-9]+\.[0-9]s|[0-9]+m[0-5][0-9]s)'
line "^duration +$dur_re\$" | grep -q . && ok "status: the total duration ($(line '^duration'))" ||
    not_ok "status: duration line '$(line '^duration')'"
case $(line '^reason ') in "reason       task 'boom' (LAMBDA) failed: "*"THE-END") ok "status: the whole reason" ;;
    *) not_ok "status: reason line '$(line '^reason ')'" ;; esac
[ "$(line '^failed task ')" = "failed task  boom (LAMBDA), attempt 2" ] && ok "status: the failed task" ||
    not_ok "status: failed task line '$(line '^failed task ')'"
line '^REF +TYPE +STATUS +ATTEMPTS +DURATION +REASON$' | grep -q . && ok "status: the table's header" ||
    not_ok "status: no table header: $text"
line "^first +LAMBDA +COMPLETED +1 +$dur_re\$" | grep -q . && ok "status: the completed task's row" ||
    not_ok "status: first's row '$(line '^first ')'"
b1=$(line "^boom +LAMBDA +FAILED +1 +$dur_re +lambda 'boom'")
b2=$(line "^boom +LAMBDA +FAILED +2 +$dur_re +lambda 'boom'")
[ -n "$b1" ] && [ -n "$b2" ] && ok "status: a row per attempt, attempts 1 and 2, with durations and reasons" ||
    not_ok "status: boom's rows: $(line '^boom')"
case $b2 in *...) ok "status: a long reason is cut (...)" ;; *) not_ok "status: reason not cut: $b2" ;; esac
[ "${#b2}" -le 100 ] && ok "status: the row keeps to COLUMNS=100 (${#b2})" || not_ok "status: a row of ${#b2} columns"
case $text in *"$ESC"*) not_ok "status: escape codes when stdout is not a terminal" ;;
    *) ok "status: no escape codes off a terminal" ;; esac
printf '%s' "$text" | jq -e . >/dev/null 2>&1 && not_ok "status: the default output is JSON" ||
    ok "status: the default output is not JSON"

# local times: the same instant in two time zones, 9 hours apart
TZ=UTC0 run_weft status "$fid"
u=$(printf '%s\n' "$out" | sed -n 's/^started *\([0-9-]* [0-9:]*\).*/\1/p')
TZ=JST-9 run_weft status "$fid"
j=$(printf '%s\n' "$out" | sed -n 's/^started *\([0-9-]* [0-9:]*\).*/\1/p')
if [ -n "$u" ] && [ -n "$j" ] && [ $(( $(date -u -d "$j" +%s) - $(date -u -d "$u" +%s) )) = 32400 ]; then
    ok "status: start time in local time ($u in UTC, $j in JST)"
else
    not_ok "status: start time '$u' (UTC0) and '$j' (JST-9)"
fi

# ---- -o json: Conductor's Workflow JSON, the document the REST API gives ----
run_weft status "$fid" -o json
expect_rc "weft status -o json" 0
json=$out
[ "$(jq -r '.status + " " + .correlationId + " " + (.tasks | length | tostring)' <<<"$json")" = "FAILED corr-77 3" ] &&
    ok "-o json parses with jq: status, correlationId, 3 tasks" || not_ok "-o json: $(printf '%.300s' "$json")"
rest=$(curl -s "$API/api/workflow/$fid")
"$JSONEQ" "$json" "$rest" && ok "-o json equals GET /api/workflow/{id}" ||
    not_ok "-o json differs from the REST GET: $(diff <(jq -S . <<<"$json") <(jq -S . <<<"$rest") | head -5)"
run_weft status "$fid" --output json --api "$API"
"$JSONEQ" "$out" "$rest" && ok "--output json --api equals the REST GET" || not_ok "--output json --api: $(printf '%.300s' "$out")"
run_weft status "$fid" --api "$API"
[ "$out" = "$text" ] || COLUMNS=100 run_weft status "$fid" --api "$API"
[ "$out" = "$text" ] && ok "status --api prints the same text" || not_ok "status --api: $(printf '%.300s' "$out")"
run_weft status "$fid" -o yaml
expect_rc "-o yaml" 2
expect_err "-o yaml" "use text or json"

# ---- watch: lines for people; exit 1 on FAILED, 0 on COMPLETED ----
run_weft watch "$fid"
expect_rc "weft watch of a FAILED workflow" 1
wtext=$out
run_weft watch "$fid" -o json
expect_rc "weft watch -o json of a FAILED workflow" 1
nj=$(printf '%s\n' "$out" | grep -c .)
[ "$(printf '%s\n' "$out" | jq -c . 2>/dev/null | wc -l)" = "$nj" ] && [ "$nj" -ge 7 ] &&
    ok "watch -o json: $nj events, each a JSON object" || not_ok "watch -o json: $(printf '%.300s' "$out")"
[ "$(printf '%s\n' "$wtext" | grep -c .)" = "$nj" ] && ok "watch: a line per event ($nj)" ||
    not_ok "watch: $(printf '%s\n' "$wtext" | grep -c .) lines for $nj events"
printf '%s\n' "$wtext" | grep -q '^{' && not_ok "watch: JSON lines without -o json" || ok "watch: its lines are not JSON"
t_re='^[0-2][0-9]:[0-5][0-9]:[0-6][0-9]\.[0-9]{3}  '
[ "$(printf '%s\n' "$wtext" | grep -cE "$t_re")" = "$nj" ] && ok "watch: every line starts with HH:MM:SS.mmm" ||
    not_ok "watch: $(printf '%s\n' "$wtext" | head -3)"
printf '%s\n' "$wtext" | grep -qE "${t_re}first \(LAMBDA\) +COMPLETED +$dur_re\$" &&
    ok "watch: a task's end with its duration" || not_ok "watch: no 'first (LAMBDA) COMPLETED <duration>' line: $wtext"
printf '%s\n' "$wtext" | grep -qE "${t_re}boom \(LAMBDA\) +FAILED +$dur_re +lambda 'boom'.*THE-END\$" &&
    ok "watch: a failed attempt with its duration and reason" || not_ok "watch: no boom FAILED line: $wtext"
printf '%s\n' "$wtext" | tail -n 1 | grep -qE "${t_re}workflow +FAILED +task 'boom'" &&
    ok "watch: ends with the workflow's FAILED line" || not_ok "watch: last line $(printf '%s\n' "$wtext" | tail -n 1)"
case $wtext in *"$ESC"*) not_ok "watch: escape codes off a terminal" ;; *) ok "watch: no escape codes off a terminal" ;; esac
run_weft watch "$fid" --api "$API"
expect_rc "weft watch --api of a FAILED workflow" 1
[ "$out" = "$wtext" ] && ok "watch --api prints the same lines" || not_ok "watch --api: $(printf '%.300s' "$out")"

run_weft start "$SRC/examples/hello.lua" --input '{"name":"w"}'
cid=$last
run_weft watch "$cid"
expect_rc "weft watch of a COMPLETED workflow" 0
printf '%s\n' "$out" | tail -n 1 | grep -qE "${t_re}workflow +COMPLETED\$" && ok "watch: ends with COMPLETED" ||
    not_ok "watch: last line $(printf '%s\n' "$out" | tail -n 1)"
run_weft watch "$cid" --api "$API"
expect_rc "weft watch --api of a COMPLETED workflow" 0

# a paused workflow has not ended: watch shows PAUSED and waits on
run_weft start "$TMP/gate.lua"
gid=$last
wait_for 10 sh -c "'$WEFT' status $gid -o json | jq -e '.tasks[0].status == \"IN_PROGRESS\"'"
run_weft pause "$gid"
expect_rc "pause" 0
timeout 3 "$WEFT" watch "$gid" >"$TMP/paused" 2>&1
prc=$?
[ "$prc" = 124 ] && ok "watch of a paused workflow keeps waiting" || not_ok "watch of a paused workflow exited $prc"
grep -qE "${t_re}workflow +PAUSED\$" "$TMP/paused" && ok "watch: the PAUSED line" || not_ok "watch paused: $(cat "$TMP/paused")"
run_weft terminate "$gid" --reason "done here"
run_weft watch "$gid"
expect_rc "weft watch of a TERMINATED workflow" 1
printf '%s\n' "$out" | tail -n 1 | grep -qE "${t_re}workflow +TERMINATED +done here\$" && ok "watch: TERMINATED and why" ||
    not_ok "watch: last line $(printf '%s\n' "$out" | tail -n 1)"

# ---- colours: only on a terminal, never with NO_COLOR or --no-color ----
tty_run() { # ENV=VALUE...: weft $WARGS on a pseudo-terminal (script), its output in $TMP/tty
    env "$@" script -q -c "$WEFT $WARGS" /dev/null >"$TMP/tty" 2>&1 </dev/null
}
WARGS="status $fid"
tty_run TERM=xterm NO_COLOR=
grep -q "$ESC\[31mFAILED$ESC\[0m" "$TMP/tty" && ok "status on a terminal: FAILED in red" ||
    not_ok "status on a terminal: no colour: $(head -c 300 "$TMP/tty" | cat -v)"
grep -q "^failed task" "$TMP/tty" && ok "status on a terminal: the same summary" || not_ok "status on a terminal: $(head -c 300 "$TMP/tty")"
tty_run TERM=xterm NO_COLOR=1
grep -q "$ESC" "$TMP/tty" && not_ok "NO_COLOR=1 on a terminal: escape codes" || ok "NO_COLOR=1 on a terminal: no escape codes"
grep -q "^status *FAILED" "$TMP/tty" && ok "NO_COLOR=1: the text still there" || not_ok "NO_COLOR=1: $(head -c 300 "$TMP/tty")"
WARGS="status $fid --no-color"
tty_run TERM=xterm NO_COLOR=
grep -q "$ESC" "$TMP/tty" && not_ok "--no-color on a terminal: escape codes" || ok "--no-color on a terminal: no escape codes"
WARGS="watch $fid"
tty_run TERM=xterm NO_COLOR=
grep -q "$ESC\[31mFAILED" "$TMP/tty" && ok "watch on a terminal: colours" || not_ok "watch on a terminal: $(head -c 300 "$TMP/tty" | cat -v)"
tty_run TERM=xterm NO_COLOR=yes
grep -q "$ESC" "$TMP/tty" && not_ok "watch, NO_COLOR on a terminal: escape codes" || ok "watch, NO_COLOR on a terminal: no escape codes"
WARGS="status $fid -o json"
tty_run TERM=xterm NO_COLOR=
grep -q "$ESC" "$TMP/tty" && not_ok "-o json on a terminal: escape codes" || ok "-o json on a terminal: plain JSON"

# ---- exit codes: no such workflow (2) vs a server that cannot be used (4) ----
kill -0 "$(weftd_pid d1)" 2>/dev/null && ok "weftd still runs" ||
    { not_ok "weftd died"; tail -n 30 "$TMP/d1.log" | sed 's/^/# /'; }
closed=$(free_port)
for cmd in "status" "watch" "wait" "terminate" "retry"; do
    run_weft $cmd 00000000-0000-0000-0000-000000000000
    expect_rc "weft $cmd of an unknown id" 2
    run_weft $cmd 00000000-0000-0000-0000-000000000000 --api "$API"
    expect_rc "weft $cmd --api of an unknown id" 2
    run_weft $cmd "$fid" --redis "redis://127.0.0.1:$closed"
    expect_rc "weft $cmd with Redis on a closed port" 4
    expect_err "weft $cmd with Redis on a closed port" "127.0.0.1:$closed"
    run_weft $cmd "$fid" --api "http://127.0.0.1:$closed"
    expect_rc "weft $cmd with the API on a closed port" 4
    expect_err "weft $cmd with the API on a closed port" "127.0.0.1:$closed"
done
run_weft start "$SRC/examples/hello.lua" --redis "redis://127.0.0.1:$closed"
expect_rc "weft start with Redis on a closed port" 4
run_weft start "$SRC/examples/hello.lua" --api "http://127.0.0.1:$closed"
expect_rc "weft start with the API on a closed port" 4
run_weft start "$TMP/no-such-file.lua" --redis "redis://127.0.0.1:$closed"
expect_rc "weft start of a missing file (before any server)" 2
run_weft --help
case $out in *"  4  the server could not be used"*) ok "weft --help documents exit 4" ;; *) not_ok "weft --help: no exit 4" ;; esac

stop_weftd_clean d1
finish
