-- WAIT with a duration: a durable timer.
local w = require "weft"

return w.workflow {
  name = "wait_example",
  output = { waited = "${pause.status}", after = "${after.output.result}" },
  w.wait { ref = "pause", duration = "200ms" },
  w.lambda { ref = "after", script = "return 'done'" },
}
