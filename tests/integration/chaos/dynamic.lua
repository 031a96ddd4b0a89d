local w = require "weft"
return w.workflow { name = "chaos_dynamic", input = { "n" }, output = { sum = "${total.output.result}" },
  w.lambda { ref = "plan", input = { n = "${workflow.input.n}" }, script = [[
    local t = {}
    for i = 1, 20 do t[i] = { ref = "d" .. i, type = "LAMBDA", input = { x = i + input.n }, script = "return input.x" } end
    return t ]] },
  w.dynamic_fork { ref = "fan", tasks = "${plan.output.result}" },
  w.lambda { ref = "total", input = { all = "${fan_join.output}" }, script = [[
    local s = 0
    for _, v in pairs(input.all) do s = s + v.result end
    return s ]] },
}
