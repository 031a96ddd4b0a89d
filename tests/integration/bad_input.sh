#!/bin/sh
# Bad input gets a clear message naming what was wrong and the documented exit
# code; nothing crashes, nothing hangs.
. "$(dirname "$0")/lib.sh"

def() { # NAME: write stdin to $TMP/NAME
    cat >"$TMP/$1"
}

# --- definition errors: exit 2, message names file, line, ref/field ---
run_weft run "$TMP/missing.lua"
expect_rc "missing file" 2
expect_err "missing file" "missing.lua"

printf 'local w = require "weft"\nreturn w.workflow { name = "x",\n  w.lambda { ref = "a" script = "return 1" } }\n' | def syntax.lua
run_weft run "$TMP/syntax.lua"
expect_rc "lua syntax error" 2
expect_err "lua syntax error" "syntax.lua:3:"

printf 'return 42\n' | def noworkflow.lua
run_weft run "$TMP/noworkflow.lua"
expect_rc "no workflow returned" 2
expect_err "no workflow returned" "noworkflow.lua"

def dup.lua <<'L'
local w = require "weft"
return w.workflow { name = "dup",
  w.lambda { ref = "a", script = "return 1" },
  w.fork { ref = "f",
    { w.lambda { ref = "b", script = "return 1" } },
    { w.lambda { ref = "a", script = "return 2" } } },
}
L
run_weft run "$TMP/dup.lua"
expect_rc "duplicate ref" 2
expect_err "duplicate ref" "dup.lua:6:"
expect_err "duplicate ref" "duplicate ref 'a'"

def unknownref.lua <<'L'
local w = require "weft"
return w.workflow { name = "unknownref",
  w.lambda { ref = "fetch", script = "return 1" },
  w.lambda { ref = "price", input = { x = "${fech.output.result}" }, script = "return 1" },
}
L
run_weft run "$TMP/unknownref.lua"
expect_rc "unknown ref in expression" 2
expect_err "unknown ref in expression" "unknownref.lua:4: task 'price'"
expect_err "unknown ref in expression" "unknown task 'fech'"

def unknowntype.lua <<'L'
local w = require "weft"
return w.workflow { name = "unknowntype",
  w.task { ref = "t", type = "NO_SUCH_TYPE" },
}
L
run_weft run "$TMP/unknowntype.lua"
expect_rc "unknown task type" 2
expect_err "unknown task type" "unknown task type NO_SUCH_TYPE (no plugin provides it; searched:"

def emptybranch.lua <<'L'
local w = require "weft"
return w.workflow { name = "emptybranch",
  w.fork { ref = "f", { w.lambda { ref = "a", script = "return 1" } }, { } },
}
L
run_weft run "$TMP/emptybranch.lua"
expect_rc "empty fork branch" 2
expect_err "empty fork branch" "branch 2 is empty"

printf '{"name": "j", "tasks": [ {"name": "a", "taskReferenceName": "a", "type": "LAMBDA",\n "inputParameters": {"scriptExpression": "return 1"}}, ]}\n' | def broken.json
run_weft run "$TMP/broken.json"
expect_rc "malformed JSON definition" 2
expect_err "malformed JSON definition" "broken.json: invalid JSON at line 2"

printf '{"name": "j", "tasks": [ {"name": "a", "taskReferenceName": "a", "type": "FORK_JOIN", "forkTasks": [[]]} ]}\n' | def emptyfork.json
run_weft run "$TMP/emptyfork.json"
expect_rc "JSON fork with empty branch" 2
expect_err "JSON fork with empty branch" "task 'a'"

def osdef.lua <<'L'
local w = require "weft"
os.execute("touch /tmp/weft-should-not-exist")
return w.workflow { name = "osdef", w.lambda { ref = "a", script = "return 1" } }
L
run_weft run "$TMP/osdef.lua"
expect_rc "os in a definition file" 2
expect_err "os in a definition file" "osdef.lua:2:"

def loopdef.lua <<'L'
while true do end
L
run_weft run "$TMP/loopdef.lua"
expect_rc "definition that loops forever" 2
expect_err "definition that loops forever" "limit"

# --- input errors ---
run_weft run "$SRC/examples/hello.lua" --input '{"name": '
expect_rc "malformed --input" 2
expect_err "malformed --input" "--input: invalid JSON"
run_weft run "$SRC/examples/hello.lua" --input '[1,2]'
expect_rc "--input not an object" 2
run_weft run "$SRC/examples/hello.lua" --input "@$TMP/nope.json"
expect_rc "--input @missing" 2
expect_err "--input @missing" "nope.json"
run_weft frobnicate
expect_rc "unknown command" 2

# --- scripts that misbehave fail their task (exit 1) with the reason ---
lambda_case() { # NAME SCRIPT EXPECTED_REASON
    printf 'local w = require "weft"\nreturn w.workflow { name = "s",\n  w.lambda { ref = "s", script = [==[%s]==] } }\n' "$2" >"$TMP/s.lua"
    start=$(date +%s)
    run_weft run "$TMP/s.lua"
    expect_rc "$1" 1
    expect_err "$1" "$3"
    [ $(( $(date +%s) - start )) -le 20 ] && ok "$1: ends within seconds" || not_ok "$1: took too long"
}
lambda_case "infinite loop" "while true do end" "instruction limit"
lambda_case "infinite loop inside pcall" "while true do pcall(function() while true do end end) end" "instruction limit"
lambda_case "memory bomb" "local t = {} for i = 1, 1e9 do t[i] = string.rep('x', 1000) .. i end" "memory limit"
lambda_case "string.rep bomb" "return string.rep('x', 2e9)" "memory limit"
lambda_case "os" "return os.time()" "os"
lambda_case "io" "return io.open('/etc/passwd')" "io"
lambda_case "require" "return require('os')" "require"
lambda_case "load" "return load('return 1')()" "load"
lambda_case "debug" "return debug.getinfo(1)" "debug"
lambda_case "dofile" "return dofile('/etc/passwd')" "dofile"
lambda_case "string metatable" "getmetatable('').__index.upper = function() return 'pwned' end" "lambda 's'"
lambda_case "runtime error" "local t = nil; return t.x" "attempt to index"

# one script cannot change what the next sees
def isolation.lua <<'L'
local w = require "weft"
return w.workflow { name = "isolation",
  output = { second = "${b.output.result}" },
  w.lambda { ref = "a", script = "leaked = 1; string.upper = nil; return 1" },
  w.lambda { ref = "b", script = "return tostring(leaked) .. ' ' .. string.upper('x')" },
}
L
run_weft run "$TMP/isolation.lua"
expect_rc "isolation" 0
expect_json "isolation" '{"second":"nil X"}'
finish
