local w = require "weft"
return w.workflow { name = "chaos_chain", input = { "n" }, output = { v = "${c3.output.result}" },
  w.lambda { ref = "c1", input = { n = "${workflow.input.n}" }, script = "return input.n + 1" },
  w.wait { ref = "pause", duration = "30ms" },
  w.lambda { ref = "c2", input = { n = "${c1.output.result}" }, script = "return input.n * 2" },
  w.lambda { ref = "c3", input = { n = "${c2.output.result}" }, script = "return input.n - 1" },
}
