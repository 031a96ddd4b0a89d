/*
 * DECISION and SWITCH: pick one list of tasks by a value.
 *
 * DECISION: caseValueParam names the input parameter holding the value, or
 * caseExpression (a Lua body) computes it; its `input` is the value of
 * caseValueParam when that is set, else the whole input.
 * SWITCH: evaluatorType "value-param" (expression names the input
 * parameter) or "lua" (expression is a Lua body, `input` as above).
 * Output: { selectedCase = name } (SWITCH adds evaluationResult = [name]).
 */
#include <stdio.h>
#include <string.h>
#include <weft/plugin.h>

static const weft_host *H;

static int check_cases(const weft_host *host, json_object *def, weft_error *err)
{
    json_object *cases, *dflt;
    if (json_object_object_get_ex(def, "decisionCases", &cases)) {
        if (!json_object_is_type(cases, json_type_object))
            return host->error(err, WEFT_EINVAL, "decisionCases must be an object of task lists");
        json_object_object_foreach(cases, name, list)
        {
            if (!json_object_is_type(list, json_type_array))
                return host->error(err, WEFT_EINVAL, "decisionCases.%s must be a list of tasks",
                                   name);
        }
    }
    if (json_object_object_get_ex(def, "defaultCase", &dflt) &&
        !json_object_is_type(dflt, json_type_array) && !json_object_is_type(dflt, json_type_null))
        return host->error(err, WEFT_EINVAL, "defaultCase must be a list of tasks");
    return 0;
}

static int decision_validate(const weft_host *host, json_object *def, weft_error *err)
{
    if (!weft_json_str(def, "caseValueParam") && !weft_json_str(def, "caseExpression"))
        return host->error(err, WEFT_EINVAL, "DECISION needs caseValueParam or caseExpression");
    return check_cases(host, def, err);
}

static int switch_validate(const weft_host *host, json_object *def, weft_error *err)
{
    const char *ev = weft_json_str(def, "evaluatorType");
    if (!weft_json_str(def, "expression"))
        return host->error(err, WEFT_EINVAL, "SWITCH needs an expression");
    if (ev && strcmp(ev, "value-param") && strcmp(ev, "lua"))
        return host->error(err, WEFT_EINVAL,
                           "SWITCH evaluatorType '%s' is not supported (use value-param or lua)",
                           ev);
    return check_cases(host, def, err);
}

/* The case name for a value: strings as they are, anything else as JSON text. */
static void case_name(json_object *v, char *buf, size_t size)
{
    if (json_object_is_type(v, json_type_string))
        snprintf(buf, size, "%s", json_object_get_string(v));
    else
        snprintf(buf, size, "%s",
                 v ? json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN) : "null");
}

static json_object *param(json_object *input, const char *name)
{
    json_object *v = NULL;
    if (name) json_object_object_get_ex(input, name, &v);
    return v;
}

static int decide(weft_ctx *ctx, json_object *def, json_object *out, weft_result *r, int is_switch)
{
    const weft_task_view *t = H->task(ctx);
    const char *vparam = weft_json_str(def, "caseValueParam");
    const char *expr = is_switch ? NULL : weft_json_str(def, "caseExpression");
    json_object *value = NULL, *cases, *list = NULL;
    char name[256], chunk[160];
    weft_error err = {0};
    int owned = 0;

    if (is_switch) {
        const char *ev = weft_json_str(def, "evaluatorType");
        if (ev && !strcmp(ev, "lua"))
            expr = weft_json_str(def, "expression");
        else
            vparam = weft_json_str(def, "expression");
    }
    if (expr) {
        snprintf(chunk, sizeof chunk, "%s '%s' expression", is_switch ? "switch" : "decision",
                 t->def_ref);
        if (H->lua_eval(ctx, chunk, expr, vparam ? param(t->input, vparam) : t->input, &value,
                        &err))
            return weft_fail(r, "%s", err.msg);
        owned = 1;
    } else {
        value = param(t->input, vparam);
    }
    case_name(value, name, sizeof name);
    if (owned) json_object_put(value);

    if (!json_object_object_get_ex(def, "decisionCases", &cases) ||
        !json_object_object_get_ex(cases, name, &list))
        json_object_object_get_ex(def, "defaultCase", &list);
    if (json_object_is_type(list, json_type_array) && json_object_array_length(list) > 0)
        json_object_array_add(out, json_object_get(json_object_array_get_idx(list, 0)));

    r->output = json_object_new_object();
    json_object_object_add(r->output, "selectedCase", json_object_new_string(name));
    if (is_switch) {
        json_object *ev = json_object_new_array();
        json_object_array_add(ev, json_object_new_string(name));
        json_object_object_add(r->output, "evaluationResult", ev);
    }
    r->status = WEFT_TASK_COMPLETED;
    return 0;
}

static int decision_map(weft_ctx *ctx, json_object *def, json_object *out, weft_result *r)
{
    return decide(ctx, def, out, r, 0);
}

static int switch_map(weft_ctx *ctx, json_object *def, json_object *out, weft_result *r)
{
    return decide(ctx, def, out, r, 1);
}

static const weft_task_type types[] = {
    WEFT_TASK_TYPE(.name = "DECISION", .validate = decision_validate, .map = decision_map),
    WEFT_TASK_TYPE(.name = "SWITCH", .validate = switch_validate, .map = switch_map),
};

WEFT_PLUGIN(decision, .types = types, .ntypes = WEFT_COUNT(types), .host = &H)
