#!/bin/bash
# weftd's life: started before Redis exists (waits, then works), retention of
# finished workflows, and SIGTERM letting a running task finish.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/redis_lib.sh"
PLUGINS="$BUILD/tests/plugins/sleep:"   # the sleep fixture, then weft's own plugins

# 1. Redis is not there yet: weftd says so, keeps trying, and works once it is
REDIS_PORT=$(free_port)
export WEFT_REDIS_URL="redis://127.0.0.1:$REDIS_PORT" WEFT_KEY_PREFIX="life$$:"
start_weftd early --workers 1 --plugin-path "$PLUGINS" --set retention=2s
wait_for 10 grep -q "redis unreachable" "$TMP/early.log" && ok "weftd logs that Redis is unreachable" \
    || { not_ok "no unreachable line"; cat "$TMP/early.log"; }
sleep 1
kill -0 "$(weftd_pid early)" && ok "weftd keeps running without Redis" || not_ok "weftd exited"
start_redis
run_weft start "$SRC/examples/hello.lua" --input '{"name":"late"}'
id=$last
run_weft wait "$id" --timeout 20
expect_json "works once Redis is up" '{"greeting":"hello, late!"}'
grep -q "redis reachable again" "$TMP/early.log" && ok "weftd logs the recovery" || not_ok "no recovery line"

# 2. retention: finished workflows expire (retention=2s here)
rcli EXISTS "${WEFT_KEY_PREFIX}{$id}" | grep -q 1 && ok "finished workflow kept for now" || not_ok "gone too early"
ttl=$(rcli PTTL "${WEFT_KEY_PREFIX}{$id}")
[ "$ttl" -gt 0 ] && [ "$ttl" -le 2000 ] && ok "it expires (PTTL $ttl ms)" || not_ok "PTTL $ttl"
sleep 2.5
run_weft status "$id" -o json
expect_rc "expired workflow is unknown" 2
[ "$(rcli KEYS "${WEFT_KEY_PREFIX}{$id}*" | wc -w)" -eq 0 ] && ok "all its keys are gone" || not_ok "keys left: $(rcli KEYS "${WEFT_KEY_PREFIX}{$id}*")"

# 3. SIGTERM: the running task finishes, the rest is left for another daemon
cat >"$TMP/slow.lua" <<L
local w = require "weft"
return w.workflow { name = "slow", output = { s = "\${nap.output.slept}", after = "\${after.output.result}" },
  w.task { ref = "nap", type = "FX_SLEEP", ms = 1500, mark = "$TMP/ran" },
  w.lambda { ref = "after", script = "return 'done'" } }
L
run_weft start "$TMP/slow.lua"; id=$last
wait_for 10 test -s "$TMP/ran" && ok "the slow task started" || not_ok "slow task never started"
kill -TERM "$(weftd_pid early)"
wait_for 15 grep -q 'msg="stopped"' "$TMP/early.log" && ok "weftd stopped after SIGTERM" || not_ok "no stop"
grep -q "grace period over" "$TMP/early.log" && not_ok "it cut the running task off" || ok "the running task finished within the grace period"
start_weftd late --workers 1 --plugin-path "$PLUGINS"
run_weft wait "$id" --timeout 20
expect_json "another daemon finished the workflow" '{"s":1500,"after":"done"}'
[ "$(wc -l <"$TMP/ran")" -eq 1 ] && ok "the slow task ran once" || not_ok "it ran $(wc -l <"$TMP/ran") times"

# 4. SIGKILL while a task runs: its lease expires and another daemon runs it again
: >"$TMP/ran"
start_weftd victim --workers 1 --plugin-path "$PLUGINS" --set lease=1s
kill -TERM "$(weftd_pid late)"; wait "$(weftd_pid late)" 2>/dev/null
run_weft start "$TMP/slow.lua"; id=$last
wait_for 10 test -s "$TMP/ran"
kill -9 "$(weftd_pid victim)"
start_weftd rescuer --workers 1 --plugin-path "$PLUGINS" --set lease=1s
run_weft wait "$id" --timeout 30
expect_json "the killed daemon's task ran again elsewhere" '{"s":1500,"after":"done"}'
[ "$(wc -l <"$TMP/ran")" -ge 2 ] && ok "the task ran at least once more ($(wc -l <"$TMP/ran") runs)" || not_ok "ran $(wc -l <"$TMP/ran") times"
run_weft status "$id" -o json
printf '%s' "$out" | "$BUILD/tests/wfcheck" && ok "its result was applied once" || not_ok "applied twice"
finish
