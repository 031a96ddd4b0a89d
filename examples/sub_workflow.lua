-- SUB_WORKFLOW: by name (child.lua next to this file) and with an inline definition.
-- weft run finds child.lua next to this file; weftd takes the definitions
-- registered with it, so child.lua is registered first:
-- run: weft run examples/sub_workflow.lua --input '{"x":3}'
-- prints: {"by_name":6,"inline":36}
-- run: weft register examples/child.lua && weft wait "$(weft start examples/sub_workflow.lua --input '{"x":3}')"
-- prints: {"by_name":6,"inline":36}
local w = require "weft"

return w.workflow {
  name = "sub_workflow_example",
  input = { "x" },
  output = { by_name = "${named.output.doubled}", inline = "${inline.output.squared}" },

  w.sub_workflow { ref = "named", name = "child", version = 1,
                   input = { x = "${workflow.input.x}" } },
  w.sub_workflow { ref = "inline", input = { x = "${named.output.doubled}" },
    definition = w.workflow {
      name = "square", input = { "x" },
      output = { squared = "${sq.output.result}" },
      w.lambda { ref = "sq", input = { x = "${workflow.input.x}" }, script = "return input.x * input.x" },
    } },
}
