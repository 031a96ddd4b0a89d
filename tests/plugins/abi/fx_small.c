/*
 * Fixture: a task type whose size says it ends before `execute` (shorter
 * than any layout of its ABI): the host must refuse it, naming the type.
 */
#include "weft/plugin.h"

static int fx_execute(weft_ctx *ctx, weft_result *result)
{
    result->status = WEFT_TASK_COMPLETED;
    return 0;
}

static const weft_task_type fx_type = {
    .size = offsetof(weft_task_type, execute),
    .name = "FX_SMALL",
    .execute = fx_execute,
};

WEFT_PLUGIN(fx_small, .types = &fx_type, .ntypes = 1)
