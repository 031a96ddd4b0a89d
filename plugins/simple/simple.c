/*
 * SIMPLE: tasks done by external workers in any language. Workers poll
 * weftd's REST API (GET /api/tasks/poll/<name>) and report results
 * (POST /api/tasks), as with Conductor. A SIMPLE task is queued by its
 * name (the queue a worker polls); its output is what the worker reports.
 */
#include <weft/plugin.h>

static const weft_task_type simple_type =
    WEFT_TASK_TYPE(.name = "SIMPLE", .flags = WEFT_TASK_EXTERNAL);

WEFT_PLUGIN(simple, .types = &simple_type, .ntypes = 1)
