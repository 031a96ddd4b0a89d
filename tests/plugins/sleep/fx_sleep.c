/*
 * Fixture: task type FX_SLEEP sleeps input.ms milliseconds, then completes with
 * { slept = ms }. If input.mark is a path, it appends a line there each time it
 * runs (so tests can count executions). If input.say is a string, it logs
 * "slept <ms> ms: <say>" at info (so tests can see a plugin's log line).
 */
#include <stdio.h>
#include <time.h>
#include <weft/plugin.h>

static const weft_host *H;

static int sleep_execute(weft_ctx *ctx, weft_result *r)
{
    const weft_task_view *t = H->task(ctx);
    json_object *ms = NULL, *mark = NULL, *say = NULL;
    long n;
    struct timespec ts;
    json_object_object_get_ex(t->input, "ms", &ms);
    n = ms ? (long)json_object_get_int64(ms) : 0;
    if (json_object_object_get_ex(t->input, "mark", &mark)) {
        FILE *f = fopen(json_object_get_string(mark), "a");
        if (f) {
            fprintf(f, "%s\n", t->task_id);
            fclose(f);
        }
    }
    ts.tv_sec = n / 1000;
    ts.tv_nsec = (n % 1000) * 1000000L;
    nanosleep(&ts, NULL);
    if (json_object_object_get_ex(t->input, "say", &say) &&
        json_object_is_type(say, json_type_string))
        H->log(WEFT_LOG_INFO, "slept %ld ms: %s", n, json_object_get_string(say));
    r->output = json_object_new_object();
    json_object_object_add(r->output, "slept", json_object_new_int64(n));
    r->status = WEFT_TASK_COMPLETED;
    return 0;
}

static const weft_task_type sleep_type =
    WEFT_TASK_TYPE(.name = "FX_SLEEP", .execute = sleep_execute);

int weft_plugin_init(const weft_host *host)
{
    weft_error err = {0};
    WEFT_PLUGIN_BEGIN(host);
    H = host;
    return host->register_task_type(&sleep_type, &err);
}
WEFT_PLUGIN_ENTRY(fx_sleep)
