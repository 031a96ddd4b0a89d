-- TERMINATE ends the workflow early with its own output; later tasks never run.
-- run: weft run examples/terminate.lua --input '{"stop":true}'
-- prints: {"stopped":true}
-- run: weft run examples/terminate.lua --input '{"stop":false}'
-- prints: {"result":{"stopped":false}}
local w = require "weft"

return w.workflow {
  name = "terminate_example",
  input = { "stop" },

  w.decision { ref = "check", on = "${workflow.input.stop}",
               cases = { ["true"] = { w.terminate { ref = "halt", status = "COMPLETED",
                                                    reason = "asked to stop",
                                                    output = { stopped = true } } } } },
  w.lambda { ref = "work", script = "return { stopped = false }" },
}
