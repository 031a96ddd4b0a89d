#!/bin/sh
# Every example says how to run it, and runs so. Each examples/*.lua and
# examples/workers/*.lua (and any other file of examples/ with such a line)
# has in its first comment lines "-- run: COMMAND", each followed by
# "-- prints: LINE", the last line COMMAND prints. Each COMMAND runs word for
# word with sh from a repository root (examples/, runtime/ on PATH), with
# WEFT_REDIS_URL and WEFT_API_URL naming a redis-server and a weftd on ports
# picked here: it must exit 0 and print that line. A file without a run line
# fails. Then the README's commands: its daemon lines start their own weftd,
# on this Redis in place of redis://127.0.0.1:6379. (examples/plugins/ builds
# against an installed SDK: install.sh runs it.)
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/redis_lib.sh"
for c in curl jq python3 setsid timeout; do
    command -v "$c" >/dev/null 2>&1 || { echo "$c not installed: skipping"; exit 77; }
done
ROOT="$TMP/root"
mkdir -p "$ROOT"
ln -s "$SRC/examples" "$ROOT/examples"
ln -s "$BUILD/runtime" "$ROOT/runtime"
GROUP=

# end_group: SIGTERM to the process group of the last command (what it left
# in the background: a worker, a weftd, a server), SIGKILL after 10 s
end_group() {
    [ -n "$GROUP" ] || return 0
    kill -TERM -"$GROUP" 2>/dev/null
    i=0
    while [ -n "$(ps -o stat= -s "$GROUP" 2>/dev/null | grep -v '^Z')" ]; do
        i=$((i + 1))
        [ $i -gt 100 ] && { kill -KILL -"$GROUP" 2>/dev/null; break; }
        sleep 0.1
    done
    GROUP=
}
trap 'end_group; cleanup_procs; rm -rf "$TMP"' EXIT

# in_root COMMAND: COMMAND with sh in $ROOT, runtime/ on PATH, in a process
# group of its own, for 60 s at most; its exit status, then end_group
in_root() {
    (cd "$ROOT" && PATH="$ROOT/runtime:$PATH" exec setsid timeout 60 sh -c "$1" </dev/null) &
    GROUP=$!
    wait "$GROUP"
    set -- $?
    end_group
    return "$1"
}

start_redis
start_weftd d1 --workers 2 --api 127.0.0.1:0
API="http://$(api_of d1)" || exit 1
export WEFT_API_URL="$API"

# run_example FILE COMMAND LINE: COMMAND exits 0 and its last line is LINE
run_example() {
    run_cmd in_root "$2"
    expect_rc "$1: $2" 0
    if [ "$last" = "$3" ]; then ok "$1: prints $3"; else
        not_ok "$1: prints $last, not $3"
        [ "$rc" != 0 ] || printf '%s\n' "$errout" | tail -n 20 | sed 's/^/# /'
    fi
    case $2 in *"examples/$1"*) ;; *) not_ok "$1: the run line does not name examples/$1" ;; esac
}

{
    find "$SRC/examples" -name '*.lua' ! -path "$SRC/examples/plugins/*"
    grep -rl '^-- run: ' "$SRC/examples"
} | sort -u >"$TMP/files"
[ -s "$TMP/files" ] || not_ok "no examples in $SRC/examples"
while IFS= read -r f; do
    name=${f#"$SRC/examples/"}
    runs=0
    cmd=
    while IFS= read -r line; do
        case $line in
        '-- run: '*)
            [ -z "$cmd" ] || not_ok "$name: '-- run: $cmd' has no '-- prints:' line after it"
            cmd=${line#-- run: } ;;
        '-- prints: '*)
            if [ -n "$cmd" ]; then
                run_example "$name" "$cmd" "${line#-- prints: }"
                runs=$((runs + 1))
            else
                not_ok "$name: '$line' follows no '-- run:' line"
            fi
            cmd= ;;
        --*)
            [ -z "$cmd" ] || not_ok "$name: '-- run: $cmd' has no '-- prints:' line after it"
            cmd= ;;
        *) break ;; # the first comment lines only
        esac
    done <"$f"
    [ -z "$cmd" ] || not_ok "$name: '-- run: $cmd' has no '-- prints:' line after it"
    [ "$runs" -gt 0 ] || not_ok "$name: no '-- run:' line with its '-- prints:' line in its first comment lines"
done <"$TMP/files"

# The README's quick start, after the build: each line exits 0.
sed -n 's/^    \(runtime\/weft \(run\|compile\|plugins\)\b.*\)/\1/p' "$SRC/README.md" >"$TMP/quick"
[ "$(wc -l <"$TMP/quick")" -ge 3 ] || not_ok "README.md: the quick start's runtime/weft lines are not found"
while IFS= read -r line; do
    run_cmd in_root "$line"
    expect_rc "README.md: $line" 0
done <"$TMP/quick"

# The README's daemon lines, word for word but for the Redis URL: weftd on
# this Redis, its API on a port it picks (not 8080), and keys of their own,
# so that the work is done by the weftd they start, not by d1. The client
# goes over Redis, as the README's does.
readme=$(sed -n '/^    runtime\/weftd /,/^    runtime\/weft wait /s/^    //p' "$SRC/README.md")
case $readme in
*'runtime/weftd --redis redis://127.0.0.1:6379 &'*'runtime/weft start examples/fork.lua'*'runtime/weft wait'*)
    run_cmd in_root "unset WEFT_API_URL; export WEFT_API_LISTEN=127.0.0.1:0 WEFT_KEY_PREFIX=readme$$:
$(printf '%s\n' "$readme" | sed "s|redis://127\.0\.0\.1:6379|$WEFT_REDIS_URL|")"
    expect_rc "README.md's daemon lines" 0
    expect_json "README.md's daemon lines" \
        '{"sent":{"email":{"result":"mail to ann"},"sms":{"result":"sms of 160 chars"}}}'
    ;;
*) not_ok "README.md: the daemon lines (weftd --redis, weft start examples/fork.lua, weft wait) are not found: $readme" ;;
esac

stop_weftd_clean d1
finish
