-- The demo: one LAMBDA task.
-- run: weft run examples/hello.lua --input '{"name":"weft"}'
-- prints: {"greeting":"hello, weft!"}
local w = require "weft"

return w.workflow {
  name = "hello", version = 1,
  input = { "name" },
  output = { greeting = "${greet.output.result}" },

  w.lambda { ref = "greet", input = { name = "${workflow.input.name}" },
             script = [[ return "hello, " .. (input.name or "world") .. "!" ]] },
}
