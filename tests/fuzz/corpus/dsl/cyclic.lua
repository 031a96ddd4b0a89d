local w = require "weft"
local t = w.lambda { ref = "a", script = "return 1" }
t.input = { self = t }
local wf = w.workflow { name = "cyc", t }
wf.me = wf
return wf
