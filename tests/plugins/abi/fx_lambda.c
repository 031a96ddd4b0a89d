/* Fixture: registers LAMBDA, the type of the built-in lambda plugin. */
#include "weft/plugin.h"

static int fx_execute(weft_ctx *ctx, weft_result *result)
{
    result->status = WEFT_TASK_COMPLETED;
    result->output = json_object_new_object();
    json_object_object_add(result->output, "result", json_object_new_string("fx lambda"));
    return 0;
}

static const weft_task_type fx_type = WEFT_TASK_TYPE(.name = "LAMBDA", .execute = fx_execute);

WEFT_PLUGIN(fx_lambda, .types = &fx_type, .ntypes = 1)
