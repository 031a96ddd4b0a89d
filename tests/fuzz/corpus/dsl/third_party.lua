local w = require "weft"
return w.workflow {
  name = "third", timeout = "1h", failure_workflow = "cleanup",
  w.task { ref = "custom", type = "MY_TYPE", anything = { 1, 2, 3 }, input = { x = "${workflow.input.x}" } },
  w.http { ref = "get", uri = "http://127.0.0.1:1/${custom.output.path}", method = "GET",
           headers = { A = "b" }, read_timeout = "2s", timeout = "10s",
           retry = { count = 3, delay = "1s", backoff = "linear", max_delay = "5s", jitter = "100ms" } },
  w.wait { ref = "pause", duration = "250ms" },
  w.join { ref = "j", on = { "custom", "get" } },
}
