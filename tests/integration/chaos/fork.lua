local w = require "weft"
return w.workflow { name = "chaos_fork", input = { "n" },
  output = { a = "${f_join.output.fa.result}", b = "${f_join.output.fb2.result}" },
  w.fork { ref = "f",
    { w.lambda { ref = "fa", input = { n = "${workflow.input.n}" }, script = "return input.n * 10" } },
    { w.wait { ref = "fb1", duration = "20ms" },
      w.lambda { ref = "fb2", input = { n = "${workflow.input.n}" }, script = "return input.n * 100" } } },
}
