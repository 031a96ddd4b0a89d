/*
 * Fixture: a plugin built for ABI 1, whose task type and lock provider had
 * no size (the layout is spelled out here, as the ABI 1 header had it). The
 * host must still load it and read both structs.
 */
#include <stdio.h>
#include <string.h>
#include "weft/plugin.h"

typedef struct v1_task_type {
    const char *name;
    unsigned flags;
    void *data;
    int (*validate)(const weft_host *host, json_object *def_task, weft_error *err);
    int (*map)(weft_ctx *ctx, json_object *def_task, json_object *out_tasks, weft_result *result);
    int (*execute)(weft_ctx *ctx, weft_result *result);
    void (*cancel)(weft_ctx *ctx);
    int (*init)(const weft_host *host, json_object *config, weft_error *err);
    void (*fini)(void);
} v1_task_type;

typedef struct v1_lock_provider {
    const char *name;
    void *(*open)(const weft_host *host, json_object *config, weft_error *err);
    int (*acquire)(void *lock, const char *key, int64_t ttl_ms, int64_t wait_ms, char *token,
                   size_t token_size, weft_error *err);
    int (*release)(void *lock, const char *key, const char *token, weft_error *err);
    void (*close)(void *lock);
} v1_lock_provider;

static int data = 42;

static int fx_execute(weft_ctx *ctx, weft_result *result)
{
    result->status = WEFT_TASK_COMPLETED;
    result->output = json_object_new_string("fx abi 1");
    return 0;
}

static int fx_acquire(void *lock, const char *key, int64_t ttl_ms, int64_t wait_ms, char *token,
                      size_t token_size, weft_error *err)
{
    snprintf(token, token_size, "abi1-token");
    return 0;
}

static int fx_release(void *lock, const char *key, const char *token, weft_error *err)
{
    return strcmp(token, "abi1-token") == 0 ? 0 : WEFT_EINVAL;
}

static const v1_task_type fx_type = {.name = "FX_ABI1", .data = &data, .execute = fx_execute};
static const v1_lock_provider fx_lock = {
    .name = "fx_abi1_lock", .acquire = fx_acquire, .release = fx_release};

int weft_plugin_init(const weft_host *host)
{
    weft_error err;
    int rc = host->declare(1, (uint32_t)offsetof(weft_host, config_fill));
    if (rc != 0) return rc;
    if ((rc = host->register_task_type((const weft_task_type *)(const void *)&fx_type, &err)))
        return rc;
    return host->register_lock_provider((const weft_lock_provider *)(const void *)&fx_lock, &err);
}
WEFT_PLUGIN_ENTRY(fx_abi1)
