#!/bin/bash
# weft on a real Redis Cluster (6 redis-server processes on loopback: 3
# primaries, 3 replicas), with the same binaries and URL form as on one
# Redis: the store routes each command by its key's slot, and the suites
# that run against weftd and one Redis run again here, on the cluster
# (redis_lib.sh's cluster mode).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster_lib.sh"
trap 'stop_cluster; rm -rf "$TMP"' EXIT
start_cluster
ok "a 6-node cluster is up (3 primaries with a replica each)"
set -- $CLUSTER_PORTS

# the slot map weft routes with (store/redis/slots.c), against the cluster
out=$("$BUILD/tests/slotcheck" 127.0.0.1 "$1" 300 2>&1) && [ "$out" = "ok 300 keys on 3 primaries" ] &&
    ok "slots.c's map sends each of 300 keys to the primary that takes it, CLUSTER KEYSLOT agrees" ||
    not_ok "slotcheck: $out"

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
expect_rc "a /db on a cluster" 2
expect_err "says why" "SELECT is not allowed in cluster mode"

# the suites against weftd, on this cluster (each under its own key prefix)
for s in daemon api api_input operator events secrets workers tree_ops queue_controls payload_refs \
    http busy_sweep depth; do
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
