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
    # redis-server's bind fail with "Address already in use"
    while :; do
        p=$(( 20000 + $(od -An -N2 -tu2 /dev/urandom | tr -d ' ') % 12000 ))
        (exec 3<>/dev/tcp/127.0.0.1/$p) 2>/dev/null || { echo $p; return; }
    done
}

# start_redis [durable]: durable = appendonly with fsync on every write
start_redis() {
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
    [ -n "$REDIS_PID" ] && kill -9 "$REDIS_PID" 2>/dev/null && wait "$REDIS_PID" 2>/dev/null
    REDIS_PID=
}

stop_redis() {
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
    kill_redis
}
trap 'cleanup_procs; rm -rf "$TMP"' EXIT

rcli() { redis-cli -p "$REDIS_PORT" "$@"; }

# api_of NAME: the HOST:PORT a daemon started with --api 127.0.0.1:0 logged
# in its "started" line; fails, its log on stderr, when it did not start
api_of() {
    wait_for 20 grep -q 'msg="started:' "$TMP/$1.log" ||
        { echo "weftd $1 did not start" >&2; cat "$TMP/$1.log" >&2; return 1; }
    grep -o 'api=127\.0\.0\.1:[0-9]*' "$TMP/$1.log" | head -n 1 | cut -d= -f2
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
