local w = require "weft"
return w.workflow { name = "chaos_loop", input = { "n" },
  output = { iterations = "${loop.output.iteration}", total = "${workflow.variables.total}" },
  w.set_variable { ref = "init", input = { total = 0 } },
  w.do_while { ref = "loop", condition = "return input.iteration < 4",
    w.lambda { ref = "step", input = { t = "${workflow.variables.total}", n = "${workflow.input.n}" },
               script = "return input.t + input.n" },
    w.set_variable { ref = "acc", input = { total = "${step.output.result}" } } },
}
