#!/bin/bash
# A busy workflow (a DO_WHILE of trivial LAMBDAs, saved every few ms by the
# worker that holds it) is swept by the other worker every sweep_interval.
# That sweep loses every fence race to the busy decider: it must give up
# soon and quietly, not hold its worker for 10 s of redone changes and log
# "gave up after N attempts in 10000 ms".
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/redis_lib.sh"
start_redis

cat >"$TMP/busy.lua" <<'L'
local w = require "weft"
return w.workflow { name = "busy",
  w.do_while { ref = "spin", max = 1000000, condition = "return true",
    w.lambda { ref = "tick", script = "return 1" } } }
L
iterations() { rcli HGET "${WEFT_KEY_PREFIX}{$1}" doc | grep -o '"tick__[0-9]*"' | wc -l; }

start_weftd d1 --workers 2 --set sweep_interval=1s
run_weft start "$TMP/busy.lua"
id=$last
sleep 14
n=$(iterations "$id")
[ "$n" -gt 100 ] && ok "the loop ran ($n iterations)" || not_ok "the loop ran $n iterations"
if grep -q 'gave up after' "$TMP/d1.log"; then
    not_ok "a sweep raced the busy decider until it gave up"
    grep 'gave up after' "$TMP/d1.log" | head -n 3 | cut -c1-200 | sed 's/^/# /'
else
    ok "no sweep raced the busy decider for long"
fi
run_weft terminate "$id"
[ "$rc" = 0 ] && ok "terminated" || not_ok "terminate: exit $rc: $errout"
stop_weftd_clean d1
finish
