-- HTTP: fetch an order from the URL given in the input and price it with a LAMBDA.
-- A JSON reply's body is parsed, so later tasks reach into it; a non-2xx reply
-- fails the task (and the retry policy applies). examples/orders.py serves
-- orders on port 8090 while the command after it runs:
-- run: python3 examples/orders.py weft run examples/http.lua --input '{"url":"http://127.0.0.1:8090/orders/7"}'
-- prints: {"status":200,"total":75}
local w = require "weft"

return w.workflow {
  name = "http_example",
  input = { "url" },
  output = { status = "${fetch.output.response.statusCode}", total = "${price.output.result}" },

  w.http { ref = "fetch", uri = "${workflow.input.url}", headers = { ["X-Request-Source"] = "weft" },
           connect_timeout = "2s", read_timeout = "10s",
           retry = { count = 3, delay = "1s", backoff = "exponential" } },
  w.lambda { ref = "price", input = { order = "${fetch.output.response.body}" },
             script = "return input.order.qty * input.order.unit" },
}
