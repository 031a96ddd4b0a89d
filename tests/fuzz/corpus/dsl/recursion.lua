local function f(n) return f(n + 1) + 1 end
return f(1)
