local w = require "weft"
return w.workflow {
  name = "broken",
  w.lambda { ref = "a", script = "return (" }
