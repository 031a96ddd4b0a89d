#!/bin/sh
# A plugin that registers a built-in's type (fx_lambda: LAMBDA) is refused,
# wherever it stands on the path, unless the operator sets WEFT_PLUGIN_OVERRIDE=1.
. "$(dirname "$0")/lib.sh"

mkdir -p "$TMP/mine"
cp "$BUILD/tests/plugins/abi/.libs/fx_lambda.so" "$TMP/mine/"

WEFT_PLUGIN_PATH="$TMP/mine:" run_weft plugins
expect_rc "built-in type taken" 1
expect_err "built-in type taken" "$TMP/mine/fx_lambda.so: task type LAMBDA is already registered by plugin"
expect_err "built-in type taken" "a built-in (set WEFT_PLUGIN_OVERRIDE=1 to replace it)"
WEFT_PLUGIN_PATH="$TMP/mine:" run_weft run "$SRC/examples/hello.lua" --input '{"name":"x"}'
expect_rc "the built-in LAMBDA runs" 0
expect_json "the built-in LAMBDA runs" '{"greeting":"hello, x!"}'

WEFT_PLUGIN_OVERRIDE=1 WEFT_PLUGIN_PATH="$TMP/mine:" run_weft plugins
expect_rc "override" 0
case $out in *"fx_lambda"*"task types: LAMBDA"*) ok "override: fx_lambda has LAMBDA" ;;
    *) not_ok "override: $out" ;; esac
WEFT_PLUGIN_OVERRIDE=1 WEFT_PLUGIN_PATH="$TMP/mine:" run_weft run "$SRC/examples/hello.lua" \
    --input '{"name":"x"}'
expect_rc "override: its LAMBDA runs" 0
expect_json "override: its LAMBDA runs" '{"greeting":"fx lambda"}'
finish
