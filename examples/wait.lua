-- WAIT with a duration: a durable timer (signal.lua waits for a signal instead).
-- run: weft run examples/wait.lua
-- prints: {"after":"done","waited":"COMPLETED"}
local w = require "weft"

return w.workflow {
  name = "wait_example",
  output = { waited = "${pause.status}", after = "${after.output.result}" },
  w.wait { ref = "pause", duration = "200ms" },
  w.lambda { ref = "after", script = "return 'done'" },
}
