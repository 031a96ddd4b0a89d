# Real redis-server and weftd processes for integration tests, on loopback
# ports picked here and stopped by pid. Source after lib.sh.
command -v redis-server >/dev/null 2>&1 || { echo "redis-server not installed: skipping"; exit 77; }
WEFTD="$BUILD/runtime/weftd"
REDIS_PORT=
REDIS_PID=
WEFTD_PIDS=
REDIS_DIR="$TMP/redis"
mkdir -p "$REDIS_DIR"

free_port() {
    # a random high port nobody listens on, below Linux's ephemeral range
    # (32768-60999): a client socket's port there, even in TIME_WAIT, makes
    # redis-server's bind fail with "Address already in use"; and above the
    # cluster's ports and bus ports (cluster_lib.sh)
    while :; do
        p=$(( 24000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 8000 ))
        (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null || { echo $p; return; }
    done
}

# On a Redis Cluster (cluster.sh sets WEFT_TEST_CLUSTER to the seeds' URL
# list, with CLUSTER_PORTS and CLUSTER_DIR, and runs a suite): start_redis
# uses that cluster (restarting nodes a kill stopped), kill_redis and
# stop_redis stop every node, redis-cli follows MOVED (-c) and REDIS_PORT is
# the first node.
if [ -n "${WEFT_TEST_CLUSTER:-}" ]; then
    . "$(dirname "$0")/cluster_lib.sh"
    mkdir -p "$TMP/bin"
    printf '#!/bin/sh\nexec %s -c "$@"\n' "$(command -v redis-cli)" >"$TMP/bin/redis-cli"
    chmod +x "$TMP/bin/redis-cli"
    PATH="$TMP/bin:$PATH"
fi

# start_redis [durable]: durable = appendonly with fsync on every write
start_redis() {
    if [ -n "${WEFT_TEST_CLUSTER:-}" ]; then
        restart_cluster || exit 1
        set -- $CLUSTER_PORTS
        REDIS_PORT=$1
        export WEFT_REDIS_URL="$WEFT_TEST_CLUSTER"
        export WEFT_KEY_PREFIX="${WEFT_KEY_PREFIX:-t$$:}"
        return
    fi
    [ -n "$REDIS_PORT" ] || REDIS_PORT=$(free_port)
    aof="--appendonly no"
    [ "${1:-}" = durable ] && aof="--appendonly yes --appendfsync always"
    # shellcheck disable=SC2086
    redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' $aof --dir "$REDIS_DIR" \
        --daemonize no --logfile "$REDIS_DIR/redis.log" &
    REDIS_PID=$!
    i=0
    while ! redis-cli -p "$REDIS_PORT" ping >/dev/null 2>&1; do
        i=$((i + 1)); [ $i -gt 100 ] && { echo "redis-server did not start"; cat "$REDIS_DIR/redis.log"; exit 1; }
        sleep 0.05
    done
    export WEFT_REDIS_URL="redis://127.0.0.1:$REDIS_PORT"
    export WEFT_KEY_PREFIX="${WEFT_KEY_PREFIX:-t$$:}"
}

kill_redis() { # SIGKILL
    [ -n "${WEFT_TEST_CLUSTER:-}" ] && { kill_cluster KILL; return; }
    [ -n "$REDIS_PID" ] && kill -9 "$REDIS_PID" 2>/dev/null && wait "$REDIS_PID" 2>/dev/null
    REDIS_PID=
}

stop_redis() {
    [ -n "${WEFT_TEST_CLUSTER:-}" ] && { kill_cluster TERM; return; }
    [ -n "$REDIS_PID" ] && kill "$REDIS_PID" 2>/dev/null && wait "$REDIS_PID" 2>/dev/null
    REDIS_PID=
}

# start_weftd NAME [ARGS...]: its log goes to $TMP/NAME.log; its pid into WEFTD_PID_<NAME>
start_weftd() {
    name=$1; shift
    # no REST API unless asked for: several daemons share this host
    case " $* " in *" --api "*) api= ;; *) api=--no-api ;; esac
    "$WEFTD" --id "$name" $api "$@" >>"$TMP/$name.log" 2>&1 &
    eval "WEFTD_PID_$name=$!"
    WEFTD_PIDS="$WEFTD_PIDS $!"
}

weftd_pid() { eval "echo \$WEFTD_PID_$1"; }

kill_weftd() { # NAME [SIGNAL]
    pid=$(weftd_pid "$1")
    kill -"${2:-TERM}" "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
}

# stop_weftd_clean NAME: SIGTERM, then its log must hold no sanitizer
# report (a sanitizer build reports leaks and errors at exit)
stop_weftd_clean() {
    kill_weftd "$1"
    if grep -q 'Sanitizer\|runtime error:' "$TMP/$1.log"; then
        not_ok "weftd's log has sanitizer reports"
        grep -A 20 'Sanitizer\|runtime error:' "$TMP/$1.log" | head -n 40 | sed 's/^/# /'
    else
        ok "weftd stopped cleanly"
    fi
}

cleanup_procs() {
    for p in $WEFTD_PIDS; do kill -9 "$p" 2>/dev/null; done
    [ -n "${WEFT_TEST_CLUSTER:-}" ] || kill_redis # a cluster is its runner's
}
trap 'cleanup_procs; rm -rf "$TMP"' EXIT

rcli() { redis-cli -p "$REDIS_PORT" "$@"; }

# dq_key ID: the key of ID's decider queue partition (P{dq}:due on one partition)
dq_key() {
    echo "${WEFT_KEY_PREFIX}{$("$BUILD/tests/slotcheck" dq "$(rcli HGET "${WEFT_KEY_PREFIX}layout" partitions)" "$1")}:due"
}

# on_primaries ARGS...: redis-cli ARGS on every primary of the cluster (on
# the one Redis without one), their outputs one after the other
on_primaries() {
    if [ -n "${WEFT_TEST_CLUSTER:-}" ]; then
        for p in $(redis-cli -p "$REDIS_PORT" cluster nodes | grep master | grep -v fail |
            sed 's/.*:\([0-9]*\)@.*/\1/'); do
            redis-cli -p "$p" "$@"
        done
    else
        rcli "$@"
    fi
}

# api_of NAME: the HOST:PORT a daemon started with --api 127.0.0.1:0 logged
# in its "started" line; fails, its log on stderr, when it did not start
api_of() {
    wait_for 20 grep -q 'msg="started:' "$TMP/$1.log" ||
        { echo "weftd $1 did not start" >&2; cat "$TMP/$1.log" >&2; return 1; }
    grep -o 'api=127\.0\.0\.1:[0-9]*' "$TMP/$1.log" | head -n 1 | cut -d= -f2
}

# wf_status ID: a workflow's status through the REST API at $API (jq);
# wait_status ID STATUS: until it has that status (20 s at most)
wf_status() { curl -s "$API/api/workflow/$1?includeTasks=false" | jq -r .status; }
wait_status() {
    end=$(( $(date +%s) + 20 ))
    until [ "$(wf_status "$1")" = "$2" ]; do
        [ "$(date +%s)" -ge "$end" ] && return 1
        sleep 0.1
    done
}

# wait_for SECONDS CMD...: until CMD succeeds
wait_for() {
    t=$1; shift
    end=$(( $(date +%s) + t ))
    until "$@" >/dev/null 2>&1; do
        [ "$(date +%s)" -ge "$end" ] && return 1
        sleep 0.1
    done
}
