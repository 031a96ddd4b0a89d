#!/bin/sh
# Replays each fuzz target over its seed corpus (corpus/<name>/): every seed
# in a process of its own, then the whole corpus in one process (state kept
# between inputs, as under libFuzzer). A run fails when it exits non-zero,
# times out, or a sanitizer or an invariant check says anything on stderr.
set -u
SRC=${WEFT_TOP_SRCDIR:?run through make check}
BUILD=${WEFT_TOP_BUILDDIR:?run through make check}
TMP=$(mktemp -d "${TMPDIR:-/tmp}/weft-fuzz.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
passes=0
failures=0

ok() { passes=$((passes + 1)); echo "ok - $*"; }
not_ok() { failures=$((failures + 1)); echo "not ok - $*"; }

# A hang is a failure too; the DSL's own limits stop it in seconds.
if command -v timeout >/dev/null 2>&1; then LIMIT="timeout 300"; else LIMIT=; fi

# replay NAME ARGS...: runs the target on ARGS, reports NAME
replay() {
    name=$1
    shift
    $LIMIT "$bin" "$@" >"$TMP/out" 2>"$TMP/err"
    rc=$?
    if [ "$rc" -eq 0 ] &&
        ! grep -q -e 'Sanitizer' -e 'runtime error:' -e 'invariant broken' "$TMP/err"; then
        ok "$name"
    else
        not_ok "$name (exit $rc)"
        sed 's/^/# /' "$TMP/err" | head -40
    fi
}

for target in expr def dsl lua_json query api redis; do
    bin="$BUILD/tests/fuzz/fuzz_$target"
    corpus="$SRC/tests/fuzz/corpus/$target"
    seeds=0
    if [ ! -x "$bin" ]; then
        not_ok "fuzz_$target: $bin not built"
        continue
    fi
    for seed in "$corpus"/*; do
        [ -f "$seed" ] || continue
        seeds=$((seeds + 1))
        replay "fuzz_$target ${seed##*/}" "$seed"
    done
    if [ "$seeds" -gt 0 ]; then
        replay "fuzz_$target: all $seeds seeds in one process" "$corpus"
    else
        not_ok "fuzz_$target: no seeds in $corpus"
    fi
done

echo "$passes passed, $failures failed"
[ "$failures" -eq 0 ]
