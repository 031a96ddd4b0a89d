#!/bin/bash
# The web UI weftd serves at /, in a real headless Chromium (ui_check.py):
# the files are served with a content security policy and without a token;
# the pages list, show and act on the runs started here, through the API
# token; the queues page shows a queue no worker polls, saying so.
# WEFT_UI_SHOTS=DIR keeps the screenshots (docs/ui.md's).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/redis_lib.sh"
command -v chromium >/dev/null 2>&1 || { echo "chromium not installed: skipping"; exit 77; }
/usr/bin/python3 -c 'import websocket' 2>/dev/null || { echo "python3-websocket not installed: skipping"; exit 77; }
TOKEN=ui-test-token-4b1d
start_redis
export WEFT_API_TOKEN=$TOKEN
start_weftd uid --workers 2 --api 127.0.0.1:0
API="http://$(api_of uid)" || exit 1

# ---- the files ----
code=$(curl -s -o "$TMP/index" -D "$TMP/hdrs" -w '%{http_code}' "$API/")
[ "$code" = 200 ] && ok "GET / without a token: 200" || not_ok "GET /: $code"
grep -qi '^Content-Type: text/html' "$TMP/hdrs" && ok "the page is HTML" || not_ok "GET /: $(cat "$TMP/hdrs")"
grep -qi "^Content-Security-Policy: default-src 'self'" "$TMP/hdrs" && ok "with a content security policy" ||
    not_ok "no content security policy"
grep -q 'src="/ui/app.js"' "$TMP/index" && ok "it loads /ui/app.js" || not_ok "index.html"
for f in app.js app.css; do
    code=$(curl -s -o /dev/null -w '%{http_code}' "$API/ui/$f")
    [ "$code" = 200 ] && ok "GET /ui/$f: 200" || not_ok "GET /ui/$f: $code"
done
grep -q 'http[s]*://' "$TMP/index" && not_ok "the page names another origin" || ok "the page names no other origin"
code=$(curl -s -o /dev/null -w '%{http_code}' "$API/api/daemons")
[ "$code" = 401 ] && ok "the API behind it still needs the token" || not_ok "GET /api/daemons without a token: $code"

# ---- runs for the pages ----
cat >"$TMP/bad.lua" <<'L'
local w = require "weft"
return w.workflow { name = "ui_bad", w.lambda { ref = "explode", script = [[ error("kaboom") ]] } }
L
cat >"$TMP/hold.lua" <<'L'
local w = require "weft"
return w.workflow { name = "ui_hold", w.wait { ref = "hold" },
  w.lambda { ref = "after", script = "return 'done'" } }
L
cat >"$TMP/unserved.lua" <<'L'
local w = require "weft"
return w.workflow { name = "ui_unserved", w.simple { ref = "greet", name = "ui_greet" } }
L
run_weft start "$TMP/unserved.lua"
expect_rc "a run whose SIMPLE task (queue ui_greet) no worker polls" 0
run_weft start "$TMP/bad.lua" --correlation-id ui-failing
failed=$last
run_weft start "$TMP/hold.lua"
wait1=$last
run_weft start "$TMP/hold.lua"
wait2=$last
auth() { curl -s -H "Authorization: Bearer $TOKEN" "$@"; }
wf_status() { auth "$API/api/workflow/$1?includeTasks=false" | jq -r .status; }
wait_status "$failed" FAILED && ok "a run failed" || not_ok "$failed did not fail"
wait_for 20 sh -c "curl -s -H 'Authorization: Bearer $TOKEN' '$API/api/workflow/$wait2' | jq -e '.tasks[0].status == \"IN_PROGRESS\"' >/dev/null" &&
    ok "a run waits on its WAIT task" || not_ok "$wait2 has no waiting task"
hold=$(auth "$API/api/workflow/$wait2" | jq -r '.tasks[0].taskId')
code=$(auth -o /dev/null -w '%{http_code}' -X POST "$API/api/tasks/$hold/log" --data-binary 'waiting for the approval mail')
[ "$code" = 200 ] && ok "a log line for the waiting task" || not_ok "POST /log: $code"

shots=${WEFT_UI_SHOTS:-$TMP}
/usr/bin/python3 "$SRC/tests/integration/ui_check.py" "$API" "$TOKEN" "$shots" "$failed" "$wait1" "$wait2" uid ui_greet \
    >"$TMP/ui.out" 2>&1
rc=$?
cat "$TMP/ui.out"
passes=$((passes + $(grep -c '^ok - ' "$TMP/ui.out")))
failures=$((failures + $(grep -c '^not ok - ' "$TMP/ui.out")))
[ "$rc" = 0 ] || [ "$(grep -c '^not ok - ' "$TMP/ui.out")" -gt 0 ] || not_ok "ui_check.py exited $rc"
stop_weftd_clean uid
finish
