-- DO_WHILE: the body runs, then the condition decides whether to run it again.
-- Body tasks are numbered per iteration (step__1, step__2, ...).
-- run: weft run examples/do_while.lua --input '{"times":3}'
-- prints: {"iterations":3,"last":30,"total":30}
local w = require "weft"

return w.workflow {
  name = "do_while_example",
  input = { "times" },
  output = { iterations = "${loop.output.iteration}", last = "${loop.output.step.result}",
             total = "${workflow.variables.total}" },

  w.set_variable { ref = "init", input = { total = 0 } },
  w.do_while { ref = "loop", input = { times = "${workflow.input.times}" },
               condition = "return input.iteration < input.times", max = 100,
    w.lambda { ref = "step", input = { total = "${workflow.variables.total}" },
               script = "return input.total + 10" },
    w.set_variable { ref = "acc", input = { total = "${step.output.result}" } },
  },
}
