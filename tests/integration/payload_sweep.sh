#!/bin/bash
# Payload files live as long as their execution: a workflow stuck retrying
# a task whose large input comes from oversized variables writes that input
# once, not once per retry/sweep; the files of a workflow that ended and
# expired (or whose execution is gone) are removed by the daemons' payload
# sweep, also a write cut short by kill -9; files of running workflows,
# young files and files that are not the runtime's stay.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/redis_lib.sh"
command -v curl >/dev/null 2>&1 || { echo "curl not installed: skipping"; exit 77; }
command -v python3 >/dev/null 2>&1 || { echo "python3 not installed: skipping"; exit 77; }
export WEFT_PAYLOAD_DIR="$TMP/payloads" WEFT_PAYLOAD_SOFT=2048 WEFT_PAYLOAD_HARD=65536
start_redis
sweep="--set retention=2s --set payload_sweep=1s --set payload_grace=1s --set sweep_interval=1s"
# shellcheck disable=SC2086
start_weftd s1 --workers 2 --api 127.0.0.1:0 $sweep
# shellcheck disable=SC2086
start_weftd s2 --workers 1 $sweep
API="http://$(api_of s1)" || exit 1

files_of() { ls "$WEFT_PAYLOAD_DIR" 2>/dev/null | grep -c "^$1\." ; }
# for wait_for, which runs its command again each time
has_files() { [ "$(files_of "$1")" = "$2" ]; }
expired() { [ "$(rcli EXISTS "${WEFT_KEY_PREFIX}{$1}")" = 0 ]; }
pad=$(python3 -c 'print("v" * 6000)')

# ---- stuck: its task fails on the oversized variables and is retried every second ----
cat >"$TMP/stuck.lua" <<'L'
local w = require "weft"
return w.workflow { name = "stuck", input = { "pad" },
  w.set_variable { ref = "setv", input = { big = "${workflow.input.pad}" } },
  w.lambda { ref = "wait_on", input = { vars = "${workflow.variables}" },
             script = "error('the variables are too big for this')",
             retry = { count = 100, delay = "1s" } } }
L
run_weft start "$TMP/stuck.lua" --input "{\"pad\":\"$pad\"}"
expect_rc "start a workflow that will be stuck" 0
stuck=$last
tries() { run_weft status "$stuck" -o json; printf '%s' "$out" | grep -c '"referenceTaskName": "wait_on"'; }
tried() { [ "$(tries)" -ge "$1" ]; }
all_files() { ls "$WEFT_PAYLOAD_DIR" | wc -l; } # the stuck workflow is the only one so far
wait_for 30 tried 2 || not_ok "the stuck task was not retried: $(tries) tries"
n1=$(all_files); t1=$(tries)
wait_for 30 tried $((t1 + 3))
n2=$(all_files); t2=$(tries)
[ "$t2" -ge $((t1 + 3)) ] && ok "the stuck task is retried ($t1 -> $t2 tries)" || not_ok "only $t1 -> $t2 tries"
[ "$n1" -le 3 ] && [ "$n2" = "$n1" ] && ok "its large input is written once ($n1 -> $n2 files over $((t2 - t1)) retries)" ||
    not_ok "payload files of the stuck workflow: $n1, then $n2 after $((t2 - t1)) more retries"
n2=$(files_of "$stuck")

# ---- ended and expired: its files go ----
cat >"$TMP/big.lua" <<'L'
local w = require "weft"
return w.workflow { name = "big", input = { "pad" }, output = { n = "${make.output.result.n}" },
  w.lambda { ref = "make", script = "return { n = 10000, body = string.rep('x', 10000) }" } }
L
run_weft start "$TMP/big.lua" --input "{\"pad\":\"$pad\"}"; id=$last
run_weft wait "$id" --timeout 20
expect_json "a workflow with a large input and output completes" '{"n":10000}'
n=$(files_of "$id")
[ "$n" -ge 2 ] && ok "it has $n payload files" || not_ok "payload files: $(ls "$WEFT_PAYLOAD_DIR")"
# kill -9 during a write leaves a temporary file; a workflow that was never created leaves its input
ghost=00000000-1111-2222-3333-444444444444
hash=0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef
echo '{"cut":' >"$WEFT_PAYLOAD_DIR/$ghost.$hash.json.5f0c2a1e-0000-4000-8000-000000000000.tmp"
echo '{}' >"$WEFT_PAYLOAD_DIR/$ghost.$hash.json"
echo 'keep me' >"$WEFT_PAYLOAD_DIR/notes.txt"
echo '{}' >"$WEFT_PAYLOAD_DIR/$ghost.json"
wait_for 30 expired "$id" &&
    ok "the ended workflow expired from Redis" || not_ok "workflow $id did not expire"
wait_for 30 has_files "$id" 0 && ok "its payload files are removed" ||
    not_ok "its payload files stay: $(ls "$WEFT_PAYLOAD_DIR" | grep "^$id")"
wait_for 30 has_files "$ghost" 1 && ok "a cut-short write and an orphaned payload are removed" ||
    not_ok "left: $(ls "$WEFT_PAYLOAD_DIR" | grep "^$ghost")"
[ -f "$WEFT_PAYLOAD_DIR/notes.txt" ] && [ -f "$WEFT_PAYLOAD_DIR/$ghost.json" ] &&
    ok "files not named by the runtime stay" || not_ok "a file not the runtime's was removed"
[ "$(files_of "$stuck")" = "$n2" ] && ok "the running workflow keeps its payload files" ||
    not_ok "the running workflow's files: $(files_of "$stuck"), were $n2"
run_weft status "$stuck" -o json
expect_rc "the running workflow still reads" 0

# ---- terminated: ended like any other, so its files go after the retention ----
# (through a daemon: it saves the end with its own retention)
code=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE "$API/api/workflow/$stuck")
[ "$code" = 200 ] || [ "$code" = 204 ] && ok "terminate the stuck workflow" || not_ok "terminate: HTTP $code"
wait_for 30 has_files "$stuck" 0 && ok "the terminated workflow's files are removed" ||
    not_ok "its files stay: $(files_of "$stuck")"
grep -q 'payload file(s) of ended workflows removed' "$TMP/s1.log" "$TMP/s2.log" &&
    ok "a daemon logs what it removed" || not_ok "nothing logged"
stop_weftd_clean s1
stop_weftd_clean s2
finish
