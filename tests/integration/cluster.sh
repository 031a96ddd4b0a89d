#!/bin/bash
# weft against a real Redis Cluster (6 redis-server processes on loopback:
# 3 primaries, 3 replicas). Until weft speaks the cluster protocol, a cluster
# node is refused at connect with a clear message, before any work is
# accepted: the weft client exits 2, weftd exits 1 (it used to accept some
# starts and leave them RUNNING, and answer the rest 503 MOVED).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/cluster_lib.sh"
trap 'stop_cluster; rm -rf "$TMP"' EXIT
start_cluster
ok "a 6-node cluster is up (3 primaries with a replica each)"
set -- $CLUSTER_PORTS
node="redis://127.0.0.1:$1"
# the slot map weft will route with (store/redis/slots.c), against the cluster
out=$("$BUILD/tests/slotcheck" 127.0.0.1 "$1" 300 2>&1) && [ "$out" = "ok 300 keys on 3 primaries" ] &&
    ok "slots.c's map sends each of 300 keys to the primary that takes it, CLUSTER KEYSLOT agrees" ||
    not_ok "slotcheck: $out"
for p in $CLUSTER_PORTS; do redis-cli -p "$p" flushall >/dev/null 2>&1; done # (replicas refuse: fine)
cat >"$TMP/c1.lua" <<'LUA'
local w = require "weft"
return w.workflow { name = "c1", w.lambda { ref = "a", script = "return 1" } }
LUA
run_weft start "$TMP/c1.lua" --redis "$node"
expect_rc "weft start against a cluster node" 2
expect_err "says why" "is a node of a Redis Cluster"
"$BUILD/runtime/weftd" --redis "$node" --no-api --workers 1 >"$TMP/weftd.log" 2>&1 &
pid=$!
i=0
while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
if kill -0 "$pid" 2>/dev/null; then
    kill -9 "$pid"
    not_ok "weftd kept running against a cluster node"
else
    wait "$pid"
    rc=$?
    [ "$rc" = 1 ] && grep -q "is a node of a Redis Cluster" "$TMP/weftd.log" &&
        ok "weftd exits 1 and says why" || not_ok "weftd: exit $rc: $(cat "$TMP/weftd.log")"
fi
keys=0
for p in $CLUSTER_PORTS; do keys=$((keys + $(redis-cli -p "$p" dbsize))); done
[ "$keys" = 0 ] && ok "weft and weftd wrote nothing to the cluster" || not_ok "$keys keys written"
finish
