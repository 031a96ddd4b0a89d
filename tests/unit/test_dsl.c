#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "lua/dsl.h"

/* The DESIGN.md §4 example. */
static const char order_lua[] =
    "local w = require \"weft\"\n"
    "return w.workflow {\n"
    "  name = \"order\", version = 1,\n"
    "  output = { total = \"${price.output.result.total}\" },\n"
    "  w.http   { ref = \"fetch\", uri = \"http://127.0.0.1:8080/orders/${workflow.input.id}\",\n"
    "             retry = { count = 3, delay = \"1s\", backoff = \"exponential\" }, timeout = "
    "\"10s\" },\n"
    "  w.lambda { ref = \"price\", input = { order = \"${fetch.output.response.body}\" },\n"
    "             script = [[ return { total = input.order.qty * input.order.unit } ]] },\n"
    "  w.decision { ref = \"route\", on = \"${price.output.result.total}\",\n"
    "               expr = \"return input > 100 and 'big' or 'small'\",\n"
    "               cases = { big = { w.simple { ref = \"review\" } } },\n"
    "               default = { w.set_variable { ref = \"auto\", input = { approved = true } } } "
    "},\n"
    "  w.fork { ref = \"notify\",\n"
    "           { w.lambda { ref = \"email\", script = \"return 'sent'\" } },\n"
    "           { w.lambda { ref = \"sms\",   script = \"return 'sent'\" } } },\n"
    "}\n";

/* Walk "tasks[3].forkTasks[0][0].name" from v; NULL if missing. */
static json_object *at(json_object *v, const char *path)
{
    const char *p = path;
    while (v && *p) {
        if (*p == '.') {
            p++;
        } else if (*p == '[') {
            char *end;
            long i = strtol(p + 1, &end, 10);
            v = json_object_is_type(v, json_type_array) ? json_object_array_get_idx(v, (size_t)i)
                                                        : NULL;
            p = end + 1;
        } else {
            char key[128];
            size_t n = strcspn(p, ".[");
            snprintf(key, sizeof key, "%.*s", (int)n, p);
            if (!json_object_object_get_ex(v, key, &v)) v = NULL;
            p += n;
        }
    }
    return v;
}

static const char *str_at(json_object *v, const char *path)
{
    json_object *x = at(v, path);
    if (!x) fail_msg("no %s", path);
    return json_object_is_type(x, json_type_string)
               ? json_object_get_string(x)
               : json_object_to_json_string_ext(x, JSON_C_TO_STRING_PLAIN |
                                                       JSON_C_TO_STRING_NOSLASHESCAPE);
}

/* Compact JSON text of the value at path ("missing" if absent). */
static const char *json_at(json_object *v, const char *path)
{
    json_object *x = at(v, path);
    return x ? json_object_to_json_string_ext(x, JSON_C_TO_STRING_PLAIN |
                                                     JSON_C_TO_STRING_NOSLASHESCAPE)
             : "missing";
}

static json_object *lines_of;

/* Compile a workflow whose body (tasks and fields) is given; fails the test on error. */
static json_object *compile_ok(const char *src)
{
    json_object *def = NULL;
    weft_error err;
    json_object_put(lines_of);
    lines_of = NULL;
    if (dsl_compile("order.lua", src, strlen(src), &def, &lines_of, &err))
        fail_msg("compile failed: %s\n%s", err.msg, src);
    assert_non_null(def);
    return def;
}

static void compile_err(const char *src, int code, const char *msg)
{
    json_object *def = NULL, *lines = NULL;
    weft_error err;
    int rc = dsl_compile("order.lua", src, strlen(src), &def, &lines, &err);
    if (rc == 0) {
        json_object_put(def);
        json_object_put(lines);
        fail_msg("compiled, wanted: %s\n%s", msg, src);
    }
    assert_null(def);
    assert_null(lines);
    assert_int_equal(rc, code);
    assert_int_equal(err.code, code);
    if (strcmp(err.msg, msg)) {
        print_error("got:  %s\nwant: %s\n", err.msg, msg);
        fail();
    }
}

/* Prefix for one-task workflows: line 1 requires, line 2 opens the workflow. */
#define HEAD "local w = require 'weft'\nreturn w.workflow { name = 'wf',\n"
#define TAIL "\n}\n"

static int teardown_lines(void **state)
{
    (void)state;
    json_object_put(lines_of);
    lines_of = NULL;
    return 0;
}

static void test_design_example(void **state)
{
    json_object *def = compile_ok(order_lua);
    (void)state;
    assert_string_equal(str_at(def, "name"), "order");
    assert_string_equal(json_at(def, "version"), "1");
    assert_string_equal(json_at(def, "schemaVersion"), "2");
    assert_string_equal(json_at(def, "outputParameters"),
                        "{\"total\":\"${price.output.result.total}\"}");
    assert_string_equal(json_at(def, "timeoutSeconds"), "0");
    assert_string_equal(str_at(def, "timeoutPolicy"), "ALERT_ONLY");
    assert_string_equal(json_at(def, "restartable"), "true");
    assert_int_equal(json_object_array_length(at(def, "tasks")), 5);

    assert_string_equal(str_at(def, "tasks[0].type"), "HTTP");
    assert_string_equal(json_at(def, "tasks[0].inputParameters"),
                        "{\"uri\":\"http://127.0.0.1:8080/orders/${workflow.input.id}\","
                        "\"method\":\"GET\"}");
    assert_string_equal(json_at(def, "tasks[0].taskDefinition"),
                        "{\"retryCount\":3,\"retryLogic\":\"EXPONENTIAL_BACKOFF\","
                        "\"retryDelaySeconds\":1,\"timeoutSeconds\":10}");

    assert_string_equal(str_at(def, "tasks[1].type"), "LAMBDA");
    assert_string_equal(str_at(def, "tasks[1].inputParameters.scriptExpression"),
                        " return { total = input.order.qty * input.order.unit } ");
    assert_string_equal(str_at(def, "tasks[1].inputParameters.order"),
                        "${fetch.output.response.body}");

    assert_string_equal(str_at(def, "tasks[2].type"), "DECISION");
    assert_string_equal(str_at(def, "tasks[2].caseValueParam"), "case_value_param");
    assert_string_equal(str_at(def, "tasks[2].inputParameters.case_value_param"),
                        "${price.output.result.total}");
    assert_string_equal(str_at(def, "tasks[2].caseExpression"),
                        "return input > 100 and 'big' or 'small'");
    assert_string_equal(str_at(def, "tasks[2].decisionCases.big[0].taskReferenceName"), "review");
    assert_string_equal(str_at(def, "tasks[2].decisionCases.big[0].type"), "SIMPLE");
    assert_string_equal(str_at(def, "tasks[2].defaultCase[0].type"), "SET_VARIABLE");
    assert_string_equal(json_at(def, "tasks[2].defaultCase[0].inputParameters"),
                        "{\"approved\":true}");

    assert_string_equal(str_at(def, "tasks[3].type"), "FORK_JOIN");
    assert_string_equal(str_at(def, "tasks[3].forkTasks[0][0].taskReferenceName"), "email");
    assert_string_equal(str_at(def, "tasks[3].forkTasks[1][0].taskReferenceName"), "sms");
    assert_string_equal(str_at(def, "tasks[4].type"), "JOIN");
    assert_string_equal(str_at(def, "tasks[4].name"), "notify_join");
    assert_string_equal(str_at(def, "tasks[4].taskReferenceName"), "notify_join");
    assert_string_equal(json_at(def, "tasks[4].joinOn"), "[\"email\",\"sms\"]");

    assert_string_equal(json_object_to_json_string_ext(lines_of, JSON_C_TO_STRING_PLAIN),
                        "{\"fetch\":5,\"price\":7,\"route\":9,\"review\":11,\"auto\":12,"
                        "\"notify\":13,\"email\":14,\"sms\":15,\"notify_join\":13}");
    json_object_put(def);
}

static void test_key_order(void **state)
{
    json_object *def = compile_ok(HEAD "w.simple { ref = 'a', optional = true, "
                                       "timeout = 5, name = 'q' }" TAIL);
    (void)state;
    assert_string_equal(json_at(def, "tasks[0]"),
                        "{\"name\":\"q\",\"taskReferenceName\":\"a\",\"type\":\"SIMPLE\","
                        "\"optional\":true,\"inputParameters\":{},"
                        "\"taskDefinition\":{\"timeoutSeconds\":5}}");
    assert_string_equal(
        json_object_to_json_string_ext(def, JSON_C_TO_STRING_PLAIN),
        "{\"name\":\"wf\",\"version\":1,\"schemaVersion\":2,\"inputParameters\":[],"
        "\"timeoutSeconds\":0,\"timeoutPolicy\":\"ALERT_ONLY\",\"restartable\":true,"
        "\"tasks\":[{\"name\":\"q\",\"taskReferenceName\":\"a\",\"type\":\"SIMPLE\","
        "\"optional\":true,\"inputParameters\":{},"
        "\"taskDefinition\":{\"timeoutSeconds\":5}}]}");
    json_object_put(def);
}

static void test_workflow_fields(void **state)
{
    json_object *def =
        compile_ok("local w = require 'weft'\n"
                   "return w.workflow { name = 'wf', version = 3, description = 'does things',\n"
                   "  input = { 'id', 'amount' }, output = { x = '${a.output}' }, timeout = '2m',\n"
                   "  failure_workflow = 'cleanup', restartable = false,\n"
                   "  variables = { count = 0, items = w.array {}, seen = {} },\n"
                   "  w.simple { ref = 'a' } }\n");
    (void)state;
    assert_string_equal(json_at(def, "version"), "3");
    assert_string_equal(str_at(def, "description"), "does things");
    assert_string_equal(json_at(def, "inputParameters"), "[\"id\",\"amount\"]");
    assert_string_equal(json_at(def, "outputParameters"), "{\"x\":\"${a.output}\"}");
    assert_string_equal(json_at(def, "timeoutSeconds"), "120");
    assert_string_equal(str_at(def, "timeoutPolicy"), "TIME_OUT_WF");
    assert_string_equal(str_at(def, "failureWorkflow"), "cleanup");
    assert_string_equal(json_at(def, "restartable"), "false");
    assert_string_equal(json_at(def, "variables"), "{\"count\":0,\"items\":[],\"seen\":{}}");
    json_object_put(def);
}

static void test_common_fields(void **state)
{
    json_object *def = compile_ok(
        HEAD "w.simple { ref = 'a', description = 'x', input = { n = 1, list = { 1, 2 } },\n"
             "  retry = { count = 2, delay = '250ms', backoff = 'linear', max_delay = '1m', "
             "jitter = '100ms' },\n"
             "  timeout = 1.5, response_timeout = '2h', rate_limit = { count = 10, per = '1d' },\n"
             "  concurrency = 4 },\n"
             "w.simple { ref = 'b', retry = { count = 0 } }" TAIL);
    (void)state;
    assert_string_equal(str_at(def, "tasks[0].description"), "x");
    assert_string_equal(json_at(def, "tasks[0].inputParameters"), "{\"list\":[1,2],\"n\":1}");
    assert_string_equal(json_at(def, "tasks[0].taskDefinition"),
                        "{\"retryCount\":2,\"retryLogic\":\"LINEAR_BACKOFF\","
                        "\"retryDelaySeconds\":0.25,\"maxRetryDelaySeconds\":60,"
                        "\"backoffJitterMs\":100,\"timeoutSeconds\":1.5,"
                        "\"responseTimeoutSeconds\":7200,\"rateLimitPerFrequency\":10,"
                        "\"rateLimitFrequencyInSeconds\":86400,\"concurrentExecLimit\":4}");
    assert_string_equal(json_at(def, "tasks[1].taskDefinition"),
                        "{\"retryCount\":0,\"retryLogic\":\"FIXED\"}");
    assert_string_equal(json_at(def, "tasks[1].optional"), "missing");
    json_object_put(def);
}

/* start_delay on any task; a wait's at (until) and Conductor's duration words. */
static void test_delays(void **state)
{
    json_object *def =
        compile_ok(HEAD "w.simple { ref = 'a', start_delay = '1 minute 30 seconds' },\n"
                        "w.wait { ref = 'b', at = '2030-04-30 15:20 GMT+04:00' },\n"
                        "w.wait { ref = 'c', ['until'] = '2030-04-30' },\n"
                        "w.wait { ref = 'd', duration = '3 days 2 hours' }" TAIL);
    (void)state;
    assert_string_equal(json_at(def, "tasks[0].startDelay"), "90");
    assert_string_equal(json_at(def, "tasks[1].inputParameters"),
                        "{\"until\":\"2030-04-30 15:20 GMT+04:00\"}");
    assert_string_equal(json_at(def, "tasks[2].inputParameters"), "{\"until\":\"2030-04-30\"}");
    assert_string_equal(json_at(def, "tasks[3].inputParameters"),
                        "{\"duration\":\"3 days 2 hours\"}");
    assert_string_equal(json_at(def, "tasks[3].startDelay"), "missing");
    json_object_put(def);
}

static void test_builders(void **state)
{
    json_object *def = compile_ok(
        HEAD
        "w.lambda { ref = 'l', input = { a = 1 }, script = 'return input.a' },\n"
        "w.switch { ref = 's1', on = '${workflow.input.kind}', cases = { x = {}, [2] = {} } },\n"
        "w.switch { ref = 's2', on = 5, expr = 'return tostring(input)' },\n"
        "w.decision { ref = 'd', on = true },\n"
        "w.join { ref = 'j', on = { 'l', 's1' } },\n"
        "w.dynamic_fork { ref = 'df', tasks = '${l.output.result}', input = '${l.output.in}' },\n"
        "w.dynamic_fork { ref = 'df2', tasks = '${l.output.result}', join = 'collect' },\n"
        "w.do_while { ref = 'loop', condition = 'return input.iteration < 3', max = 10,\n"
        "  input = { k = 'v' }, w.simple { ref = 'step' }, w.wait { ref = 'pause', "
        "duration = '5s' } },\n"
        "w.sub_workflow { ref = 'child', name = 'other', version = 2, input = { a = 1 } },\n"
        "w.sub_workflow { ref = 'child2', name = 'other' },\n"
        "w.set_variable { ref = 'sv', input = { v = 1 } },\n"
        "w.terminate { ref = 't1' },\n"
        "w.terminate { ref = 't2', status = 'FAILED', reason = 'no', output = { x = 1 } },\n"
        "w.wait { ref = 'w1' },\n"
        "w.wait { ref = 'w2', duration = '${workflow.input.delay}' },\n"
        "w.wait { ref = 'w3', duration = 30 },\n"
        "w.http { ref = 'h', method = 'post', uri = 'http://x/', headers = { A = 'b' },\n"
        "  body = { k = { 1, 2 } }, connect_timeout = '2s', read_timeout = 1.5 },\n"
        "w.simple { ref = 'sq', name = 'queue' },\n"
        "w.task { ref = 'p', type = 'MY_PLUGIN', url = 'x', count = 3, input = { a = 1 }, "
        "optional = true }" TAIL);
    (void)state;
    assert_string_equal(json_at(def, "tasks[0]"),
                        "{\"name\":\"l\",\"taskReferenceName\":\"l\",\"type\":\"LAMBDA\","
                        "\"inputParameters\":{\"scriptExpression\":\"return input.a\",\"a\":1}}");
    assert_string_equal(json_at(def, "tasks[1]"),
                        "{\"name\":\"s1\",\"taskReferenceName\":\"s1\",\"type\":\"SWITCH\","
                        "\"inputParameters\":{\"case_value_param\":\"${workflow.input.kind}\"},"
                        "\"evaluatorType\":\"value-param\",\"expression\":\"case_value_param\","
                        "\"decisionCases\":{\"2\":[],\"x\":[]},\"defaultCase\":[]}");
    assert_string_equal(json_at(def, "tasks[2]"),
                        "{\"name\":\"s2\",\"taskReferenceName\":\"s2\",\"type\":\"SWITCH\","
                        "\"inputParameters\":{\"case_value_param\":5},"
                        "\"caseValueParam\":\"case_value_param\",\"evaluatorType\":\"lua\","
                        "\"expression\":\"return tostring(input)\",\"decisionCases\":{},"
                        "\"defaultCase\":[]}");
    assert_string_equal(json_at(def, "tasks[3]"),
                        "{\"name\":\"d\",\"taskReferenceName\":\"d\",\"type\":\"DECISION\","
                        "\"inputParameters\":{\"case_value_param\":true},"
                        "\"caseValueParam\":\"case_value_param\",\"decisionCases\":{},"
                        "\"defaultCase\":[]}");
    assert_string_equal(json_at(def, "tasks[4]"),
                        "{\"name\":\"j\",\"taskReferenceName\":\"j\",\"type\":\"JOIN\","
                        "\"inputParameters\":{},\"joinOn\":[\"l\",\"s1\"]}");
    assert_string_equal(
        json_at(def, "tasks[5]"),
        "{\"name\":\"df\",\"taskReferenceName\":\"df\",\"type\":\"FORK_JOIN_DYNAMIC\","
        "\"inputParameters\":{\"dynamicTasks\":\"${l.output.result}\","
        "\"dynamicTasksInput\":\"${l.output.in}\"},"
        "\"dynamicForkTasksParam\":\"dynamicTasks\","
        "\"dynamicForkTasksInputParamName\":\"dynamicTasksInput\"}");
    assert_string_equal(json_at(def, "tasks[6]"),
                        "{\"name\":\"df_join\",\"taskReferenceName\":\"df_join\",\"type\":\"JOIN\","
                        "\"inputParameters\":{},\"joinOn\":[]}");
    assert_string_equal(json_at(def, "tasks[7].inputParameters.dynamicTasksInput"), "{}");
    assert_string_equal(str_at(def, "tasks[8].taskReferenceName"), "collect");
    assert_string_equal(json_at(def, "tasks[9]"),
                        "{\"name\":\"loop\",\"taskReferenceName\":\"loop\",\"type\":\"DO_WHILE\","
                        "\"inputParameters\":{\"k\":\"v\"},"
                        "\"loopCondition\":\"return input.iteration < 3\",\"maxIterations\":10,"
                        "\"loopOver\":[{\"name\":\"step\",\"taskReferenceName\":\"step\","
                        "\"type\":\"SIMPLE\",\"inputParameters\":{}},"
                        "{\"name\":\"pause\",\"taskReferenceName\":\"pause\",\"type\":\"WAIT\","
                        "\"inputParameters\":{\"duration\":\"5s\"}}]}");
    assert_string_equal(json_at(def, "tasks[10]"),
                        "{\"name\":\"child\",\"taskReferenceName\":\"child\","
                        "\"type\":\"SUB_WORKFLOW\",\"inputParameters\":{\"a\":1},"
                        "\"subWorkflowParam\":{\"name\":\"other\",\"version\":2}}");
    assert_string_equal(json_at(def, "tasks[11].subWorkflowParam"), "{\"name\":\"other\"}");
    assert_string_equal(json_at(def, "tasks[12]"),
                        "{\"name\":\"sv\",\"taskReferenceName\":\"sv\",\"type\":\"SET_VARIABLE\","
                        "\"inputParameters\":{\"v\":1}}");
    assert_string_equal(json_at(def, "tasks[13].inputParameters"),
                        "{\"terminationStatus\":\"COMPLETED\"}");
    assert_string_equal(str_at(def, "tasks[13].type"), "TERMINATE");
    assert_string_equal(json_at(def, "tasks[14].inputParameters"),
                        "{\"terminationStatus\":\"FAILED\",\"terminationReason\":\"no\","
                        "\"workflowOutput\":{\"x\":1}}");
    assert_string_equal(json_at(def, "tasks[15].inputParameters"), "{}");
    assert_string_equal(str_at(def, "tasks[15].type"), "WAIT");
    assert_string_equal(json_at(def, "tasks[16].inputParameters"),
                        "{\"duration\":\"${workflow.input.delay}\"}");
    assert_string_equal(json_at(def, "tasks[17].inputParameters"), "{\"duration\":30}");
    assert_string_equal(json_at(def, "tasks[18].inputParameters"),
                        "{\"uri\":\"http://x/\",\"method\":\"POST\",\"headers\":{\"A\":\"b\"},"
                        "\"body\":{\"k\":[1,2]},\"connectionTimeOut\":2000,\"readTimeOut\":1500}");
    assert_string_equal(str_at(def, "tasks[18].type"), "HTTP");
    assert_string_equal(json_at(def, "tasks[19]"),
                        "{\"name\":\"queue\",\"taskReferenceName\":\"sq\",\"type\":\"SIMPLE\","
                        "\"inputParameters\":{}}");
    assert_string_equal(
        json_at(def, "tasks[20]"),
        "{\"name\":\"p\",\"taskReferenceName\":\"p\",\"type\":\"MY_PLUGIN\","
        "\"optional\":true,\"inputParameters\":{\"a\":1,\"count\":3,\"url\":\"x\"}}");
    assert_int_equal(json_object_array_length(at(def, "tasks")), 21);
    json_object_put(def);
}

static void test_forks(void **state)
{
    json_object *def = compile_ok(
        HEAD
        "w.fork { ref = 'outer', join = 'both',\n"
        "  { w.simple { ref = 'a' }, w.fork { ref = 'inner', { w.simple { ref = 'b' } },\n"
        "                                                      { w.simple { ref = 'c' } } } },\n"
        "  { w.simple { ref = 'd' } } }" TAIL);
    (void)state;
    /* the inner fork expands in its branch; its join is the branch's last task */
    assert_int_equal(json_object_array_length(at(def, "tasks[0].forkTasks[0]")), 3);
    assert_string_equal(str_at(def, "tasks[0].forkTasks[0][1].type"), "FORK_JOIN");
    assert_string_equal(str_at(def, "tasks[0].forkTasks[0][2].taskReferenceName"), "inner_join");
    assert_string_equal(json_at(def, "tasks[0].forkTasks[0][2].joinOn"), "[\"b\",\"c\"]");
    assert_string_equal(str_at(def, "tasks[1].taskReferenceName"), "both");
    assert_string_equal(json_at(def, "tasks[1].joinOn"), "[\"inner_join\",\"d\"]");
    assert_string_equal(json_object_to_json_string_ext(lines_of, JSON_C_TO_STRING_PLAIN),
                        "{\"outer\":3,\"a\":4,\"inner\":4,\"b\":4,\"c\":5,\"inner_join\":4,"
                        "\"d\":6,\"both\":3}");
    json_object_put(def);
}

static void test_inline_sub_workflow(void **state)
{
    json_object *def = compile_ok(
        "local w = require 'weft'\n"
        "local child = w.workflow { name = 'child', version = 2, w.simple { ref = 'a' } }\n"
        "return w.workflow { name = 'parent',\n"
        "  w.simple { ref = 'a' },\n"
        "  w.sub_workflow { ref = 'run', definition = child, input = { x = 1 } } }\n");
    (void)state;
    assert_string_equal(str_at(def, "tasks[1].subWorkflowParam.name"), "child");
    assert_string_equal(json_at(def, "tasks[1].subWorkflowParam.version"), "2");
    assert_string_equal(str_at(def, "tasks[1].subWorkflowParam.workflowDefinition.tasks[0]."
                                    "taskReferenceName"),
                        "a");
    assert_string_equal(json_at(def, "tasks[1].subWorkflowParam.workflowDefinition.schemaVersion"),
                        "2");
    assert_string_equal(json_object_to_json_string_ext(lines_of, JSON_C_TO_STRING_PLAIN),
                        "{\"a\":4,\"run\":5}");
    json_object_put(def);
}

static void test_lines_through_helpers(void **state)
{
    json_object *def =
        compile_ok("local w = require 'weft'\n"
                   "local function step(n)\n"
                   "  local t = w.simple { ref = 'step' .. n }\n"
                   "  return t\n"
                   "end\n"
                   "local function tail(n) return w.simple { ref = 'tail' .. n } end\n"
                   "local ok, t = pcall(w.simple, { ref = 'p' })\n"
                   "return w.workflow {\n"
                   "  name = 'wf',\n"
                   "  step(1), step(2), t,\n"
                   "  w.lambda {\n"
                   "    ref = 'multi',\n"
                   "    script = 'return 1',\n"
                   "  },\n"
                   "  tail(1),\n"
                   "}\n");
    (void)state;
    /* a tail call leaves no frame in the helper: its caller's line counts */
    assert_string_equal(json_object_to_json_string_ext(lines_of, JSON_C_TO_STRING_PLAIN),
                        "{\"step1\":3,\"step2\":3,\"p\":7,\"multi\":11,\"tail1\":15}");
    json_object_put(def);
}

static void test_field_errors(void **state)
{
    (void)state;
    compile_err(HEAD "\n\n\n\n\n\nw.lambda { ref = 'price', scirpt = 'return 1' }" TAIL,
                WEFT_EINVAL, "order.lua:9: lambda 'price': unknown field 'scirpt'");
    compile_err(HEAD "w.lambda { script = 'return 1' }" TAIL, WEFT_EINVAL,
                "order.lua:3: lambda: missing field 'ref'");
    compile_err(HEAD "w.simple { ref = 'a.b' }" TAIL, WEFT_EINVAL,
                "order.lua:3: simple: field 'ref' must be a non-empty string without spaces, "
                "'.' or '$' (got \"a.b\")");
    compile_err(HEAD "w.simple { ref = 'a b' }" TAIL, WEFT_EINVAL,
                "order.lua:3: simple: field 'ref' must be a non-empty string without spaces, "
                "'.' or '$' (got \"a b\")");
    compile_err(HEAD "w.simple { ref = '$x' }" TAIL, WEFT_EINVAL,
                "order.lua:3: simple: field 'ref' must be a non-empty string without spaces, "
                "'.' or '$' (got \"$x\")");
    compile_err(HEAD "w.simple { ref = '' }" TAIL, WEFT_EINVAL,
                "order.lua:3: simple: field 'ref' must be a non-empty string without spaces, "
                "'.' or '$' (got \"\")");
    compile_err(HEAD "w.simple { ref = 5 }" TAIL, WEFT_EINVAL,
                "order.lua:3: simple: field 'ref' must be a non-empty string without spaces, "
                "'.' or '$' (got a number)");
    compile_err(
        HEAD "w.lambda 'x'" TAIL, WEFT_EINVAL,
        "order.lua:3: lambda: expected a table of fields { ref = ..., ... } (got a string)");
    compile_err(HEAD "w.lambda { ref = 'l' }" TAIL, WEFT_EINVAL,
                "order.lua:3: lambda 'l': missing field 'script'");
    compile_err(HEAD "w.lambda { ref = 'l', script = 5 }" TAIL, WEFT_EINVAL,
                "order.lua:3: lambda 'l': field 'script' must be a string (got a number)");
    compile_err(HEAD "w.lambda { ref = 'l', script = 'return 1', w.simple { ref = 'x' } }" TAIL,
                WEFT_EINVAL,
                "order.lua:3: lambda 'l': unexpected positional entry 1 (lambda takes named "
                "fields only)");
    compile_err(HEAD "w.lambda { ref = 'l', script = 'return 1', [true] = 1 }" TAIL, WEFT_EINVAL,
                "order.lua:3: lambda 'l': unexpected key [true]");
    compile_err(HEAD "w.lambda { ref = 'l', script = 'return 1', input = 'x' }" TAIL, WEFT_EINVAL,
                "order.lua:3: lambda 'l': field 'input' must be a table { name = value } (got a "
                "string)");
    compile_err(HEAD "w.lambda { ref = 'l', script = 'return 1', input = { f = print or "
                     "tostring } }" TAIL,
                WEFT_EINVAL,
                "order.lua:3: lambda 'l': field 'input.f' holds a function, which has no JSON "
                "form");
    compile_err(HEAD "w.lambda { ref = 'l', script = 'return 1', input = { x = { 0/0 } } }" TAIL,
                WEFT_EINVAL, "order.lua:3: lambda 'l': field 'input.x[1]' must be a finite number");
    compile_err(HEAD "w.lambda { ref = 'l', script = 'return 1', input = { scriptExpression = 'x' "
                     "} }" TAIL,
                WEFT_EINVAL,
                "order.lua:3: lambda 'l': field 'input' cannot set 'scriptExpression': lambda "
                "sets it");
    compile_err(HEAD "w.simple { ref = 'a', optional = 'yes' }" TAIL, WEFT_EINVAL,
                "order.lua:3: simple 'a': field 'optional' must be a boolean (got a string)");
    compile_err(HEAD "w.task { ref = 'a' }" TAIL, WEFT_EINVAL,
                "order.lua:3: task 'a': missing field 'type'");
    compile_err(HEAD "w.task { ref = 'a', type = 'X', cfg = { f = error } }" TAIL, WEFT_EINVAL,
                "order.lua:3: task 'a': field 'cfg.f' holds a function, which has no JSON form");
    compile_err(HEAD "w.http { ref = 'h' }" TAIL, WEFT_EINVAL,
                "order.lua:3: http 'h': missing field 'uri'");
    compile_err(HEAD "w.http { ref = 'h', uri = 'x', method = 'FETCH' }" TAIL, WEFT_EINVAL,
                "order.lua:3: http 'h': field 'method' must be one of GET, POST, PUT, PATCH, "
                "DELETE, HEAD, OPTIONS (got \"FETCH\")");
    compile_err(HEAD "w.terminate { ref = 't', status = 'DONE' }" TAIL, WEFT_EINVAL,
                "order.lua:3: terminate 't': field 'status' must be \"COMPLETED\" or \"FAILED\" "
                "(got \"DONE\")");
    compile_err(HEAD "w.decision { ref = 'd' }" TAIL, WEFT_EINVAL,
                "order.lua:3: decision 'd': missing field 'on'");
    compile_err(HEAD "w.decision { ref = 'd', on = 1, cases = 'x' }" TAIL, WEFT_EINVAL,
                "order.lua:3: decision 'd': field 'cases' must be a table { name = { tasks... } } "
                "(got a string)");
    compile_err(HEAD
                "w.decision { ref = 'd', on = 1, cases = { big = w.simple { ref = 'x' } } }" TAIL,
                WEFT_EINVAL,
                "order.lua:3: decision 'd' case 'big': expected a list of tasks { ... } (got a "
                "simple task)");
    compile_err(HEAD "w.switch { ref = 'd', on = 1, default = { 'x' } }" TAIL, WEFT_EINVAL,
                "order.lua:3: switch 'd' default: entry 1 is not a task (got a string)");
    compile_err(HEAD "w.do_while { ref = 'l', w.simple { ref = 'x' } }" TAIL, WEFT_EINVAL,
                "order.lua:3: do_while 'l': missing field 'condition'");
    compile_err(HEAD "w.do_while { ref = 'l', condition = 'return false' }" TAIL, WEFT_EINVAL,
                "order.lua:3: do_while 'l' body is empty");
    compile_err(HEAD "w.do_while { ref = 'l', condition = 'return false', max = 0, w.simple { ref "
                     "= 'x' } }" TAIL,
                WEFT_EINVAL,
                "order.lua:3: do_while 'l': field 'max' must be a whole number >= 1 "
                "(got 0)");
    compile_err(HEAD "w.dynamic_fork { ref = 'f', tasks = 'list' }" TAIL, WEFT_EINVAL,
                "order.lua:3: dynamic_fork 'f': field 'tasks' must be an expression \"${...}\" "
                "giving a list of tasks");
    compile_err(HEAD "w.sub_workflow { ref = 's' }" TAIL, WEFT_EINVAL,
                "order.lua:3: sub_workflow 's': missing field 'name' (the workflow to run) or "
                "'definition'");
    compile_err(HEAD "w.sub_workflow { ref = 's', definition = { name = 'x' } }" TAIL, WEFT_EINVAL,
                "order.lua:3: sub_workflow 's': field 'definition' must be a w.workflow { ... } "
                "(got a table)");
    compile_err("local w = require 'weft'\n"
                "local c = w.workflow { name = 'c', w.simple { ref = 'a' } }\n"
                "return w.workflow { name = 'p', w.sub_workflow { ref = 's', name = 'c', "
                "definition = c } }\n",
                WEFT_EINVAL,
                "order.lua:3: sub_workflow 's': give either name (and version) or definition, not "
                "both");
    compile_err(HEAD "w.join { ref = 'j', on = { 'nowhere' } }" TAIL, WEFT_EINVAL,
                "order.lua:3: join 'j': field 'on' names unknown ref 'nowhere'");
    compile_err(HEAD "w.join { ref = 'j', on = { 'a.b' } }" TAIL, WEFT_EINVAL,
                "order.lua:3: join 'j': field 'on[1]' must be a non-empty string without spaces, "
                "'.' or '$' (got \"a.b\")");
}

static void test_duration_errors(void **state)
{
    (void)state;
    compile_err(HEAD "w.simple { ref = 'a', timeout = '5 minutez' }" TAIL, WEFT_EINVAL,
                "order.lua:3: simple 'a': field 'timeout': bad duration '5 minutez' (use e.g. "
                "\"250ms\", \"5s\", \"2m\", \"1h\", \"3 days 2 hours\" or seconds)");
    compile_err(HEAD "w.simple { ref = 'a', timeout = -1 }" TAIL, WEFT_EINVAL,
                "order.lua:3: simple 'a': field 'timeout': bad duration -1.0 (must be >= 0 "
                "seconds)");
    compile_err(HEAD "w.simple { ref = 'a', retry = { count = 1, delay = {} } }" TAIL, WEFT_EINVAL,
                "order.lua:3: simple 'a': field 'retry.delay': bad duration (a table; use e.g. "
                "\"5s\" or a number of seconds)");
    compile_err(HEAD "w.wait { ref = 'a', duration = 'soon' }" TAIL, WEFT_EINVAL,
                "order.lua:3: wait 'a': field 'duration': bad duration 'soon' (use e.g. "
                "\"250ms\", \"5s\", \"2m\", \"1h\", \"3 days 2 hours\" or seconds)");
    compile_err(HEAD "w.http { ref = 'a', uri = 'x', read_timeout = '1y' }" TAIL, WEFT_EINVAL,
                "order.lua:3: http 'a': field 'read_timeout': bad duration '1y' (use e.g. "
                "\"250ms\", \"5s\", \"2m\", \"1h\", \"3 days 2 hours\" or seconds)");
    compile_err(HEAD "w.wait { ref = 'a', duration = '1s', at = '2030-01-01' }" TAIL, WEFT_EINVAL,
                "order.lua:3: wait 'a': a wait takes duration or at (until), not both");
    compile_err(HEAD "w.wait { ref = 'a', at = '2030-01-01', ['until'] = '2030-01-01' }" TAIL,
                WEFT_EINVAL, "order.lua:3: wait 'a': a wait takes at or until, not both");
    compile_err(HEAD "w.lambda { ref = 'a', script = 'return 1', start_delay = 'later' }" TAIL,
                WEFT_EINVAL,
                "order.lua:3: lambda 'a': field 'start_delay': bad duration 'later' (use e.g. "
                "\"250ms\", \"5s\", \"2m\", \"1h\", \"3 days 2 hours\" or seconds)");
    compile_err(HEAD "w.simple { ref = 'a', retry = { count = 1, cont = 2 } }" TAIL, WEFT_EINVAL,
                "order.lua:3: simple 'a': unknown field 'retry.cont'");
    compile_err(HEAD "w.simple { ref = 'a', retry = { delay = '1s' } }" TAIL, WEFT_EINVAL,
                "order.lua:3: simple 'a': missing field 'retry.count'");
    compile_err(HEAD "w.simple { ref = 'a', retry = { count = -1 } }" TAIL, WEFT_EINVAL,
                "order.lua:3: simple 'a': field 'retry.count' must be a whole number >= 0 (got "
                "-1)");
    compile_err(HEAD "w.simple { ref = 'a', retry = { count = 1, backoff = 'random' } }" TAIL,
                WEFT_EINVAL,
                "order.lua:3: simple 'a': field 'retry.backoff' must be \"fixed\", \"linear\" or "
                "\"exponential\" (got \"random\")");
    compile_err(HEAD "w.simple { ref = 'a', retry = 3 }" TAIL, WEFT_EINVAL,
                "order.lua:3: simple 'a': field 'retry' must be a table { count = n, delay = "
                "\"1s\", backoff = \"fixed\" } (got a number)");
    compile_err(HEAD "w.simple { ref = 'a', rate_limit = { count = 5 } }" TAIL, WEFT_EINVAL,
                "order.lua:3: simple 'a': missing field 'rate_limit.per'");
    compile_err(HEAD "w.simple { ref = 'a', concurrency = 1.5 }" TAIL, WEFT_EINVAL,
                "order.lua:3: simple 'a': field 'concurrency' must be a whole number >= 1 (got "
                "1.5)");
    compile_err(HEAD "w.simple { ref = 'a', timeout = true }" TAIL, WEFT_EINVAL,
                "order.lua:3: simple 'a': field 'timeout': bad duration (a boolean; use e.g. "
                "\"5s\" or a number of seconds)");
}

static void test_script_compile_errors(void **state)
{
    (void)state;
    compile_err(HEAD "\n\n\n\n\n\nw.lambda { ref = 'price', script = 'return 1 +' }" TAIL,
                WEFT_EINVAL,
                "order.lua:9: lambda 'price': script does not compile: [string]:1: unexpected "
                "symbol near <eof>");
    compile_err(HEAD "w.decision { ref = 'd', on = 1, expr = 'return = 1' }" TAIL, WEFT_EINVAL,
                "order.lua:3: decision 'd': expr does not compile: [string]:1: unexpected symbol "
                "near '='");
    compile_err(HEAD
                "w.do_while { ref = 'l', condition = 'x = \\n\\n', w.simple { ref = 'a' } }" TAIL,
                WEFT_EINVAL,
                "order.lua:3: do_while 'l': condition does not compile: [string]:3: unexpected "
                "symbol near <eof>");
}

static void test_ref_errors(void **state)
{
    (void)state;
    compile_err(HEAD "w.simple { ref = 'a' },\nw.simple { ref = 'a' }" TAIL, WEFT_EINVAL,
                "order.lua:4: workflow 'wf': duplicate ref 'a'");
    compile_err(HEAD "w.lambda { ref = 'email', script = 'return 1' },\n"
                     "w.fork { ref = 'notify',\n"
                     "  { w.simple { ref = 'x' } },\n"
                     "  { w.simple { ref = 'y' }, w.lambda { ref = 'email', script = 'return 1' } "
                     "} }" TAIL,
                WEFT_EINVAL, "order.lua:6: fork 'notify' branch 2: duplicate ref 'email'");
    compile_err(HEAD "w.simple { ref = 'review' },\n"
                     "w.decision { ref = 'route', on = 1,\n"
                     "  cases = { big = { w.simple { ref = 'review' } } } }" TAIL,
                WEFT_EINVAL, "order.lua:5: decision 'route' case 'big': duplicate ref 'review'");
    compile_err(HEAD "w.simple { ref = 'auto' },\n"
                     "w.switch { ref = 'route', on = 1,\n"
                     "  default = { w.simple { ref = 'auto' } } }" TAIL,
                WEFT_EINVAL, "order.lua:5: switch 'route' default: duplicate ref 'auto'");
    compile_err(HEAD "w.do_while { ref = 'loop', condition = 'return false',\n"
                     "  w.simple { ref = 'loop' } }" TAIL,
                WEFT_EINVAL, "order.lua:4: do_while 'loop' body: duplicate ref 'loop'");
    compile_err(HEAD "w.simple { ref = 'notify_join' },\n"
                     "w.fork { ref = 'notify', { w.simple { ref = 'x' } } }" TAIL,
                WEFT_EINVAL, "order.lua:4: fork 'notify': duplicate ref 'notify_join'");
    compile_err(HEAD "w.fork { ref = 'f', join = 'x', { w.simple { ref = 'x' } } }" TAIL,
                WEFT_EINVAL, "order.lua:3: fork 'f': duplicate ref 'x'");
    compile_err(HEAD "w.fork { ref = 'notify',\n  { w.simple { ref = 'x' } },\n  {} }" TAIL,
                WEFT_EINVAL, "order.lua:3: fork 'notify' branch 2 is empty");
    compile_err(HEAD "w.fork { ref = 'notify' }" TAIL, WEFT_EINVAL,
                "order.lua:3: fork 'notify': needs at least one branch (a list of tasks as a "
                "positional entry)");
    compile_err(HEAD "w.fork { ref = 'notify', w.simple { ref = 'x' } }" TAIL, WEFT_EINVAL,
                "order.lua:3: fork 'notify' branch 1: expected a list of tasks { ... } (got a "
                "simple task)");
    compile_err(HEAD "w.fork { ref = 'notify', { w.simple { ref = 'x' }, 'oops' } }" TAIL,
                WEFT_EINVAL,
                "order.lua:3: fork 'notify' branch 1: entry 2 is not a task (got a string)");
    compile_err(HEAD "w.fork { ref = 'notify', { w.simple { ref = 'x' }, mode = 1 } }" TAIL,
                WEFT_EINVAL,
                "order.lua:3: fork 'notify' branch 1: unexpected key .mode in a list of tasks");
}

static void test_workflow_errors(void **state)
{
    (void)state;
    compile_err("local w = require 'weft'\nreturn w.workflow { name = 'wf' }\n", WEFT_EINVAL,
                "order.lua:2: workflow 'wf' has no tasks");
    compile_err("local w = require 'weft'\nreturn w.workflow { w.simple { ref = 'a' } }\n",
                WEFT_EINVAL, "order.lua:2: workflow: missing field 'name'");
    compile_err(HEAD "'step'" TAIL, WEFT_EINVAL,
                "order.lua:2: workflow 'wf': entry 1 is not a task (got a string)");
    compile_err(HEAD "w.simple { ref = 'a' }, nil, w.simple { ref = 'b' }" TAIL, WEFT_EINVAL,
                "order.lua:2: workflow 'wf': entry 2 is not a task (got nil)");
    compile_err("local w = require 'weft'\nreturn w.workflow { name = 'wf', versoin = 2,\n"
                "w.simple { ref = 'a' } }\n",
                WEFT_EINVAL, "order.lua:2: workflow 'wf': unknown field 'versoin'");
    compile_err("local w = require 'weft'\nreturn w.workflow { name = 'wf', version = 0,\n"
                "w.simple { ref = 'a' } }\n",
                WEFT_EINVAL,
                "order.lua:2: workflow 'wf': field 'version' must be a whole number >= 1 (got 0)");
    compile_err(
        "local w = require 'weft'\nreturn w.workflow { name = 'wf', input = { id = 1 },\n"
        "w.simple { ref = 'a' } }\n",
        WEFT_EINVAL,
        "order.lua:2: workflow 'wf': field 'input' must be a list of names { \"id\", ... }");
    compile_err("local w = require 'weft'\nreturn w.workflow 'wf'\n", WEFT_EINVAL,
                "order.lua:2: workflow: expected a table of fields { name = ..., tasks... } (got a "
                "string)");
}

static void test_file_errors(void **state)
{
    (void)state;
    compile_err("return 'hello'\n", WEFT_EINVAL,
                "order.lua: the file must return w.workflow { ... } (got a string)");
    compile_err("local x = 1\n", WEFT_EINVAL,
                "order.lua: the file must return w.workflow { ... } (got nil)");
    compile_err("local w = require 'weft'\nreturn w.simple { ref = 'a' }\n", WEFT_EINVAL,
                "order.lua: the file must return w.workflow { ... } (got a simple task)");
    compile_err("local w = require 'weft'\nreturn { name = 'wf', tasks = {} }\n", WEFT_EINVAL,
                "order.lua: the file must return w.workflow { ... } (got a table)");
    compile_err("local w = require 'weft'\nreturn w.workflow {\n  name = = 'x' }\n", WEFT_EINVAL,
                "order.lua:3: unexpected symbol near '='");
    compile_err("\x1bLua", WEFT_EINVAL, "order.lua: attempt to load a binary chunk (mode is 't')");
    compile_err("local w = require 'weft'\n\nlocal x = nil\nreturn x.y\n", WEFT_EINVAL,
                "order.lua:4: attempt to index a nil value (local 'x')");
    compile_err("error('by hand', 0)\n", WEFT_EINVAL, "order.lua: by hand");
    compile_err("error({ code = 1 })\n", WEFT_EINVAL, "order.lua: error {\"code\":1}");
}

static void test_sandboxed(void **state)
{
    (void)state;
    compile_err("local f = io.open('/etc/passwd')\n", WEFT_EINVAL,
                "order.lua:1: attempt to index a nil value (global 'io')");
    compile_err("\nos.exit(1)\n", WEFT_EINVAL,
                "order.lua:2: attempt to index a nil value (global 'os')");
    compile_err("local os = require('os')\n", WEFT_EINVAL,
                "order.lua:1: module 'os' is not available (definitions can only require "
                "\"weft\")");
    compile_err("require 'io'\n", WEFT_EINVAL,
                "order.lua:1: module 'io' is not available (definitions can only require "
                "\"weft\")");
    compile_err("return debug.getinfo(1)\n", WEFT_EINVAL,
                "order.lua:1: attempt to index a nil value (global 'debug')");
    compile_err("return load('return 1')()\n", WEFT_EINVAL,
                "order.lua:1: attempt to call a nil value (global 'load')");
    compile_err("return dofile('/etc/passwd')\n", WEFT_EINVAL,
                "order.lua:1: attempt to call a nil value (global 'dofile')");
    compile_err("return package.loaded\n", WEFT_EINVAL,
                "order.lua:1: attempt to index a nil value (global 'package')");
}

/* A loop ends on the instruction limit, or on the clock on a slow machine
 * (valgrind). */
static void loop_err(const char *src)
{
    json_object *def = NULL, *lines = NULL;
    weft_error err;
    assert_int_equal(dsl_compile("order.lua", src, strlen(src), &def, &lines, &err), WEFT_ELIMIT);
    assert_null(def);
    if (strcmp(err.msg, "order.lua: instruction limit (10000000) exceeded") &&
        strcmp(err.msg, "order.lua: time limit (5000 ms) exceeded"))
        fail_msg("unexpected: %s", err.msg);
}

static void test_limits(void **state)
{
    (void)state;
    loop_err("local w = require 'weft'\nwhile true do end\n");
    compile_err("local s = 'x'\nwhile true do s = s .. s end\n", WEFT_ELIMIT,
                "order.lua: memory limit (33554432 bytes) exceeded");
    /* builders inside the loop count too */
    loop_err("local w = require 'weft'\nwhile true do pcall(w.simple, { ref = 'a' }) end\n");
}

static void test_compile_file(void **state)
{
    char dir[] = "/tmp/test_dsl_XXXXXX", path[64];
    json_object *def = NULL, *lines = NULL;
    weft_error err;
    FILE *f;
    (void)state;
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/order.lua", dir);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs(order_lua, f);
    fclose(f);
    assert_int_equal(dsl_compile_file(path, &def, &lines, &err), 0);
    assert_string_equal(str_at(def, "name"), "order");
    assert_string_equal(json_at(lines, "price"), "7");
    json_object_put(def);
    json_object_put(lines);
    /* lines may be NULL */
    assert_int_equal(dsl_compile_file(path, &def, NULL, &err), 0);
    json_object_put(def);

    f = fopen(path, "w");
    assert_non_null(f);
    fputs("return 1\n", f);
    fclose(f);
    assert_int_equal(dsl_compile_file(path, &def, &lines, &err), WEFT_EINVAL);
    assert_string_equal(err.msg,
                        "order.lua: the file must return w.workflow { ... } (got a number)");
    assert_null(def);
    assert_null(lines);
    unlink(path);
    assert_int_equal(dsl_compile_file(path, &def, &lines, &err), WEFT_ENOTFOUND);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_design_example, teardown_lines),
        cmocka_unit_test_teardown(test_key_order, teardown_lines),
        cmocka_unit_test_teardown(test_workflow_fields, teardown_lines),
        cmocka_unit_test_teardown(test_common_fields, teardown_lines),
        cmocka_unit_test_teardown(test_builders, teardown_lines),
        cmocka_unit_test_teardown(test_forks, teardown_lines),
        cmocka_unit_test_teardown(test_inline_sub_workflow, teardown_lines),
        cmocka_unit_test_teardown(test_lines_through_helpers, teardown_lines),
        cmocka_unit_test(test_field_errors),
        cmocka_unit_test(test_duration_errors),
        cmocka_unit_test(test_delays),
        cmocka_unit_test(test_script_compile_errors),
        cmocka_unit_test(test_ref_errors),
        cmocka_unit_test(test_workflow_errors),
        cmocka_unit_test(test_file_errors),
        cmocka_unit_test(test_sandboxed),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_compile_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
