-- LAMBDA: Lua function bodies over the resolved input; outputs { result = ... }.
-- run: weft run examples/lambda.lua --input '{"items":[{"qty":2,"unit":3},{"qty":1,"unit":10}]}'
-- prints: {"count":2,"label":"ORDER OF 2 ITEMS","total":16}
local w = require "weft"

return w.workflow {
  name = "lambda_example",
  input = { "items" },
  output = { total = "${total.output.result.total}", count = "${total.output.result.count}",
             label = "${label.output.result}" },

  w.lambda { ref = "total", input = { items = "${workflow.input.items}" }, script = [[
    local sum = 0
    for _, it in ipairs(input.items) do sum = sum + it.qty * it.unit end
    return { total = sum, count = #input.items }
  ]] },
  -- text interpolation: ${...} inside a longer string becomes text
  w.lambda { ref = "label", input = { text = "order of ${total.output.result.count} items" },
             script = [[ return string.upper(input.text) ]] },
}
