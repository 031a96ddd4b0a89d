#!/bin/bash
# Operators see stuck queues: a queue holding a task that no worker serves
# (a SIMPLE task nobody polls) is listed by GET /api/tasks/queue/sizes and
# /api/tasks/queue/all (every queue holding tasks, not only the daemon's),
# counted in /metrics with its last poll time, and said to be unpolled in
# words ("no worker has polled ...") by /api/queue/{name} (what the Queues
# page shows) and the poll data, once no poll came for queue_unpolled_after
# (here 2s); a queue a worker polled lately is not. Run once on one Redis and
# once with the queues split in shards.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/redis_lib.sh"
for c in curl jq; do
    command -v "$c" >/dev/null 2>&1 || { echo "$c not installed: skipping"; exit 77; }
done

# wf NAME QUEUE: $TMP/NAME.lua, a workflow NAME of one SIMPLE task on QUEUE
wf() {
    printf 'local w = require "weft"\nreturn w.workflow { name = "%s", w.simple { ref = "t", name = "%s" } }\n' \
        "$1" "$2" >"$TMP/$1.lua"
}
# queued API QUEUE N: until GET /api/tasks/queue/sizes?taskType=QUEUE says N
queued() { [ "$(curl -s "$1/api/tasks/queue/sizes?taskType=$2" | jq ".\"$2\"")" = "$3" ]; }
# metric API LINE: /metrics has the whole line LINE
metric() { curl -s "$1/metrics" | grep -qxF "$2"; }

round() { # LABEL: one daemon, two queues
    label=$1
    start_weftd "d$label" --workers 1 --api 127.0.0.1:0 --set queue_unpolled_after=2s
    API="http://$(api_of "d$label")" || exit 1

    # greet: a task no one polls
    wf "greet$label" "greet$label"
    run_weft start "$TMP/greet$label.lua"
    expect_rc "$label: start a workflow whose SIMPLE task no one serves" 0
    wait_for 10 queued "$API" "greet$label" 1 || not_ok "$label: greet$label never queued"
    sizes=$(curl -s "$API/api/tasks/queue/sizes")
    [ "$(jq ".greet$label" <<<"$sizes")" = 1 ] &&
        ok "$label: /api/tasks/queue/sizes without taskType lists greet$label: 1" ||
        not_ok "$label: /api/tasks/queue/sizes: $sizes"
    jq -e 'to_entries | all(.value > 0)' <<<"$sizes" >/dev/null &&
        ok "$label: it lists only queues holding tasks" || not_ok "$label: an empty queue in $sizes"
    all=$(curl -s "$API/api/tasks/queue/all")
    [ "$(jq ".greet$label" <<<"$all")" = 1 ] && ok "$label: /api/tasks/queue/all too" ||
        not_ok "$label: /api/tasks/queue/all: $all"
    metric "$API" "weft_queue_depth{queue=\"greet$label\"} 1" &&
        ok "$label: /metrics: weft_queue_depth{queue=\"greet$label\"} 1" ||
        not_ok "$label: /metrics: $(curl -s "$API/metrics" | grep "greet$label")"
    metric "$API" "weft_queue_last_poll_timestamp_seconds{queue=\"greet$label\"} 0.000" &&
        ok "$label: /metrics: never polled: weft_queue_last_poll_timestamp_seconds 0.000" ||
        not_ok "$label: /metrics: $(curl -s "$API/metrics" | grep "greet$label")"
    q=$(curl -s "$API/api/queue/greet$label")
    case $(jq -r '.problem // ""' <<<"$q") in
    "no worker has polled this queue"*) ok "$label: /api/queue/greet$label says no worker has polled it" ;;
    *) not_ok "$label: /api/queue/greet$label: $q" ;;
    esac
    [ "$(jq '.lastPollTime' <<<"$q")" = 0 ] && ok "$label: and its lastPollTime is 0" ||
        not_ok "$label: lastPollTime: $q"
    pd=$(curl -s "$API/api/tasks/queue/polldata?taskType=greet$label")
    jq -e --arg q "greet$label" 'length == 1 and .[0].queueName == $q and .[0].lastPollTime == 0 and
        (.[0].problem | startswith("no worker has polled"))' <<<"$pd" >/dev/null &&
        ok "$label: /api/tasks/queue/polldata?taskType=greet$label: Conductor's PollData and the words" ||
        not_ok "$label: polldata: $pd"

    # served: polled now (nothing there), then a task comes: not stuck
    # until no poll came for 2 s
    before=$(date +%s)
    code=$(curl -s -o /dev/null -w '%{http_code}' "$API/api/tasks/poll/served$label?workerid=w1")
    [ "$code" = 204 ] && ok "$label: a worker polls served$label: 204" || not_ok "$label: poll: $code"
    wf "served$label" "served$label"
    run_weft start "$TMP/served$label.lua"
    wait_for 10 queued "$API" "served$label" 1 || not_ok "$label: served$label never queued"
    q=$(curl -s "$API/api/queue/served$label")
    jq -e --argjson t "$before" '(.problem == null) and .lastPollTime >= $t * 1000' <<<"$q" >/dev/null &&
        ok "$label: polled lately: no problem, lastPollTime set" || not_ok "$label: served$label: $q"
    line=$(curl -s "$API/metrics" | grep "^weft_queue_last_poll_timestamp_seconds{queue=\"served$label\"} ")
    awk -v t="${line##* }" -v b="$before" 'BEGIN { exit !(t >= b && t < b + 60) }' &&
        ok "$label: /metrics: weft_queue_last_poll_timestamp_seconds of served$label is the poll's Unix time" ||
        not_ok "$label: /metrics: '$line' (polled at $before or later)"
    sleep 2.5
    q=$(curl -s "$API/api/queue/served$label")
    case $(jq -r '.problem // ""' <<<"$q") in
    "no worker has polled for 2"*) ok "$label: 2 s on: \"$(jq -r .problem <<<"$q")\"" ;;
    *) not_ok "$label: served$label after 2.5 s: $q" ;;
    esac
    all=$(curl -s "$API/api/tasks/queue/polldata/all")
    jq -e --arg a "greet$label" --arg b "served$label" '[.[] | select(.queueName == $a or .queueName == $b) |
        select(.problem | startswith("no worker has polled"))] | length == 2' <<<"$all" >/dev/null &&
        ok "$label: /api/tasks/queue/polldata/all has both, with the words" ||
        not_ok "$label: polldata/all: $all"

    # bad input: 400, naming what was wrong
    for q in "" "taskType=" "taskType=blue:greet" "taskType=a%7Cb" "taskType=$(printf 'x%.0s' $(seq 1 200))"; do
        code=$(curl -s -o "$TMP/bad.json" -w '%{http_code}' "$API/api/tasks/queue/polldata?$q")
        [ "$code" = 400 ] && jq -e '.message | length > 0' "$TMP/bad.json" >/dev/null &&
            ok "$label: polldata?${q:0:30}: 400, $(jq -r .message "$TMP/bad.json" | cut -c1-60)" ||
            not_ok "$label: polldata?${q:0:30}: $code $(cat "$TMP/bad.json")"
    done

    # a worker takes greet's task: the queue holds none ready, no words
    task=$(curl -s "$API/api/tasks/poll/greet$label?workerid=w1")
    q=$(curl -s "$API/api/queue/greet$label")
    jq -e '.problem == null and .lastPollTime > 0 and .leased == 1' <<<"$q" >/dev/null &&
        ok "$label: polled and taken: no problem" || not_ok "$label: greet$label after a poll: $q ($task)"
    stop_weftd_clean "d$label"
}

start_redis
round one
# a key prefix of its own, whose queues are split in 3 shards
export WEFT_KEY_PREFIX="s$$:" WEFT_QUEUE_SHARDS=3
round shards
finish
