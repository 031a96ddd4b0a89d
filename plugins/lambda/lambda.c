/*
 * LAMBDA: a Lua function body run in the host's sandbox (fresh environment
 * per run, memory cap, instruction budget). inputParameters.scriptExpression
 * holds the body; the other input parameters are the script's `input`.
 * Output: { result = <returned value> }.
 */
#include <stdio.h>
#include <string.h>
#include <weft/plugin.h>

static const weft_host *H;

/* The script as written in the definition: never interpolated. */
static const char *script_of(json_object *def)
{
    json_object *in, *s;
    if (json_object_object_get_ex(def, "inputParameters", &in) &&
        json_object_object_get_ex(in, "scriptExpression", &s) &&
        json_object_is_type(s, json_type_string))
        return json_object_get_string(s);
    return NULL;
}

static int lambda_validate(const weft_host *host, json_object *def, weft_error *err)
{
    const char *s = script_of(def);
    if (!s || !*s)
        return host->error(err, WEFT_EINVAL,
                           "LAMBDA needs inputParameters.scriptExpression (a Lua function body)");
    return 0;
}

static int lambda_execute(weft_ctx *ctx, weft_result *r)
{
    const weft_task_view *t = H->task(ctx);
    json_object *input = json_object_new_object(), *value = NULL;
    char chunk[160];
    weft_error err = {0};
    int rc;

    if (!input)
        return WEFT_ENOMEM;
    json_object_object_foreach(t->input, k, v)
    {
        if (strcmp(k, "scriptExpression"))
            json_object_object_add(input, k, json_object_get(v));
    }
    snprintf(chunk, sizeof chunk, "lambda '%s'", t->def_ref);
    rc = H->lua_eval(ctx, chunk, script_of(t->def), input, &value, &err);
    json_object_put(input);
    if (rc) {
        r->status = WEFT_TASK_FAILED;
        snprintf(r->reason, sizeof r->reason, "%s", err.msg);
        return 0;
    }
    r->output = json_object_new_object();
    json_object_object_add(r->output, "result", value);
    r->status = WEFT_TASK_COMPLETED;
    return 0;
}

static const weft_task_type lambda_type = {
    .name = "LAMBDA",
    .validate = lambda_validate,
    .execute = lambda_execute,
};

int weft_plugin_init(const weft_host *host)
{
    weft_error err = {0};
    WEFT_PLUGIN_BEGIN(host);
    H = host;
    return host->register_task_type(&lambda_type, &err);
}
WEFT_PLUGIN_ENTRY(lambda)
