#include "core/sweeper.h"

/* Read a child's end (a parent whose notice was lost). 1 = it ended, filled in c. */
static int child_ended(op_env *env, const char *child_id, op_complete *c, json_object **out,
                       char *reason, size_t rsize)
{
    xc_exec *cx = NULL;
    weft_error err = {0};
    if (op_load(env, child_id, &cx, NULL, &err)) return 0;
    if (!xc_wf_terminal(cx->status)) {
        xc_free(cx);
        return 0;
    }
    *out = xc_child_result(cx, &c->status, reason, rsize);
    c->reason = c->status == WEFT_TASK_COMPLETED ? NULL : reason;
    c->output = *out;
    xc_free(cx);
    return 1;
}

int sw_look(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, void *ud, weft_error *err)
{
    int64_t now = dec->now(), next;
    size_t i, n = x->tasks.len;
    if (xc_wf_terminal(x->status))
        return OP_NOCHANGE; /* finished: only its decider-queue entry was left */
    for (i = 0; i < n && !xc_wf_terminal(x->status); i++) {
        xc_task *t = x->tasks.items[i];
        if (xc_task_terminal(t->status)) continue;
        if (t->def->type->map) {
            /* a control-flow timer that came due */
            if (t->status == WEFT_TASK_IN_PROGRESS && t->callback_ms > 0 && t->callback_ms <= now) {
                t->callback_ms = 0;
                dec_remap(dec, x, t, o);
            }
        } else if (t->child_id) {
            /* a sub-workflow that ended while nobody told us */
            op_complete c = {0};
            json_object *out = NULL;
            char reason[WEFT_ERROR_MAX];
            if (child_ended(env, t->child_id, &c, &out, reason, sizeof reason))
                dec_complete(dec, x, t, c.status, c.output, c.reason, o, err);
            json_object_put(out);
        } else if (t->queued && ST(env->st, queue_has, xc_task_queue(t), x->id, t->id, err) == 0) {
            /* queued in the execution but in no queue: a step lost to a crash */
            dec_enqueue(dec, x, t, t->callback_ms > now ? t->callback_ms : now, o);
        }
    }
    dec_timeouts(dec, x, now, &next, o);
    dec_decide(dec, x, o);
    return 0;
}
