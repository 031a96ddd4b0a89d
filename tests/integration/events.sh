#!/bin/bash
# The status lane: every event has its own id, the events of one save (one
# stream entry: a fork's SCHEDULED events, a terminate's CANCELED ones) too,
# so a Server-Sent Events client that reconnects with Last-Event-ID after any
# event, mid-save included, gets exactly the events after it; weft watch
# (directly and through --api) prints each event once.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/redis_lib.sh"
command -v curl >/dev/null 2>&1 || { echo "curl not installed: skipping"; exit 77; }
start_redis
start_weftd d1 --workers 1 --api 127.0.0.1:0
API="http://$(api_of d1)" || exit 1

# a fork of three waiting branches: their events come in one save, and the
# terminate's cancels in another
cat >"$TMP/fan.lua" <<'L'
local w = require "weft"
return w.workflow { name = "fan",
  w.fork { ref = "f",
    { w.simple { ref = "a" } }, { w.simple { ref = "b" } }, { w.simple { ref = "c" } } } }
L
run_weft start "$TMP/fan.lua"
id=$last
wait_for 20 sh -c "redis-cli -p $REDIS_PORT XRANGE '${WEFT_KEY_PREFIX}{$id}:ev' - + | grep -q '\"referenceTaskName\":\"c\"'" ||
    not_ok "the fork did not schedule its branches"

# live, on the running workflow: a stream resumed mid-save gets the rest of
# it and then waits; one resumed after the last event gets nothing while it waits
curl -s -N --max-time 2 "$API/api/workflow/$id/events" | tr -d '\r' | grep '^id: ' | cut -c5- >"$TMP/live_ids"
nl=$(wc -l <"$TMP/live_ids")
[ "$nl" -ge 3 ] && ok "a running workflow's stream: $nl events so far" || not_ok "live stream: $nl events"
curl -s -N --max-time 2 -H "Last-Event-ID: $(sed -n 2p "$TMP/live_ids")" "$API/api/workflow/$id/events" |
    tr -d '\r' | grep '^id: ' | cut -c5- >"$TMP/live_rest"
tail -n +3 "$TMP/live_ids" | cmp -s - "$TMP/live_rest" && ok "resumed live after event 2: the rest, then it waits" ||
    not_ok "resumed live after event 2: $(tr '\n' ' ' <"$TMP/live_rest")"
curl -s -N --max-time 2 -H "Last-Event-ID: $(tail -n 1 "$TMP/live_ids")" "$API/api/workflow/$id/events" |
    tr -d '\r' | grep -c '^id: ' >"$TMP/live_none"
[ "$(cat "$TMP/live_none")" = 0 ] && ok "resumed live after the last event: nothing repeated" ||
    not_ok "resumed after the last event: $(cat "$TMP/live_none") events"

run_weft terminate "$id" --reason "enough"
expect_rc "terminated" 0
saves=$(rcli XLEN "${WEFT_KEY_PREFIX}{$id}:ev")

# the whole stream (it closes after the end)
curl -s -N --max-time 20 "$API/api/workflow/$id/events" | tr -d '\r' >"$TMP/all"
grep '^id: ' "$TMP/all" | cut -c5- >"$TMP/ids"
grep '^data: ' "$TMP/all" >"$TMP/data"
n=$(wc -l <"$TMP/ids")
[ "$n" -gt "$saves" ] && ok "$n events from $saves saves: some saves hold several" || not_ok "$n events, $saves saves"
[ "$(wc -l <"$TMP/data")" = "$n" ] && ok "an id for every event" || not_ok "$(wc -l <"$TMP/data") events, $n ids"
[ "$(sort -u "$TMP/ids" | wc -l)" = "$n" ] && ok "every event has its own id" ||
    not_ok "ids repeat: $(sort "$TMP/ids" | uniq -d | tr '\n' ' ')"
grep -qvE '^[0-9]+-[0-9]+-[0-9]+$' "$TMP/ids" && not_ok "ids not of the form <ms>-<seq>-<index>: $(head -n 3 "$TMP/ids" | tr '\n' ' ')" ||
    ok "ids read <ms>-<seq>-<index>"

# resuming after each event, mid-save included: exactly the rest, in order
bad=0
for k in $(seq 1 "$n"); do
    after=$(sed -n "${k}p" "$TMP/ids")
    curl -s -N --max-time 20 -H "Last-Event-ID: $after" "$API/api/workflow/$id/events" | tr -d '\r' |
        grep '^data: ' >"$TMP/rest"
    tail -n +$((k + 1)) "$TMP/data" >"$TMP/want"
    if ! cmp -s "$TMP/rest" "$TMP/want"; then
        bad=$((bad + 1))
        echo "# after event $k ($after): $(wc -l <"$TMP/rest") events, wanted $(wc -l <"$TMP/want")"
    fi
done
[ "$bad" = 0 ] && ok "Last-Event-ID after any of the $n events resumes exactly after it" ||
    not_ok "$bad of $n resumes lost or repeated events"

# a plain stream id (what earlier servers sent) resumes after its whole save
first=$(sed -n 1p "$TMP/ids")
entry=${first%-*}
curl -s -N --max-time 20 -H "Last-Event-ID: $entry" "$API/api/workflow/$id/events" | tr -d '\r' |
    grep -c '^data: ' >"$TMP/count"
in_first=$(grep -c "^$entry-" "$TMP/ids")
[ "$(cat "$TMP/count")" = $((n - in_first)) ] && ok "a plain stream id resumes after its whole entry" ||
    not_ok "after $entry: $(cat "$TMP/count") events, wanted $((n - in_first))"

# malformed ids: 400 naming the id
code=$(curl -s -o "$TMP/body" -w '%{http_code}' -H "Last-Event-ID: 12-3-x" "$API/api/workflow/$id/events")
[ "$code" = 400 ] && grep -q "12-3-x" "$TMP/body" && ok "a malformed Last-Event-ID: 400 naming it" ||
    not_ok "Last-Event-ID 12-3-x: $code $(cat "$TMP/body")"
code=$(curl -s -o "$TMP/body" -w '%{http_code}' -H "Last-Event-ID: 1-2-3-4" "$API/api/workflow/$id/events")
[ "$code" = 400 ] && ok "an id with four parts: 400" || not_ok "Last-Event-ID 1-2-3-4: $code"

# weft watch prints each event once, directly and through the API
run_weft watch "$id" -o json
expect_rc "weft watch of a terminated workflow" 1
[ "$(printf '%s\n' "$out" | grep -c '^{')" = "$n" ] && ok "weft watch prints the $n events" ||
    not_ok "weft watch printed $(printf '%s\n' "$out" | grep -c '^{') events, wanted $n"
run_weft watch "$id" --api "$API" -o json
expect_rc "weft watch --api of a terminated workflow" 1
[ "$(printf '%s\n' "$out" | grep -c '^{')" = "$n" ] && ok "weft watch --api prints the $n events" ||
    not_ok "weft watch --api printed $(printf '%s\n' "$out" | grep -c '^{') events, wanted $n"
# for people: one line per event, none of them JSON
run_weft watch "$id"
expect_rc "weft watch (text) of a terminated workflow" 1
[ "$(printf '%s\n' "$out" | wc -l)" = "$n" ] && ! printf '%s\n' "$out" | grep -q '^{' &&
    ok "weft watch prints the $n events as lines of text" ||
    not_ok "weft watch (text): $(printf '%s\n' "$out" | head -3)"

stop_weftd_clean d1
finish
