-- Two SIMPLE tasks done by external workers (worker.py serves "greet" and
-- worker.sh "shout") that poll weftd's REST API at WEFT_API_URL (default
-- http://127.0.0.1:8080); with --once each exits after one task:
-- run: python3 examples/workers/worker.py --once & sh examples/workers/worker.sh --once & weft wait "$(weft start examples/workers/workflow.lua --input '{"name":"ann"}')"
-- prints: {"greeting":"HELLO, ANN"}
local w = require "weft"

return w.workflow {
  name = "workers_example",
  input = { "name" },
  output = { greeting = "${shout.output.text}" },
  w.simple { ref = "greet", input = { name = "${workflow.input.name}" },
             response_timeout = "30s", retry = { count = 2, delay = "1s" } },
  w.simple { ref = "shout", input = { text = "${greet.output.text}" }, response_timeout = "30s" },
}
