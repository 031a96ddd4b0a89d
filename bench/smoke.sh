#!/bin/sh
# weft-bench runs each workload once, embedded and against a redis-server and
# weftd it starts itself, at a tiny N: the driver works and its JSON line has
# every field. Not a timed test: the figures are not checked.
. "${WEFT_TOP_SRCDIR:?run through make check}/tests/integration/lib.sh"
. "$SRC/tests/integration/redis_lib.sh"
BENCH="$BUILD/bench/weft-bench"
N=5

COMMON='system version workload mode store concurrency n tasks_per_wf seconds workflows_per_s tasks_per_s p50_ms p99_ms failed'
REDIS_ONLY='daemons redis_bytes_per_wf set_rps redis_round_trips_per_task weftd_cpu_us_per_task'

# bench NAME FIELDS ARGS...: run it, check exit 0, a JSON last line with FIELDS, n and no failures
bench() {
    name=$1 fields=$2; shift 2
    "$BENCH" "$@" >"$TMP/out" 2>"$TMP/err" &
    bench_pid=$!
    wait $bench_pid
    rc=$?
    last=$(tail -n 1 "$TMP/out")
    if [ "$rc" != 0 ]; then
        not_ok "$name: exit $rc"; sed 's/^/# /' "$TMP/err" | tail -20; return
    fi
    if ! "$JSONEQ" "$last" "$last" 2>/dev/null; then
        not_ok "$name: last line is not JSON: $last"; return
    fi
    missing=
    for f in $fields; do
        case $last in *"\"$f\":"*) ;; *) missing="$missing $f" ;; esac
    done
    if [ -n "$missing" ]; then not_ok "$name: JSON lacks$missing: $last"; return; fi
    case $last in
        *'"failed":0'*) ;;
        *) not_ok "$name: failures: $last"; return ;;
    esac
    ok "$name: $last"
}

for wl in queue chain5 fanout10; do
    bench "embedded $wl burst" "$COMMON cpu_us_per_task" --workload "$wl" --n $N --embedded
    bench "embedded $wl serial" "$COMMON" --workload "$wl" --n 3 --embedded --serial
done

start_redis
for wl in queue chain5 fanout10; do
    bench "redis $wl burst" "$COMMON $REDIS_ONLY" --workload "$wl" --n $N --redis "$WEFT_REDIS_URL" \
        --baseline-n 0 --workers 2
    bench "redis $wl serial" "$COMMON $REDIS_ONLY" --workload "$wl" --n 3 --serial \
        --redis "$WEFT_REDIS_URL" --baseline-n 0 --workers 2
done

# two daemons, and the SET baseline with its ratio (when redis-benchmark is installed)
if command -v redis-benchmark >/dev/null 2>&1; then extra=tasks_ratio_to_set; else extra=; fi
bench "redis chain5, 2 daemons, baseline" "$COMMON $REDIS_ONLY $extra" --workload chain5 --n $N \
    --redis "$WEFT_REDIS_URL" --daemons 2 --workers 2 --baseline-n 2000
case $last in *'"set_rps":null'*) [ -z "$extra" ] || not_ok "no SET baseline: $last" ;; esac

# the daemons are gone and the run's keys deleted (redis-benchmark's own key aside)
left=$(rcli --scan --pattern 'wbench*' | head -5)
if [ -z "$left" ]; then ok "no keys left behind"; else not_ok "keys left behind: $left"; fi
if pgrep -f "weftd.*--prefix wbench$bench_pid-" >/dev/null 2>&1; then
    not_ok "weftd processes left running"
else
    ok "no weftd left running"
fi

# on a Redis Cluster (3 primaries, no replica): the run's commands and keys
# per primary, summed, and none left behind
. "$SRC/tests/integration/cluster_lib.sh"
trap 'stop_cluster; cleanup_procs; rm -rf "$TMP"' EXIT
CLUSTER_REPLICAS=0 start_cluster
bench "cluster chain5 burst" "$COMMON $REDIS_ONLY primaries max_cmds_share max_keys_share" \
    --workload chain5 --n $N --redis "$WEFT_REDIS_URL" --baseline-n 0 --workers 2
case $last in
    *'"primaries":[{'*'},{'*'},{'*'}]'*) ok "three primaries reported" ;;
    *) not_ok "primaries: $last" ;;
esac
left=$(for p in $CLUSTER_PORTS; do redis-cli -p "$p" --scan --pattern 'wbench*'; done | head -5)
if [ -z "$left" ]; then ok "no keys left behind on the cluster"; else not_ok "keys left behind: $left"; fi

# usage errors
bench_usage() {
    "$BENCH" "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?; errout=$(cat "$TMP/err")
}
bench_usage --workload nope --embedded
expect_rc "unknown workload" 2
expect_err "unknown workload" "is not queue, chain5 or fanout10"
bench_usage --workload queue
expect_rc "no store" 2
expect_err "no store" "choose one of --redis URL and --embedded"
finish
