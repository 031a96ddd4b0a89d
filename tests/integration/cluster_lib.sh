# A real Redis Cluster for integration tests: 6 redis-server processes on
# loopback ports picked here (3 primaries, 3 replicas), joined with
# redis-cli --cluster create, stopped by pid. Source after lib.sh.
command -v redis-server >/dev/null 2>&1 || { echo "redis-server not installed: skipping"; exit 77; }
CLUSTER_PORTS=
CLUSTER_PIDS=
CLUSTER_DIR="$TMP/cluster"

cluster_port() {
    # a random high port nobody listens on whose bus port (+10000) is free too
    while :; do
        p=$(( 20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 12000 ))
        (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null && continue
        (exec 3<>/dev/tcp/127.0.0.1/$((p + 10000))) 2>/dev/null && continue
        case " $CLUSTER_PORTS " in *" $p "*) continue ;; esac
        echo $p
        return
    done
}

# start_cluster: 6 nodes, 1 replica per primary; exports WEFT_REDIS_URL as
# the three primaries' seeds
start_cluster() {
    mkdir -p "$CLUSTER_DIR"
    for i in 1 2 3 4 5 6; do
        p=$(cluster_port)
        mkdir -p "$CLUSTER_DIR/$p"
        redis-server --port "$p" --bind 127.0.0.1 --cluster-enabled yes \
            --cluster-config-file "$CLUSTER_DIR/$p/nodes.conf" --cluster-node-timeout 2000 \
            --save '' --appendonly no --dir "$CLUSTER_DIR/$p" --daemonize no \
            --logfile "$CLUSTER_DIR/$p/redis.log" &
        CLUSTER_PIDS="$CLUSTER_PIDS $!"
        CLUSTER_PORTS="$CLUSTER_PORTS $p"
    done
    for p in $CLUSTER_PORTS; do
        i=0
        until redis-cli -p "$p" ping >/dev/null 2>&1; do
            i=$((i + 1)); [ $i -gt 100 ] && { echo "redis-server on $p did not start"; exit 1; }
            sleep 0.05
        done
    done
    # shellcheck disable=SC2086
    redis-cli --cluster create $(for p in $CLUSTER_PORTS; do printf '127.0.0.1:%s ' "$p"; done) \
        --cluster-replicas 1 --cluster-yes >"$CLUSTER_DIR/create.log" 2>&1 ||
        { echo "redis-cli --cluster create failed"; cat "$CLUSTER_DIR/create.log"; exit 1; }
    set -- $CLUSTER_PORTS
    i=0
    # up, and every primary with its replica (failover tests need them)
    until [ "$(redis-cli -p "$1" cluster info | tr -d '\r' | grep '^cluster_state:')" = cluster_state:ok ] &&
        [ "$(redis-cli -p "$1" cluster nodes | grep -c slave)" = 3 ]; do
        i=$((i + 1)); [ $i -gt 400 ] && { echo "the cluster did not come up"; exit 1; }
        sleep 0.05
    done
    export WEFT_REDIS_URL="redis://127.0.0.1:$1,redis://127.0.0.1:$2,redis://127.0.0.1:$3"
    export WEFT_KEY_PREFIX="${WEFT_KEY_PREFIX:-t$$:}"
}

stop_cluster() {
    for p in $CLUSTER_PIDS; do kill "$p" 2>/dev/null; done
    for p in $CLUSTER_PIDS; do wait "$p" 2>/dev/null; done
    CLUSTER_PIDS=
}

# ccli KEY ARGS...: redis-cli on the node serving KEY's slot (-c follows MOVED)
ccli() { set -- $CLUSTER_PORTS; redis-cli -c -p "$1" "$@"; }
