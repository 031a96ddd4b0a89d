#!/bin/bash
# Hostile input to weftd's REST API: error bodies stay valid JSON when the
# request holds invalid UTF-8; a NUL in a name (path, query or body) is
# refused with 400; every malformed request gets an HTTP answer; and the
# first requests after Redis comes back are served, not answered 503.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/redis_lib.sh"
command -v curl >/dev/null 2>&1 || { echo "curl not installed: skipping"; exit 77; }
command -v python3 >/dev/null 2>&1 || { echo "python3 not installed: skipping"; exit 77; }
start_redis
start_weftd d1 --workers 1 --api 127.0.0.1:0
ADDR="$(api_of d1)" || { not_ok "weftd did not start"; finish; exit 1; }
API="http://$ADDR"
PORT=${ADDR##*:}

# http METHOD PATH [CURL ARGS...]: sets $code and $body
http() {
    m=$1 p=$2
    shift 2
    code=$(curl -s -o "$TMP/body" -w '%{http_code}' --max-time 10 -X "$m" "$API$p" "$@")
    body=$(cat "$TMP/body")
}
# valid_json NAME: the body is valid JSON (UTF-8 included) with a message
valid_json() {
    if python3 -c 'import json,sys; m=json.loads(open(sys.argv[1],"rb").read().decode("utf-8"))["message"]; print(m)' "$TMP/body" >"$TMP/msg" 2>"$TMP/why"; then
        ok "$1: $code, a valid JSON error ($(head -c 120 "$TMP/msg"))"
    else
        not_ok "$1: $code, not valid JSON: $(head -c 200 "$TMP/why") body: $(head -c 200 "$TMP/body" | od -c | head -3)"
    fi
}
expect_code() { # NAME CODE
    if [ "$code" = "$2" ]; then ok "$1: $2"; else not_ok "$1: HTTP $code, wanted $2 (body: $(head -c 300 "$TMP/body"))"; fi
}

# ---- invalid UTF-8 is escaped in error bodies ----
http GET '/api/nothing/%ff%fe'
expect_code "an unknown path with invalid UTF-8" 404
valid_json "404 for /api/nothing/%ff%fe"
grep -q '\\\\xff' "$TMP/body" && ok "the bad byte is shown as \\xff" || not_ok "no \\xff in: $body"
http GET '/api/workflow/%c3%28%ff'
valid_json "GET of an id with invalid UTF-8"
printf '{"name": "\xff\xfe", "version": 1, "tasks": [' >"$TMP/bad.json"
http POST /api/metadata/workflow --data-binary @"$TMP/bad.json"
expect_code "a cut JSON body with invalid UTF-8" 400
valid_json "400 for a body with invalid UTF-8"
printf '{"workflowDef":{"name":"u\xc3","tasks":[{"name":"x\xff","taskReferenceName":"r\xfe","type":"NOPE\xff"}]}}' >"$TMP/bad2.json"
http POST /api/workflow --data-binary @"$TMP/bad2.json"
expect_code "an inline definition with invalid UTF-8 names" 400
valid_json "400 for invalid UTF-8 names"
http GET '/api/tasks/poll/batch/q?count=%ff'
expect_code "a query argument with invalid UTF-8" 400
valid_json "400 for count=%ff"
# what the URL names comes back in JSON: a name that is not UTF-8 is refused
http GET '/api/queue/caf%e9'
expect_code "a queue name that is not UTF-8" 400
valid_json "400 for /api/queue/caf%e9"
grep -q 'not UTF-8' "$TMP/body" && ok "the 400 says why" || not_ok "no reason in: $body"
http GET '/api/tasks/queue/sizes?taskType=%ff'
expect_code "a taskType that is not UTF-8" 400
http GET '/api/queue/caf%c3%a9'
expect_code "a queue name in UTF-8" 200

# ---- a NUL in a name is refused ----
http GET '/api/workflow/abc%00def'
expect_code "an id with %00 in the path" 400
valid_json "400 for %00 in the path"
grep -q 'NUL' "$TMP/body" && ok "the 400 says NUL" || not_ok "no NUL in: $body"
http GET '/api/metadata/workflow/na%00me'
expect_code "a definition name with %00" 400
http GET '/api/tasks/poll/ty%00pe'
expect_code "a task type with %00" 400
http GET '/api/tasks/poll/batch/q?workerid=w%00x'
expect_code "a worker id with %00 in the query" 400
http POST /api/workflow -d '{"name":"wf\u0000x"}'
expect_code "a workflow name with \\u0000 in the body" 400
grep -q 'name' "$TMP/body" && ok "the 400 names the field" || not_ok "field not named: $body"
http POST /api/workflow -d '{"workflowDef":{"name":"n","tasks":[{"name":"a","taskReferenceName":"r\u0000s","type":"SIMPLE"}]}}'
expect_code "a task reference with \\u0000 in an inline definition" 400
http POST /api/workflow -d '{"workflowDef":{"name":"n","tasks":[{"name":"a\u0000b","taskReferenceName":"r","type":"SIMPLE"}]}}'
expect_code "a task type name with \\u0000" 400
http POST /api/tasks -d '{"workflowInstanceId":"a\u0000b","taskId":"t","status":"COMPLETED"}'
expect_code "a workflowInstanceId with \\u0000" 400
http POST /api/metadata/taskdefs -d '[{"name":"td\u0000x"}]'
expect_code "a task definition name with \\u0000" 400
http POST /api/workflow -d '{"workflowDef":{"name":"nul_data","tasks":[{"name":"a","taskReferenceName":"r","type":"SIMPLE"}]},"input":{"v":"x\u0000y"}}'
expect_code "a NUL in data (not a name) is data" 200

# ---- every malformed request gets an answer ----
cat >"$TMP/raw.py" <<'PY'
import socket, sys
port = int(sys.argv[1])
cases = [
    b"GET /health HTTP/1.1\r\n\r\n",
    b"GET /health HTTP/9.9\r\nHost: x\r\n\r\n",
    b"GET /he\x00alth HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /health HTTP/1.1\r\nHost: x\r\nBad Header Line\r\n\r\n",
    b"POST /api/workflow HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}",
    b"POST /api/workflow HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
    b"POST /api/workflow HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nZZ\r\n{}\r\n0\r\n\r\n",
    b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
    b"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 40000 + b"\r\n\r\n",
    b"POST /api/workflow HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\n\xff\xfe\x00\x01",
    b"DELETE /api/workflow/%zz HTTP/1.1\r\nHost: x\r\n\r\n",
]
bad = 0
for i, c in enumerate(cases):
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    got = b""
    try:
        s.sendall(c)
        s.shutdown(socket.SHUT_WR)
    except OSError:
        pass  # answered and closed before all was sent (431, 414): read the answer
    try:
        while b"\r\n" not in got:
            d = s.recv(65536)
            if not d:
                break
            got += d
    except OSError as e:
        got += b" error " + str(e).encode()
    s.close()
    first = got.split(b"\r\n", 1)[0]
    if first.startswith(b"HTTP/1.") and len(first.split()) >= 2:
        print("ok - malformed request %d gets an answer: %s" % (i + 1, first.decode("latin-1")))
    else:
        bad += 1
        print("not ok - malformed request %d (%r...) got no HTTP answer: %r" % (i + 1, c[:40], got[:80]))
sys.exit(1 if bad else 0)
PY
python3 "$TMP/raw.py" "$PORT" >"$TMP/raw.out"
while IFS= read -r line; do
    case $line in ok*) ok "${line#ok - }" ;; *) not_ok "${line#not ok - }" ;; esac
done <"$TMP/raw.out"
http GET /health
expect_code "the daemon is still up after malformed requests" 200

# ---- the first requests after Redis comes back ----
# several at once, so that several API threads hold a Redis connection
cps=
for i in 1 2 3 4 5 6 7 8; do curl -s -o /dev/null "$API/health" & cps="$cps $!"; done
for p in $cps; do wait "$p"; done
http POST /api/workflow -d '{"workflowDef":{"name":"before","tasks":[{"name":"a","taskReferenceName":"r","type":"SIMPLE"}]}}'
expect_code "a start before Redis restarts" 200
stop_redis
http GET /health
expect_code "/health while Redis is down" 503
start_redis
bad=0 codes=
for i in 1 2 3 4 5 6 7 8 9 10; do
    http GET /health
    codes="$codes $code"
    [ "$code" = 200 ] || bad=$((bad + 1))
    http POST /api/workflow -d '{"workflowDef":{"name":"after","tasks":[{"name":"a","taskReferenceName":"r","type":"SIMPLE"}]}}'
    codes="$codes $code"
    [ "$code" = 200 ] || bad=$((bad + 1))
done
[ "$bad" = 0 ] && ok "after Redis came back, 20 of 20 requests were served" || not_ok "after Redis came back: codes$codes"
stop_weftd_clean d1
finish
