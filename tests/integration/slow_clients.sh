#!/bin/bash
# Slow clients cannot lock others out of weftd's REST API: a slowloris
# attack (hundreds of connections sending a header byte per second) leaves
# /health answering; past the total and per-client connection limits a
# request gets a clear 503; a request that takes longer than
# api_request_timeout to arrive is dropped; event streams and long polls
# do not hold up the threads that serve the rest.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/redis_lib.sh"
command -v curl >/dev/null 2>&1 || { echo "curl not installed: skipping"; exit 77; }
command -v python3 >/dev/null 2>&1 || { echo "python3 not installed: skipping"; exit 77; }
SLOW="python3 $SRC/tests/integration/slow_clients.py"
start_redis

# probe URL [SRC]: the HTTP code of one GET (000 = no answer within 3 s)
probe() { curl -s -o "$TMP/probe" -w '%{http_code}' --max-time 3 ${2:+--interface "$2"} "$1"; }

# ---- a slowloris attack on a daemon with the default limits ----
start_weftd d1 --workers 1 --api 127.0.0.1:0
ADDR=$(api_of d1) || { echo "$ADDR"; finish; exit 1; }
API="http://$ADDR"
PORT=${API##*:}
$SLOW drip "$PORT" 127.0.0.2 600 14 >"$TMP/drip" 2>&1 &
drip=$!
sleep 3
good=0
for i in 1 2 3 4 5 6 7 8 9 10; do
    [ "$(probe "$API/health")" = 200 ] && good=$((good + 1))
    sleep 0.8
done
[ "$good" = 10 ] && ok "during a 600-connection slowloris attack, 10 of 10 /health probes answer 200" ||
    not_ok "during a slowloris attack only $good of 10 /health probes answered 200"
wait $drip
grep -q 'closed=[1-9]' "$TMP/drip" && ok "connections over the per-client limit are closed ($(cat "$TMP/drip"))" ||
    not_ok "the attacker kept every connection: $(cat "$TMP/drip")"
[ "$(probe "$API/health")" = 200 ] && ok "/health after the attack" || not_ok "/health after the attack"
stop_weftd_clean d1

# ---- small limits: streams, long polls, 503s, the request timeout ----
start_weftd d2 --workers 1 --api 127.0.0.1:0 --set api_threads=2 --set api_max_connections=50 \
    --set api_max_connections_per_ip=20 --set api_request_timeout=3s
ADDR=$(api_of d2) || { echo "$ADDR"; not_ok "weftd d2 did not start"; finish; exit 1; }
API="http://$ADDR"
PORT=${API##*:}
wid=$(curl -s -X POST "$API/api/workflow" -d '{"workflowDef":{"name":"slow","tasks":[{"name":"slow_q","taskReferenceName":"s","type":"SIMPLE"}]}}')
case $wid in *-*) ok "a workflow to watch ($wid)" ;; *) not_ok "start: $wid" ;; esac
pids=
for i in $(seq 1 12); do
    curl -s -N --max-time 30 --interface 127.0.0.5 "$API/api/workflow/$wid/events" >"$TMP/sse$i" &
    pids="$pids $!"
done
for i in $(seq 1 12); do
    curl -s --max-time 30 --interface 127.0.0.6 "$API/api/tasks/poll/batch/none_q?timeout=6000" >"$TMP/lp$i" &
    pids="$pids $!"
done
sleep 1
good=0 t0=$(date +%s%3N)
for i in 1 2 3 4 5; do [ "$(probe "$API/health")" = 200 ] && good=$((good + 1)); done
t1=$(date +%s%3N)
[ "$good" = 5 ] && ok "12 event streams and 12 long polls on 2 threads: /health answers ($((t1 - t0)) ms for 5)" ||
    not_ok "with 12 event streams and 12 long polls, $good of 5 /health probes answered"
code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 -X POST "$API/api/tasks/$wid/s/COMPLETED" -d '{"r":1}')
[ "$code" = 200 ] && ok "the task completed through the API" || not_ok "completing the task: $code"
for p in $pids; do wait "$p"; done
n=0
for i in $(seq 1 12); do grep -q '"status":"COMPLETED","output"' "$TMP/sse$i" && n=$((n + 1)); done
[ "$n" = 12 ] && ok "each of the 12 streams saw the workflow end" || not_ok "$n of 12 streams saw the end"
n=0
for i in $(seq 1 12); do [ "$(cat "$TMP/lp$i")" = "[]" ] && n=$((n + 1)); done
[ "$n" = 12 ] && ok "each of the 12 long polls answered []" || not_ok "$n of 12 long polls answered []"

# over the per-client limit: 503 naming the limit
rm -f "$TMP/ready"
$SLOW hold "$PORT" 127.0.0.7 20 "$TMP/ready" 2 >/dev/null &
hp=$!
wait_for 5 test -f "$TMP/ready"
code=$(probe "$API/health" 127.0.0.7)
[ "$code" = 503 ] && grep -q 'api_max_connections_per_ip' "$TMP/probe" &&
    ok "a client over api_max_connections_per_ip gets 503 ($(cat "$TMP/probe"))" ||
    not_ok "over the per-client limit: $code $(cat "$TMP/probe")"
[ "$(probe "$API/health")" = 200 ] && ok "another client still gets 200" || not_ok "another client: $(cat "$TMP/probe")"
wait $hp

# over the total limit: 503 naming the limit, with Retry-After
rm -f "$TMP/ready"*
hps=
for i in 1 2 3; do
    $SLOW hold "$PORT" 127.0.0.1$i 17 "$TMP/ready$i" 2 >/dev/null &
    hps="$hps $!"
done
wait_for 5 test -f "$TMP/ready1" -a -f "$TMP/ready2" -a -f "$TMP/ready3"
hdrs=$(curl -s -D - -o "$TMP/probe" --max-time 3 "$API/health" | tr -d '\r')
case $hdrs in *" 503 "*"Retry-After:"*) ok "over api_max_connections: 503 with Retry-After" ;;
    *) not_ok "over the total limit: $hdrs" ;; esac
grep -q '"message":".*api_max_connections' "$TMP/probe" && ok "the 503 names api_max_connections" ||
    not_ok "503 body: $(cat "$TMP/probe")"
for p in $hps; do wait "$p"; done
wait_for 5 sh -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' '$API/health')\" = 200 ]" &&
    ok "/health answers 200 once the connections are gone" || not_ok "after the connections left: $(probe "$API/health")"

# a request dripping in slower than api_request_timeout is dropped
secs=$($SLOW closes "$PORT" 127.0.0.8 15)
case $secs in open) not_ok "a dripping request is never dropped" ;;
    *) awk "BEGIN{exit !($secs >= 2 && $secs <= 9)}" && ok "a dripping request is dropped after ${secs} s (api_request_timeout=3s)" ||
        not_ok "a dripping request was dropped after $secs s" ;; esac
# stopping with event streams and long polls waiting: they are ended, the daemon stops
wid=$(curl -s -X POST "$API/api/workflow" -d '{"workflowDef":{"name":"slow","tasks":[{"name":"slow_q","taskReferenceName":"s","type":"SIMPLE"}]}}')
pids=
for i in 1 2 3 4; do
    curl -s -N --max-time 60 "$API/api/workflow/$wid/events" >/dev/null &
    pids="$pids $!"
    curl -s --max-time 60 "$API/api/tasks/poll/batch/none_q?timeout=20000" >/dev/null &
    pids="$pids $!"
done
sleep 1
t0=$(date +%s)
stop_weftd_clean d2
for p in $pids; do wait "$p"; done
t1=$(date +%s)
[ $((t1 - t0)) -lt 15 ] && ok "stopped with 4 streams and 4 long polls waiting, in $((t1 - t0)) s; their clients were answered" ||
    not_ok "stopping with streams and long polls took $((t1 - t0)) s"
finish
