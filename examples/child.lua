-- A workflow used by sub_workflow.lua by name: weft run finds it next to that
-- file; weftd once it is registered (weft register examples/child.lua).
-- run: weft run examples/child.lua --input '{"x":4}'
-- prints: {"doubled":8}
local w = require "weft"

return w.workflow {
  name = "child", version = 1,
  input = { "x" },
  output = { doubled = "${double.output.result}" },
  w.lambda { ref = "double", input = { x = "${workflow.input.x}" }, script = "return input.x * 2" },
}
