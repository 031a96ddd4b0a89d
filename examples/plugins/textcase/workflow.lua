-- Uses the out-of-tree TEXT_CASE plugin:
--   make && WEFT_PLUGIN_PATH=$PWD: weft run workflow.lua --input '{"text":"hello plugin world"}'
local w = require "weft"

return w.workflow {
  name = "textcase_example",
  input = { "text" },
  output = { shout = "${shout.output.text}", title = "${title.output.text}" },
  w.task { ref = "shout", type = "TEXT_CASE", text = "${workflow.input.text}", mode = "upper" },
  w.task { ref = "title", type = "TEXT_CASE", text = "${workflow.input.text}", mode = "title" },
}
