#!/bin/sh
# The examples embedded, beyond their own run lines (example_runs.sh runs
# those): the Conductor JSON one (JSON has no comment for a run line), the
# trace on stderr, per-iteration refs; every example validates and compiles.
. "$(dirname "$0")/lib.sh"

example() { # FILE INPUT EXPECTED [EXIT]
    run_weft run "$SRC/examples/$1" --input "$2"
    expect_rc "$1 $2" "${4:-0}"
    expect_json "$1 $2" "$3"
}

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
for f in "$SRC"/examples/*.lua "$SRC"/examples/*.json "$SRC"/examples/workers/*.lua; do
    run_weft validate "$f"
    expect_rc "validate $(basename "$f")" 0
done
run_weft compile "$SRC/examples/order.lua"
expect_rc "compile order.lua" 0
case $out in *'"type": "FORK_JOIN"'*'"type": "JOIN"'*) ok "order.lua compiles a fork and its join" ;;
    *) not_ok "order.lua JSON lacks FORK_JOIN/JOIN: $out" ;; esac
finish
