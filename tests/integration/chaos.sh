#!/bin/bash
# DESIGN.md §8 under fire: two weftd daemons on one durable Redis run hundreds
# of mixed workflows while each daemon is SIGKILLed and restarted once and
# redis-server is SIGKILLed and restarted once. Every workflow must end
# COMPLETED with the right output, and no task reference may complete twice.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/redis_lib.sh"
C="$SRC/tests/integration/chaos"
PER=${WEFT_CHAOS_PER:-40}   # workflows per kind (5 kinds)
start_redis durable
daemon_args="--workers 3 --set lease=2s --set sweep_interval=1s --set lock_ttl=2s"
start_weftd d1 $daemon_args
start_weftd d2 $daemon_args
run_weft register "$C/child.lua"; expect_rc "register child" 0

. "$(dirname "$0")/chaos_lib.sh"
half=$((PER / 2))
start_batch 1 "$half"
sleep 1
kill_weftd d1 9; ok "SIGKILLed d1"
start_batch $((half + 1)) "$PER"
start_weftd d1 $daemon_args; ok "restarted d1"
sleep 1
kill_weftd d2 9; ok "SIGKILLed d2"
sleep 0.5
start_weftd d2 $daemon_args; ok "restarted d2"
sleep 0.5
kill_redis; ok "SIGKILLed redis-server"
sleep 1
start_redis durable; ok "restarted redis-server"

check_outcomes
grep -q "redis unreachable" "$TMP/d1.log" "$TMP/d2.log" && ok "daemons logged the Redis outage" || not_ok "no outage logged"
grep -q "redis reachable again" "$TMP/d1.log" "$TMP/d2.log" && ok "daemons logged the recovery" || not_ok "no recovery logged"
kill -0 "$(weftd_pid d1)" && kill -0 "$(weftd_pid d2)" && ok "both daemons survived" || not_ok "a daemon died"
for d in d1 d2; do grep -c 'level=error' "$TMP/$d.log" | sed "s/^/# $d error lines: /"; done
finish
