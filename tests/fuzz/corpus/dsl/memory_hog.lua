local t = {}
for i = 1, 1e9 do t[i] = string.rep("x", 4096) .. i end
return t
