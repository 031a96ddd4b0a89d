/* Fixture: a plugin built for the next major ABI; the host must refuse it. */
#include "weft/plugin.h"

static int fx_execute(weft_ctx *ctx, weft_result *result)
{
    result->status = WEFT_TASK_COMPLETED;
    return 0;
}

static const weft_task_type fx_type = WEFT_TASK_TYPE(.name = "FX_BAD_ABI", .execute = fx_execute);

int weft_plugin_init(const weft_host *host)
{
    weft_error err;
    int rc = host->declare(WEFT_ABI_MAJOR + 1, (uint32_t)sizeof(weft_host));
    if (rc != 0) return rc;
    return host->register_task_type(&fx_type, &err);
}
WEFT_PLUGIN_ENTRY(fx_bad_abi)
