#!/bin/sh
# weft run: a plugin's log lines pass the one log threshold, set by
# WEFT_LOG_LEVEL as weftd's log_level sets it; a bad value is a usage error.
. "$(dirname "$0")/lib.sh"
PLUGINS="$BUILD/tests/plugins/sleep:"   # the sleep fixture, then weft's own plugins

cat >"$TMP/say.lua" <<'LUA'
local w = require "weft"
return w.workflow { name = "say",
  w.task { ref = "nap", type = "FX_SLEEP", ms = 1, say = "hello from the fixture" } }
LUA
line='weft: FX_SLEEP: info: slept 1 ms: hello from the fixture'

run_weft run "$TMP/say.lua" --plugin-path "$PLUGINS" --quiet
expect_rc "default level" 0
case $errout in *"$line"*) ok "info: the plugin's line is shown" ;;
    *) not_ok "info: no plugin line in: $errout" ;; esac

WEFT_LOG_LEVEL=warn run_weft run "$TMP/say.lua" --plugin-path "$PLUGINS" --quiet
expect_rc "WEFT_LOG_LEVEL=warn" 0
case $errout in *"slept 1 ms"*) not_ok "warn: the info line was shown: $errout" ;;
    *) ok "warn: the plugin's info line is left out" ;; esac

WEFT_LOG_LEVEL=debug run_weft run "$TMP/say.lua" --plugin-path "$PLUGINS" --quiet
case $errout in *"$line"*) ok "debug: the plugin's line is shown" ;;
    *) not_ok "debug: no plugin line in: $errout" ;; esac

WEFT_LOG_LEVEL=loud run_weft run "$TMP/say.lua" --plugin-path "$PLUGINS" --quiet
expect_rc "WEFT_LOG_LEVEL=loud" 2
case $errout in *"WEFT_LOG_LEVEL: log_level 'loud' (use error, warn, info or debug)"*)
    ok "a bad level is named" ;; *) not_ok "bad level: $errout" ;; esac
finish
