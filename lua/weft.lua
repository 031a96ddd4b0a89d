-- The weft definition DSL (docs/lua-dsl.md). runtime/dsl.c runs this chunk
-- inside each definition's sandbox; `require "weft"` returns the table `w`.
--
-- Builders (w.lambda, w.fork ...) check their fields and return task nodes.
-- w.workflow walks the nodes, checks refs over the whole tree, expands each
-- fork into FORK_JOIN + JOIN and returns the Conductor WorkflowDef as plain
-- tables; their metatables tell the C side how to print them (__jsontype =
-- "array"/"object", __jsonorder = the order of known keys).
--
-- Arguments from dsl.c: the definition's chunk name ("order.lua"); a function
-- returning the line of the definition file now running; one returning nil
-- if a Lua body compiles, else the message; one parsing a duration into ms
-- (or nil and a message).
local chunkname, caller_line, check_script, parse_duration = ...

local w = {}

local ARRAY = { __jsontype = "array" }
local OBJECT = { __jsontype = "object" }
local function ordered(keys)
  return { __jsontype = "object", __jsonorder = keys }
end

local WORKFLOW = ordered { "name", "description", "version", "schemaVersion", "inputParameters",
  "outputParameters", "timeoutSeconds", "timeoutPolicy", "failureWorkflow", "restartable",
  "variables", "tasks" }
local TASK = ordered { "name", "taskReferenceName", "type", "description", "optional",
  "startDelay", "inputParameters", "taskDefinition", "caseValueParam", "caseExpression", "evaluatorType",
  "expression", "decisionCases", "defaultCase", "forkTasks", "joinOn", "dynamicForkTasksParam",
  "dynamicForkTasksInputParamName", "loopCondition", "maxIterations", "loopOver",
  "subWorkflowParam" }
local TASKDEF = ordered { "retryCount", "retryLogic", "retryDelaySeconds", "maxRetryDelaySeconds",
  "backoffJitterMs", "timeoutSeconds", "responseTimeoutSeconds", "rateLimitPerFrequency",
  "rateLimitFrequencyInSeconds", "concurrentExecLimit" }
local SUBWF = ordered { "name", "version", "priority", "workflowDefinition" }
-- inputParameters: what the builder sets first, then the user's keys sorted
local INPUT = ordered { "uri", "method", "headers", "body", "connectionTimeOut", "readTimeOut",
  "scriptExpression", "case_value_param", "dynamicTasks", "dynamicTasksInput", "duration", "until",
  "terminationStatus", "terminationReason", "workflowOutput" }

local Node = {}                                     -- metatable of builder results
local compiled = setmetatable({}, { __mode = "k" }) -- workflow def -> its lines table

local function set(list)
  local s = {}
  for _, k in ipairs(list) do s[k] = true end
  return s
end

local COMMON = { "ref", "name", "description", "input", "optional", "retry", "timeout",
  "response_timeout", "rate_limit", "concurrency", "start_delay" }
local COMMON_SET = set(COMMON)

local function fail(line, msg, ...)
  error(string.format("%s:%d: " .. msg, chunkname, line, ...), 0)
end

local function describe(v)
  if v == nil then return "nil" end
  if getmetatable(v) == Node then return "a " .. v.kind .. " task" end
  if compiled[v] then return "a workflow" end
  return "a " .. type(v)
end

-- describe, but quoting strings: for values that have the right type but
-- not an allowed value
local function show(v)
  if type(v) == "string" then return string.format("%q", v) end
  return describe(v)
end

-- b is the builder being run: { kind = "lambda", line = 9, ref = "price" }
local function where(b)
  if b.ref then return string.format("%s '%s'", b.kind, b.ref) end
  return b.kind
end

local function bad(b, msg, ...)
  fail(b.line, "%s: " .. msg, where(b), ...)
end

local function is_table(v)
  return type(v) == "table" and getmetatable(v) ~= Node and not compiled[v]
end

local function want(b, field, v, ty)
  if v ~= nil and type(v) ~= ty then
    bad(b, "field '%s' must be a %s (got %s)", field, ty, describe(v))
  end
  return v
end

local function need(b, field, v, ty)
  if v == nil then bad(b, "missing field '%s'", field) end
  return want(b, field, v, ty)
end

local function int(b, field, v, min)
  if v == nil then return nil end
  local i = type(v) == "number" and math.tointeger(v)
  if not i or i < min then
    bad(b, "field '%s' must be a whole number >= %d (got %s)", field, min,
      type(v) == "number" and tostring(v) or describe(v))
  end
  return i
end

local function millis(b, field, v)
  if v == nil then return nil end
  local ms, err = parse_duration(v)
  if not ms then bad(b, "field '%s': %s", field, err) end
  return ms
end

local function seconds(b, field, v)
  local ms = millis(b, field, v)
  if ms == nil then return nil end
  if ms % 1000 == 0 then return ms // 1000 end
  return ms / 1000
end

local function keyname(k)
  if type(k) == "string" and k:match("^[%a_][%w_]*$") then return "." .. k end
  if type(k) == "string" then return string.format("[%q]", k) end
  return "[" .. tostring(k) .. "]"
end

-- v must have a JSON form: strings, finite numbers, booleans and tables of them
local function plain(b, field, v, seen, depth)
  if v == nil then return nil end
  local t = type(v)
  if t == "table" then
    if getmetatable(v) == Node then bad(b, "field '%s' holds a task, not a value", field) end
    seen, depth = seen or {}, depth or 0
    if seen[v] then bad(b, "field '%s' contains itself", field) end
    if depth >= 100 then bad(b, "field '%s' is nested too deeply", field) end
    seen[v] = true
    for k, x in next, v do
      if type(k) ~= "string" and math.type(k) ~= "integer" then
        bad(b, "field '%s' has a %s as a key (use strings)", field, type(k))
      end
      plain(b, field .. keyname(k), x, seen, depth + 1)
    end
    seen[v] = nil
  elseif t == "number" then
    if v ~= v or v == math.huge or v == -math.huge then
      bad(b, "field '%s' must be a finite number", field)
    end
  elseif t ~= "string" and t ~= "boolean" then
    bad(b, "field '%s' holds a %s, which has no JSON form", field, t)
  end
  return v
end

local function copy(t, mt)
  local c = setmetatable({}, mt)
  for k, v in next, t do c[k] = v end
  return c
end

local function check_ref(b, field, v)
  if v == nil then bad(b, "missing field '%s'", field) end
  if type(v) ~= "string" or v == "" or v:find("[%s%.%$]") then
    bad(b, "field '%s' must be a non-empty string without spaces, '.' or '$' (got %s)", field,
      show(v))
  end
  return v
end

local function compiles(b, field, script)
  local err = check_script(script)
  if err then bad(b, "%s does not compile: %s", field, err) end
end

-- Unknown named fields and holes in the positional entries are errors.
-- Returns the number of positional entries.
local function check_fields(b, spec, allowed, positional)
  local n, first, unknown = 0, nil, {}
  for k in next, spec do
    if math.type(k) == "integer" and k >= 1 then
      if k > n then n = k end
      if not first or k < first then first = k end
    elseif type(k) == "string" then
      if allowed and not allowed[k] then unknown[#unknown + 1] = k end
    else
      bad(b, "unexpected key %s", keyname(k))
    end
  end
  if #unknown > 0 then
    table.sort(unknown)
    bad(b, "unknown field '%s'", unknown[1])
  end
  if n > 0 and not positional then
    bad(b, "unexpected positional entry %d (%s takes named fields only)", first, b.kind)
  end
  return n
end

-- The positional entries 1..n of t, which must all be task nodes.
local function task_list(b, t, path, n)
  local out = {}
  for i = 1, n do
    local v = t[i]
    if getmetatable(v) ~= Node then
      fail(b.line, "%s: entry %d is not a task (got %s)", path, i, describe(v))
    end
    out[i] = v
  end
  return out
end

-- A field holding a list of tasks ({ w.simple {...}, ... }).
local function sublist(b, v, path)
  if not is_table(v) then
    fail(b.line, "%s: expected a list of tasks { ... } (got %s)", path, describe(v))
  end
  local n = 0
  for k in next, v do
    if math.type(k) ~= "integer" or k < 1 then
      fail(b.line, "%s: unexpected key %s in a list of tasks", path, keyname(k))
    end
    if k > n then n = k end
  end
  return task_list(b, v, path, n)
end

local function add_input(b, t, key, value)
  if value == nil then return end
  if t.inputParameters[key] ~= nil then
    bad(b, "field 'input' cannot set '%s': %s sets it", key, b.kind)
  end
  t.inputParameters[key] = value
end

local BACKOFF = { fixed = "FIXED", linear = "LINEAR_BACKOFF", exponential = "EXPONENTIAL_BACKOFF" }
local RETRY_FIELDS = set { "count", "delay", "backoff", "max_delay", "jitter" }
local RATE_FIELDS = set { "count", "per" }

local function sub_fields(b, field, v, allowed, example)
  if not is_table(v) then
    bad(b, "field '%s' must be a table %s (got %s)", field, example, describe(v))
  end
  for k in next, v do
    if not allowed[k] then bad(b, "unknown field '%s%s'", field, keyname(k)) end
  end
end

-- The WorkflowTask fields every builder shares. skip_input: the builder
-- gives `input` its own meaning.
local function common(b, spec, ty, skip_input)
  local t = setmetatable({}, TASK)
  t.name = want(b, "name", spec.name, "string") or b.ref
  t.taskReferenceName = b.ref
  t.type = ty
  t.description = want(b, "description", spec.description, "string")
  if want(b, "optional", spec.optional, "boolean") then t.optional = true end
  t.startDelay = seconds(b, "start_delay", spec.start_delay)
  t.inputParameters = setmetatable({}, INPUT)
  if spec.input ~= nil and not skip_input then
    if not is_table(spec.input) then
      bad(b, "field 'input' must be a table { name = value } (got %s)", describe(spec.input))
    end
    for k, v in next, plain(b, "input", spec.input) do t.inputParameters[k] = v end
  end

  local def, any = setmetatable({}, TASKDEF), false
  local r = spec.retry
  if r ~= nil then
    sub_fields(b, "retry", r, RETRY_FIELDS, "{ count = n, delay = \"1s\", backoff = \"fixed\" }")
    if r.count == nil then bad(b, "missing field 'retry.count'") end
    def.retryCount = int(b, "retry.count", r.count, 0)
    def.retryLogic = BACKOFF[r.backoff == nil and "fixed" or r.backoff]
    if not def.retryLogic then
      bad(b, "field 'retry.backoff' must be \"fixed\", \"linear\" or \"exponential\" (got %s)",
        show(r.backoff))
    end
    def.retryDelaySeconds = seconds(b, "retry.delay", r.delay)
    def.maxRetryDelaySeconds = seconds(b, "retry.max_delay", r.max_delay)
    def.backoffJitterMs = millis(b, "retry.jitter", r.jitter)
    any = true
  end
  if spec.timeout ~= nil then
    def.timeoutSeconds = seconds(b, "timeout", spec.timeout)
    any = true
  end
  if spec.response_timeout ~= nil then
    def.responseTimeoutSeconds = seconds(b, "response_timeout", spec.response_timeout)
    any = true
  end
  local rl = spec.rate_limit
  if rl ~= nil then
    sub_fields(b, "rate_limit", rl, RATE_FIELDS, "{ count = n, per = \"1s\" }")
    if rl.count == nil then bad(b, "missing field 'rate_limit.count'") end
    if rl.per == nil then bad(b, "missing field 'rate_limit.per'") end
    def.rateLimitPerFrequency = int(b, "rate_limit.count", rl.count, 1)
    def.rateLimitFrequencyInSeconds = seconds(b, "rate_limit.per", rl.per)
    any = true
  end
  if spec.concurrency ~= nil then
    def.concurrentExecLimit = int(b, "concurrency", spec.concurrency, 1)
    any = true
  end
  if any then t.taskDefinition = def end
  return t
end

local function node(b, task, extra)
  local nd = extra or {}
  nd.kind, nd.ref, nd.line, nd.task = b.kind, b.ref, b.line, task
  return setmetatable(nd, Node)
end

-- Define w[kind]. fields: the builder's own named fields (nil: any name is
-- allowed); positional: whether it takes positional entries.
local function builder(kind, fields, positional, build)
  local allowed = fields and set(fields)
  if allowed then
    for _, k in ipairs(COMMON) do allowed[k] = true end
  end
  w[kind] = function(spec)
    local b = { kind = kind, line = caller_line() }
    if not is_table(spec) then
      bad(b, "expected a table of fields { ref = ..., ... } (got %s)", describe(spec))
    end
    b.ref = check_ref(b, "ref", spec.ref)
    local n = check_fields(b, spec, allowed, positional)
    return build(b, spec, n)
  end
end

builder("lambda", { "script" }, false, function(b, spec)
  local t = common(b, spec, "LAMBDA")
  local script = need(b, "script", spec.script, "string")
  compiles(b, "script", script)
  add_input(b, t, "scriptExpression", script)
  return node(b, t)
end)

local function decision(kind, ty)
  builder(kind, { "on", "expr", "cases", "default" }, false, function(b, spec)
    local t = common(b, spec, ty)
    if spec.on == nil then bad(b, "missing field 'on'") end
    add_input(b, t, "case_value_param", plain(b, "on", spec.on))
    local expr = want(b, "expr", spec.expr, "string")
    if expr then compiles(b, "expr", expr) end
    if ty == "DECISION" then
      t.caseValueParam = "case_value_param"
      t.caseExpression = expr
    elseif expr then
      t.evaluatorType, t.expression = "lua", expr
      t.caseValueParam = "case_value_param"
    else
      t.evaluatorType, t.expression = "value-param", "case_value_param"
    end
    local cases = {}
    if spec.cases ~= nil then
      if not is_table(spec.cases) then
        bad(b, "field 'cases' must be a table { name = { tasks... } } (got %s)",
          describe(spec.cases))
      end
      for name, list in next, spec.cases do
        if type(name) ~= "string" and math.type(name) ~= "integer" then
          bad(b, "case names must be strings (got %s)", describe(name))
        end
        name = tostring(name)
        cases[name] = sublist(b, list, string.format("%s case '%s'", where(b), name))
      end
    end
    local default = {}
    if spec.default ~= nil then default = sublist(b, spec.default, where(b) .. " default") end
    return node(b, t, { cases = cases, default = default })
  end)
end
decision("decision", "DECISION")
decision("switch", "SWITCH")

builder("fork", { "join" }, true, function(b, spec, n)
  local t = common(b, spec, "FORK_JOIN")
  local join = b.ref .. "_join"
  if spec.join ~= nil then join = check_ref(b, "join", spec.join) end
  if n == 0 then bad(b, "needs at least one branch (a list of tasks as a positional entry)") end
  local branches = {}
  for i = 1, n do
    local path = string.format("%s branch %d", where(b), i)
    branches[i] = sublist(b, spec[i], path)
    if #branches[i] == 0 then fail(b.line, "%s is empty", path) end
  end
  return node(b, t, { branches = branches, join = join })
end)

builder("join", { "on" }, false, function(b, spec)
  local t = common(b, spec, "JOIN")
  local on = need(b, "on", spec.on, "table")
  local refs = setmetatable({}, ARRAY)
  for k in next, on do
    if math.type(k) ~= "integer" or k < 1 or k > #on then
      bad(b, "field 'on' must be a list of refs { \"a\", \"b\" }")
    end
  end
  for i = 1, #on do refs[i] = check_ref(b, "on[" .. i .. "]", on[i]) end
  t.joinOn = refs
  return node(b, t, { on = refs })
end)

builder("dynamic_fork", { "tasks", "join" }, false, function(b, spec)
  local t = common(b, spec, "FORK_JOIN_DYNAMIC", true)
  local tasks = need(b, "tasks", spec.tasks, "string")
  if not tasks:find("${", 1, true) then
    bad(b, "field 'tasks' must be an expression \"${...}\" giving a list of tasks")
  end
  local input = spec.input
  if input ~= nil and type(input) ~= "string" and not is_table(input) then
    bad(b, "field 'input' must be an expression or a table (got %s)", describe(input))
  end
  t.inputParameters.dynamicTasks = tasks
  t.inputParameters.dynamicTasksInput = plain(b, "input", input) or setmetatable({}, OBJECT)
  t.dynamicForkTasksParam = "dynamicTasks"
  t.dynamicForkTasksInputParamName = "dynamicTasksInput"
  local join = b.ref .. "_join"
  if spec.join ~= nil then join = check_ref(b, "join", spec.join) end
  return node(b, t, { join = join, dynamic = true })
end)

builder("do_while", { "condition", "max" }, true, function(b, spec, n)
  local t = common(b, spec, "DO_WHILE")
  local cond = need(b, "condition", spec.condition, "string")
  compiles(b, "condition", cond)
  t.loopCondition = cond
  t.maxIterations = int(b, "max", spec.max, 1)
  if n == 0 then fail(b.line, "%s body is empty", where(b)) end
  return node(b, t, { body = task_list(b, spec, where(b) .. " body", n) })
end)

builder("sub_workflow", { "version", "definition", "priority" }, false, function(b, spec)
  local t = common(b, spec, "SUB_WORKFLOW")
  t.name = b.ref -- `name` is the child workflow's here
  local p, name, def = setmetatable({}, SUBWF), spec.name, spec.definition
  if def ~= nil then
    if not compiled[def] then
      bad(b, "field 'definition' must be a w.workflow { ... } (got %s)", describe(def))
    end
    if name ~= nil or spec.version ~= nil then
      bad(b, "give either name (and version) or definition, not both")
    end
    p.name, p.version, p.workflowDefinition = def.name, def.version, def
  else
    if name == nil then bad(b, "missing field 'name' (the workflow to run) or 'definition'") end
    p.name = name
    p.version = int(b, "version", spec.version, 1)
  end
  p.priority = int(b, "priority", spec.priority, 0)
  if p.priority and p.priority > 99 then
    bad(b, "field 'priority' must be a whole number from 0 to 99 (got %d)", p.priority)
  end
  t.subWorkflowParam = p
  return node(b, t)
end)

builder("set_variable", {}, false, function(b, spec)
  return node(b, common(b, spec, "SET_VARIABLE"))
end)

builder("terminate", { "status", "reason", "output" }, false, function(b, spec)
  local t = common(b, spec, "TERMINATE")
  local status = spec.status
  if status == nil then status = "COMPLETED" end
  if status ~= "COMPLETED" and status ~= "FAILED" then
    bad(b, "field 'status' must be \"COMPLETED\" or \"FAILED\" (got %s)", show(status))
  end
  add_input(b, t, "terminationStatus", status)
  add_input(b, t, "terminationReason", want(b, "reason", spec.reason, "string"))
  add_input(b, t, "workflowOutput", plain(b, "output", spec.output))
  return node(b, t)
end)

local function is_expr(v)
  return type(v) == "string" and v:find("${", 1, true) ~= nil
end

-- until is a Lua keyword: `at = ...` or `["until"] = ...` (Conductor's until)
builder("wait", { "duration", "until", "at" }, false, function(b, spec)
  local t = common(b, spec, "WAIT")
  local at = spec.at
  if spec["until"] ~= nil then
    if at ~= nil then bad(b, "a wait takes at or until, not both") end
    at = spec["until"]
  end
  if spec.duration ~= nil and at ~= nil then
    bad(b, "a wait takes duration or at (until), not both")
  end
  if spec.duration ~= nil then
    if not is_expr(spec.duration) then millis(b, "duration", spec.duration) end
    add_input(b, t, "duration", spec.duration)
  end
  -- the time's formats are checked where the definition is compiled (by the WAIT type)
  if at ~= nil then add_input(b, t, "until", want(b, "at", at, "string")) end
  return node(b, t)
end)

local METHODS = set { "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS" }

builder("http", { "method", "uri", "headers", "body", "connect_timeout", "read_timeout" }, false,
  function(b, spec)
    local t = common(b, spec, "HTTP")
    add_input(b, t, "uri", need(b, "uri", spec.uri, "string"))
    local method = want(b, "method", spec.method, "string") or "GET"
    if not is_expr(method) then
      method = method:upper()
      if not METHODS[method] then
        bad(b, "field 'method' must be one of GET, POST, PUT, PATCH, DELETE, HEAD, OPTIONS "
          .. "(got %s)", show(spec.method))
      end
    end
    add_input(b, t, "method", method)
    if spec.headers ~= nil then
      if not is_table(spec.headers) then
        bad(b, "field 'headers' must be a table { name = value } (got %s)", describe(spec.headers))
      end
      add_input(b, t, "headers", copy(plain(b, "headers", spec.headers), OBJECT))
    end
    add_input(b, t, "body", plain(b, "body", spec.body))
    add_input(b, t, "connectionTimeOut", millis(b, "connect_timeout", spec.connect_timeout))
    add_input(b, t, "readTimeOut", millis(b, "read_timeout", spec.read_timeout))
    return node(b, t)
  end)

builder("simple", {}, false, function(b, spec)
  return node(b, common(b, spec, "SIMPLE"))
end)

-- Any task type (a plugin's): fields other than the common ones go into
-- inputParameters.
builder("task", nil, false, function(b, spec)
  local ty = need(b, "type", spec.type, "string")
  if ty == "" then bad(b, "field 'type' must not be empty") end
  local t = common(b, spec, ty)
  local extra = {}
  for k in next, spec do
    if type(k) == "string" and k ~= "type" and not COMMON_SET[k] then extra[#extra + 1] = k end
  end
  table.sort(extra)
  for _, k in ipairs(extra) do add_input(b, t, k, plain(b, k, spec[k])) end
  return node(b, t)
end)

-- Mark a table as a JSON array (an empty table is written as {} otherwise).
function w.array(t)
  return setmetatable(t or {}, ARRAY)
end

-- Compiling a workflow: st = { seen = {ref = true}, lines = {ref = line},
-- order = {refs in order}, joins = {join nodes} }.
local function claim(st, ref, line, path)
  if st.seen[ref] then fail(line, "%s: duplicate ref '%s'", path, ref) end
  st.seen[ref] = true
  st.lines[ref] = line
  st.order[#st.order + 1] = ref
end

local function join_task(ref, on)
  return setmetatable({ name = ref, taskReferenceName = ref, type = "JOIN",
    inputParameters = setmetatable({}, INPUT), joinOn = on }, TASK)
end

local compile_list

local function compile_node(st, nd, path, out)
  claim(st, nd.ref, nd.line, path)
  local t = copy(nd.task, TASK)
  local here = string.format("%s '%s'", nd.kind, nd.ref)
  out[#out + 1] = t
  if nd.branches then
    local last = setmetatable({}, ARRAY)
    t.forkTasks = setmetatable({}, ARRAY)
    for i, branch in ipairs(nd.branches) do
      local list = compile_list(st, branch, string.format("%s branch %d", here, i))
      t.forkTasks[i] = list
      last[i] = list[#list].taskReferenceName
    end
    claim(st, nd.join, nd.line, here)
    out[#out + 1] = join_task(nd.join, last)
  elseif nd.dynamic then
    claim(st, nd.join, nd.line, here)
    out[#out + 1] = join_task(nd.join, setmetatable({}, ARRAY))
  elseif nd.cases then
    local names = {}
    for name in next, nd.cases do names[#names + 1] = name end
    table.sort(names)
    t.decisionCases = setmetatable({}, OBJECT)
    for _, name in ipairs(names) do
      t.decisionCases[name] =
        compile_list(st, nd.cases[name], string.format("%s case '%s'", here, name))
    end
    t.defaultCase = compile_list(st, nd.default, here .. " default")
  elseif nd.body then
    t.loopOver = compile_list(st, nd.body, here .. " body")
  elseif nd.on then
    st.joins[#st.joins + 1] = nd
  end
end

function compile_list(st, list, path)
  local out = setmetatable({}, ARRAY)
  for _, nd in ipairs(list) do compile_node(st, nd, path, out) end
  return out
end

local WORKFLOW_FIELDS = set { "name", "version", "description", "input", "output", "timeout",
  "failure_workflow", "restartable", "variables" }

function w.workflow(spec)
  local b = { kind = "workflow", line = caller_line() }
  if not is_table(spec) then
    bad(b, "expected a table of fields { name = ..., tasks... } (got %s)", describe(spec))
  end
  local name = need(b, "name", spec.name, "string")
  if name == "" then bad(b, "field 'name' must not be empty") end
  b.ref = name
  local n = check_fields(b, spec, WORKFLOW_FIELDS, true)
  local tasks = task_list(b, spec, where(b), n)
  if n == 0 then fail(b.line, "%s has no tasks", where(b)) end

  local def = setmetatable({}, WORKFLOW)
  def.name = name
  def.description = want(b, "description", spec.description, "string")
  def.version = spec.version == nil and 1 or int(b, "version", spec.version, 1)
  def.schemaVersion = 2
  def.inputParameters = setmetatable({}, ARRAY)
  if spec.input ~= nil then
    local input = spec.input
    if not is_table(input) then
      bad(b, "field 'input' must be a list of names { \"id\", ... } (got %s)", describe(input))
    end
    for k, v in next, input do
      if math.type(k) ~= "integer" or k < 1 or k > #input or type(v) ~= "string" then
        bad(b, "field 'input' must be a list of names { \"id\", ... }")
      end
    end
    for i = 1, #input do def.inputParameters[i] = input[i] end
  end
  if spec.output ~= nil then
    if not is_table(spec.output) then
      bad(b, "field 'output' must be a table { name = value } (got %s)", describe(spec.output))
    end
    def.outputParameters = copy(plain(b, "output", spec.output), OBJECT)
  end
  if spec.timeout ~= nil then
    def.timeoutSeconds, def.timeoutPolicy = seconds(b, "timeout", spec.timeout), "TIME_OUT_WF"
  else
    def.timeoutSeconds, def.timeoutPolicy = 0, "ALERT_ONLY"
  end
  def.failureWorkflow = want(b, "failure_workflow", spec.failure_workflow, "string")
  def.restartable = want(b, "restartable", spec.restartable, "boolean") ~= false
  if spec.variables ~= nil then
    if not is_table(spec.variables) then
      bad(b, "field 'variables' must be a table { name = value } (got %s)",
        describe(spec.variables))
    end
    def.variables = copy(plain(b, "variables", spec.variables), OBJECT)
  end

  local st = { seen = {}, lines = {}, order = {}, joins = {} }
  def.tasks = compile_list(st, tasks, where(b))
  for _, j in ipairs(st.joins) do
    for _, ref in ipairs(j.on) do
      if not st.seen[ref] then
        fail(j.line, "join '%s': field 'on' names unknown ref '%s'", j.ref, ref)
      end
    end
  end
  compiled[def] = setmetatable(st.lines, ordered(st.order))
  return def
end

-- For dsl.c: the lines table of a compiled workflow, or nil and what v is.
local function inspect(v)
  local lines = compiled[v]
  if lines then return lines end
  return nil, describe(v)
end

return w, inspect
