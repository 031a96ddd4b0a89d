#!/bin/sh
# embed-scripts.sh SRCDIR FILE...: print a C source with each Lua file's text as
# rs_script_src[i] (NUL-terminated) named rs_script_name[i] (basename without .lua).
# A line "--@include NAME.lua" is replaced by that file's text (from SRCDIR's
# store/redis): code the queue scripts share.
set -e
srcdir=$1; shift
printf '/* generated from the Redis scripts in runtime/store/redis by build-aux/embed-scripts.sh; do not edit */\n'
printf '#include <stddef.h>\n'
i=0
for f in "$@"; do
    printf 'static const char s%d[] = {\n' $i
    d=$(dirname "$srcdir/$f")
    awk -v d="$d" '/^--@include / { f = d "/" $2; while ((getline l < f) > 0) print l; close(f); next } { print }' "$srcdir/$f" |
        od -An -v -tx1 | sed -e 's/ *\([0-9a-f][0-9a-f]\)/0x\1,/g' -e '/^$/d'
    printf '0x00 };\n'
    i=$((i + 1))
done
printf 'const char *const rs_script_name[] = {\n'
for f in "$@"; do b=$(basename "$f" .lua); printf '    "%s",\n' "$b"; done
printf '};\nconst char *const rs_script_src[] = {\n'
i=0; for f in "$@"; do printf '    s%d,\n' $i; i=$((i + 1)); done
printf '};\nconst size_t rs_script_count = %d;\n' $#
