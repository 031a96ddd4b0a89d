-- The order workflow of DESIGN.md §4: fetch an order over HTTP, price it in a
-- LAMBDA, route it by its total (a big one waits for a SIMPLE "review" task done
-- by a worker), and notify in two parallel branches. examples/orders.py is the
-- orders service it fetches from, on port 8090 (weftd's API has 8080); it serves
-- while the command after it runs:
-- run: python3 examples/orders.py weft run examples/order.lua --input '{"id":7}'
-- prints: {"total":75}
local w = require "weft"
return w.workflow {
  name = "order", version = 1,
  output = { total = "${price.output.result.total}" },
  w.http   { ref = "fetch", uri = "http://127.0.0.1:8090/orders/${workflow.input.id}",
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
