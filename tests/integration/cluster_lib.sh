# A real Redis Cluster for integration tests: 6 redis-server processes on
# loopback ports picked here (3 primaries, 3 replicas), joined with
# redis-cli --cluster create, stopped by pid. Source after lib.sh.
command -v redis-server >/dev/null 2>&1 || { echo "redis-server not installed: skipping"; exit 77; }
CLUSTER_PORTS=${CLUSTER_PORTS:-}
CLUSTER_DIR=${CLUSTER_DIR:-$TMP/cluster}

cluster_port() {
    # a random port nobody listens on whose bus port (+10000) is free too: ports
    # 12000-13999, buses 22000-23999, apart from redis_lib.sh's 24000-31999 (the
    # tests run side by side) and below Linux's ephemeral range (32768-60999),
    # where a client socket may hold a port
    while :; do
        p=$(( 12000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 2000 ))
        (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null && continue
        (exec 3<>/dev/tcp/127.0.0.1/$((p + 10000))) 2>/dev/null && continue
        case " $CLUSTER_PORTS " in *" $p "*) continue ;; esac
        echo $p
        return
    done
}

# cluster_node PORT: one node (its files in $CLUSTER_DIR/PORT, its pid in pid
# there). A replica may always take over from its failed primary (validity
# factor 0): a freshly made cluster's replicas may not have heard from their
# primary for longer than Redis otherwise allows; and they sync at once
# (Redis waits 5 s for more replicas to sync with, by default).
cluster_node() {
    mkdir -p "$CLUSTER_DIR/$1"
    redis-server --port "$1" --bind 127.0.0.1 --cluster-enabled yes \
        --cluster-config-file "$CLUSTER_DIR/$1/nodes.conf" --cluster-node-timeout 2000 \
        --cluster-replica-validity-factor 0 --repl-diskless-sync-delay 0 \
        --save '' --appendonly no --dir "$CLUSTER_DIR/$1" --daemonize no \
        --pidfile "$CLUSTER_DIR/$1/pid" --logfile "$CLUSTER_DIR/$1/redis.log" &
    CLUSTER_JOBS="${CLUSTER_JOBS:-} $!"
    i=0
    until redis-cli -p "$1" ping >/dev/null 2>&1; do
        i=$((i + 1))
        [ $i -gt 100 ] && { echo "redis-server on $1 did not start:"; tail -n 5 "$CLUSTER_DIR/$1/redis.log"; exit 1; }
        sleep 0.05
    done
}

# replicas_synced: every replica's link to its primary is up (a replica that
# has not synced yet would take over with nothing)
replicas_synced() {
    for p in $CLUSTER_PORTS; do
        redis-cli -p "$p" info replication | tr -d '\r' | grep -q '^role:slave' || continue
        redis-cli -p "$p" info replication | tr -d '\r' | grep -q '^master_link_status:up' || return 1
    done
}

# every_node_ok: every node says cluster_state:ok (each one learns it on its own)
every_node_ok() {
    for p in $CLUSTER_PORTS; do
        [ "$(redis-cli -p "$p" cluster info | tr -d '\r' | grep '^cluster_state:')" = cluster_state:ok ] ||
            return 1
    done
}

# cluster_ok: until every slot is served and every primary has its replica, synced
cluster_ok() {
    set -- $CLUSTER_PORTS
    i=0
    until every_node_ok &&
        [ "$(redis-cli -p "$1" cluster nodes | grep -v fail | grep -c slave)" = $((3 * ${CLUSTER_REPLICAS:-1})) ] &&
        replicas_synced; do
        i=$((i + 1)); [ $i -gt 600 ] && { echo "the cluster did not come up"; return 1; }
        sleep 0.05
    done
}

# start_cluster: 6 nodes, 1 replica per primary (CLUSTER_REPLICAS=0: the 3
# primaries alone); exports WEFT_REDIS_URL as the three primaries' seeds
start_cluster() {
    local replicas=${CLUSTER_REPLICAS:-1}
    mkdir -p "$CLUSTER_DIR"
    for i in $(seq 1 $((3 * (1 + replicas)))); do
        p=$(cluster_port)
        CLUSTER_PORTS="$CLUSTER_PORTS $p"
    done
    for p in $CLUSTER_PORTS; do cluster_node "$p"; done
    # shellcheck disable=SC2086
    redis-cli --cluster create $(for p in $CLUSTER_PORTS; do printf '127.0.0.1:%s ' "$p"; done) \
        --cluster-replicas "$replicas" --cluster-yes >"$CLUSTER_DIR/create.log" 2>&1 ||
        { echo "redis-cli --cluster create failed"; cat "$CLUSTER_DIR/create.log"; exit 1; }
    cluster_ok || exit 1
    set -- $CLUSTER_PORTS
    export WEFT_REDIS_URL="redis://127.0.0.1:$1,redis://127.0.0.1:$2,redis://127.0.0.1:$3"
    export WEFT_KEY_PREFIX="${WEFT_KEY_PREFIX:-t$$:}"
    export CLUSTER_PORTS CLUSTER_DIR
}

# kill_cluster [SIGNAL]: every node (its data goes: nothing is saved)
kill_cluster() {
    for p in $CLUSTER_PORTS; do
        [ -f "$CLUSTER_DIR/$p/pid" ] && kill -"${1:-TERM}" "$(cat "$CLUSTER_DIR/$p/pid")" 2>/dev/null
    done
    for p in $CLUSTER_PORTS; do
        i=0
        while redis-cli -p "$p" ping >/dev/null 2>&1 && [ $i -lt 100 ]; do i=$((i + 1)); sleep 0.05; done
        rm -f "$CLUSTER_DIR/$p/pid"
    done
}

# restart_cluster: the nodes killed come back (empty) with their slots
restart_cluster() {
    for p in $CLUSTER_PORTS; do
        redis-cli -p "$p" ping >/dev/null 2>&1 || cluster_node "$p"
    done
    cluster_ok
}

stop_cluster() {
    kill_cluster TERM
    # shellcheck disable=SC2086
    [ -z "${CLUSTER_JOBS:-}" ] || wait $CLUSTER_JOBS 2>/dev/null # its nodes only: a runner's other jobs go on
    CLUSTER_JOBS=
}

# ccli KEY ARGS...: redis-cli on the node serving KEY's slot (-c follows MOVED)
ccli() { set -- $CLUSTER_PORTS; redis-cli -c -p "$1" "$@"; }
