#!/bin/bash
# Operators on sub-workflow trees: a parent learns at once that an operator
# terminated its child through the REST API (not at its next sweep,
# sweep_interval later), and a parent that ended before the child a client
# terminated (the cascade of `weft terminate` through Redis wakes it) leaves
# the decider queue instead of being looked at every sweep_interval until
# it expires.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/redis_lib.sh"
command -v curl >/dev/null 2>&1 || { echo "curl not installed: skipping"; exit 77; }
start_redis

cat >"$TMP/par.lua" <<'L'
local w = require "weft"
return w.workflow { name = "par",
  w.sub_workflow { ref = "c", definition = w.workflow { name = "kid", w.wait { ref = "z" } } } }
L
status() { rcli HGET "${WEFT_KEY_PREFIX}{$1}" status; }
child_of() { rcli HGET "${WEFT_KEY_PREFIX}{$1}" doc | grep -o '"subWorkflowId":"[^"]*"' | head -n 1 | cut -d'"' -f4; }
due() { rcli ZSCORE "$(dq_key "$1")" "$1"; }
start_par() {
    run_weft start "$TMP/par.lua"
    id=$last
    wait_for 20 sh -c "redis-cli -p $REDIS_PORT HGET '${WEFT_KEY_PREFIX}{$id}' doc | grep -q subWorkflowId" ||
        not_ok "no child started"
    kid=$(child_of "$id")
    wait_for 10 sh -c "[ \"\$(redis-cli -p $REDIS_PORT HGET '${WEFT_KEY_PREFIX}{$kid}' status)\" = RUNNING ]"
}

start_weftd d1 --api 127.0.0.1:0 --workers 2
API="http://$(api_of d1)" || exit 1

# a child terminated through the API: its parent's SUB_WORKFLOW fails at once
start_par
c=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE "$API/api/workflow/$kid?reason=op")
[ "$c" = 200 ] && ok "DELETE of the child: 200" || not_ok "DELETE of the child: $c"
if wait_for 5 sh -c "[ \"\$(redis-cli -p $REDIS_PORT HGET '${WEFT_KEY_PREFIX}{$id}' status)\" = FAILED ]"; then
    ok "the parent learns of its child's terminate within 5 s"
else
    not_ok "the parent is $(status "$id") 5 s after its child was terminated through the API"
fi

# weft terminate (through Redis) of the parent: the child's terminate wakes
# the parent, which ended first; the daemon takes it off the decider queue
start_par
run_weft terminate "$id"
[ "$rc" = 0 ] && ok "weft terminate of the parent" || not_ok "weft terminate: exit $rc: $errout"
wait_for 10 sh -c "[ \"\$(redis-cli -p $REDIS_PORT HGET '${WEFT_KEY_PREFIX}{$kid}' status)\" = TERMINATED ]" &&
    ok "the child is TERMINATED" || not_ok "the child is $(status "$kid")"
if wait_for 5 sh -c "[ -z \"\$(redis-cli -p $REDIS_PORT ZSCORE '$(dq_key "$id")' '$id')\" ]"; then
    ok "the ended parent left the decider queue"
else
    not_ok "the ended parent ($(status "$id")) is still due at $(due "$id") (now $(date +%s%3N))"
fi
[ -z "$(due "$kid")" ] && ok "so did the child" || not_ok "the ended child is still due"

# a retried parent is due again (the clean-up does not lose it)
run_weft retry "$id"
[ "$rc" = 0 ] && ok "weft retry of the parent" || not_ok "weft retry: exit $rc: $errout"
sleep 1
[ "$(status "$id")" = RUNNING ] && ok "the retried parent runs" || not_ok "the retried parent is $(status "$id")"
[ -n "$(due "$id")" ] && ok "the retried parent is on the decider queue" || not_ok "the retried parent is not due"
run_weft terminate "$id"

stop_weftd_clean d1
finish
