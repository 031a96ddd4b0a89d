#!/bin/bash
# External payload storage: inputs/outputs over the soft limit live in the
# payload directory and are referenced from the execution, transparently to
# tasks and readers; over the hard limit they are refused with both sizes.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/redis_lib.sh"
export WEFT_PAYLOAD_DIR="$TMP/payloads" WEFT_PAYLOAD_SOFT=2048 WEFT_PAYLOAD_HARD=65536
start_redis
start_weftd p1 --workers 2

cat >"$TMP/big.lua" <<'L'
local w = require "weft"
return w.workflow { name = "big", input = { "n" },
  output = { len = "${measure.output.result}", head = "${make.output.result.head}" },
  w.lambda { ref = "make", input = { n = "${workflow.input.n}" },
             script = "return { head = 'abc', body = string.rep('x', input.n) }" },
  w.lambda { ref = "measure", input = { big = "${make.output.result}" },
             script = "return #input.big.body" } }
L
run_weft start "$TMP/big.lua" --input '{"n":10000}'; id=$last
run_weft wait "$id" --timeout 20
expect_json "a large output feeds the next task" '{"len":10000,"head":"abc"}'
doclen=$(rcli HGET "${WEFT_KEY_PREFIX}{$id}" doc | wc -c)
[ "$doclen" -lt 8000 ] && ok "the stored execution stays small ($doclen bytes)" || not_ok "doc is $doclen bytes"
n=$(ls "$WEFT_PAYLOAD_DIR" | wc -l)
[ "$n" -ge 2 ] && ok "$n payloads in the payload directory" || not_ok "payload dir: $(ls "$WEFT_PAYLOAD_DIR")"
run_weft status "$id" -o json
case $out in *'"$payload"'*) not_ok "status shows a reference instead of the data" ;; *xxxxxxxxxx*) ok "status shows the data itself" ;; *) not_ok "status: ${out:0:300}" ;; esac

# over the hard limit: a task's output fails the task, naming both sizes
run_weft start "$TMP/big.lua" --input '{"n":100000}'; id=$last
run_weft wait "$id" --timeout 20
expect_rc "an output over the hard limit" 1
expect_err "an output over the hard limit" "over the hard limit of 64.0 KiB"

# a workflow input over the hard limit is refused at start
python3 -c 'import json; print(json.dumps({"n": 1, "pad": "y" * 70000}))' >"$TMP/in.json"
run_weft start "$TMP/big.lua" --input "@$TMP/in.json"
expect_rc "an input over the hard limit" 2
expect_err "an input over the hard limit" "workflow input is"
expect_err "an input over the hard limit" "over the hard limit of 64.0 KiB"
# over the soft limit only: kept outside, and the workflow runs
python3 -c 'import json; print(json.dumps({"n": 5, "pad": "y" * 5000}))' >"$TMP/in2.json"
run_weft start "$TMP/big.lua" --input "@$TMP/in2.json"; id=$last
run_weft wait "$id" --timeout 20
expect_json "a large input is kept outside and still read" '{"len":5,"head":"abc"}'
finish
