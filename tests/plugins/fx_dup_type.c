/* Fixture: registers FX_OK, which clashes with fx_ok when both are loaded. */
#include "weft/plugin.h"

static int fx_execute(weft_ctx *ctx, weft_result *result)
{
    result->status = WEFT_TASK_FAILED;
    return 0;
}

static const weft_task_type fx_type = WEFT_TASK_TYPE(.name = "FX_OK", .execute = fx_execute);

int weft_plugin_init(const weft_host *host)
{
    weft_error err;
    WEFT_PLUGIN_BEGIN(host);
    return host->register_task_type(&fx_type, &err);
}
WEFT_PLUGIN_ENTRY(fx_dup_type)
