-- the instruction budget stops this, also under pcall
local w = require "weft"
pcall(function() while true do end end)
return w.workflow { name = "never", w.simple { ref = "a" } }
