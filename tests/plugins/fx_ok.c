/*
 * Fixture: a well-behaved plugin. Registers the task types FX_OK (execute)
 * and FX_OK_MAP (map only; shares FX_OK's fini, which must run once) and the
 * lock provider fx_lock.
 */
#include <stdio.h>
#include <string.h>
#include "weft/plugin.h"

static const weft_host *fx_host;

static int fx_execute(weft_ctx *ctx, weft_result *result)
{
    result->status = WEFT_TASK_COMPLETED;
    result->output = json_object_new_string("fx ok");
    return 0;
}

static int fx_map(weft_ctx *ctx, json_object *def_task, json_object *out_tasks, weft_result *result)
{
    result->status = WEFT_TASK_COMPLETED;
    return 0;
}

/* The host's log is how the tests see that fini ran. */
static void fx_fini(void)
{
    if (fx_host) fx_host->log(WEFT_LOG_INFO, "fx_ok: fini");
}

static const weft_task_type fx_type = {
    .size = sizeof(weft_task_type),
    .name = "FX_OK",
    .execute = fx_execute,
    .fini = fx_fini,
};

static const weft_task_type fx_map_type = {
    .size = sizeof(weft_task_type),
    .name = "FX_OK_MAP",
    .map = fx_map,
    .fini = fx_fini,
};

static int fx_acquire(void *lock, const char *key, int64_t ttl_ms, int64_t wait_ms, char *token,
                      size_t token_size, weft_error *err)
{
    snprintf(token, token_size, "fx-token");
    return 0;
}

static int fx_release(void *lock, const char *key, const char *token, weft_error *err)
{
    return strcmp(token, "fx-token") == 0 ? 0 : WEFT_EINVAL;
}

static const weft_lock_provider fx_lock = {
    .size = sizeof(weft_lock_provider),
    .name = "fx_lock",
    .acquire = fx_acquire,
    .release = fx_release,
};

int weft_plugin_init(const weft_host *host)
{
    weft_error err;
    int rc;
    WEFT_PLUGIN_BEGIN(host);
    fx_host = host;
    if ((rc = host->register_task_type(&fx_type, &err)) != 0) return rc;
    if ((rc = host->register_task_type(&fx_map_type, &err)) != 0) return rc;
    return host->register_lock_provider(&fx_lock, &err);
}
WEFT_PLUGIN_ENTRY(fx_ok)
