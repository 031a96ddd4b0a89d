#!/bin/sh
# Runs every example workflow embedded and checks its output and exit status.
. "$(dirname "$0")/lib.sh"

example() { # FILE INPUT EXPECTED [EXIT]
    run_weft run "$SRC/examples/$1" --input "$2"
    expect_rc "$1 $2" "${4:-0}"
    expect_json "$1 $2" "$3"
}

example hello.lua '{"name":"weft"}' '{"greeting":"hello, weft!"}'
example lambda.lua '{"items":[{"qty":2,"unit":3},{"qty":1,"unit":10}]}' \
    '{"total":16,"count":2,"label":"ORDER OF 2 ITEMS"}'
example decision.lua '{"amount":150,"country":"FR"}' \
    '{"route":"big","region":"FR","approved":false,"note":"needs review"}'
example decision.lua '{"amount":5,"country":"JP"}' \
    '{"route":"small","region":"JP","approved":true,"note":"auto"}'
example fork.lua '{"user":"ann"}' \
    '{"sent":{"email":{"result":"mail to ann"},"sms":{"result":"sms of 160 chars"}}}'
example dynamic_fork.lua '{"n":3}' \
    '{"results":{"square_1":{"result":1},"square_2":{"result":4},"square_3":{"result":9}}}'
example dynamic_fork.lua '{"n":0}' '{"results":{}}'
example do_while.lua '{"times":3}' '{"iterations":3,"last":30,"total":30}'
example sub_workflow.lua '{"x":3}' '{"by_name":6,"inline":36}'
example terminate.lua '{"stop":true}' '{"stopped":true}'
example terminate.lua '{"stop":false}' '{"result":{"stopped":false}}'
example wait.lua '{}' '{"waited":"COMPLETED","after":"done"}'
example retry.lua '{}' '{"flaky":"ok on attempt 2","flaky_attempt":2,"broken":"COMPLETED_WITH_ERRORS"}'
example conductor.json '{"kind":"a"}' \
    '{"selected":"a","joined":{"left":{"result":"L"},"right":{"result":"R:a"}},"flag":"A"}'
example conductor.json '{"kind":"zzz"}' \
    '{"selected":"zzz","joined":{"left":{"result":"L"},"right":{"result":"R:zzz"}},"flag":"other"}'

# transitions go to stderr as they happen, the output is the last stdout line
run_weft run "$SRC/examples/fork.lua" --input '{"user":"bo"}'
expect_err "fork trace" "email (LAMBDA) COMPLETED"
expect_err "fork trace" "notify_join (JOIN) COMPLETED"
expect_err "fork trace" "workflow"
[ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && ok "stdout is one line" || not_ok "stdout: $out"

# loop iterations get per-iteration refs, as in Conductor
run_weft run "$SRC/examples/do_while.lua" --input '{"times":2}'
expect_err "do_while refs" "step__1 (LAMBDA) COMPLETED"
expect_err "do_while refs" "step__2 (LAMBDA) COMPLETED"

# every example at least compiles and validates
for f in "$SRC"/examples/*.lua "$SRC"/examples/*.json; do
    [ "$(basename "$f")" = order.lua ] && continue # HTTP and SIMPLE are served by weftd
    run_weft validate "$f"
    expect_rc "validate $(basename "$f")" 0
done
run_weft compile "$SRC/examples/order.lua"
expect_rc "compile order.lua" 0
case $out in *'"type": "FORK_JOIN"'*'"type": "JOIN"'*) ok "order.lua compiles a fork and its join" ;;
    *) not_ok "order.lua JSON lacks FORK_JOIN/JOIN: $out" ;; esac
finish
