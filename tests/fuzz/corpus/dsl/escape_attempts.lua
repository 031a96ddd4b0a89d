local os = require "os"
local f = io.open("/etc/passwd")
load("return 1")()
return debug.getinfo(1)
