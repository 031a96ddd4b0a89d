#!/bin/bash
# weft on a real Redis Cluster (6 redis-server processes on loopback: 3
# primaries, 3 replicas), with the same binaries and URL form as on one
# Redis: the store routes each command by its key's slot, and the suites
# that run against weftd and one Redis run again here, on the cluster
# (redis_lib.sh's cluster mode).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/redis_lib.sh"
. "$(dirname "$0")/cluster_lib.sh"
trap 'stop_cluster; rm -rf "$TMP"' EXIT
start_cluster
ok "a 6-node cluster is up (3 primaries with a replica each)"
set -- $CLUSTER_PORTS

# the slot map weft routes with (store/redis/slots.c), against the cluster
out=$("$BUILD/tests/slotcheck" 127.0.0.1 "$1" 300 2>&1) && [ "$out" = "ok 300 keys on 3 primaries" ] &&
    ok "slots.c's map sends each of 300 keys to the primary that takes it, CLUSTER KEYSLOT agrees" ||
    not_ok "slotcheck: $out"

# a worker's rounds keep to one primary, in turn; steps go out in flight
# (homecheck.c says what it checks), on a key prefix of its own
"$BUILD/tests/homecheck" "$WEFT_REDIS_URL" "h$$:" >"$TMP/homecheck.out" 2>&1
hrc=$?
while read -r line; do
    case "$line" in
    "ok - "*) ok "homecheck: ${line#ok - }" ;;
    "not ok - "*) not_ok "homecheck: ${line#not ok - }" ;;
    esac
done <"$TMP/homecheck.out"
[ "$hrc" = 0 ] || not_ok "homecheck exits $hrc: $(grep -v '^ok' "$TMP/homecheck.out" | head -n 5)"

# one seed is enough: the others are found in the slot map
cat >"$TMP/c1.lua" <<'LUA'
local w = require "weft"
return w.workflow { name = "c1", w.lambda { ref = "a", script = "return { n = input.n * 2 }",
    input = { n = "${workflow.input.n}" } } }
LUA
"$BUILD/runtime/weftd" --redis "redis://127.0.0.1:$2" --no-api --workers 2 --id c1 >"$TMP/c1.log" 2>&1 &
wpid=$!
ids=
for i in $(seq 1 30); do
    run_weft start "$TMP/c1.lua" --redis "redis://127.0.0.1:$3" --input "{\"n\":$i}"
    ids="$ids $last"
done
bad=0
i=0
for id in $ids; do
    i=$((i + 1))
    run_weft wait "$id" --timeout 20 --redis "redis://127.0.0.1:$1"
    "$JSONEQ" "$last" "{\"result\":{\"n\":$((i * 2))}}" || { bad=$((bad + 1)); echo "# $id: $last $errout"; }
done
[ "$bad" = 0 ] && ok "30 workflows started through one seed, run by weftd on another, waited on through a third" ||
    not_ok "$bad of 30 workflows wrong"
kill "$wpid"
wait "$wpid"
# their keys are on every primary, not on the seed alone
n=0
for p in $(redis-cli -p "$1" cluster nodes | grep master | sed 's/.*:\([0-9]*\)@.*/\1/'); do
    k=$(redis-cli -p "$p" --scan --pattern "${WEFT_KEY_PREFIX}{*}" | wc -l)
    [ "$k" -gt 0 ] && n=$((n + 1))
done
[ "$n" = 3 ] && ok "the executions' keys are spread over the 3 primaries" || not_ok "keys on $n primaries"

# a database number means nothing on a cluster: said at connect
run_weft status nosuch --redis "redis://127.0.0.1:$1/2"
expect_rc "a /db on a cluster (the server refused the connection)" 4
expect_err "says why" "SELECT is not allowed in cluster mode"

# the layout is fixed at first use: this prefix has 9 partitions (a cluster's
# default: at least 8, a multiple of the 3 primaries), and a process
# configured otherwise is refused, naming both
[ "$(redis-cli -c -p "$1" HGET "${WEFT_KEY_PREFIX}layout" partitions)" = 9 ] &&
    ok "a new prefix on 3 primaries gets 9 partitions" || not_ok "layout: $(redis-cli -c -p "$1" HGETALL "${WEFT_KEY_PREFIX}layout")"
WEFT_PARTITIONS=4 run_weft status nosuch
expect_rc "WEFT_PARTITIONS=4 against a prefix of 9" 2
expect_err "names both" "was first used with partitions=9 (kept in ${WEFT_KEY_PREFIX}layout), and this process is configured with partitions=4"
"$BUILD/runtime/weftd" --no-api --workers 1 --set partitions=16 >"$TMP/p16.log" 2>&1 &
ppid=$!
if wait_for 10 sh -c "! kill -0 $ppid"; then
    wait "$ppid"
    prc=$?
    [ "$prc" = 1 ] && grep -q "configured with partitions=16" "$TMP/p16.log" &&
        ok "weftd --set partitions=16 exits 1 and says why" || not_ok "weftd: exit $prc: $(cat "$TMP/p16.log")"
else
    kill -9 "$ppid"
    not_ok "weftd with partitions=16 kept running"
fi

# queue shards: a cluster's default is a shard per primary, fixed like the partitions; one hot
# type's tasks spread over every primary, and all of them are claimed
[ "$(redis-cli -c -p "$1" HGET "${WEFT_KEY_PREFIX}layout" queue_shards)" = 3 ] &&
    ok "a new prefix on a 3-primary cluster gets 3 queue shards" || not_ok "layout: $(redis-cli -c -p "$1" HGETALL "${WEFT_KEY_PREFIX}layout")"
WEFT_QUEUE_SHARDS=3,LAMBDA=2 run_weft status nosuch
expect_rc "WEFT_QUEUE_SHARDS=3,LAMBDA=2 against a prefix of 3" 2
expect_err "names both" "was first used with queue_shards=3 (kept in ${WEFT_KEY_PREFIX}layout), and this process is configured with queue_shards=3,LAMBDA=2"
ids=
for i in $(seq 1 60); do
    run_weft start "$TMP/c1.lua" --input "{\"n\":$i}"
    ids="$ids $last"
done
n=0
total=0
for p in $(redis-cli -p "$1" cluster nodes | grep master | sed 's/.*:\([0-9]*\)@.*/\1/'); do
    k=0
    for key in $(redis-cli -p "$p" --scan --pattern "${WEFT_KEY_PREFIX}{q:LAMBDA|*}:ready"); do
        k=$((k + $(redis-cli -p "$p" ZCARD "$key")))
    done
    [ "$k" -gt 0 ] && n=$((n + 1))
    total=$((total + k))
done
base=$(redis-cli -c -p "$1" ZCARD "${WEFT_KEY_PREFIX}{q:LAMBDA}:ready")
[ "$n" = 3 ] && [ "$total" = 60 ] && [ "$base" = 0 ] &&
    ok "60 queued LAMBDA tasks sit in shards on all 3 primaries, none in the base queue" ||
    not_ok "LAMBDA shards: $total tasks on $n primaries, $base in the base queue"
"$BUILD/runtime/weftd" --no-api --workers 2 --id c2 >"$TMP/c2.log" 2>&1 &
wpid=$!
bad=0
i=0
for id in $ids; do
    i=$((i + 1))
    run_weft wait "$id" --timeout 20
    "$JSONEQ" "$last" "{\"result\":{\"n\":$((i * 2))}}" || { bad=$((bad + 1)); echo "# $id: $last $errout"; }
done
[ "$bad" = 0 ] && ok "weftd claimed them from every shard: 60 right outputs" || not_ok "$bad of 60 workflows wrong"
kill "$wpid"
wait "$wpid"

# the suites against weftd, on this cluster (each under its own key prefix)
for s in daemon api api_input operator events secrets workers tree_ops queue_controls payload_refs \
    http busy_sweep depth search lost_writes; do
    WEFT_TEST_CLUSTER=$WEFT_REDIS_URL WEFT_KEY_PREFIX= bash "$(dirname "$0")/$s.sh" >"$TMP/$s.log" 2>&1
    rc=$?
    if [ "$rc" = 0 ]; then
        ok "$s.sh on the cluster: $(tail -n 1 "$TMP/$s.log")"
    else
        not_ok "$s.sh on the cluster: exit $rc, $(tail -n 1 "$TMP/$s.log")"
        grep '^not ok' "$TMP/$s.log" | head -n 20 | sed 's/^/# /'
    fi
done
finish
