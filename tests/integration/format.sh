#!/bin/bash
# The C sources are formatted as .clang-format says (STYLE.md 11): every .c
# and .h under runtime, plugins, sdk, tests, bench and examples, except the
# files the build generates. A file that clang-format would change fails the
# check, named with the first lines it would change. To fix:
#     clang-format -i FILE
. "$(dirname "$0")/lib.sh"
command -v clang-format >/dev/null 2>&1 || { not_ok "clang-format is not installed (./bootstrap installs it)"; finish; }
n=0 bad=0
while IFS= read -r f; do
    n=$((n + 1))
    if ! out=$(clang-format --style=file --dry-run --Werror "$f" 2>&1); then
        bad=$((bad + 1))
        not_ok "$f is not formatted: $(printf '%s\n' "$out" | head -3)"
    fi
done < <(cd "$SRC" && find runtime plugins sdk tests bench examples -name '*.[ch]' \
             ! -path 'runtime/lua/weft_lua.c' ! -path 'runtime/store/redis/scripts.c' \
             ! -path 'runtime/api/ui_*.c' \
             ! -path '*/.libs/*' | sort | sed "s|^|$SRC/|")
[ "$n" -gt 100 ] && ok "$n C files checked, $bad not formatted" || not_ok "only $n C files found under $SRC"
[ "$bad" = 0 ] && ok "every C file is formatted as .clang-format says" || true
finish
