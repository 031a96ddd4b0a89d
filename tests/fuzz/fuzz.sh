#!/bin/sh
# Builds the fuzz targets with clang and libFuzzer (ASan, UBSan) in a build
# tree of their own and runs each for a while, under nice -n 19; see README.md.
#
#   tests/fuzz/fuzz.sh [-t SECONDS] [-d DIR] [-b] [TARGET...]
#
# -t  seconds per target (default 60; FUZZ_SECONDS)
# -d  the work directory (default ${TMPDIR:-/tmp}/weft-fuzz-$USER; FUZZ_DIR):
#     src/ the build tree (a copy of the working tree's tracked files),
#     work/<target> the corpus each run grows, crashes/ what fails, log/
# -b  build only
# TARGET: expr def dsl lua_json query api redis (default: all; FUZZ_TARGETS)
#
# make fuzz (FUZZ_SECONDS=, FUZZ_TARGETS=) runs this. A crash reproduces with
# DIR/src/fuzz_<target> FILE, or with make check's tests/fuzz/fuzz_<target> FILE.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/../.." && pwd)
seconds=${FUZZ_SECONDS:-60}
dir=${FUZZ_DIR:-${TMPDIR:-/tmp}/weft-fuzz-$(id -un)}
build_only=0
while getopts t:d:b opt; do
    case $opt in
    t) seconds=$OPTARG ;;
    d) dir=$OPTARG ;;
    b) build_only=1 ;;
    *)
        sed -n '2,16s/^# \{0,1\}//p' "$0" >&2
        exit 2
        ;;
    esac
done
shift $((OPTIND - 1))
targets=${*:-${FUZZ_TARGETS:-expr def dsl lua_json query api redis}}
CC=${FUZZ_CC:-clang}
command -v "$CC" >/dev/null || {
    echo "fuzz.sh: $CC not found (libFuzzer comes with clang)" >&2
    exit 2
}
mkdir -p "$dir/src" "$dir/work" "$dir/crashes" "$dir/log"
src=$dir/src

# The working tree as it is (uncommitted changes and new files too), mtimes kept so that
# make rebuilds only what changed since the last run.
(cd "$top" && git ls-files -z --cached --others --exclude-standard | tar --null -T - -cf -) | (cd "$src" && tar -xf -)
cd "$src"
flags="-g -O1 -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined"
if [ ! -f config.status ]; then
    autoreconf -fi >/dev/null 2>&1
    ./configure -q CC="$CC" CFLAGS="$flags"
fi
nice -n 19 make -s -j2 -C runtime libweft.la
libs="runtime/.libs/libweft.a $(pkg-config --libs json-c lua5.4 hiredis libmicrohttpd libcurl) -lltdl -lm -lpthread"
for t in $targets; do
    [ -f "tests/fuzz/fuzz_$t.c" ] || {
        echo "fuzz.sh: no target $t" >&2
        exit 2
    }
    if [ ! -x "fuzz_$t" ] || [ -n "$(find tests/fuzz runtime/.libs/libweft.a -newer "fuzz_$t" \
        \( -name "fuzz*.[ch]" -o -name libweft.a \) | head -1)" ]; then
        # shellcheck disable=SC2086
        nice -n 19 "$CC" $flags -fsanitize=fuzzer -Isdk -Iruntime -I. -Itests/fuzz \
            $(pkg-config --cflags json-c lua5.4 hiredis libmicrohttpd) "tests/fuzz/fuzz_$t.c" \
            $libs -o "fuzz_$t"
    fi
done
[ "$build_only" = 1 ] && exit 0

status=0
for t in $targets; do
    case $t in
    dsl) opts="-max_len=4096 -timeout=30" ;;
    api) opts="-max_len=4096 -timeout=600" ;; # fuzz_api.c: ANSWER_CPU_MS
    query) opts="-max_len=1024 -timeout=10" ;;
    *) opts="-max_len=8192 -timeout=10" ;;
    esac
    [ -f "tests/fuzz/$t.dict" ] && opts="$opts -dict=tests/fuzz/$t.dict"
    mkdir -p "$dir/work/$t"
    echo "fuzz.sh: fuzz_$t for $seconds s (log: $dir/log/$t.log)"
    # the CPU time it had (under nice -n 19 on a busy machine, less than the wall clock)
    time=
    [ -x /usr/bin/time ] && time="/usr/bin/time -f cpu:%U+%Ss_wall:%es"
    # shellcheck disable=SC2086
    $time nice -n 19 "./fuzz_$t" $opts -rss_limit_mb=2048 -max_total_time="$seconds" \
        -print_final_stats=1 -artifact_prefix="$dir/crashes/$t-" \
        "$dir/work/$t" "tests/fuzz/corpus/$t" >"$dir/log/$t.log" 2>&1 || status=1
    grep -E '^#[0-9]+[[:space:]]+DONE|^stat::(number_of_executed_units|peak_rss_mb)|^SUMMARY|invariant broken|^cpu:' \
        "$dir/log/$t.log" | sed "s/^/  $t: /"
done
crashes=$(find "$dir/crashes" -type f | wc -l)
echo "fuzz.sh: $crashes file(s) in $dir/crashes"
exit $status
