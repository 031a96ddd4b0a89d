#!/bin/sh
# The command line's table: `weft <command> --help` for every command, the
# generated `weft --help`, and usage errors (exit 2) that name what was wrong.
. "$WEFT_TOP_SRCDIR/tests/integration/lib.sh"

commands="run compile validate plugins start status list wait watch register terminate pause resume
retry restart signal secret"

run_weft --help
expect_rc "weft --help" 0
for c in $commands; do
    case $out in *"
  $c "*) ok "weft --help lists $c" ;; *) not_ok "weft --help lacks $c" ;; esac
done
run_weft help
expect_rc "weft help" 0
run_weft -h
expect_rc "weft -h" 0
run_weft
expect_rc "weft alone" 2
case $errout in "usage: weft"*) ok "weft alone: usage on stderr" ;; *)
    not_ok "weft alone: stderr $errout" ;; esac

for c in $commands; do
    run_weft "$c" --help
    expect_rc "weft $c --help" 0
    case $out in "usage: weft $c "*) ok "weft $c --help: usage line" ;; *)
        not_ok "weft $c --help: $out" ;; esac
    case $out in *"--help "*) ok "weft $c --help: lists its options" ;; *)
        not_ok "weft $c --help: no options" ;; esac
    help=$out
    run_weft help "$c"
    expect_rc "weft help $c" 0
    [ "$out" = "$help" ] && ok "weft help $c = weft $c --help" || not_ok "weft help $c differs"
    run_weft "$c" x --no-such-option
    expect_rc "weft $c --no-such-option" 2
    expect_err "weft $c --no-such-option" "unknown option --no-such-option"
done

run_weft start --help
case $out in *"--input JSON|@file"*"--idempotency-key K"*) ok "start --help: its options" ;; *)
    not_ok "start --help: $out" ;; esac
case $out in *"--quiet"*) not_ok "start --help lists --quiet" ;; *)
    ok "start --help: not another command's options" ;; esac
run_weft wait --help
case $out in *"--timeout S"*"--api URL"*|*"--api URL"*"--timeout S"*) ok "wait --help: --timeout, --api" ;; *)
    not_ok "wait --help: $out" ;; esac

run_weft run x.lua -z
expect_rc "unknown short option" 2
expect_err "unknown short option" "unknown option -z"
run_weft run x.lua --timeout 3
expect_rc "an option of another command" 2
expect_err "an option of another command" "--timeout does not apply to weft run"
run_weft start x.lua --input
expect_rc "an option without its value" 2
expect_err "an option without its value" "--input needs a value"
run_weft frobnicate --help
expect_rc "unknown command --help" 2
expect_err "unknown command --help" "unknown command 'frobnicate'"
run_weft help frobnicate
expect_rc "help for an unknown command" 2
run_weft status
expect_rc "status without an id" 2
expect_err "status without an id" "status needs an argument"
run_weft compile
expect_rc "compile without a file" 2
expect_err "compile without a file" "compile needs a file"
run_weft secret list --api http://127.0.0.1:1
expect_rc "secret over --api" 2
expect_err "secret over --api" "secrets are kept in Redis"
run_weft status x --api ftp://h
expect_rc "--api not http" 2
expect_err "--api not http" "expected an http:// or https:// URL"
run_weft compile "$SRC/examples/hello.lua" --quiet
expect_rc "compile --quiet" 2

# options go before or after the command, --opt=value too
run_weft --input='{"name":"opt"}' run "$SRC/examples/hello.lua" -q
expect_rc "options before the command" 0
case $last in *opt*) ok "--input=value before the command" ;; *) not_ok "output $last" ;; esac

run_weft --version
expect_rc "weft --version" 0
case $out in "weft "*) ok "weft --version prints it" ;; *) not_ok "weft --version: $out" ;; esac

# weftd and weft-bench parse with getopt_long too: --help, --opt=value, bad options named
WEFTD="$BUILD/runtime/weftd"
BENCH="$BUILD/bench/weft-bench"
"$WEFTD" --help >"$TMP/out" 2>&1; rc=$?
expect_rc "weftd --help" 0
grep -q '^usage: weftd' "$TMP/out" && ok "weftd --help: usage" || not_ok "weftd --help: $(cat "$TMP/out")"
"$WEFTD" --no-such-flag --version >"$TMP/out" 2>&1; rc=$?
expect_rc "weftd --version next to a bad option" 0
for args in "--no-such-flag" "--redis" "--set novalue" "stray"; do
    # shellcheck disable=SC2086
    "$WEFTD" $args >/dev/null 2>"$TMP/err"; rc=$?; errout=$(cat "$TMP/err")
    expect_rc "weftd $args" 2
    expect_err "weftd $args" "unknown or incomplete option ${args%% *}"
done
"$WEFTD" --workers=many >/dev/null 2>"$TMP/err"; rc=$?; errout=$(cat "$TMP/err")
expect_rc "weftd --workers=many" 2
expect_err "weftd --workers=many" "--workers: "
"$BENCH" --help >"$TMP/out" 2>&1; rc=$?
expect_rc "weft-bench --help" 0
"$BENCH" --no-such-flag >/dev/null 2>"$TMP/err"; rc=$?; errout=$(cat "$TMP/err")
expect_rc "weft-bench --no-such-flag" 2
expect_err "weft-bench --no-such-flag" "unknown option --no-such-flag"
"$BENCH" --workload queue --n >/dev/null 2>"$TMP/err"; rc=$?; errout=$(cat "$TMP/err")
expect_rc "weft-bench --n without a value" 2
expect_err "weft-bench --n without a value" "incomplete option --n"
"$BENCH" --workload=chain5 --embedded --n=3 --serial >"$TMP/out" 2>"$TMP/err"; rc=$?
errout=$(cat "$TMP/err")
expect_rc "weft-bench --opt=value" 0
case $(tail -n 1 "$TMP/out") in *'"workload":"chain5"'*'"n":3'*) ok "weft-bench --opt=value: applied" ;;
    *) not_ok "weft-bench: $(tail -n 1 "$TMP/out")" ;; esac

echo "# $passes passed, $failures failed"
[ "$failures" = 0 ]
