#!/bin/sh
# The sample plugin of docs/plugins.md builds warning-free (-Wall -Wextra -Werror) and links
# with -Wl,--no-undefined against json-c alone (what pkg-config --libs weft-plugin names), and
# weft loads it and runs its task type.
. "$(dirname "$0")/lib.sh"

mkdir -p "$TMP/doc"
awk '/^    #include <weft\/plugin.h>/ { on = 1 } on { print substr($0, 5) }
     on && /^    WEFT_PLUGIN\(/ { exit }' "$SRC/docs/plugins.md" >"$TMP/doc/hello.c"
grep -q "WEFT_PLUGIN(hello" "$TMP/doc/hello.c" && ok "sample found in docs/plugins.md" ||
    not_ok "no sample in docs/plugins.md"
if ${CC:-cc} -shared -fPIC -Wall -Wextra -Werror -I"$SRC/sdk" $(pkg-config --cflags json-c) \
    "$TMP/doc/hello.c" -o "$TMP/doc/hello.so" -Wl,--no-undefined $(pkg-config --libs json-c) \
    >"$TMP/doc/build.log" 2>&1; then
    ok "the sample builds warning-free with -Wl,--no-undefined"
else
    not_ok "the sample does not build"; cat "$TMP/doc/build.log"
fi
cat >"$TMP/doc/hello.lua" <<'L'
local w = require "weft"
return w.workflow { name = "doc_hello", output = { g = "${h.output.greeting}" },
  w.task { ref = "h", type = "HELLO", input = { name = "docs" } } }
L
WEFT_PLUGIN_PATH="$TMP/doc:" run_weft run "$TMP/doc/hello.lua"
expect_rc "the sample's HELLO runs" 0
expect_json "the sample's HELLO runs" '{"g":"docs"}'
finish
