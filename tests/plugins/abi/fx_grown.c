/*
 * Fixture: built against a newer minor of the ABI, whose task type has a
 * field this host does not know: the host reads what it knows.
 */
#include "weft/plugin.h"

static int fx_execute(weft_ctx *ctx, weft_result *result)
{
    result->status = WEFT_TASK_COMPLETED;
    return 0;
}

static const struct {
    weft_task_type t;
    void (*from_the_future)(void);
} fx_type = {WEFT_TASK_TYPE(.name = "FX_GROWN", .execute = fx_execute), NULL};

int weft_plugin_init(const weft_host *host)
{
    weft_task_type t = fx_type.t;
    weft_error err;
    WEFT_PLUGIN_BEGIN(host);
    t.size = sizeof fx_type;
    /* the host copies what it registers: a local struct is fine */
    return host->register_task_type(&t, &err);
}
WEFT_PLUGIN_ENTRY(fx_grown)
