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

# packaging: man pages, bash completion, the systemd unit and a sample configuration,
# where make install puts them: the directories as make expands them
make_eval() { # DIR TEXT: TEXT as make expands it in $BUILD/DIR's Makefile
    printf 'weft-eval:\n\t@echo %s\n' "$2" |
        MAKEFLAGS= make -s --no-print-directory -C "$BUILD/$1" -f Makefile -f - weft-eval
}
unitdir=$(make_eval runtime '$(systemdsystemunitdir)')
sysconfdir=$(make_eval . '$(sysconfdir)')
# a variable the configured unit directory names must be make's: one only a
# shell knew (distcheck's dc_install_base, quoted) would be empty, and the
# unit would go to /lib/systemd/system, outside the prefix
for v in $(sed -n 's/^systemdsystemunitdir = //p' "$BUILD/runtime/Makefile" |
    grep -o '\${[A-Za-z_][A-Za-z_0-9]*}\|\$([A-Za-z_][A-Za-z_0-9]*)' | tr -d '${}()'); do
    [ "$(make_eval runtime "\$(origin $v)")" != undefined ] ||
        not_ok "systemdsystemunitdir names \${$v}, which make does not define (the unit would go to $unitdir)"
done
case $unitdir in
/*) ok "the unit directory is a path: $unitdir" ;;
*) not_ok "the unit directory, as make expands it: '$unitdir'" ;;
esac
man1="$inst/share/man/man1/weft.1" man8="$inst/share/man/man8/weftd.8"
comp="$inst/share/bash-completion/completions/weft"
unit="$root$unitdir/weftd.service" conf="$root$sysconfdir/weft/weftd.conf"
for f in "$man1" "$man8" "$comp" "$unit" "$conf"; do
    [ -s "$f" ] && ok "installed ${f#$root}" || not_ok "missing ${f#$root}"
done
for m in "$man1" "$man8"; do
    warn=$(groff -man -Tutf8 -ww -z "$m" 2>&1)
    [ -z "$warn" ] && ok "groff renders ${m##*/} without a warning" || not_ok "groff ${m##*/}: $warn"
    groff -man -Tutf8 -P-cbou "$m" 2>/dev/null | grep -q '^SYNOPSIS' && ok "${m##*/} has a SYNOPSIS" ||
        not_ok "${m##*/}: no SYNOPSIS rendered"
done
groff -man -Tutf8 -P-cbou "$man1" 2>/dev/null | tr -s " \n" "  " | grep -q "The server could not be used" &&
    ok "weft.1 documents exit 4" || not_ok "weft.1: no exit 4"

grep -qx "ExecStart=$prefix/bin/weftd --config $sysconfdir/weft/weftd.conf" "$unit" &&
    ok "the unit runs the installed weftd with the installed configuration" ||
    not_ok "the unit's ExecStart: $(grep ExecStart= "$unit")"
grep -q '@[a-z]*@' "$unit" && not_ok "the unit has unfilled @vars@" || ok "the unit's paths are filled in"
for k in DynamicUser=yes NoNewPrivileges=yes ProtectSystem=strict ProtectHome=yes PrivateTmp=yes \
    Restart=on-failure "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6" StateDirectory=weft; do
    grep -qx "$k" "$unit" && ok "the unit sets $k" || not_ok "the unit lacks $k"
done
if command -v systemd-analyze >/dev/null 2>&1; then
    # verified where the files are: the unit with its paths moved under the install root
    mkdir -p "$TMP/unit"
    sed "s|$prefix|$inst|g; s|$sysconfdir|$root$sysconfdir|g" "$unit" >"$TMP/unit/weftd.service"
    say=$(MANPATH="$inst/share/man" systemd-analyze verify "$TMP/unit/weftd.service" 2>&1); vrc=$?
    [ "$vrc" = 0 ] && [ -z "$say" ] && ok "systemd-analyze verify: clean" || not_ok "systemd-analyze verify (exit $vrc): $say"
else
    echo "# systemd-analyze not installed: the unit is not verified"
fi
# the sample configuration reads: weftd starts with it (Redis away: it says so and waits)
: >"$TMP/weftd.log"
WEFT_PAYLOAD_DIR="$TMP/payloads" "$inst/bin/weftd" --config "$conf" --redis "redis://127.0.0.1:1" \
    --plugin-path "$inst/lib/weft" --no-api >"$TMP/weftd.log" 2>&1 &
wpid=$!
i=0
while ! grep -q 'will retry' "$TMP/weftd.log" && kill -0 "$wpid" 2>/dev/null && [ $i -lt 100 ]; do
    sleep 0.1; i=$((i + 1))
done
if kill -0 "$wpid" 2>/dev/null && grep -q 'will retry' "$TMP/weftd.log"; then
    ok "weftd starts with the sample configuration"
else
    not_ok "weftd with the sample configuration: $(head -c 500 "$TMP/weftd.log")"
fi
kill "$wpid" 2>/dev/null; wait "$wpid" 2>/dev/null

# bash completion, called as bash calls it
complete_() { # WORDS...: what _weft offers for the last word
    (cd "$TMP/files" && bash -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _weft
        printf "%s\n" "${COMPREPLY[@]}"' _ "$comp" "$@" 2>&1)
}
mkdir -p "$TMP/files/sub"; : >"$TMP/files/a.lua"; : >"$TMP/files/b.json"; : >"$TMP/files/c.txt"
got=$(complete_ weft sta | sort | tr '\n' ' ')
[ "$got" = "start status " ] && ok "completion: weft sta -> start status" || not_ok "completion of 'weft sta': $got"
got=$(complete_ "$inst/bin/weft" status ID --o | tr '\n' ' ')
[ "$got" = "--output " ] && ok "completion: status --o -> --output (from weft status --help)" || not_ok "completion of 'status --o': $got"
got=$(complete_ "$inst/bin/weft" status ID -o "" | tr '\n' ' ')
[ "$got" = "text json " ] && ok "completion: -o -> text json" || not_ok "completion of '-o': $got"
got=$(complete_ "$inst/bin/weft" run "" | sort | tr '\n' ' ')
[ "$got" = "a.lua b.json sub/ " ] && ok "completion: run FILE -> definitions and directories" || not_ok "completion of 'run': $got"
got=$(complete_ weft list --status T | tr '\n' ' ')
[ "$got" = "TIMED_OUT TERMINATED " ] && ok "completion: list --status T -> workflow statuses" || not_ok "completion of 'list --status T': $got"
got=$(complete_ "$inst/bin/weft" list --l | tr '\n' ' ')
[ "$got" = "--limit " ] && ok "completion: list --l -> --limit" || not_ok "completion of 'list --l': $got"
got=$(complete_ weft --redis x wa | tr '\n' ' ')
[ "$got" = "wait watch " ] && ok "completion: the command after an option and its value" || not_ok "completion after --redis x: $got"
cmds=$("$inst/bin/weft" --help | sed -n 's/^  \([a-z][a-z]*\) .*/\1/p' | sort | tr '\n' ' ')
got=$(complete_ weft "" | grep -vx help | sort | tr '\n' ' ')
[ "$got" = "$cmds" ] && ok "completion offers the commands of weft --help" || not_ok "completion: $got; weft --help: $cmds"

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
# the .pc's abi_major is the WEFT_ABI_MAJOR a plugin compiles with, as the compiler reads it
pc_abi=$(PKG_CONFIG_PATH="$inst/lib/pkgconfig" pkg-config --define-prefix --variable=abi_major weft-plugin)
printf '#include <stdio.h>\n#include <weft/plugin.h>\nint main(void) { printf("%%d\\n", WEFT_ABI_MAJOR); return 0; }\n' \
    >"$TMP/abi.c"
if ${CC:-cc} $cflags "$TMP/abi.c" -o "$TMP/abi" >"$TMP/abi.log" 2>&1; then
    h_abi=$("$TMP/abi")
    [ -n "$pc_abi" ] && [ "$pc_abi" = "$h_abi" ] &&
        ok "weft-plugin.pc's abi_major=$pc_abi is the installed plugin.h's WEFT_ABI_MAJOR" ||
        not_ok "weft-plugin.pc says abi_major=$pc_abi, the installed plugin.h WEFT_ABI_MAJOR $h_abi"
else
    not_ok "a program including the installed weft/plugin.h does not build: $(head -c 500 "$TMP/abi.log")"
fi

WEFT="$inst/bin/weft"
WEFT_PLUGIN_PATH="$TMP/textcase:$inst/lib/weft" run_weft run "$TMP/textcase/workflow.lua" \
    --input '{"text":"hello plugin world"}'
expect_rc "installed weft runs the plugin's workflow" 0
expect_json "textcase workflow" '{"shout":"HELLO PLUGIN WORLD","title":"Hello Plugin World"}'
WEFT_PLUGIN_PATH="$TMP/textcase:$inst/lib/weft" run_weft plugins
case $out in *TEXT_CASE*LAMBDA*|*LAMBDA*TEXT_CASE*) ok "plugins lists TEXT_CASE and LAMBDA" ;;
    *) not_ok "plugins: $out" ;; esac
finish
