/*
 * LAMBDA: a Lua function body run in the host's sandbox (fresh environment
 * per run, memory cap, instruction budget). inputParameters.scriptExpression
 * holds the body; the other input parameters are the script's `input`.
 * Output: { result = <returned value> }.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <weft/plugin.h>

static const weft_host *H;

/*
 * The script's input objects are reused: a new json-c object (a 16-entry
 * hash table) for every run cost more than a small script. Between runs
 * they are empty; during one, their members are borrowed from the task's
 * input (constant keys, referenced values). Runs may be on several threads.
 */
#define POOL_MAX 8
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static json_object *pool[POOL_MAX];
static int npool;

static json_object *input_take(void)
{
    json_object *o = NULL;
    pthread_mutex_lock(&pool_lock);
    if (npool > 0) o = pool[--npool];
    pthread_mutex_unlock(&pool_lock);
    return o ? o : json_object_new_object();
}

/* Empty o and keep it for the next run (lua_eval keeps no reference). */
static void input_give(json_object *o)
{
    json_object_object_foreach(o, k, v)
    {
        (void)v;
        json_object_object_del(o, k); /* foreach has read the next entry already */
    }
    pthread_mutex_lock(&pool_lock);
    if (npool < POOL_MAX) {
        pool[npool++] = o;
        o = NULL;
    }
    pthread_mutex_unlock(&pool_lock);
    json_object_put(o);
}

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

/* "lambda '<ref>'" truncated to size, as snprintf would write it, without
 * snprintf's cost on every run. size > 9. */
static void chunk_name(char *buf, size_t size, const char *ref)
{
    static const char pre[] = "lambda '";
    size_t n = sizeof pre - 1, len = strlen(ref);
    memcpy(buf, pre, n);
    if (len > size - 1 - n) len = size - 1 - n;
    memcpy(buf + n, ref, len);
    n += len;
    if (n < size - 1) buf[n++] = '\'';
    buf[n] = 0;
}

static int lambda_execute(weft_ctx *ctx, weft_result *r)
{
    const weft_task_view *t = H->task(ctx);
    json_object *input = input_take(), *value = NULL;
    char chunk[160];
    weft_error err = {0};
    int rc;

    if (!input) return WEFT_ENOMEM;
    /* t->input outlives the run: its keys can be borrowed */
    json_object_object_foreach(t->input, k, v)
    {
        if (strcmp(k, "scriptExpression") &&
            json_object_object_add_ex(input, k, json_object_get(v),
                                      JSON_C_OBJECT_ADD_KEY_IS_NEW |
                                          JSON_C_OBJECT_ADD_CONSTANT_KEY))
            json_object_put(v);
    }
    chunk_name(chunk, sizeof chunk, t->def_ref);
    rc = H->lua_eval(ctx, chunk, script_of(t->def), input, &value, &err);
    input_give(input);
    if (rc) return weft_fail(r, "%s", err.msg);
    r->output = json_object_new_object();
    json_object_object_add(r->output, "result", value);
    r->status = WEFT_TASK_COMPLETED;
    return 0;
}

static void lambda_fini(void)
{
    pthread_mutex_lock(&pool_lock);
    while (npool > 0)
        json_object_put(pool[--npool]);
    pthread_mutex_unlock(&pool_lock);
}

static const weft_task_type lambda_type =
    WEFT_TASK_TYPE(.name = "LAMBDA", .validate = lambda_validate, .execute = lambda_execute,
                   .fini = lambda_fini);

WEFT_PLUGIN(lambda, .types = &lambda_type, .ntypes = 1, .host = &H)
