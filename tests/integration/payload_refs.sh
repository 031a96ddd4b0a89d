#!/bin/bash
# Client data is data: a value shaped like a payload reference,
# {"$payload": "<path>"}, sent as a workflow input, a task input, a worker's
# outputData or a workflow output, is kept and served exactly as sent. No
# host file is read through it, and nothing in an answer tells whether such
# a file exists. Through weftd's REST API, the CLI's direct-to-Redis path
# and the embedded engine.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/redis_lib.sh"
command -v curl >/dev/null 2>&1 || { echo "curl not installed: skipping"; exit 77; }
command -v python3 >/dev/null 2>&1 || { echo "python3 not installed: skipping"; exit 77; }
export WEFT_PAYLOAD_DIR="$TMP/payloads" WEFT_PAYLOAD_SOFT=2048
start_redis
start_weftd r1 --workers 2 --api 127.0.0.1:0
API="http://$(api_of r1)" || exit 1

# A JSON file the daemon could parse and serve, a host file that is not
# JSON (its parse error would tell it exists), and one that does not exist.
canary="canary-$$-$RANDOM"
printf '{"stolen":"%s"}\n' "$canary" >"$TMP/secret.json"
host_text=$(tr -d '\n' </etc/hostname 2>/dev/null)

# req METHOD PATH [CURL ARGS...]: sets $code and $body
req() {
    m=$1 p=$2
    shift 2
    code=$(curl -s -o "$TMP/body" -w '%{http_code}' -X "$m" "$API$p" "$@")
    body=$(cat "$TMP/body")
}
# status_of ID
status_of() {
    req GET "/api/workflow/$1?includeTasks=false"
    printf '%s' "$body" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("status",""))' 2>/dev/null
}
# leaks NAME: $body holds none of the files' contents
leaks() {
    case $body in
    *"$canary"*) not_ok "$1: serves the content of $TMP/secret.json" ;;
    *) if [ ${#host_text} -ge 4 ] && [ "${body#*"$host_text"}" != "$body" ]; then
           not_ok "$1: serves the content of /etc/hostname"
       else ok "$1: no host file served"; fi ;;
    esac
}
# same NAME PYEXPR WANT: PYEXPR over the parsed $body (as w) equals the JSON WANT
same() {
    got=$(printf '%s' "$body" | python3 -c "import json,sys; w=json.load(sys.stdin); print(json.dumps($2, sort_keys=True))" 2>&1)
    if "$JSONEQ" "$got" "$3"; then ok "$1: $3"; else not_ok "$1: $got, wanted $3"; fi
}

for ref in "$TMP/secret.json" /etc/hostname /no/such/file ../../../etc/hostname; do
    forged="{\"\$payload\":\"$ref\"}"
    cat >"$TMP/forged.json" <<J
{"workflowDef": "local w = require 'weft'\nreturn w.workflow { name = 'forged', output = { ['\$payload'] = '$ref' },\n  w.set_variable { ref = 'setv', input = { ['\$payload'] = '$ref' } },\n  w.simple { ref = 'ext', name = 'forged_q' } }",
 "input": $forged}
J
    req POST /api/workflow --data-binary @"$TMP/forged.json"
    [ "$code" = 200 ] && ok "start with input $forged" || { not_ok "start with input $forged: HTTP $code $body"; continue; }
    id=$body
    req GET "/api/workflow/$id"
    [ "$code" = 200 ] && ok "$ref: the workflow reads back" || not_ok "$ref: GET answers $code: ${body:0:300}"
    leaks "$ref: running workflow"
    same "$ref: workflow input round-trips" 'w.get("input")' "$forged"

    # a worker that answers with a reference-shaped outputData
    end=$(( $(date +%s) + 20 ))
    until req GET '/api/tasks/poll/forged_q?workerid=wr' && [ "$code" = 200 ]; do
        [ "$(date +%s)" -ge "$end" ] && break
        sleep 0.1
    done
    [ "$code" = 200 ] && ok "$ref: the worker polls its task" || { not_ok "$ref: poll answers $code"; continue; }
    tid=$(printf '%s' "$body" | python3 -c 'import json,sys; print(json.load(sys.stdin)["taskId"])')
    req POST /api/tasks -d "{\"workflowInstanceId\":\"$id\",\"taskId\":\"$tid\",\"status\":\"COMPLETED\",\"outputData\":$forged}"
    [ "$code" = 200 ] && ok "$ref: the worker's result is taken" || not_ok "$ref: POST /api/tasks answers $code: $body"
    end=$(( $(date +%s) + 20 ))
    while [ "$(status_of "$id")" != COMPLETED ] && [ "$(date +%s)" -lt "$end" ]; do sleep 0.1; done
    req GET "/api/workflow/$id"
    [ "$code" = 200 ] && ok "$ref: the ended workflow reads back" || not_ok "$ref: GET answers $code: ${body:0:300}"
    same "$ref: it completed" 'w.get("status")' '"COMPLETED"'
    leaks "$ref: ended workflow"
    same "$ref: workflow input" 'w.get("input")' "$forged"
    same "$ref: workflow output" 'w.get("output")' "$forged"
    same "$ref: task input" '[t.get("inputData") for t in w["tasks"] if t["referenceTaskName"]=="setv"]' "[$forged]"
    same "$ref: worker's output" '[t.get("outputData") for t in w["tasks"] if t["referenceTaskName"]=="ext"]' "[$forged]"
done

# the CLI's direct-to-Redis path: start, status and wait
cat >"$TMP/forged.lua" <<L
local w = require "weft"
return w.workflow { name = "forged_cli", input = { "\$payload" },
  output = { ["\$payload"] = "$TMP/secret.json", echo = "\${workflow.input}" },
  w.set_variable { ref = "setv", input = { ["\$payload"] = "$TMP/secret.json" } } }
L
forged="{\"\$payload\":\"$TMP/secret.json\"}"
run_weft start "$TMP/forged.lua" --input "$forged"
expect_rc "weft start with a reference-shaped input" 0
id=$last
run_weft wait "$id" --timeout 20
expect_rc "weft wait" 0
body=$out
leaks "weft wait"
expect_json "weft wait prints the output as the workflow made it" \
    "{\"\$payload\":\"$TMP/secret.json\",\"echo\":$forged}"
run_weft status "$id" -o json
body=$out
leaks "weft status"
same "weft status: the input as sent" 'w.get("input")' "$forged"

# the embedded engine
run_weft run "$TMP/forged.lua" --input "$forged"
expect_rc "weft run with a reference-shaped input" 0
body=$out
leaks "weft run"
expect_json "weft run prints the output as the workflow made it" \
    "{\"\$payload\":\"$TMP/secret.json\",\"echo\":$forged}"
# a payload file gone (removed by hand): the workflow and the file are named, nothing crashes
pad=$(python3 -c 'print("p" * 5000)')
run_weft start "$TMP/forged.lua" --input "{\"\$payload\":\"$pad\"}"
id=$last
run_weft wait "$id" --timeout 20
expect_rc "a workflow with a large input" 0
n=$(ls "$WEFT_PAYLOAD_DIR" | grep -c "^$id\.")
[ "$n" -ge 1 ] && ok "its input is kept outside ($n files)" || not_ok "no payload file of $id"
rm -f "$WEFT_PAYLOAD_DIR/$id".*
run_weft status "$id" -o json
[ "$rc" != 0 ] && ok "status of a workflow whose payload is gone fails (exit $rc)" || not_ok "status: exit 0"
expect_err "its payload is gone" "workflow $id: payload $id."
req GET "/api/workflow/$id"
case $body in *"workflow $id: payload $id."*) ok "the API names the workflow and the payload (HTTP $code)" ;;
    *) not_ok "the API answers $code: ${body:0:300}" ;; esac
req GET /health
[ "$code" = 200 ] && ok "weftd still answers" || not_ok "health: $code"
stop_weftd_clean r1
finish
