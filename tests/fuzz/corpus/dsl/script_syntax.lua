local w = require "weft"
return w.workflow { name = "s", w.lambda { ref = "a", script = "return end end" } }
