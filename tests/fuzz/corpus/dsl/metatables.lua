local w = require "weft"
local wf = w.workflow { name = "meta", w.simple { ref = "a" } }
return setmetatable(wf, { __index = function() error("boom from __index") end,
                          __pairs = function() error("boom from __pairs") end })
