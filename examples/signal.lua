-- WAIT without a duration: the workflow waits until the task is signalled
-- (weft signal, or POST /api/tasks/{workflowId}/{ref}/COMPLETED with a JSON
-- body), and the signal's JSON is the task's output. It needs weftd: nothing
-- can signal a workflow that weft run holds in its own process.
-- run: id=$(weft start examples/signal.lua --input '{"order":7}') && weft signal "$id" approval '{"by":"ann"}' && weft wait "$id"
-- prints: {"message":"order 7 approved by ann"}
local w = require "weft"

return w.workflow {
  name = "signal_example",
  input = { "order" },
  output = { message = "${confirm.output.result}" },
  w.wait { ref = "approval" },
  w.lambda { ref = "confirm", input = { order = "${workflow.input.order}", by = "${approval.output.by}" },
             script = [[ return "order " .. input.order .. " approved by " .. input.by ]] },
}
