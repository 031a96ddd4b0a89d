/*
 * Operations on executions kept in Redis: create, load, and update under
 * the workflow lock with a fenced save. The daemon's deciders and the
 * client commands both go through here. Prefix op_.
 *
 * An update loads the execution, lets a function change it (the decider,
 * a task result, terminate ...), and saves it only if nobody saved since it
 * was loaded (the fence); otherwise it loads again and redoes the change.
 * So two deciders racing on one execution never lose an update, whatever
 * lock module is configured, and a result is applied to the newest state.
 */
#ifndef WEFT_OPS_H
#define WEFT_OPS_H

#include <pthread.h>
#include "base/log.h"
#include "core/decider.h"
#include "core/def.h"
#include "core/exec.h"
#include "core/defcache.h"
#include "store/store.h"

typedef struct op_env op_env;

/* Who hears of what a save did (optional). */
typedef struct op_hooks {
    void *ud;
    /* x ended (terminal, saved): for counting (metrics). */
    void (*ended)(void *ud, const xc_exec *x);
    /* Every change of a task (t) or the workflow (t NULL), as it is made. */
    void (*change)(void *ud, const xc_exec *x, const xc_task *t);
    /* The definition named name (version 0: the latest), a new reference:
     * where this process finds definitions by name (the embedded engine's
     * files). NULL: the store's registered ones. */
    int (*find_def)(void *ud, const char *name, int version, def_workflow **out, weft_error *err);
    /* Task t of x was canceled or timed out: its plugin hears of it (the
     * embedded engine, where the task ran in this process). */
    void (*cancel)(void *ud, xc_exec *x, xc_task *t);
    /* x was saved for the first time since its create (or since a restart
     * made it run again): its start, as the metrics count it, in whichever
     * process saves it, wherever it was started. */
    void (*started)(void *ud, const xc_exec *x);
    /* A line to log (WEFT_LOG_*), once its change is saved: a task failed,
     * timed out or is retried, a workflow ended. What it is about goes in
     * fields (ended by a NULL key): workflow (its id), name, task (its ref),
     * type, status, reason; msg says what happened ("task FAILED"). */
    void (*note)(void *ud, int level, const lg_field *fields, const char *msg);
    /* A cascade that failed (effects.h): a parent not told, a failure
     * workflow not started. NULL: a WEFT_LOG_WARN note. */
    void (*warn)(void *ud, const char *msg);
} op_hooks;

/* What dec_env.domain_active asked a store lately (op_domain_active's ud):
 * a second's answers are reused, so that a fork of many tasks with one
 * fallback list asks once per domain. Zero it and set st. */
typedef struct op_domains {
    st_store *st;
    struct {
        char key[200]; /* "<domain>:<queue>" */
        int active;
        int64_t at;
    } e[16];
    unsigned next;
} op_domains;

struct op_env {
    st_store *st;                   /* this thread's store handle */
    const def_env *defs;            /* compiling definitions */
    const dec_env *dec;             /* deciding; its on_change/ud are replaced per update */
    dc_cache *cache;                /* may be NULL */
    const weft_lock_provider *lock; /* NULL = no lock (fencing alone) */
    void *lock_handle;
    int64_t lock_ttl_ms, lock_wait_ms;
    int64_t sweep_ms;     /* an unfinished execution is looked at again within this; 0: only at
                           * its deadlines (one process, where nothing can be lost) */
    int64_t retention_ms; /* how long an ended execution is kept (a child younger than it
                           * that is not there was lost, not expired); 0: not known */
    int client;           /* changes made here are followed by a decider elsewhere: wake it now */
    int cascade;          /* ends are followed here (a daemon's deciders): the parent told, the
                           * failure workflow started; else the parent's decider is woken */
    int unfenced;         /* fencing off: saves overwrite newer state (lock alone protects) */
    int64_t command_wait_ms; /* op_command: how long to wait for a command to land (0 = 10 s) */
    const op_hooks *hooks;
    /* Eager dispatch (op_update_many): a task that a save makes visible now
     * and eager says yes to is leased to the caller for lease_ms instead of
     * queued, so it can run it at once with the execution it holds. */
    int (*eager)(void *ud, const xc_task *t);
    void *eager_ud;
    int64_t lease_ms;
    char lease_tok[40]; /* the next lease token, "<seed>:e<n>" (set on first use) */
    size_t lease_len;
    /* Cascades between executions (effects.h) wait here and are run one
     * after the other by the outermost update. Zero-initialized; private
     * to effects.c. */
    struct op_later *later;
    size_t nlater, hlater, caplater;
    int nest;           /* > 0 while a cascade runs: updates defer theirs */
    op_domains domains; /* what dec_env.domain_active may point to (op_domain_active) */
};

/* Return this from an op_fn when it changed nothing: no save. */
#define OP_NOCHANGE 1

/*
 * Change an execution. fn gets the loaded execution, a decider env whose
 * status changes become status-lane events, and the action list to fill.
 * Returns 0 (or OP_NOCHANGE) from fn after a successful save, fn's error,
 * or a store error. WEFT_ETIMEOUT when the lock could not be had.
 */
typedef int (*op_fn)(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, void *ud,
                     weft_error *err);
int op_update(op_env *env, const char *id, op_fn fn, void *ud, weft_error *err);

/* The same, trying first with an execution the caller loaded (op_load;
 * taken, also on failure): one round trip less when nobody saved since. */
int op_update_from(op_env *env, const char *id, xc_exec *loaded, op_fn fn, void *ud,
                   weft_error *err);

/*
 * Several changes to different executions, with their saves and queue steps
 * in two round trips in all (plus one for the executions not given loaded).
 * Each item is op_update_from's arguments and its outcome. A save that loses
 * its fence race is redone alone with op_update. No lock is taken: with a
 * lock module configured the items run one by one through op_update_from.
 */
typedef struct op_item {
    const char *id;
    xc_exec *x; /* in: a loaded copy or NULL (taken); out: see keep */
    op_fn fn;
    void *ud;
    const st_lease *acks; /* claims this change consumes: dropped with its steps */
    size_t nacks;
    int keep;        /* in: hand back the execution in x after a batched save
                      * or NOCHANGE (not when it was redone alone: x NULL) */
    st_lease *eager; /* out: tasks leased to the caller (malloc'd, NULL when
                      * none); with any, x is handed back too */
    size_t neager;
    int look;  /* in: a look only (a sweep, no results): a save lost to
                * a newer one is redone for OP_LOOK_RACE_MS at most,
                * since whoever saved is deciding the workflow */
    int saved; /* out: 1 when this call saved it (not NOCHANGE) */
    int rc;    /* out: 0, or fn's or the store's error in err */
    weft_error err;
} op_item;
/* *room: how many tasks in all may be leased eagerly, counted down; NULL:
 * none (every task is queued). */
void op_update_many(op_env *env, op_item *items, size_t n, size_t *room);

/* Load several executions in one round trip: out[i] (caller frees) or rcs[i]. */
int op_load_many(op_env *env, const char *const *ids, size_t n, xc_exec **out, int *rcs,
                 weft_error *err);

/* Load an execution (caller frees with xc_free). */
int op_load(op_env *env, const char *id, xc_exec **out, uint64_t *fence, weft_error *err);
/* The runs q finds (st_ops.search), loaded, each made into JSON by shape
 * (given arg): *total of them match, the page in the array *out (owned; a
 * run gone since the search is left out). */
int op_find(op_env *env, const st_query *q, json_object *(*shape)(const xc_exec *x, int arg),
            int arg, long long *total, json_object **out, weft_error *err);
/* op_find's shapes: Conductor's WorkflowSummary (arg unused); its Workflow,
 * with its tasks when tasks is set, else an empty list of them. */
json_object *op_summary(const xc_exec *x, int arg);
json_object *op_workflow(const xc_exec *x, int tasks);
/* Conductor's SearchResult of q into *res: {totalHits, results}, the
 * results summaries, or Workflow objects without tasks with workflows set. */
int op_search(op_env *env, const st_query *q, int workflows, json_object **res, weft_error *err);

/* dec_env.domain_active over a store (ud: an op_domains): a claim polled the
 * domain's queue within the last 10 seconds, as Conductor counts an active
 * worker. */
int op_domain_active(void *ud, const char *queue, const char *domain);

/* Whether d (n bytes) is a task domain's name: 1-64 letters, digits, '_',
 * '-', '.' (NO_DOMAIN is one). */
int op_domain_ok(const char *d, size_t n);

/* Whether m is a valid taskToDomain map (task name or "*" -> "d1,d2,...",
 * each domain of letters, digits, '_', '-', '.', or NO_DOMAIN): 0, or
 * WEFT_EINVAL naming the entry. */
int op_check_domains(json_object *m, weft_error *err);

/*
 * Say why each queued task of x that no worker has taken yet waits, in its
 * entry of doc's "tasks" (xc_to_json's, in the same order) as
 * "reasonForIncompletion": not claimable before a time (startDelay, a retry
 * delay: from the task itself), or held back by its name's concurrency or
 * rate limit (one store call per such task that has limits).
 */
void op_say_waiting(op_env *env, const xc_exec *x, json_object *doc);

/* A compiled definition from the cache or from a JSON text. */
int op_def(op_env *env, const char *json, const char *source, def_workflow **out, weft_error *err);

typedef struct op_start_args {
    def_workflow *def;
    json_object *input;                     /* borrowed; NULL = {} */
    const char *correlation_id;             /* may be NULL */
    const char *idempotency_key;            /* may be NULL: the same key returns the same id */
    const char *parent_id, *parent_task_id; /* sub-workflows */
    int depth;                              /* sub-workflows and failure workflows: the
                                             * depth of the one that started it + 1 */
    const char *id;                         /* NULL = a fresh UUID */
    int priority; /* 0..99 (Conductor's): its due tasks are claimed before lower ones' */
    json_object *task_to_domain; /* borrowed, may be NULL: Conductor's taskToDomain */
    /* 1: its task types are not checked (served.h), for a start nothing may
     * refuse: a failure workflow, whose registration was checked; else a
     * type nothing serves refuses the start (WEFT_EINVAL) */
    int unchecked_types;
} op_start_args;

/* Create a RUNNING execution and put it on the decider queue, due now.
 * id_out gets its id (the existing one for a repeated idempotency key); it
 * may be a->id's own buffer. When the create was sent and no answer came
 * (WEFT_EIO, WEFT_ETIMEOUT), the run may exist: id_out gets the id it has
 * if so, and err says that it may have started; on every other failure
 * id_out is left as it was (a caller that tells the cases apart starts it
 * as ""). */
int op_start(op_env *env, const op_start_args *a, char id_out[64], weft_error *err);

/* Several starts in one round trip (those with an idempotency key go one by
 * one): ids[i] or rcs[i]. Returns 0 when all started, else the first
 * failure's code with its message in err. */
int op_start_many(op_env *env, const op_start_args *a, size_t n, char (*ids)[64], int *rcs,
                  weft_error *err);

/*
 * An operator's terminate, pause or resume, which a busy workflow cannot
 * outrun: the command is recorded in the execution (exec_command), the
 * store refuses every save that has not applied it, and this call then
 * applies it itself or sees a decider's save do so. Returns 0 once it is
 * applied (the workflow TERMINATED, PAUSED or RUNNING again, with the usual
 * cascade and events); WEFT_ENOTFOUND; WEFT_ESTATE when the status does not
 * allow it (already ended, not RUNNING, not PAUSED); WEFT_ETIMEOUT when
 * nothing applied it within env->command_wait_ms (it stays recorded and is
 * applied at the workflow's next save). reason: terminate only, may be NULL.
 */
typedef enum op_cmd { OP_TERMINATE, OP_PAUSE, OP_RESUME } op_cmd;
int op_command(op_env *env, const char *id, op_cmd cmd, const char *reason, weft_error *err);

/* Ready-made changes (ud as noted). */
int op_fn_terminate(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, void *reason,
                    weft_error *err);
int op_fn_pause(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, void *ud, weft_error *err);
int op_fn_resume(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, void *ud,
                 weft_error *err);
int op_fn_retry(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, void *ud, weft_error *err);
int op_fn_restart(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, void *ud,
                  weft_error *err);

/*
 * Fail the tasks whose lease expired too often (reap's "<wfid>|<taskid>"
 * members; the array and its strings are freed); their retry policy decides
 * what next. warn (optional) hears of updates that failed.
 */
void op_fail_reaped(op_env *env, char **members, size_t n,
                    void (*warn)(void *ud, const char *workflow_id, const char *msg), void *ud);

/* Complete a waiting task by ref (signal) or id: ud is an op_complete. */
typedef struct op_complete {
    const char *ref; /* or */
    const char *task_id;
    weft_task_status status;
    json_object *output; /* borrowed */
    const char *reason;
    const char *child_id; /* only apply if the task waits on this child */
} op_complete;
int op_fn_complete(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, void *ud,
                   weft_error *err);

/*
 * dec_complete for a result from outside the engine (a worker, a signal):
 * it is stored, so the secrets the task's input names are masked in output
 * (borrowed, not changed) and reason first (host_redact_reported: one
 * secret lookup per secret named; none for a task whose input names none).
 * reason is masked whole, then cut at reason_max bytes (0: the longest a
 * reason can be).
 */
int op_complete_reported(op_env *env, const dec_env *dec, xc_exec *x, xc_task *t,
                         weft_task_status status, json_object *output, const char *reason,
                         size_t reason_max, dec_out *o, weft_error *err);

/* host_secret_fn over the store: ud is the st_store. */
int op_secret(void *ud, const char *name, char **value, weft_error *err);

#endif
