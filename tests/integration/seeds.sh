#!/bin/bash
# WEFT_REDIS_URL as a comma-separated list of seed nodes: weft and weftd
# connect to the first that answers (here the first is a port nobody listens
# on), and a bad entry is refused naming it.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/redis_lib.sh"
start_redis
dead="redis://127.0.0.1:$(free_port)"
live="$WEFT_REDIS_URL"
cat >"$TMP/s.lua" <<'LUA'
local w = require "weft"
return w.workflow { name = "seeds", w.lambda { ref = "a", script = "return 41 + 1" } }
LUA
export WEFT_REDIS_URL="$dead,$live"
run_weft start "$TMP/s.lua"
expect_rc "weft start with a dead seed first" 0
id=$last
start_weftd s1 --workers 1
run_weft wait "$id" --timeout 20
expect_rc "weftd with the same list ran it" 0
expect_json "its output" '{"result":42}'
run_weft start "$TMP/s.lua" --redis "$live,,$dead"
expect_rc "an empty entry" 2
expect_err "is refused" "empty entry"
run_weft start "$TMP/s.lua" --redis "$dead"
[ "$rc" != 0 ] && ok "a dead seed alone: exit $rc" || not_ok "a dead seed alone: exit 0"
stop_weftd_clean s1
finish
