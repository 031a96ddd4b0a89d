/* What a worker's saves tell: workflows that ended or started (metrics)
 * and the decider's notes (logged). */
#include "daemon/internal.h"

static void on_note(void *ud, int level, const lg_field *fields, const char *msg)
{
    lg_log(level, fields, "%s", msg);
}

/* What follows an end (its parent, its failure workflow) is the effects'
 * (core/effects.c); here it is counted. */
static void on_ended(void *ud, const xc_exec *x)
{
    mt_workflow_ended(((worker *)ud)->n->metrics, x->def ? x->def->name : NULL,
                      weft_wf_status_name(x->status), xc_run_seconds(x));
}

static void on_started(void *ud, const xc_exec *x)
{
    mt_workflow_started(((worker *)ud)->n->metrics);
}

void nd_hooks_init(worker *w)
{
    w->hooks.ud = w;
    w->hooks.ended = on_ended;
    w->hooks.started = on_started;
    w->hooks.note = on_note;
}
