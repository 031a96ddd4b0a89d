-- DECISION on a value, SWITCH with a Lua expression, and the default case.
-- run: weft run examples/decision.lua --input '{"amount":150,"country":"FR"}'
-- prints: {"approved":false,"note":"needs review","region":"FR","route":"big"}
-- run: weft run examples/decision.lua --input '{"amount":5,"country":"JP"}'
-- prints: {"approved":true,"note":"auto","region":"JP","route":"small"}
local w = require "weft"

return w.workflow {
  name = "decision_example",
  input = { "amount", "country" },
  output = { route = "${route.output.selectedCase}", region = "${region.output.selectedCase}",
             approved = "${workflow.variables.approved}", note = "${workflow.variables.note}" },

  w.decision { ref = "route", on = "${workflow.input.amount}",
               expr = "return input > 100 and 'big' or 'small'",
               cases = {
                 big = { w.set_variable { ref = "review", input = { approved = false, note = "needs review" } } },
                 small = { w.set_variable { ref = "auto", input = { approved = true, note = "auto" } } },
               } },
  w.switch { ref = "region", on = "${workflow.input.country}",
             cases = { FR = { w.lambda { ref = "eu", script = "return 'eu'" } },
                       US = { w.lambda { ref = "us", script = "return 'us'" } } },
             default = { w.lambda { ref = "other", script = "return 'other'" } } },
}
