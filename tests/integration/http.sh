#!/bin/sh
# The HTTP task embedded (weft run) against tests/httpd: replies feeding later
# tasks, failures with the status in the reason, retries, what is sent,
# timeouts, schemes refused at definition load, redirects, the body limit.
# The host allow-list needs plugin config, which weft run does not take:
# tests/unit/test_http.c covers it.
. "$(dirname "$0")/lib.sh"

HTTPD="$BUILD/tests/httpd"
[ -x "$HTTPD" ] || { echo "# $HTTPD is not built"; exit 77; }
"$HTTPD" "$TMP/port" "$TMP/hole" &
httpd_pid=$!
trap 'kill "$httpd_pid" 2>/dev/null; wait "$httpd_pid" 2>/dev/null; rm -rf "$TMP"' EXIT
i=0
while [ ! -s "$TMP/port" ] || [ ! -s "$TMP/hole" ]; do
    i=$((i + 1))
    if [ "$i" -gt 500 ] || ! kill -0 "$httpd_pid" 2>/dev/null; then
        echo "# tests/httpd did not start"
        exit 1
    fi
    sleep 0.02
done
PORT=$(cat "$TMP/port")
HOLE=$(cat "$TMP/hole")
BASE="http://127.0.0.1:$PORT"
IN="{\"base\":\"$BASE\"}"

# wf NAME BODY: writes $TMP/NAME.lua, a workflow whose tasks are BODY
wf() {
    cat >"$TMP/$1.lua" <<EOF
local w = require "weft"
return w.workflow { name = "$1", version = 1,
$2
}
EOF
}

# expect_no NAME TEXT: stderr does not contain TEXT
expect_no() {
    case $errout in *"$2"*) not_ok "$1: stderr has '$2'" ;; *) ok "$1: no '$2'" ;; esac
}

# count TEXT: how many stderr lines contain TEXT
count() { printf '%s\n' "$errout" | grep -c -F -- "$1"; }

# A JSON reply feeds a LAMBDA through ${fetch.output.response.body...}.
wf json '
  output = { total = "${price.output.result}", status = "${fetch.output.response.statusCode}",
             reason = "${fetch.output.response.reasonPhrase}",
             type = "${fetch.output.response.headers.content-type}" },
  w.http { ref = "fetch", uri = "${workflow.input.base}/json" },
  w.lambda { ref = "price", input = { qty = "${fetch.output.response.body.qty}",
                                      unit = "${fetch.output.response.body.unit}" },
             script = "return input.qty * input.unit" },'
run_weft run "$TMP/json.lua" --input "$IN"
expect_rc "json into lambda" 0
expect_json "json into lambda" '{"total":12,"status":200,"reason":"OK","type":"application/json"}'
expect_err "json into lambda" "fetch (HTTP) COMPLETED"

# A text reply is a string.
wf text '
  output = { body = "${t.output.response.body}" },
  w.http { ref = "t", uri = "${workflow.input.base}/text" },'
run_weft run "$TMP/text.lua" --input "$IN"
expect_rc "text body" 0
expect_json "text body" '{"body":"hello"}'

# Non-2xx replies fail the task with the status, method and URL in the reason.
wf status '  w.http { ref = "s", uri = "${workflow.input.base}/status/${workflow.input.code}" },'
run_weft run "$TMP/status.lua" --input "{\"base\":\"$BASE\",\"code\":404}"
expect_rc "404" 1
expect_err "404" "s (HTTP) FAILED: HTTP 404 Not Found from GET $BASE/status/404"
run_weft run "$TMP/status.lua" --input "{\"base\":\"$BASE\",\"code\":503}"
expect_rc "503" 1
expect_err "503" "HTTP 503 Service Unavailable from GET $BASE/status/503"
expect_err "503 fails the workflow" "failed: HTTP 503 Service Unavailable"

# The retry policy re-tries a 503: the third request succeeds.
wf retry '
  output = { hits = "${f.output.response.body.hits}", attempt = "${f.output.response.statusCode}" },
  w.http { ref = "f", uri = "${workflow.input.base}/flaky/${workflow.input.key}?fail=2",
           retry = { count = 3, delay = "50ms" } },'
run_weft run "$TMP/retry.lua" --input "{\"base\":\"$BASE\",\"key\":\"r1\"}"
expect_rc "retry until 2xx" 0
expect_json "retry until 2xx" '{"hits":3,"attempt":200}'
[ "$(count 'f (HTTP) FAILED: HTTP 503')" = 2 ] && ok "retry: two 503 failures" ||
    not_ok "retry: wanted two 503 failures: $errout"
# ... and gives up when the retries run out (every attempt reaches the server)
wf retry_few '
  w.http { ref = "f", uri = "${workflow.input.base}/flaky/r3?fail=5", retry = { count = 1, delay = "50ms" } },'
run_weft run "$TMP/retry_few.lua" --input "$IN"
expect_rc "retries used up" 1
[ "$(count 'f (HTTP) FAILED: HTTP 503')" = 2 ] && ok "retries used up: two attempts" ||
    not_ok "retries used up: wanted two attempts: $errout"
wf hits '
  output = { hits = "${h.output.response.body.hits}" },
  w.http { ref = "h", uri = "${workflow.input.base}/hits/r3" },'
run_weft run "$TMP/hits.lua" --input "$IN"
expect_json "the server saw both attempts" '{"hits":2}'

# An optional HTTP task that fails lets the workflow go on; its reply stays in its output.
wf optional '
  output = { code = "${o.output.response.statusCode}", after = "${next.output.result}" },
  w.http { ref = "o", uri = "${workflow.input.base}/status/500", optional = true },
  w.lambda { ref = "next", script = "return \"went on\"" },'
run_weft run "$TMP/optional.lua" --input "$IN"
expect_rc "optional" 0
expect_json "optional" '{"code":500,"after":"went on"}'

# POST with a JSON body and headers: the server echoes what it got.
wf post '
  output = { sent = "${p.output.response.body.body}", method = "${p.output.response.body.method}",
             type = "${p.output.response.body.headers.content-type}",
             token = "${p.output.response.body.headers.x-token}",
             num = "${p.output.response.body.headers.x-num}" },
  w.http { ref = "p", method = "post", uri = "${workflow.input.base}/echo",
           headers = { ["X-Token"] = "abc", ["X-Num"] = 5 },
           body = { order = { id = "${workflow.input.id}" } } },'
run_weft run "$TMP/post.lua" --input "{\"base\":\"$BASE\",\"id\":7}"
expect_rc "post json" 0
expect_json "post json" '{"sent":"{\"order\":{\"id\":7}}","method":"POST",
    "type":"application/json","token":"abc","num":"5"}'

# Header values never reach the log, even when the request fails.
wf secret '
  w.http { ref = "s", uri = "${workflow.input.base}/status/500",
           headers = { Authorization = "Bearer ${secrets.HTTP_TOKEN}" } },'
WEFT_SECRET_HTTP_TOKEN=tok-9f8e7d run_weft run "$TMP/secret.lua" --input "$IN"
expect_rc "secret header" 1
expect_err "secret header" "HTTP 500 Internal Server Error"
expect_no "secret header" "tok-9f8e7d"

# Transport failures: nothing listening, a connect that hangs, a reply that never comes.
wf closed '
  w.http { ref = "c", uri = "http://127.0.0.1:1/x" },'
run_weft run "$TMP/closed.lua"
expect_rc "closed port" 1
expect_err "closed port" "Failed to connect to 127.0.0.1 port 1"
wf hole '
  w.http { ref = "c", uri = "${workflow.input.url}", connect_timeout = "300ms" },'
t0=$(date +%s)
run_weft run "$TMP/hole.lua" --input "{\"url\":\"http://127.0.0.1:$HOLE/x\"}"
t1=$(date +%s)
expect_rc "connect timeout" 1
expect_err "connect timeout" "connect timeout after 300 ms (connectionTimeOut)"
[ $((t1 - t0)) -le 3 ] && ok "connect timeout: quick" || not_ok "connect timeout took $((t1 - t0))s"
wf slow '
  w.http { ref = "s", uri = "${workflow.input.base}/slow?ms=5000", read_timeout = "300ms" },'
t0=$(date +%s)
run_weft run "$TMP/slow.lua" --input "$IN"
t1=$(date +%s)
expect_rc "read timeout" 1
expect_err "read timeout" "read timeout: no data for 300 ms (readTimeOut) from GET $BASE/slow?ms=5000"
[ $((t1 - t0)) -le 3 ] && ok "read timeout: quick" || not_ok "read timeout took $((t1 - t0))s"
wf slow_ok '
  output = { slept = "${s.output.response.body.slept}" },
  w.http { ref = "s", uri = "${workflow.input.base}/slow?ms=200", read_timeout = "3s" },'
run_weft run "$TMP/slow_ok.lua" --input "$IN"
expect_rc "slow reply in time" 0
expect_json "slow reply in time" '{"slept":200}'

# Only http and https: another scheme is refused when the definition loads (exit 2) ...
wf ftp '  w.http { ref = "f", uri = "ftp://127.0.0.1/file" },'
run_weft run "$TMP/ftp.lua"
expect_rc "ftp uri" 2
expect_err "ftp uri" "scheme 'ftp' is not allowed (only http and https)"
run_weft validate "$TMP/ftp.lua"
expect_rc "validate ftp uri" 2
wf file '  w.http { ref = "f", uri = "file:///etc/passwd" },'
run_weft run "$TMP/file.lua"
expect_rc "file uri" 2
expect_err "file uri" "scheme 'file' is not allowed"
wf nouri '  w.task { ref = "f", type = "HTTP", method = "GET" },'
run_weft run "$TMP/nouri.lua"
expect_rc "no uri" 2
expect_err "no uri" "HTTP needs inputParameters.uri"
# ... or, when it comes from the input, fails the task at once, without retries.
wf dyn '  w.http { ref = "d", uri = "${workflow.input.url}", retry = { count = 3, delay = "50ms" } },'
run_weft run "$TMP/dyn.lua" --input '{"url":"file:///etc/passwd"}'
expect_rc "file uri from input" 1
expect_err "file uri from input" "d (HTTP) FAILED_WITH_TERMINAL_ERROR: HTTP: uri scheme 'file' is not allowed"
[ "$(count 'd (HTTP) SCHEDULED')" = 1 ] && ok "terminal error: no retry" ||
    not_ok "terminal error retried: $errout"

# Text that is not UTF-8 (a Latin-1 body, a Lua string) is stored and shown
# by one rule, each bad byte as the text \xNN: the output is valid JSON.
wf latin1 '  output = { body = "${r.output.response.body}", lua = "${l.output.result}" },
  w.http { ref = "r", uri = "${workflow.input.base}/latin1" },
  w.lambda { ref = "l", script = [[ return "na\xefve" ]] },'
run_weft run "$TMP/latin1.lua" --input "$IN"
expect_rc "latin1" 0
expect_json "latin1" '{"body":"caf\\xe9","lua":"na\\xefve"}'
if printf '%s' "$last" | iconv -f UTF-8 -t UTF-8 >/dev/null 2>&1; then ok "latin1: the output is UTF-8"; else
    not_ok "latin1: the output is not UTF-8: $last"; fi

# Redirects are followed; a redirect to another scheme is refused.
wf redirect '
  output = { qty = "${r.output.response.body.qty}", code = "${r.output.response.statusCode}" },
  w.http { ref = "r", uri = "${workflow.input.base}/redirect" },'
run_weft run "$TMP/redirect.lua" --input "$IN"
expect_rc "redirect" 0
expect_json "redirect" '{"qty":3,"code":200}'
wf redirect_ftp '  w.http { ref = "r", uri = "${workflow.input.base}/redirect?to=ftp://127.0.0.1/x" },'
run_weft run "$TMP/redirect_ftp.lua" --input "$IN"
expect_rc "redirect to ftp" 1
expect_err "redirect to ftp" "refused: uri scheme 'ftp' is not allowed"

# The reply body is capped (16 MiB by default).
wf big '  w.http { ref = "b", uri = "${workflow.input.base}/big?bytes=17000000" },'
run_weft run "$TMP/big.lua" --input "$IN"
expect_rc "body over the limit" 1
expect_err "body over the limit" "response body over the limit of 16777216 bytes (max_response_bytes)"

# A Conductor definition with the legacy http_request wrapper runs unchanged.
cat >"$TMP/conductor.json" <<EOF
{ "name": "legacy", "version": 1,
  "outputParameters": { "method": "\${get_echo.output.response.body.method}",
                        "body": "\${get_echo.output.response.body.body}" },
  "tasks": [ { "name": "get_echo", "taskReferenceName": "get_echo", "type": "HTTP",
               "inputParameters": { "http_request": {
                 "uri": "$BASE/echo", "method": "PUT", "body": "plain text",
                 "connectionTimeOut": 1000, "readTimeOut": 2000 } } } ] }
EOF
run_weft run "$TMP/conductor.json"
expect_rc "conductor http_request" 0
expect_json "conductor http_request" '{"method":"PUT","body":"plain text"}'

# The example workflow.
run_weft run "$SRC/examples/http.lua" --input "{\"url\":\"$BASE/json\"}"
expect_rc "examples/http.lua" 0
expect_json "examples/http.lua" '{"status":200,"total":12}'

finish
