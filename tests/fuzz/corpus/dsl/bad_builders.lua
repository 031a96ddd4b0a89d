-- duplicate refs, a branch that is not a list, a bad retry duration
local w = require "weft"
return w.workflow {
  name = "bad",
  w.lambda { ref = "a", script = "return 1", retry = { count = 2, delay = "soon", backoff = "sometimes" } },
  w.fork { ref = "f", { w.lambda { ref = "a", script = "return 2" } }, "not a branch" },
}
