-- FORK_JOIN_DYNAMIC: a LAMBDA makes the list of tasks; the join waits on all of them.
local w = require "weft"

return w.workflow {
  name = "dynamic_fork_example",
  input = { "n" },
  output = { results = "${fan_join.output}" },

  w.lambda { ref = "plan", input = { n = "${workflow.input.n}" }, script = [[
    local tasks = {}
    for i = 1, input.n do
      tasks[i] = { ref = "square_" .. i, type = "LAMBDA", input = { x = i },
                   script = "return input.x * input.x" }
    end
    return tasks
  ]] },
  w.dynamic_fork { ref = "fan", tasks = "${plan.output.result}" },
}
