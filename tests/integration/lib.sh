# Shared by the integration tests: paths, and a tiny assertion vocabulary.
# Each test prints "ok - ..." / "not ok - ..." lines and exits non-zero on any failure.
set -u
SRC=${WEFT_TOP_SRCDIR:?run through make check}
BUILD=${WEFT_TOP_BUILDDIR:?run through make check}
WEFT="$BUILD/runtime/weft"
JSONEQ="$BUILD/tests/jsoneq"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weft-test.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
failures=0
passes=0

ok() { passes=$((passes + 1)); echo "ok - $*"; }
not_ok() { failures=$((failures + 1)); echo "not ok - $*"; }

# run_weft ARGS...: runs weft, sets $out (stdout), $errout (stderr), $rc, $last (last
# stdout line). One still running after WEFT_TEST_RUN_TIMEOUT seconds (600) is stopped,
# exit 124: a `weft watch` or `wait` on a workflow no daemon is left to end fails its
# test, never hangs make check.
run_weft() { run_cmd timeout "${WEFT_TEST_RUN_TIMEOUT:-600}" "$WEFT" "$@"; }

# run_cmd CMD ARGS...: runs CMD (a shell function too), setting the same variables as run_weft
run_cmd() {
    "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    out=$(cat "$TMP/out")
    errout=$(cat "$TMP/err")
    last=$(tail -n 1 "$TMP/out")
}

# expect_rc NAME CODE
expect_rc() {
    if [ "$rc" = "$2" ]; then ok "$1: exit $2"; else
        not_ok "$1: exit $rc, wanted $2"; echo "# stderr: $errout" | head -20; fi
}

# expect_err NAME TEXT: stderr contains TEXT
expect_err() {
    case $errout in *"$2"*) ok "$1: says '$2'" ;; *)
        not_ok "$1: stderr lacks '$2'"; printf '# stderr: %s\n' "$errout" | head -20 ;; esac
}

# expect_json NAME JSON: the last stdout line equals JSON
expect_json() {
    if "$JSONEQ" "$last" "$2"; then ok "$1: output $2"; else
        not_ok "$1: output $last, wanted $2"; printf '# stderr: %s\n' "$errout" | tail -20; fi
}

finish() {
    echo "$passes passed, $failures failed"
    [ "$failures" -eq 0 ]
}
