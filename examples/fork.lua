-- FORK_JOIN: branches run in parallel; the join (added as notify_join) collects
-- the output of the last task of each branch.
-- run: weft run examples/fork.lua --input '{"user":"ann"}'
-- prints: {"sent":{"email":{"result":"mail to ann"},"sms":{"result":"sms of 160 chars"}}}
local w = require "weft"

return w.workflow {
  name = "fork_example",
  input = { "user" },
  output = { sent = "${notify_join.output}" },

  w.fork { ref = "notify",
    { w.lambda { ref = "email", input = { to = "${workflow.input.user}" },
                 script = "return 'mail to ' .. input.to" } },
    { w.lambda { ref = "sms_prepare", script = "return 160" },
      w.lambda { ref = "sms", input = { len = "${sms_prepare.output.result}" },
                 script = "return 'sms of ' .. input.len .. ' chars'" } },
  },
}
