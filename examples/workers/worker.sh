#!/bin/sh
# An external weft worker in shell, with curl and jq: polls weftd's REST API for
# tasks named "shout", upper-cases input.text, and reports the result.
#   WEFT_API_URL=http://127.0.0.1:8080 sh worker.sh [--once]
# WEFT_API_TOKEN is sent as a bearer token when set.
set -u
API=${WEFT_API_URL:-http://127.0.0.1:8080}
TASK=${WEFT_TASK:-shout}
WORKER="sh-$(hostname)-$$"
auth() { [ -n "${WEFT_API_TOKEN:-}" ] && printf 'Authorization: Bearer %s' "$WEFT_API_TOKEN" || printf 'X-No-Auth: 1'; }

while :; do
    task=$(curl -sf -H "$(auth)" "$API/api/tasks/poll/batch/$TASK?workerid=$WORKER&count=1&timeout=1000") \
        || { echo "worker: weftd unreachable; retrying" >&2; sleep 1; continue; }
    [ "$(printf '%s' "$task" | jq length)" -eq 0 ] && continue
    wf=$(printf '%s' "$task" | jq -r '.[0].workflowInstanceId')
    id=$(printf '%s' "$task" | jq -r '.[0].taskId')
    text=$(printf '%s' "$task" | jq -r '.[0].inputData.text // ""')
    shouted=$(printf '%s' "$text" | tr '[:lower:]' '[:upper:]')
    jq -n --arg wf "$wf" --arg id "$id" --arg w "$WORKER" --arg t "$shouted" \
        '{workflowInstanceId: $wf, taskId: $id, workerId: $w, status: "COMPLETED", outputData: {text: $t}}' |
        curl -sf -H "$(auth)" -H 'Content-Type: application/json' --data-binary @- "$API/api/tasks" >/dev/null \
        || echo "worker: could not report task $id" >&2
    [ "${1:-}" = --once ] && exit 0
done
