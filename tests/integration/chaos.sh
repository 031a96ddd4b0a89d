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

ids="$TMP/ids"; : >"$ids"
start_batch() { # from..to
    for i in $(seq "$1" "$2"); do
        for kind in chain fork dynamic sub loop; do
            # a producer retries while Redis is away (the same key: never two workflows)
            for try in 1 2 3 4 5 6 7 8 9 10; do
                run_weft start "$C/$kind.lua" --input "{\"n\":$i}" --idempotency-key "$$-$kind-$i"
                [ "$rc" = 0 ] && break
                sleep 0.5
            done
            [ "$rc" = 0 ] && echo "$kind $i $last" >>"$ids" || not_ok "start $kind $i: $errout"
        done
    done
}
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

expected() { # kind n -> JSON
    n=$2
    case $1 in
    chain) echo "{\"v\":$(( (n + 1) * 2 - 1 ))}" ;;
    fork) echo "{\"a\":$(( n * 10 )),\"b\":$(( n * 100 ))}" ;;
    dynamic) echo "{\"sum\":$(( 210 + 20 * n ))}" ;;
    sub) echo "{\"named\":$(( n * 2 )),\"inline\":$(( n * n ))}" ;;
    loop) echo "{\"iterations\":4,\"total\":$(( 4 * n ))}" ;;
    esac
}
bad=0 dups=0 total=0
while read -r kind n id; do
    total=$((total + 1))
    "$WEFT" wait "$id" --timeout 120 >"$TMP/w.out" 2>"$TMP/w.err"
    wrc=$?
    got=$(tail -n 1 "$TMP/w.out")
    if [ "$wrc" != 0 ] || ! "$JSONEQ" "$got" "$(expected "$kind" "$n")"; then
        bad=$((bad + 1))
        [ $bad -le 5 ] && echo "# $kind $n $id: exit $wrc, output $got, wanted $(expected "$kind" "$n"): $(cat "$TMP/w.err")"
    fi
    if ! "$WEFT" status "$id" | "$BUILD/tests/wfcheck" >"$TMP/dup" 2>&1; then
        dups=$((dups + 1))
        [ $dups -le 5 ] && echo "# $kind $n $id: $(cat "$TMP/dup")"
    fi
done <"$ids"
[ "$total" -eq $((PER * 5)) ] && ok "$total workflows started" || not_ok "only $total of $((PER * 5)) started"
[ $bad -eq 0 ] && ok "all $total completed with the right output" || not_ok "$bad of $total wrong or unfinished"
[ $dups -eq 0 ] && ok "no task reference completed twice" || not_ok "$dups workflows completed a task twice"
grep -q "redis unreachable" "$TMP/d1.log" "$TMP/d2.log" && ok "daemons logged the Redis outage" || not_ok "no outage logged"
grep -q "redis reachable again" "$TMP/d1.log" "$TMP/d2.log" && ok "daemons logged the recovery" || not_ok "no recovery logged"
kill -0 "$(weftd_pid d1)" && kill -0 "$(weftd_pid d2)" && ok "both daemons survived" || not_ok "a daemon died"
for d in d1 d2; do grep -c 'level=error' "$TMP/$d.log" | sed "s/^/# $d error lines: /"; done
finish
