#!/bin/bash
# What a Redis failover or reshard can lose or put out of order, made by
# hand: keys deleted as a promoted replica would lack them (Redis
# replicates asynchronously, and on a cluster a workflow's keys and its
# child's live on different nodes). A sub-workflow's child whose start was
# lost, though its parent's task names it, is started again (under its
# idempotency key: the same id while the key is kept, else a new one) and
# the parent completes with its output. A decider queue entry whose
# execution is not there (yet: a reshard can apply a create's steps before
# the create) stays a while before it leaves.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/redis_lib.sh"
start_redis
# started through its REST API: the runs get the daemon's sweep_interval
# (a client's start makes a run due after its own, 30 s)
start_weftd d1 --workers 2 --set sweep_interval=1s --api 127.0.0.1:0
API="http://$(api_of d1)" || { not_ok "weftd did not start"; finish; exit 1; }

cat >"$TMP/kid.lua" <<'L'
local w = require "weft"
return w.workflow { name = "lost_kid", input = { "x" }, output = { doubled = "${d.output.result}" },
  w.wait { ref = "slow", duration = "3s" },
  w.lambda { ref = "d", input = { x = "${workflow.input.x}" }, script = "return input.x * 2" } }
L
cat >"$TMP/par.lua" <<'L'
local w = require "weft"
return w.workflow { name = "lost_par", input = { "n" }, output = { got = "${c.output.doubled}" },
  w.sub_workflow { ref = "c", name = "lost_kid", input = { x = "${workflow.input.n}" } } }
L
run_weft register "$TMP/kid.lua"; expect_rc "register the child" 0
child_of() { rcli HGET "${WEFT_KEY_PREFIX}{$1}" doc | grep -o '"subWorkflowId":"[^"]*"' | head -n 1 | cut -d'"' -f4; }
task_of() { rcli HGET "${WEFT_KEY_PREFIX}{$1}" doc | grep -o '"tasks":\[{"id":"[^"]*"' | cut -d'"' -f6; }

# lose_child N WHAT: a parent whose child's start is then lost (WHAT: "kid",
# its keys and its decider queue entry; "kid+key", its idempotency key too;
# "paused", the kid's while the parent is paused)
lose_child() {
    WEFT_API_URL=$API run_weft start "$TMP/par.lua" --input "{\"n\":$1}"
    id=$last
    wait_for 20 sh -c "redis-cli -p $REDIS_PORT HGET '${WEFT_KEY_PREFIX}{$id}' doc | grep -q subWorkflowId" ||
        not_ok "$2: no child started"
    if [ "$2" = paused ]; then run_weft pause "$id"; expect_rc "$2: pause" 0; fi
    kid=$(child_of "$id")
    rcli DEL "${WEFT_KEY_PREFIX}{$kid}" "${WEFT_KEY_PREFIX}{$kid}:out" "${WEFT_KEY_PREFIX}{$kid}:ev" >/dev/null
    rcli ZREM "$(dq_key "$kid")" "$kid" >/dev/null
    [ "$2" = kid+key ] && { [ "$(rcli DEL "${WEFT_KEY_PREFIX}idem:sub:$(task_of "$id")")" = 1 ] ||
        not_ok "$2: no idempotency key idem:sub:$(task_of "$id")"; }
    if [ "$2" = paused ]; then # nothing is started while the parent is paused
        sleep 3
        [ "$(rcli EXISTS "${WEFT_KEY_PREFIX}{$kid}")" = 0 ] && ! grep -q "sub-workflow $kid is gone" "$TMP/d1.log" &&
            ok "$2: not started again while paused" || not_ok "$2: started while paused"
        run_weft resume "$id"; expect_rc "$2: resume" 0
    fi
    "$WEFT" wait "$id" --timeout 20 >"$TMP/w.out" 2>"$TMP/w.err"
    wrc=$? got=$(tail -n 1 "$TMP/w.out")
    if [ "$wrc" = 0 ] && "$JSONEQ" "$got" "{\"got\":$(($1 * 2))}"; then
        ok "$2 lost: the parent completed with {\"got\":$(($1 * 2))}"
    else
        not_ok "$2 lost: exit $wrc, output $got: $(cat "$TMP/w.err")"
    fi
    now=$(child_of "$id")
    [ "$(rcli HGET "${WEFT_KEY_PREFIX}{$now}" status)" = COMPLETED ] &&
        ok "$2 lost: its child $now is there again, COMPLETED" || not_ok "$2 lost: child $now: $(rcli HGET "${WEFT_KEY_PREFIX}{$now}" status)"
    if [ "$2" != kid+key ]; then
        [ "$now" = "$kid" ] && ok "$2 lost: started again under its id $kid" || not_ok "$2 lost: child $now, was $kid"
    else
        [ -n "$now" ] && [ "$now" != "$kid" ] && ok "$2 lost: a new child $now" || not_ok "$2 lost: child '$now', was $kid"
    fi
    grep "$id" "$TMP/d1.log" | grep -q "sub-workflow $kid is gone" &&
        ok "$2 lost: the daemon logs it" || not_ok "$2 lost: not logged: $(grep "$id" "$TMP/d1.log" | tail -n 3)"
}
lose_child 21 kid
lose_child 33 kid+key
lose_child 7 paused

# an entry with no execution: still there, marked, after 2 s; gone after 10 s
ghost=ghost-$$
dq=$(dq_key "$ghost")
rcli ZADD "$dq" 0 "$ghost" >/dev/null
sleep 2
[ -n "$(rcli ZSCORE "$dq" "$ghost")" ] && [ -n "$(rcli HGET "${dq%:due}:gone" "$ghost")" ] &&
    ok "an entry whose execution is missing stays, marked" ||
    not_ok "entry: '$(rcli ZSCORE "$dq" "$ghost")', mark: '$(rcli HGET "${dq%:due}:gone" "$ghost")'"
wait_for 15 sh -c "[ -z \"\$(redis-cli -p $REDIS_PORT ZSCORE '$dq' '$ghost')\" ]" &&
    ok "it leaves once missing for 10 s" || not_ok "still there: $(rcli ZSCORE "$dq" "$ghost")"

# a run `weft start` made over Redis is first looked at after the client's
# 30 s (not the daemon's sweep_interval), 10 s on a cluster (a start's guard):
# its entry waits there
after=30000
[ -n "${WEFT_TEST_CLUSTER:-}" ] && after=10000
t0=$(date +%s%3N)
run_weft start "$TMP/par.lua" --input '{"n":3}'
wait_for 20 sh -c "redis-cli -p $REDIS_PORT HGET '${WEFT_KEY_PREFIX}{$last}' doc | grep -q subWorkflowId"
at=$(rcli ZSCORE "$(dq_key "$last")" "$last")
[ -n "$at" ] && [ "${at%.*}" -ge $((t0 + after - 1000)) ] && [ "${at%.*}" -le $(($(date +%s%3N) + after)) ] &&
    ok "a client's start is due $((after / 1000)) s later" || not_ok "a client's start is due at '$at' (started at $t0, wanted $after ms later)"

stop_weftd_clean d1

# a child gone whose task started longer than the retention ago may have
# ended and expired unnoticed: the task fails, naming it (not run twice)
start_weftd d2 --workers 2 --set sweep_interval=1s --set retention=4s --api 127.0.0.1:0
API="http://$(api_of d2)" || { not_ok "weftd did not start"; finish; exit 1; }
sed 's/duration = "3s"/duration = "30s"/' "$TMP/kid.lua" >"$TMP/kid30.lua"
run_weft register "$TMP/kid30.lua"; expect_rc "register the slow child" 0
WEFT_API_URL=$API run_weft start "$TMP/par.lua" --input '{"n":5}'
id=$last
wait_for 20 sh -c "redis-cli -p $REDIS_PORT HGET '${WEFT_KEY_PREFIX}{$id}' doc | grep -q subWorkflowId" ||
    not_ok "old: no child started"
kid=$(child_of "$id")
sleep 5
rcli DEL "${WEFT_KEY_PREFIX}{$kid}" "${WEFT_KEY_PREFIX}{$kid}:out" "${WEFT_KEY_PREFIX}{$kid}:ev" >/dev/null
rcli ZREM "$(dq_key "$kid")" "$kid" >/dev/null
"$WEFT" wait "$id" --timeout 20 >"$TMP/w.out" 2>"$TMP/w.err"
wrc=$?
[ "$wrc" = 1 ] && ok "old: the parent ended, not COMPLETED (exit 1)" || not_ok "old: exit $wrc: $(cat "$TMP/w.err")"
run_weft status "$id" -o json
case $out in *"sub-workflow $kid is gone (expired after the retention?)"*) ok "old: its task failed, naming the child" ;;
    *) not_ok "old: status ${out:0:600}" ;; esac
stop_weftd_clean d2
finish
