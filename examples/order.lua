-- The order workflow from DESIGN.md §4. It uses HTTP and SIMPLE tasks, which run
-- under weftd (later issues); `weft compile examples/order.lua` shows its JSON.
local w = require "weft"
return w.workflow {
  name = "order", version = 1,
  output = { total = "${price.output.result.total}" },
  w.http   { ref = "fetch", uri = "http://127.0.0.1:8080/orders/${workflow.input.id}",
             retry = { count = 3, delay = "1s", backoff = "exponential" }, timeout = "10s" },
  w.lambda { ref = "price", input = { order = "${fetch.output.response.body}" },
             script = [[ return { total = input.order.qty * input.order.unit } ]] },
  w.decision { ref = "route", on = "${price.output.result.total}",
               expr = "return input > 100 and 'big' or 'small'",
               cases = { big = { w.simple { ref = "review" } } },
               default = { w.set_variable { ref = "auto", input = { approved = true } } } },
  w.fork { ref = "notify",
           { w.lambda { ref = "email", script = "return 'sent'" } },
           { w.lambda { ref = "sms",   script = "return 'sent'" } } },
}
