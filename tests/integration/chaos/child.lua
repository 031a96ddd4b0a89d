local w = require "weft"
return w.workflow { name = "chaos_child", output = { doubled = "${d.output.result}" },
  w.wait { ref = "slow", duration = "20ms" },
  w.lambda { ref = "d", input = { x = "${workflow.input.x}" }, script = "return input.x * 2" } }
