#include "core/sweeper.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Read a child's end (a parent whose notice was lost). 1 = it ended, filled
 * in c; -1 = it is not there; 0 = it runs, or could not be read now. */
static int child_ended(op_env *env, const char *child_id, op_complete *c, json_object **out,
                       char *reason, size_t rsize)
{
    xc_exec *cx = NULL;
    weft_error err = {0};
    int rc = op_load(env, child_id, &cx, NULL, &err);
    if (rc) return rc == WEFT_ENOTFOUND ? -1 : 0;
    if (!xc_wf_terminal(cx->status)) {
        xc_free(cx);
        return 0;
    }
    *out = xc_child_result(cx, &c->status, reason, rsize);
    xc_free(cx);
    if (!*out) return 0; /* out of memory: read again at the next look */
    c->reason = c->status == WEFT_TASK_COMPLETED ? NULL : reason;
    c->output = *out;
    return 1;
}

/*
 * A child that is not there though SUB_WORKFLOW task t names it. Younger
 * than the retention (the task started after now - retention_ms, its child
 * after it), it cannot have expired: its start was lost. A Redis failover
 * loses the writes its primary had not yet replicated, and on a cluster the
 * child's create and the parent's save that took its id are on different
 * nodes, so the save may be kept and the create lost. The task is queued
 * again and starts the child again, under its idempotency key: the same id
 * while the key is kept, a new one if that was lost too. A paused parent
 * does so once resumed. A child that may have expired (its end unnoticed
 * for longer than the retention) fails the task: run again, it would do its
 * work twice.
 */
static void child_gone(op_env *env, const dec_env *dec, xc_exec *x, xc_task *t, int64_t now,
                       dec_out *o, weft_error *err)
{
    char msg[WEFT_ERROR_MAX];
    int again = env->retention_ms > 0 && now - t->started_ms < env->retention_ms;
    if (x->status == WEFT_WF_PAUSED) return;
    snprintf(msg, sizeof msg,
             again ? "its sub-workflow %s is gone (a Redis failover lost its start?): "
                     "starting it again"
                   : "its sub-workflow %s is gone (expired after the retention?)",
             t->child_id);
    if (!again) {
        dec_complete(dec, x, t, WEFT_TASK_FAILED, NULL, msg, o, err);
        return;
    }
    if (env->hooks && env->hooks->note) {
        lg_field f[] = {LG_STR("workflow", x->id), LG_STR("task", t->ref), {.key = NULL}};
        env->hooks->note(env->hooks->ud, WEFT_LOG_WARN, f, msg);
    }
    free(t->child_id);
    t->child_id = NULL;
    if (json_object_is_type(t->output, json_type_object))
        json_object_object_del(t->output, "subWorkflowId");
    /* an output kept outside (payload.h) is written anew */
    free(t->output_ref);
    t->output_ref = NULL;
    t->sized = 0;
    dec_enqueue(dec, x, t, now, o);
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
            int ended = child_ended(env, t->child_id, &c, &out, reason, sizeof reason);
            if (ended > 0)
                dec_complete(dec, x, t, c.status, c.output, c.reason, o, err);
            else if (ended < 0 && !strcmp(t->def->type_name, "SUB_WORKFLOW"))
                child_gone(env, dec, x, t, now, o, err);
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
