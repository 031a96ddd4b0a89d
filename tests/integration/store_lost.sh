#!/bin/bash
# A store that lost its data says so: Redis flushed, or restarted empty,
# under a running weftd with running workflows. The daemon logs an error
# naming the loss and what it knew, /health reports it, /metrics counts it;
# a fresh start on an empty Redis and a restart on kept data are no loss.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/redis_lib.sh"
command -v curl >/dev/null 2>&1 || { echo "curl not installed: skipping"; exit 77; }
start_redis
start_weftd d1 --workers 1 --api 127.0.0.1:0
API="http://$(api_of d1)" || { not_ok "weftd did not start"; finish; exit 1; }
losses() { curl -s "$API/metrics" | grep '^weft_store_data_losses_total ' | cut -d' ' -f2; }
lost_lines() { grep -c 'level=error.*lost its data' "$TMP/d1.log"; }

# a fresh start on an empty Redis is no loss
[ "$(rcli --scan --pattern "${WEFT_KEY_PREFIX}epoch")" = "${WEFT_KEY_PREFIX}epoch" ] &&
    ok "weftd wrote the store's epoch key at first use" || not_ok "no epoch key: $(rcli --scan | head -5)"
[ "$(lost_lines)" = 0 ] && ok "a fresh start logs no loss" || not_ok "fresh start: $(grep 'lost its data' "$TMP/d1.log")"
[ "$(losses)" = 0 ] && ok "/metrics: weft_store_data_losses_total 0" || not_ok "metrics at start: $(losses)"
body=$(curl -s "$API/health")
case $body in *'"status":"UP"'*) ok "/health: UP ($body)" ;; *) not_ok "/health at start: $body" ;; esac

for i in $(seq 1 20); do
    curl -s -o /dev/null -X POST "$API/api/workflow" -d '{"workflowDef":{"name":"kept","tasks":[{"name":"kept_q","taskReferenceName":"k","type":"SIMPLE"}]}}'
done
wait_for 10 sh -c "curl -s '$API/api/tasks/queue/sizes?taskType=kept_q' | grep -q '\"kept_q\":20'" &&
    ok "20 workflows running" || not_ok "queue: $(curl -s "$API/api/tasks/queue/sizes?taskType=kept_q")"
sleep 2 # a heartbeat sees them

# FLUSHALL: the connections stay, the keeper's heartbeat finds the epoch gone
rcli flushall >/dev/null
wait_for 10 sh -c "grep -q 'level=error.*lost its data' '$TMP/d1.log'" &&
    ok "FLUSHALL: an error is logged within seconds" || not_ok "FLUSHALL: nothing logged"
line=$(grep 'level=error.*lost its data' "$TMP/d1.log" | head -n 1)
case $line in *"20 unfinished workflow"*) ok "the log line says what was lost: $line" ;;
    *) not_ok "the log line lacks the count: $line" ;; esac
sleep 2
[ "$(lost_lines)" = 1 ] && ok "one line for one loss" || not_ok "$(lost_lines) lines for one loss"
[ "$(losses)" = 1 ] && ok "/metrics: weft_store_data_losses_total 1" || not_ok "metrics: $(losses)"
curl -s "$API/metrics" | grep -q '^weft_store_data_lost_timestamp_seconds [1-9]' &&
    ok "/metrics: weft_store_data_lost_timestamp_seconds is set" || not_ok "no loss timestamp"
body=$(curl -s -o "$TMP/h" -w '%{http_code}' "$API/health")
h=$(cat "$TMP/h")
case $h in *'"status":"DEGRADED"'*'"store":"DATA_LOST"'*'"problem":"'*lost*) ok "/health says so ($body): $h" ;;
    *) not_ok "/health after the loss: $body $h" ;; esac
[ "$(rcli --scan --pattern "${WEFT_KEY_PREFIX}epoch")" = "${WEFT_KEY_PREFIX}epoch" ] &&
    ok "a new epoch key is written" || not_ok "no new epoch key"

# Redis restarted empty: the connections break, the reconnect finds no epoch
curl -s -o /dev/null -X POST "$API/api/workflow" -d '{"workflowDef":{"name":"kept","tasks":[{"name":"kept_q","taskReferenceName":"k","type":"SIMPLE"}]}}'
sleep 1.5
stop_redis
start_redis
wait_for 15 sh -c "[ \$(grep -c 'level=error.*lost its data' '$TMP/d1.log') -ge 2 ]" &&
    ok "Redis restarted empty: an error is logged" || not_ok "restart: $(lost_lines) loss lines"
sleep 2
[ "$(lost_lines)" = 2 ] && ok "one line for the second loss" || not_ok "$(lost_lines) lines after two losses"
[ "$(losses)" = 2 ] && ok "/metrics: weft_store_data_losses_total 2" || not_ok "metrics: $(losses)"

# a restart of weftd on kept data is no loss
stop_weftd_clean d1
start_weftd d2 --workers 1
wait_for 20 grep -q 'msg="started:' "$TMP/d2.log" || not_ok "d2 did not start"
sleep 2
grep -q 'lost its data' "$TMP/d2.log" && not_ok "a restart on kept data logged a loss" || ok "a restart on kept data is no loss"
stop_weftd_clean d2
finish
