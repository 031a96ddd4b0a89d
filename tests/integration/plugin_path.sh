#!/bin/sh
# Plugin discovery: `weft plugins` lists every type from separate .so files, and
# a WEFT_PLUGIN_PATH without the lambda plugin makes LAMBDA an unknown type.
. "$(dirname "$0")/lib.sh"

run_weft plugins
expect_rc "weft plugins" 0
for t in LAMBDA DECISION SWITCH FORK_JOIN FORK_JOIN_DYNAMIC JOIN SUB_WORKFLOW DO_WHILE \
    SET_VARIABLE TERMINATE WAIT; do
    case $out in *" $t"*) ok "weft plugins lists $t" ;; *) not_ok "weft plugins lacks $t" ;; esac
done
n=$(printf '%s\n' "$out" | grep -c '  file: .*\.\(la\|so\)$')
[ "$n" -ge 4 ] && ok "types come from $n plugin files" || not_ok "only $n plugin files: $out"
case $out in *"abi: 2"*) ok "ABI shown" ;; *) not_ok "no ABI in: $out" ;; esac

# a directory holding every plugin but lambda
mkdir -p "$TMP/plugins"
for p in decision fork_join flow; do
    cp "$BUILD/plugins/$p/.libs/$p.so" "$TMP/plugins/"
done
WEFT_PLUGIN_PATH="$TMP/plugins" run_weft run "$SRC/examples/hello.lua"
expect_rc "without lambda" 2
expect_err "without lambda" "unknown task type LAMBDA (no plugin provides it; searched: $TMP/plugins; known types: DECISION, DO_WHILE, FORK_JOIN"
cat >"$TMP/nolambda.lua" <<'L'
local w = require "weft"
return w.workflow { name = "nolambda", output = { v = "${workflow.variables.v}" },
  w.set_variable { ref = "s", input = { v = 42 } } }
L
WEFT_PLUGIN_PATH="$TMP/plugins" run_weft run "$TMP/nolambda.lua"
expect_rc "other plugins still work" 0
expect_json "other plugins still work" '{"v":42}'

# --plugin-path wins over the environment; an empty element adds the defaults
WEFT_PLUGIN_PATH="$TMP/plugins" run_weft run "$SRC/examples/hello.lua" --plugin-path "$TMP/plugins:"
expect_rc "empty element = defaults" 0

run_weft plugins --plugin-path "$TMP/no-such-dir"
expect_err "missing plugin dir" "no-such-dir"
finish
