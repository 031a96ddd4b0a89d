local w = require "weft"
return w.workflow { name = "chaos_sub", input = { "n" },
  output = { named = "${named.output.doubled}", inline = "${inline.output.sq}" },
  w.sub_workflow { ref = "named", name = "chaos_child", input = { x = "${workflow.input.n}" } },
  w.sub_workflow { ref = "inline", input = { x = "${workflow.input.n}" },
    definition = w.workflow { name = "chaos_square", output = { sq = "${sq.output.result}" },
      w.lambda { ref = "sq", input = { x = "${workflow.input.x}" }, script = "return input.x * input.x" } } },
}
