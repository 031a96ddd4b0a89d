-- forks inside forks inside a decision, with explicit and automatic joins
local w = require "weft"
return w.workflow {
  name = "nested", version = 2, input = { "k" },
  output = { all = "${outer_join.output}" },
  w.decision { ref = "pick", on = "${workflow.input.k}",
    cases = { a = {
      w.fork { ref = "outer",
        { w.fork { ref = "inner", join = "inner_done",
            { w.lambda { ref = "i1", script = "return 1" } },
            { w.lambda { ref = "i2", script = "return 2" },
              w.fork { ref = "deepest", { w.simple { ref = "d1" } }, { w.simple { ref = "d2" } } } } } },
        { w.set_variable { ref = "sv", input = { x = "${i1.output.result}" } } } } } },
    default = { w.terminate { ref = "stop", status = "FAILED", reason = "no case" } } },
}
