/*
 * The decider: a pure function of an execution. Given what happened
 * (tasks that ended), it schedules what comes next, retries what failed,
 * maps control-flow tasks through their plugins' `map`, and completes or
 * fails the workflow. It does no I/O: what the store must do is returned
 * as actions. Prefix dec_.
 */
#ifndef WEFT_DECIDER_H
#define WEFT_DECIDER_H

#include "core/def.h"
#include "core/exec.h"
#include "plugin/host.h"

/*
 * What a decision asks of the world outside the execution. One module
 * applies them (core/effects.c), the same for the embedded engine and the
 * daemon; nothing else writes an action.
 */
typedef enum dec_kind {
    DEC_ENQUEUE,         /* put task in its type's queue, visible at `at` */
    DEC_TIMER,           /* re-evaluate an inline task at `at` */
    DEC_CANCEL,          /* a queued or running task was canceled or timed out: it
                          * leaves its queue, its plugin hears of it */
    DEC_UNQUEUE,         /* a worker's claim on task ended with its result: it
                          * leaves its queue (dec_unqueue) */
    DEC_TERMINATE_CHILD, /* task's child workflow (task->child_id) is to end */
    DEC_NOTIFY_PARENT,   /* the workflow ended: its parent's SUB_WORKFLOW task hears */
    DEC_START_FAILURE,   /* the workflow failed: its failure workflow starts */
    DEC_WF_ENDED,        /* the workflow reached a terminal status (always the last) */
} dec_kind;

typedef struct dec_action {
    dec_kind kind;
    xc_task *task; /* NULL for the workflow's own (NOTIFY_PARENT, START_FAILURE, WF_ENDED) */
    int64_t at;
} dec_action;

typedef struct dec_out {
    dec_action *a;
    size_t n, cap;
} dec_out;

typedef struct dec_env {
    const def_env *defs;      /* to compile dynamic tasks */
    const host_services *svc; /* for map callbacks (Lua sandbox) */
    int64_t (*now)(void);
    /* Called on every task or workflow status change (t NULL = workflow). */
    void (*on_change)(void *ud, const xc_exec *x, const xc_task *t);
    void *ud;
    /* Optional: whether a worker polled queue's domain lately (Conductor's
     * "active worker"), for taskToDomain's lists of domains; NULL: none. */
    int (*domain_active)(void *ud, const char *queue, const char *domain);
    void *domain_ud;
} dec_env;

/* Whether a new execution's first decision runs no plugin code (its first
 * task is a queued one), so that whoever starts it can make it. */
int dec_can_start(const xc_exec *x);

/* Act on every task that ended since the last call. */
int dec_decide(const dec_env *env, xc_exec *x, dec_out *out);

/*
 * Apply what a queued task's execute reported (rc from the callback; the
 * result's output/end_output are taken). A task no longer IN_PROGRESS or
 * SCHEDULED (canceled meanwhile) ignores it. Call dec_decide afterwards.
 */
void dec_apply(const dec_env *env, xc_exec *x, xc_task *t, int rc, weft_result *r, dec_out *out);

/* Put a queued task (back) in its queue, visible at `at` (the sweeper's repair). */
void dec_enqueue(const dec_env *env, xc_exec *x, xc_task *t, int64_t at, dec_out *out);

/* A worker's claim on queued task t ends (its result is taken): t leaves
 * its queue. Nothing for an inline task or a sub-workflow's. */
void dec_unqueue(const dec_env *env, xc_exec *x, xc_task *t, dec_out *out);

/* A worker picked task t up: IN_PROGRESS, started time, poll count. */
void dec_start(const dec_env *env, xc_exec *x, xc_task *t);

/* Re-run an inline task's map (a DEC_TIMER fired). */
void dec_remap(const dec_env *env, xc_exec *x, xc_task *t, dec_out *out);

/* Complete an IN_PROGRESS task from outside (worker, signal, child workflow). */
int dec_complete(const dec_env *env, xc_exec *x, xc_task *t, weft_task_status status,
                 json_object *output, const char *reason, dec_out *out, weft_error *err);

/* Time out tasks and the workflow whose deadlines passed; the earliest
 * deadline still ahead goes to *next (0 = none). */
void dec_timeouts(const dec_env *env, xc_exec *x, int64_t now, int64_t *next, dec_out *out);

/* End the workflow: terminal status, reason; active tasks are canceled. */
void dec_end(const dec_env *env, xc_exec *x, weft_wf_status status, const char *reason,
             dec_out *out);

/*
 * Operator actions. Each changes only the execution (no plugin runs, so a
 * client can do it); a decider takes it from there. WEFT_ESTATE, naming the
 * status, when the workflow is not in a state that allows it.
 * pause: RUNNING -> PAUSED (running tasks finish, nothing new starts).
 * resume: PAUSED -> RUNNING.
 * retry: a FAILED/TIMED_OUT/TERMINATED workflow runs again from its failed
 *   and canceled tasks (new instances, retryCount + 1).
 * restart: a terminal workflow starts over with the same id and input.
 */
int dec_pause(const dec_env *env, xc_exec *x, weft_error *err);
int dec_resume(const dec_env *env, xc_exec *x, weft_error *err);
int dec_retry(const dec_env *env, xc_exec *x, dec_out *out, weft_error *err);
int dec_restart(const dec_env *env, xc_exec *x, weft_error *err);

/* Resolve a template against an execution (caller owns the result). */
json_object *dec_resolve(const xc_exec *x, const ex_tmpl *t);

/* The same into *out, or WEFT_ENOMEM when a value could not be built (it
 * must not be taken for null). */
int dec_resolve_checked(const xc_exec *x, const ex_tmpl *t, json_object **out);

void dec_out_free(dec_out *o);

#endif
