#!/bin/bash
# A start whose outcome is unknown (Redis stalled past the API's timeout) is
# never answered as safely retryable: a 504 (no Retry-After) says the run
# may exist, names its id and is "retryable": false, and the run is found under that id once
# Redis answers. With an idempotency key a retry is safe: retryable, and
# retrying gives the same run.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/redis_lib.sh"

start_redis
# one API thread: its connection is made by the first start, so a later
# start sends its create at once (a new connection would stall before it)
start_weftd d1 --workers 1 --api 127.0.0.1:0 --set api_threads=1
API="http://$(api_of d1)" || exit 1
# a LAMBDA: its start's first round trip is the create (a SIMPLE task's
# TaskDef is looked up first, and a start that fails there did not happen)
body='{"name":"s","workflowDef":{"name":"s","tasks":[{"name":"l","taskReferenceName":"l","type":"LAMBDA","inputParameters":{"scriptExpression":"return 1"}}]}}'
curl -s -o /dev/null -X POST "$API/api/workflow" -H 'Content-Type: application/json' -d "$body"
# its end indexed before Redis stalls (an end's steps cut off by the stall wait in
# the outbox for the sweeper, 30 s on)
wait_for 20 sh -c "[ \"\$(curl -s '$API/api/workflow/search?query=workflowType%3Ds' | jq .totalHits)\" = 1 ]" ||
    not_ok "the first run of s is not found"

# stall SECONDS: Redis stops answering (SIGSTOP) for that long, from now
stall() {
    kill -STOP "$REDIS_PID"
    (sleep "$1"; kill -CONT "$REDIS_PID") &
    sleeper=$!
}
# Redis stalls past the API's answer timeout (5 s a reply; a start is tried again once) while the start is sent
stall 12
code=$(curl -s -D "$TMP/h1" -o "$TMP/r1" -w '%{http_code}' -X POST "$API/api/workflow" -H 'Content-Type: application/json' -d "$body")
wait "$sleeper"
[ "$code" = 504 ] && ok "a stalled start: 504" || not_ok "a stalled start: $code $(cat "$TMP/r1")"
jq -e '.retryable == false' "$TMP/r1" >/dev/null && ok "not retryable" || not_ok "retryable: $(cat "$TMP/r1")"
grep -qi '^retry-after' "$TMP/h1" && not_ok "a Retry-After with it" || ok "no Retry-After"
id=$(jq -r '.workflowId // empty' "$TMP/r1")
[ -n "$id" ] && ok "names the run's id" || not_ok "no workflowId: $(cat "$TMP/r1")"
grep -q "may have" "$TMP/r1" && ok "says the run may exist" || not_ok "message: $(cat "$TMP/r1")"
wait_for 20 sh -c "curl -s '$API/api/workflow/$id' | grep -q '\"workflowId\"'" &&
    ok "the run is found under that id" || not_ok "no run $id: $(curl -s "$API/api/workflow/$id")"
wait_for 10 sh -c "[ \"\$(curl -s '$API/api/workflow/search?query=workflowType%3Ds' | jq .totalHits)\" = 2 ]" &&
    ok "two runs in all (none retried behind the client's back)" ||
    not_ok "$(curl -s "$API/api/workflow/search?query=workflowType%3Ds" | jq .totalHits) runs of s"

# with an idempotency key, retrying is safe and says so
kbody='{"name":"s","idempotencyKey":"k-1","workflowDef":{"name":"s","tasks":[{"name":"l","taskReferenceName":"l","type":"LAMBDA","inputParameters":{"scriptExpression":"return 1"}}]}}'
stall 12
code=$(curl -s -o "$TMP/r2" -w '%{http_code}' -X POST "$API/api/workflow" -H 'Content-Type: application/json' -d "$kbody")
wait "$sleeper"
[ "$code" = 503 ] && jq -e '.retryable == true' "$TMP/r2" >/dev/null && ok "with a key: 503, retryable" ||
    not_ok "with a key: $code $(cat "$TMP/r2")"
again=$(curl -s -X POST "$API/api/workflow" -H 'Content-Type: application/json' -d "$kbody")
again2=$(curl -s -X POST "$API/api/workflow" -H 'Content-Type: application/json' -d "$kbody")
first=$(jq -r '.workflowId // empty' "$TMP/r2")
[ -n "$again" ] && [ "$again" = "$again2" ] && { [ -z "$first" ] || [ "$first" = "$again" ]; } &&
    ok "retries give one run" || not_ok "retries: $again, $again2 (first $first)"
wait_for 10 sh -c "[ \"\$(curl -s '$API/api/workflow/search?query=workflowType%3Ds' | jq .totalHits)\" = 3 ]" &&
    ok "three runs in all" || not_ok "$(curl -s "$API/api/workflow/search?query=workflowType%3Ds" | jq .totalHits) runs of s"

# the weft client over Redis says the same: exit 4 (unreachable), the id, may have started
cat >"$TMP/s.lua" <<'L'
local w = require "weft"
return w.workflow { name = "s", w.lambda { ref = "l", script = "return 1" } }
L
stall 12
run_weft start "$TMP/s.lua"
wait "$sleeper"
expect_rc "weft start, Redis stalled" 4
expect_err "weft start, Redis stalled" "may have"
stop_weftd_clean d1
finish
