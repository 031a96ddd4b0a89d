-- FORK_JOIN_DYNAMIC: a LAMBDA makes the list of tasks; the join waits on all of them.
-- run: weft run examples/dynamic_fork.lua --input '{"n":3}'
-- prints: {"results":{"square_1":{"result":1},"square_2":{"result":4},"square_3":{"result":9}}}
-- run: weft run examples/dynamic_fork.lua --input '{"n":0}'
-- prints: {"results":{}}
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
