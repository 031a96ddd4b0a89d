-- Retries and optional tasks: "flaky" fails until its third attempt (retryCount 2,
-- exponential backoff); "broken" always fails but is optional, so the workflow goes on.
-- run: weft run examples/retry.lua
-- prints: {"broken":"COMPLETED_WITH_ERRORS","flaky":"ok on attempt 2","flaky_attempt":2}
local w = require "weft"

return w.workflow {
  name = "retry_example",
  output = { flaky = "${flaky.output.result}", flaky_attempt = "${flaky.retryCount}",
             broken = "${broken.status}" },

  w.lambda { ref = "flaky", input = { attempt = "${flaky.retryCount}" },
             retry = { count = 2, delay = "50ms", backoff = "exponential" },
             script = [[
               if (input.attempt or 0) < 2 then error("not yet (attempt " .. tostring(input.attempt) .. ")") end
               return "ok on attempt " .. input.attempt
             ]] },
  w.lambda { ref = "broken", optional = true, script = "error('always broken')" },
}
