-- A workflow used by sub_workflow.lua by name.
local w = require "weft"

return w.workflow {
  name = "child", version = 1,
  input = { "x" },
  output = { doubled = "${double.output.result}" },
  w.lambda { ref = "double", input = { x = "${workflow.input.x}" }, script = "return input.x * 2" },
}
