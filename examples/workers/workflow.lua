-- Two SIMPLE tasks done by external workers (worker.py and worker.sh here):
--   weftd --api 127.0.0.1:8080 &
--   python3 examples/workers/worker.py &       # serves "greet"
--   sh examples/workers/worker.sh &            # serves "shout"
--   weft start examples/workers/workflow.lua --input '{"name":"ann"}'
local w = require "weft"

return w.workflow {
  name = "workers_example",
  input = { "name" },
  output = { greeting = "${shout.output.text}" },
  w.simple { ref = "greet", input = { name = "${workflow.input.name}" },
             response_timeout = "30s", retry = { count = 2, delay = "1s" } },
  w.simple { ref = "shout", input = { text = "${greet.output.text}" }, response_timeout = "30s" },
}
