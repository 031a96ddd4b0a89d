/*
 * Fixture: registers FX_PARTIAL, then fails its init with a logged message.
 * The host must undo the registration and unload the plugin.
 */
#include "weft/plugin.h"

static int fx_execute(weft_ctx *ctx, weft_result *result)
{
    result->status = WEFT_TASK_COMPLETED;
    return 0;
}

static const weft_task_type fx_type = WEFT_TASK_TYPE(.name = "FX_PARTIAL", .execute = fx_execute);

int weft_plugin_init(const weft_host *host)
{
    weft_error err;
    int rc;
    WEFT_PLUGIN_BEGIN(host);
    if ((rc = host->register_task_type(&fx_type, &err)) != 0) return rc;
    host->log(WEFT_LOG_ERROR, "fx_init_fails: cannot reach the frobnicator");
    return WEFT_EIO;
}
WEFT_PLUGIN_ENTRY(fx_init_fails)
