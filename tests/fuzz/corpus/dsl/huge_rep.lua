return string.rep("x", 1e10)
