/*
 * Workflow definitions: a Conductor WorkflowDef JSON compiled once into a
 * tree of def_task nodes (input templates compiled, retry/timeout policy
 * read, task types resolved, nested task lists found). Prefix def_.
 *
 * The core knows no task type by name. Nested task lists are found by
 * shape: any field of a task (other than inputParameters, taskDefinition
 * and subWorkflowParam) holding an array of task objects, an array of such
 * arrays, or an object whose values are such arrays.
 */
#ifndef WEFT_DEF_H
#define WEFT_DEF_H

#include <stdint.h>
#include <json-c/json.h>
#include "weft/plugin.h"
#include "core/expr.h"
#include "base/util.h"

typedef struct def_task def_task;
typedef struct def_list def_list;
typedef struct def_workflow def_workflow;

struct def_list {
    def_task **tasks;
    size_t n;
    def_task *owner; /* the task holding this list; NULL for the workflow's tasks */
};

enum def_retry_logic { DEF_RETRY_FIXED, DEF_RETRY_LINEAR, DEF_RETRY_EXPONENTIAL };
/* What a task timeout does (Conductor's timeoutPolicy; TIME_OUT_WF is the default). */
enum def_timeout_policy { DEF_TIMEOUT_WF, DEF_TIMEOUT_RETRY, DEF_TIMEOUT_ALERT_ONLY };

/* A task definition's queue limits (Conductor's rateLimitPerFrequency and
 * rateLimitFrequencyInSeconds, concurrentExecLimit), counted under the
 * task's name in its queue. */
typedef struct def_qlimit {
    int rate_count;      /* starts per window; 0 = no rate limit */
    int64_t rate_per_ms; /* the window */
    int concurrency;     /* leased at once; 0 = no limit */
} def_qlimit;

/* Whether d has queue limits. */
#define def_limited(d) ((d)->limit.rate_count > 0 || (d)->limit.concurrency > 0)

struct def_task {
    json_object *json; /* the WorkflowTask (its userdata points back here) */
    const char *ref;
    const char *name;
    const char *type_name;
    const weft_task_type *type;
    const char *queue; /* the work queue: the type's name, or the task's name (external types) */
    ex_tmpl *input;    /* compiled inputParameters */
    int uses_secrets;  /* they refer to ${secrets.NAME} */
    def_list *list;    /* the list it stands in */
    size_t index;      /* its position there */
    def_list **children;
    size_t nchildren;
    int optional;
    int retry_count;
    enum def_retry_logic retry_logic;
    int64_t retry_delay_ms, max_retry_delay_ms, jitter_ms;
    double backoff_scale;
    int64_t timeout_ms, response_timeout_ms; /* 0 = none */
    int64_t start_delay_ms; /* startDelay: a first attempt waits this long to be claimed */
    def_qlimit limit;       /* zeros: none */
    enum def_timeout_policy timeout_policy;
    int line; /* source line (Lua definitions), 0 if unknown */
};

struct def_workflow {
    json_object *json; /* the WorkflowDef, owned */
    const char *name;
    int version;
    char *source; /* file name for messages, may be NULL */
    def_list root;
    wu_map *by_ref;  /* taskReferenceName -> def_task */
    ex_tmpl *output; /* outputParameters; NULL = the last task's output */
    int64_t timeout_ms;
    int timeout_fails; /* timeoutPolicy TIME_OUT_WF */
    int restartable;
    json_object *failure_workflow; /* name string or NULL */
    wu_vec all;                    /* every def_task, for freeing */
    size_t nremote;                /* of them, of def_remote_type (allow_unknown) */
    int refs;
};

/*
 * Recursion and size limits, the same for weft run and weftd (config keys
 * max_tasks ... in config.c). Definition-time ones fail the definition;
 * run-time ones fail the task with a reason naming the ref and the limit.
 */
typedef struct def_limits {
    int max_tasks;           /* tasks in one definition, nested ones counted */
    int max_retry_count;     /* a task's retryCount */
    int max_fork_width;      /* a task's nested lists (fork branches, cases) and the
                              * tasks one map schedules at once (dynamic forks) */
    int max_depth;           /* sub-workflow nesting below the root */
    int max_loop_iterations; /* DO_WHILE iterations when maxIterations is absent */
    int64_t max_variables;   /* workflow.variables as JSON text, in bytes */
} def_limits;

/* The defaults (config.c's table says the same). */
extern const def_limits def_limits_default;

/* Resolves a type name to a task type; NULL if none provides it. */
typedef const weft_task_type *(*def_type_fn)(void *ud, const char *name);

typedef struct def_env {
    def_type_fn find_type;
    void *ud;
    const char *searched;  /* plugin path, for "unknown task type" messages */
    const weft_host *host; /* passed to validate callbacks */
    /* Types no plugin here provides are queued for whoever serves them
     * (daemons, clients) instead of being an error (weft run). */
    int allow_unknown;
    const def_limits *limits; /* NULL = def_limits_default */
    const char *known;        /* the types plugins here provide, ", "-separated (NULL: not said) */
} def_env;

/* env's limits (the defaults when it has none). */
const def_limits *def_limits_of(const def_env *env);

/* Whether `what` (a sub-workflow, a failure workflow) of an execution at
 * depth may start: 0, or WEFT_ELIMIT naming it and max_depth. */
int def_check_depth(const def_limits *lim, int depth, const char *what, weft_error *err);

/* The type given to tasks of unknown types under allow_unknown: queued. */
extern const weft_task_type def_remote_type;

/*
 * Compile a definition. json is borrowed (a reference is taken).
 * source names the file in messages (may be NULL); lines maps refs to
 * source lines (may be NULL). Errors (WEFT_EINVAL) name the source, line,
 * ref and field: "order.lua:7: task 'price': unknown task type LAMBDA (...)".
 */
int def_compile(const def_env *env, json_object *json, const char *source, json_object *lines,
                def_workflow **out, weft_error *err);

/*
 * Compile a task created at run time (a dynamic fork's tasks). The node
 * stands alone in a list owned by `owner`; refs must not clash with the
 * definition's. The new nodes belong to `dyn` (freed with def_dynamic_free);
 * the shared definition is not modified.
 */
typedef struct def_dyn {
    wu_vec lists, tasks;
    wu_vec roots; /* a reference on each dynamic node's JSON */
} def_dyn;
int def_compile_dynamic(const def_env *env, def_workflow *wf, def_task *owner, json_object *json,
                        def_dyn *dyn, def_task **out, weft_error *err);
void def_dynamic_free(def_dyn *dyn);

def_workflow *def_ref(def_workflow *wf);
void def_unref(def_workflow *wf);

/* The def_task compiled from this JSON node, or NULL. */
def_task *def_of_json(json_object *node);

/* The task after t in its list, or NULL at the end. */
static inline def_task *def_next(const def_task *t)
{
    return t->index + 1 < t->list->n ? t->list->tasks[t->index + 1] : NULL;
}

/* Retry delay before attempt `retry` (1 = the first retry), with jitter. */
int64_t def_retry_delay(const def_task *t, int retry);

#endif
