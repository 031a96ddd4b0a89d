#!/bin/sh
# embed.sh SYMBOL FILE: print a C source defining `const char SYMBOL[]` with FILE's bytes
# (NUL-terminated) and `const unsigned long SYMBOL_len`. Used to compile Lua sources into weft.
set -e
sym=$1 file=$2
printf '/* generated from %s by build-aux/embed.sh; do not edit */\n' "$(basename "$file")"
printf 'const char %s[] = {\n' "$sym"
od -An -v -tx1 "$file" | sed -e 's/ *\([0-9a-f][0-9a-f]\)/0x\1,/g' -e '/^$/d'
printf '0x00 };\nconst unsigned long %s_len = sizeof(%s) - 1;\n' "$sym" "$sym"
