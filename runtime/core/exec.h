/*
 * Executions (workflow instances) and their task instances, and their
 * Conductor-shaped JSON (Workflow / Task). Prefix xc_.
 *
 * An execution embeds its definition at start: later changes to a
 * registered definition never reach a running execution.
 */
#ifndef WEFT_EXEC_H
#define WEFT_EXEC_H

#include <stdint.h>
#include <json-c/json.h>
#include "weft/plugin.h"
#include "core/def.h"
#include "base/util.h"

typedef struct xc_task {
    char id[WU_TASK_ID_MAX]; /* wu_task_id: its workflow's id and 16 hex digits */
    char *ref;               /* instance ref: def ref, plus "__<n>" per enclosing loop iteration */
    def_task *def;
    json_object *dyn_json; /* the WorkflowTask of a dynamic task (owned), else NULL */
    weft_task_status status;
    json_object *input;  /* resolved input (owned) */
    json_object *output; /* owned, may be NULL */
    char *reason;
    int seq;
    int retry_count;
    int poll_count;
    int iteration; /* loop task: current iteration; body task: its iteration */
    int scope;     /* loop-iteration scope it runs in (0 = top level) */
    int64_t scheduled_ms, started_ms, ended_ms, updated_ms;
    int64_t callback_ms;          /* when IN_PROGRESS with a callback: when it is due */
    char *child_id;               /* SUB_WORKFLOW: the child execution */
    char *worker_id;              /* who polled it (external workers) */
    char *domain;                 /* the task domain it was queued in (taskToDomain), or NULL */
    char *queue;                  /* with a domain: "<domain>:<its type's queue>", else NULL */
    char *input_ref, *output_ref; /* where a large input/output is kept outside (payload.h) */
    unsigned followed : 1;        /* the decider has acted on its terminal status */
    unsigned spawned : 1;         /* it scheduled nested tasks; they continue the flow */
    unsigned retried : 1;         /* a retry instance replaced it */
    unsigned queued : 1;          /* waits in a work queue */
    unsigned fresh : 1;           /* created, not yet mapped or queued */
    unsigned sized : 1;           /* its input/output were checked against the payload limits */
    unsigned no_response : 1;     /* timed out waiting for its worker (responseTimeout) */
} xc_task;

typedef struct xc_scope {
    int parent;
    int iteration;
    char *suffix; /* "__2", "__2__1" ... */
} xc_scope;

typedef struct xc_exec {
    char id[37];
    def_workflow *def;
    weft_wf_status status;
    json_object *input, *output, *variables; /* owned */
    char *reason;
    char *correlation_id;
    json_object *task_to_domain; /* Conductor's taskToDomain: task name or "*" -> domains (owned) */
    char *parent_id, *parent_task_id;
    int depth;    /* sub-workflow nesting: 0 for a root, parent's + 1 */
    int priority; /* 0..99: its due tasks are claimed before those of lower ones */
    char *failed_task_id;
    char *input_ref, *output_ref; /* large input/output kept outside (payload.h) */
    int64_t created_ms, updated_ms, ended_ms;
    uint64_t fence;
    int refs;       /* references besides the first (xc_ref); xc_free drops one */
    char *cmd;      /* an operator command waiting in the store (ops.c applies it first) */
    wu_vec tasks;   /* xc_task *, in seq order */
    wu_map *by_ref; /* instance ref -> latest xc_task */
    wu_map *by_def; /* def ref -> latest xc_task */
    wu_vec scopes;  /* xc_scope *; index = scope id; 0 = top level */
    def_dyn dyn;    /* dynamic task nodes */
    int active;     /* tasks not yet terminal */
    wu_vec ended;   /* tasks that reached a terminal status, for the decider */
    size_t ended_head;
    int timed;        /* tasks with a timeout or response timeout were scheduled */
    int fresh;        /* tasks created but not yet dispatched */
    int64_t timer_ms; /* the armed timeout check (engine), 0 = none */
    unsigned root_done : 1;
    unsigned revived : 1; /* made RUNNING again (retry, restart) since it was loaded */
    int stored_status;    /* the status the store holds (-1: not known): a save that
                           * changes it moves the run in the store's index */
    json_object *j_id;    /* cached JSON strings for expressions */
} xc_exec;

/* A new RUNNING execution of def (a reference is taken). input is borrowed
 * (copied by reference); id NULL = a fresh UUID. */
int xc_new(def_workflow *def, json_object *input, const char *id, xc_exec **out, weft_error *err);
/* Drop a reference: the last one frees x. NULL is ignored. */
void xc_free(xc_exec *x);
/* Take another reference to x (a store that keeps the object hands out
 * references): returns x. Not thread-safe, as the object itself is not. */
xc_exec *xc_ref(xc_exec *x);

/* Forget every task (restart): no tasks, the definition's initial
 * variables, the same id and input. Status, output and reason are the
 * caller's to reset (dec_restart does). */
int xc_reset(xc_exec *x);

/* A new task instance of def in scope, appended (seq = its index + 1). */
xc_task *xc_add_task(xc_exec *x, def_task *def, int scope, int iteration);

/*
 * Undo xc_add_task of x's last task, which nothing refers to yet: the
 * instance before it is again the latest of its ref and of its node. For
 * a new instance of a ref x has had before (a retry), with room made in
 * by_ref and by_def beforehand (wu_map_reserve): it allocates nothing.
 */
void xc_drop_last(xc_exec *x);

#define XC_DOMAIN_MAX 64 /* a task domain's name */
#define XC_QUEUE_MAX 128 /* a work queue's name, with the NUL (the stores' limit) */

/* The priority of a child that task t of x starts: its subWorkflowParam's
 * (Conductor's SubWorkflowParams.priority), else x's. */
int xc_child_priority(const xc_exec *x, const xc_task *t);

/* The work queue t waits in: its domain's, else its type's. */
static inline const char *xc_task_queue(const xc_task *t)
{
    return t->queue ? t->queue : t->def->queue;
}
/* t goes to domain's queue (NULL: none). 0 or WEFT_ENOMEM. */
int xc_task_set_domain(xc_task *t, const char *domain);

xc_task *xc_find_ref(const xc_exec *x, const char *ref);
xc_task *xc_latest(const xc_exec *x, const def_task *def);
xc_task *xc_find_id(const xc_exec *x, const char *task_id);

/* New loop scope under parent for iteration n; returns its id or -1. */
int xc_new_scope(xc_exec *x, int parent, int iteration);

static inline int xc_task_terminal(weft_task_status s)
{
    return s >= WEFT_TASK_COMPLETED;
}
static inline int xc_task_ok(weft_task_status s)
{
    return s == WEFT_TASK_COMPLETED || s == WEFT_TASK_COMPLETED_WITH_ERRORS ||
           s == WEFT_TASK_SKIPPED;
}
static inline int xc_wf_terminal(weft_wf_status s)
{
    return s != WEFT_WF_RUNNING && s != WEFT_WF_PAUSED;
}
/* How long an ended workflow ran, start to end, in seconds; -1 when a time
 * is not known. */
static inline double xc_run_seconds(const xc_exec *x)
{
    if (x->created_ms <= 0 || x->ended_ms < x->created_ms) return -1;
    return (double)(x->ended_ms - x->created_ms) / 1000.0;
}

/* Replace a task's reason (printf-style). 0, or WEFT_ENOMEM with *slot as
 * it was. */
int xc_set_reason(char **slot, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Conductor's Workflow JSON (with tasks[]) and Task JSON. Caller owns. */
json_object *xc_to_json(const xc_exec *x);
/* Conductor's WorkflowSummary of x (what a search answers): its times as
 * UTC texts ("2026-11-26T08:00:00.123Z"), input and output as JSON texts,
 * failedReferenceTaskNames comma-separated. */
json_object *xc_summary(const xc_exec *x);
json_object *xc_task_to_json(const xc_exec *x, const xc_task *t);

int xc_wf_status_parse(const char *s, weft_wf_status *out);

/*
 * What a parent's SUB_WORKFLOW task gets from its ended child: returns the
 * output (the child's, plus subWorkflowId; caller owns; NULL when out of
 * memory), sets *status to COMPLETED or FAILED, and writes "sub-workflow
 * <id> <STATUS>[: reason]" into reason (used when it failed).
 */
json_object *xc_child_result(const xc_exec *child, weft_task_status *status, char *reason,
                             size_t size);

/* The input of x's failure workflow: x's input plus workflowId, reason,
 * failureStatus and failureTaskId (caller owns; NULL when out of memory). */
json_object *xc_failure_input(const xc_exec *x);

#endif
