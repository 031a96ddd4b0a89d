#!/bin/sh
# make install into a temporary root, then build the out-of-tree example plugin
# against the installed SDK through pkg-config alone, and run its workflow with
# the installed weft.
. "$(dirname "$0")/lib.sh"

root="$TMP/root"
if MAKEFLAGS= make -C "$BUILD" -s install DESTDIR="$root" >"$TMP/install.log" 2>&1; then
    ok "make install DESTDIR"
else
    not_ok "make install failed"; tail -20 "$TMP/install.log"; finish; exit 1
fi
prefix=$(sed -n 's/^prefix=//p' "$BUILD/sdk/weft-plugin.pc")
inst="$root$prefix"
for f in "$inst/bin/weft" "$inst/include/weft/plugin.h" "$inst/lib/pkgconfig/weft-plugin.pc" \
    "$inst/lib/weft/lambda.so"; do
    [ -e "$f" ] && ok "installed ${f#$root}" || not_ok "missing ${f#$root}"
done

cp -r "$SRC/examples/plugins/textcase" "$TMP/textcase"
chmod -R u+w "$TMP/textcase"
if MAKEFLAGS= PKG_CONFIG_PATH="$inst/lib/pkgconfig" PKG_CONFIG="pkg-config --define-prefix" \
    make -C "$TMP/textcase" >"$TMP/build.log" 2>&1; then
    ok "out-of-tree plugin builds against the installed SDK"
else
    not_ok "out-of-tree plugin build failed"; cat "$TMP/build.log"
fi
cflags=$(PKG_CONFIG_PATH="$inst/lib/pkgconfig" pkg-config --define-prefix --cflags weft-plugin)
case $cflags in *"-I$inst/include"*) ok "pkg-config points at the installed headers" ;;
    *) not_ok "pkg-config --cflags weft-plugin: $cflags" ;; esac

WEFT="$inst/bin/weft"
WEFT_PLUGIN_PATH="$TMP/textcase:$inst/lib/weft" run_weft run "$TMP/textcase/workflow.lua" \
    --input '{"text":"hello plugin world"}'
expect_rc "installed weft runs the plugin's workflow" 0
expect_json "textcase workflow" '{"shout":"HELLO PLUGIN WORLD","title":"Hello Plugin World"}'
WEFT_PLUGIN_PATH="$TMP/textcase:$inst/lib/weft" run_weft plugins
case $out in *TEXT_CASE*LAMBDA*|*LAMBDA*TEXT_CASE*) ok "plugins lists TEXT_CASE and LAMBDA" ;;
    *) not_ok "plugins: $out" ;; esac
finish
