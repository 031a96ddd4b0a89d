-- TERMINATE ends the workflow early with its own output; later tasks never run.
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
