/* What follows a worker's save: a workflow that ended (its parent, its
 * failure workflow, metrics) and the decider's notes (logged). */
#include "daemon/internal.h"

#include <stdio.h>
#include <stdlib.h>

static void on_note(void *ud, int level, const char *msg)
{
    lg_say(level, "%s", msg);
}

static void on_ended(void *ud, op_env *env, const xc_exec *x)
{
    worker *w = ud;
    weft_error err = {0};
    mt_workflow_ended(w->n->metrics, weft_wf_status_name(x->status));
    if (x->parent_id && x->parent_task_id) {
        op_complete c = {0};
        char reason[WEFT_ERROR_MAX];
        json_object *out = xc_child_result(x, &c.status, reason, sizeof reason);
        c.task_id = x->parent_task_id;
        c.child_id = x->id;
        c.output = out;
        c.reason = c.status == WEFT_TASK_COMPLETED ? NULL : reason;
        if (op_update(env, x->parent_id, op_fn_complete, &c, &err) && err.code != WEFT_ESTATE)
            lg_say(WEFT_LOG_WARN, "workflow %s: telling parent %s: %s (the sweeper retries)",
                   x->id, x->parent_id, err.msg);
        json_object_put(out);
    }
    if ((x->status == WEFT_WF_FAILED || x->status == WEFT_WF_TIMED_OUT) &&
        x->def->failure_workflow) {
        const char *name = json_object_get_string(x->def->failure_workflow);
        char *json = NULL, id[64], key[128], what[WEFT_ERROR_MAX / 2];
        def_workflow *d = NULL;
        op_start_args a = {0};
        json_object *in;
        int v = 0;
        /* a failure workflow that fails and starts itself again is a
         * recursion too: bounded like sub-workflows */
        snprintf(what, sizeof what, "failure workflow '%s'", name);
        if (def_check_depth(&w->n->limits, x->depth, what, &err)) {
            lg_say(WEFT_LOG_WARN, "workflow %s: not started: %s", x->id, err.msg);
            return;
        }
        if (rs_def_get(w->r, name, 0, &json, &v, &err) || op_def(env, json, name, &d, &err)) {
            lg_say(WEFT_LOG_WARN, "workflow %s: failure workflow '%s': %s", x->id, name,
                   err.msg);
            free(json);
            return;
        }
        free(json);
        in = xc_failure_input(x);
        snprintf(key, sizeof key, "failure:%s", x->id);
        a.def = d;
        a.input = in;
        a.idempotency_key = key;
        a.depth = x->depth + 1;
        if (op_start(env, &a, id, &err))
            lg_say(WEFT_LOG_WARN, "workflow %s: failure workflow '%s': %s", x->id, name,
                   err.msg);
        else
            mt_workflow_started(w->n->metrics);
        json_object_put(in);
        def_unref(d);
    }
}

void nd_hooks_init(worker *w)
{
    w->hooks.ud = w;
    w->hooks.ended = on_ended;
    w->hooks.note = on_note;
}
