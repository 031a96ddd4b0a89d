/*
 * weft plugin SDK: everything a task-type or lock plugin may use.
 *
 * A plugin is one shared object exporting one entry point:
 *
 *     int weft_plugin_init(const weft_host *host);
 *
 * usually written by WEFT_PLUGIN(name, .types = ..., .locks = ...), which
 * declares the ABI and registers what the descriptor lists.
 *
 * The host hands over a table of functions (weft_host) rather than exporting
 * symbols, so a plugin links against nothing of weft's. Inside init the plugin
 * checks the ABI and registers its task types or lock providers; registration
 * is only allowed during init. If init returns non-zero, everything it
 * registered is undone and the object is unloaded.
 *
 * Ownership: json-c objects handed to a plugin are borrowed, valid until the
 * callback returns; keep one with json_object_get(). Objects a plugin hands
 * to the host are described on each field or function.
 */
#ifndef WEFT_PLUGIN_H
#define WEFT_PLUGIN_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <json-c/json.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * ABI changelog. Incompatible changes bump the major; the host refuses a
 * major it cannot read. Compatible additions only append fields at the end
 * of a struct (each struct that grows starts with its size or, for the host
 * table, abi_major + size) and are listed here under the major.
 *
 * 1  weft_host { abi_major, size, version, declare, register_task_type,
 *    register_lock_provider, log, error, task, type_data, lookup,
 *    workflow_input, workflow_variables, set_variables, lua_eval,
 *    start_child, parse_duration, now_ms, previous }; weft_task_type and
 *    weft_lock_provider without a size.
 * 2  weft_task_type and weft_lock_provider start with `uint32_t size`
 *    (sizeof the struct the plugin was built with), so either can grow at
 *    its end: the host reads a shorter struct from an older plugin (fields
 *    past its size count as NULL / 0) and refuses one shorter than the ABI 2
 *    layout, naming the file and type. The new first field moved every other
 *    one, hence the new major. The host still loads ABI 1 plugins (their
 *    structs are read in the old layout).
 *    weft_host.config_fill: plugin config as a declared weft_config_field
 *    table the host validates and fills. WEFT_PLUGIN() descriptor.
 *    A type or lock name a built-in plugin (one in weft's own plugin
 *    directory) has is refused for other plugins unless the operator sets
 *    WEFT_PLUGIN_OVERRIDE=1.
 */
#define WEFT_ABI_MAJOR 2

#if defined(__GNUC__)
#define WEFT_EXPORT __attribute__((visibility("default")))
#else
#define WEFT_EXPORT
#endif

/*
 * Error convention: functions return 0 on success or a negative WEFT_E* code,
 * and put a human message naming the file, field, ref or id involved into a
 * caller-owned weft_error.
 */
enum {
    WEFT_OK = 0,
    WEFT_EINVAL = -1,    /* bad argument or bad input (definition, JSON) */
    WEFT_ENOMEM = -2,    /* allocation failed */
    WEFT_ENOTFOUND = -3, /* no such file, ref, id, type or key */
    WEFT_EEXIST = -4,    /* already registered / duplicate */
    WEFT_EABI = -5,      /* plugin built for another ABI */
    WEFT_ELIMIT = -6,    /* a limit was hit (memory, instructions, size) */
    WEFT_ESCRIPT = -7,   /* a Lua script raised an error */
    WEFT_EIO = -8,       /* I/O or network failure */
    WEFT_ESTATE = -9,    /* call not allowed now (e.g. registration after init) */
    WEFT_ETIMEOUT = -10, /* a deadline passed */
};

#define WEFT_ERROR_MAX 512
typedef struct weft_error {
    int code;
    char msg[WEFT_ERROR_MAX];
} weft_error;

/* Task statuses, as in Conductor. */
typedef enum weft_task_status {
    WEFT_TASK_SCHEDULED = 0,
    WEFT_TASK_IN_PROGRESS,
    WEFT_TASK_COMPLETED,
    WEFT_TASK_COMPLETED_WITH_ERRORS,
    WEFT_TASK_FAILED,
    WEFT_TASK_FAILED_WITH_TERMINAL_ERROR,
    WEFT_TASK_TIMED_OUT,
    WEFT_TASK_CANCELED,
    WEFT_TASK_SKIPPED,
} weft_task_status;

/* Workflow statuses. */
typedef enum weft_wf_status {
    WEFT_WF_RUNNING = 0,
    WEFT_WF_COMPLETED,
    WEFT_WF_FAILED,
    WEFT_WF_TIMED_OUT,
    WEFT_WF_TERMINATED,
    WEFT_WF_PAUSED,
} weft_wf_status;

/* The call context of one task callback. Opaque; valid until the callback returns. */
typedef struct weft_ctx weft_ctx;

/* A read-only view of a task instance (borrowed; valid until the callback returns). */
typedef struct weft_task_view {
    const char *task_id;
    const char *workflow_id;
    const char *ref;     /* instance reference name (with __N inside loops) */
    const char *def_ref; /* taskReferenceName in the definition */
    const char *type;
    weft_task_status status;
    json_object *def;     /* the WorkflowTask JSON of this task */
    json_object *input;   /* resolved inputParameters */
    json_object *output;  /* output so far (may be NULL) */
    int retry_count;      /* 0 on the first attempt */
    int poll_count;       /* how many times execute was called for this instance */
    int iteration;        /* loop iteration (1-based) inside DO_WHILE, else 0 */
    int64_t scheduled_ms; /* wall-clock times in ms since the epoch; 0 = not yet */
    int64_t started_ms;
} weft_task_view;

/*
 * What a callback reports. The host initialises it (status SCHEDULED, all
 * pointers NULL) before each call and owns it; the plugin fills it in.
 */
typedef struct weft_result {
    /* COMPLETED, FAILED, FAILED_WITH_TERMINAL_ERROR or IN_PROGRESS. */
    weft_task_status status;
    /* The task's output. The host takes ownership of the object stored here. */
    json_object *output;
    /* Why the task failed; shown as reasonForIncompletion. */
    char reason[WEFT_ERROR_MAX];
    /*
     * IN_PROGRESS only: run execute (or, for inline types, map) again after
     * this many ms. A negative value means: wait for an external completion
     * (a worker, a signal, a child workflow).
     */
    int64_t callback_after_ms;
    /*
     * map only: start a new loop iteration numbered `iteration` (> 0) for the
     * tasks appended to out_tasks. 0 = schedule them in the current scope.
     */
    int iteration;
    /*
     * Ending the whole workflow (TERMINATE): set end_workflow to
     * WEFT_WF_COMPLETED or WEFT_WF_FAILED; end_output (host takes ownership)
     * becomes the workflow output, `reason` its reason.
     */
    weft_wf_status end_workflow;
    json_object *end_output;
} weft_result;

typedef struct weft_host weft_host;

/* Flags of a task type. */
enum {
    /*
     * Done by external workers (any language, over the REST API), not by a
     * plugin: no execute and no map. Its tasks are queued by the task's
     * name, as Conductor queues SIMPLE tasks.
     */
    WEFT_TASK_EXTERNAL = 1u << 0,
};

/*
 * A task type. Only `name` and one of `execute` / `map` are required
 * (neither for WEFT_TASK_EXTERNAL).
 * A type with `map` is control flow: it runs inside the decider, and its
 * map must be quick and do no I/O. A type with only `execute` is queued and
 * runs on a worker.
 * The struct and its strings must stay valid until fini (static storage is usual).
 */
typedef struct weft_task_type {
    uint32_t size;    /* sizeof(weft_task_type) as built: set it (ABI 2) */
    const char *name; /* the `type` string in definitions, e.g. "LAMBDA" */
    unsigned flags;   /* WEFT_TASK_* */
    void *data;       /* plugin data, given back through weft_host.type_data() */

    /*
     * At definition load: reject bad fields early. def_task is the WorkflowTask
     * JSON (borrowed). Return 0 or a WEFT_E* code with a message in err (the
     * host prefixes the workflow name and ref).
     */
    int (*validate)(const weft_host *host, json_object *def_task, weft_error *err);

    /*
     * Control-flow types: called when the task is scheduled, and
     * again whenever the host re-evaluates it while it is IN_PROGRESS: when a
     * task list nested in it ends (loop bodies), when it is reached again from
     * a finished branch (joins), or after callback_after_ms.
     * Append the tasks to schedule to out_tasks (borrowed JSON array): nodes
     * of def_task taken with json_object_get(), or new WorkflowTask objects
     * (dynamic forks; the host validates them). Fill `result` with this
     * task's own status and output.
     * Returns 0, or a WEFT_E* code with result->reason set: the task fails.
     */
    int (*map)(weft_ctx *ctx, json_object *def_task, json_object *out_tasks, weft_result *result);

    /*
     * Queued types: run the task. Called on a worker thread; may block, but
     * should honour its own timeouts. Set result->status (COMPLETED, FAILED,
     * FAILED_WITH_TERMINAL_ERROR or IN_PROGRESS with callback_after_ms) and
     * result->output. Returns 0, or a WEFT_E* code with result->reason set:
     * the task fails (and is retried as its definition says).
     */
    int (*execute)(weft_ctx *ctx, weft_result *result);

    /* The task was canceled (workflow terminated, sibling failed). Optional. */
    void (*cancel)(weft_ctx *ctx);

    /* Called once after registration with the plugin's config (borrowed, may be NULL). */
    int (*init)(const weft_host *host, json_object *config, weft_error *err);
    /* Called once before the plugin is unloaded. */
    void (*fini)(void);
} weft_task_type;

/*
 * A lock provider (e.g. none, local, redis): guards one workflow's decider.
 * acquire returns 0 with a fencing token in *token, WEFT_ETIMEOUT when the
 * lock is held elsewhere past wait_ms, or another WEFT_E* code. open gets
 * the provider's config (borrowed until open returns, may be NULL).
 */
typedef struct weft_lock_provider {
    uint32_t size; /* sizeof(weft_lock_provider) as built: set it (ABI 2) */
    const char *name;
    void *(*open)(const weft_host *host, json_object *config, weft_error *err);
    int (*acquire)(void *lock, const char *key, int64_t ttl_ms, int64_t wait_ms, char *token,
                   size_t token_size, weft_error *err);
    int (*release)(void *lock, const char *key, const char *token, weft_error *err);
    void (*close)(void *lock);
} weft_lock_provider;

/* Types of plugin config values (weft_config_field.type). */
typedef enum weft_config_type {
    WEFT_CONFIG_STRING = 1, /* const char *, borrowed from the config object */
    WEFT_CONFIG_INT,        /* int64_t, a JSON integer */
    WEFT_CONFIG_BOOL,       /* int, 0 or 1, a JSON boolean */
    WEFT_CONFIG_MS,         /* int64_t ms: an integer (ms) or a duration string ("5s") */
    WEFT_CONFIG_JSON,       /* json_object *, any JSON value, borrowed; checked by the plugin */
} weft_config_type;

/*
 * One key of a plugin's config: a table of these, ended by a row with key
 * NULL, is what weft_host.config_fill validates a config object against and
 * fills a struct from (as nginx's ngx_command_t).
 */
typedef struct weft_config_field {
    const char *key;
    weft_config_type type;
    size_t offset;    /* offsetof(<your struct>, <member>) */
    int required;     /* the key must be given */
    const char *dflt; /* the default as text ("2000", "5s", "true", "weft:"); NULL: none */
    int64_t min, max; /* INT and MS: allowed range, when max > min */
} weft_config_field;

/*
 * A row for member `member` of struct `st`, whose key is the member's name;
 * the other fields as designated initializers:
 *     WEFT_CONFIG_KEY(WEFT_CONFIG_MS, options, timeout_ms, .dflt = "2s", .min = 1, .max = 60000)
 * End a table with WEFT_CONFIG_END.
 */
#define WEFT_CONFIG_KEY(type_, st, member, ...)                                                    \
    {                                                                                              \
        .key = #member, .type = (type_), .offset = offsetof(st, member), __VA_ARGS__               \
    }
#define WEFT_CONFIG_END                                                                            \
    {                                                                                              \
        .key = NULL                                                                                \
    }

/* Log levels for weft_host.log. */
enum { WEFT_LOG_ERROR = 0, WEFT_LOG_WARN, WEFT_LOG_INFO, WEFT_LOG_DEBUG };

/*
 * The host API. Append-only: fields are never reordered or removed, so a
 * plugin built against an older minor version keeps working. Test for a
 * newer function with WEFT_HOST_HAS(host, field).
 */
struct weft_host {
    /* These four fields keep their place in every ABI version. */
    uint32_t abi_major;  /* WEFT_ABI_MAJOR of the host */
    uint32_t size;       /* sizeof(weft_host) of the host */
    const char *version; /* weft's version string */
    /*
     * First call of every plugin init (WEFT_PLUGIN_BEGIN does it): tells the
     * host which ABI and host-table size the plugin was built against.
     * Returns WEFT_EABI when the majors differ (the host reports both);
     * registration without it fails with WEFT_ESTATE.
     */
    int (*declare)(uint32_t plugin_abi_major, uint32_t plugin_host_size);

    /* Registration: only inside weft_plugin_init. type is borrowed and must
     * outlive the plugin. Returns WEFT_EEXIST if the name is taken (the
     * message names the other plugin), WEFT_ESTATE outside init. */
    int (*register_task_type)(const weft_task_type *type, weft_error *err);
    int (*register_lock_provider)(const weft_lock_provider *lock, weft_error *err);

    /* printf-style log line (cut at 1023 bytes), tagged with the plugin's
     * name, in the host's log format (weftd: its own lines, filtered by its
     * log_level; elsewhere stderr, info and above). Inside a task callback
     * the values of the task's secrets are masked as "***". */
    void (*log)(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

    /* Set err->code and a printf-style message; returns code. */
    int (*error)(weft_error *err, int code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

    /* --- inside task callbacks --- */

    /* The task being mapped or executed. */
    const weft_task_view *(*task)(weft_ctx *ctx);
    /* The type's `data` pointer. */
    void *(*type_data)(weft_ctx *ctx);
    /* The latest instance of another task of the same workflow, by its
     * definition ref (newest iteration and retry) or instance ref; NULL if it
     * has not been scheduled. Borrowed, valid until the callback returns. */
    const weft_task_view *(*lookup)(weft_ctx *ctx, const char *ref);
    /* The workflow's input and variables (borrowed). */
    json_object *(*workflow_input)(weft_ctx *ctx);
    json_object *(*workflow_variables)(weft_ctx *ctx);
    /* Merge the members of vars (borrowed) into workflow.variables. */
    int (*set_variables)(weft_ctx *ctx, json_object *vars, weft_error *err);

    /*
     * Run a Lua function body in a fresh sandbox (no io/os/require/load/debug,
     * memory cap, instruction budget). `input` (borrowed) is visible to the
     * script as the global `input`. On success *out is the returned value as
     * JSON (caller owns it; NULL for nil). WEFT_ELIMIT when a limit was hit,
     * WEFT_ESCRIPT for a Lua error; err says which.
     */
    int (*lua_eval)(weft_ctx *ctx, const char *chunkname, const char *body, json_object *input,
                    json_object **out, weft_error *err);

    /*
     * Start a child workflow for this task (SUB_WORKFLOW). Either def (a
     * WorkflowDef JSON, borrowed) or name + version (0 = latest registered).
     * input is borrowed; the child is given a copy with the values of this
     * task's secrets masked as "***" (the child's input is stored). On
     * success the child's id is copied to id_out. When the child ends the
     * host completes this task with the child's output (plus subWorkflowId)
     * or fails it with the child's reason.
     */
    int (*start_child)(weft_ctx *ctx, json_object *def, const char *name, int version,
                       json_object *input, char *id_out, size_t id_size, weft_error *err);

    /* Parse a duration ("250ms", "5s", "2m", "1h", a number of seconds, as a
     * JSON string or number) into ms. WEFT_EINVAL with a message otherwise. */
    int (*parse_duration)(json_object *value, int64_t *ms, weft_error *err);

    /* Wall-clock milliseconds since the epoch (the engine's clock). */
    int64_t (*now_ms)(void);

    /* The latest instance of the task standing before this one in its task
     * list (e.g. the fork before a join), or NULL. Borrowed, as lookup. */
    const weft_task_view *(*previous)(weft_ctx *ctx);

    /* --- ABI 2 --- */

    /*
     * Validate config (borrowed; NULL or JSON null = empty) against table
     * and fill out: every key of table gets its value, else its default
     * (members without either are left as they are). Strings and JSON
     * values point into config: valid while config is (copy what must live
     * longer). Returns 0, or WEFT_EINVAL with a message starting with
     * `what` (e.g. "lock redis") naming the key: config not an object, an
     * unknown key (the known ones listed), a wrong type, a value out of
     * range, a required key missing. out is filled only on success.
     */
    int (*config_fill)(const weft_config_field *table, json_object *config, void *out,
                       const char *what, weft_error *err);
};

/* Start weft_plugin_init with this: returns from init on an ABI mismatch. */
#define WEFT_PLUGIN_BEGIN(host)                                                                    \
    do {                                                                                           \
        int weft_rc_ = (host)->declare(WEFT_ABI_MAJOR, (uint32_t)sizeof(weft_host));               \
        if (weft_rc_ != 0) return weft_rc_;                                                        \
    } while (0)

#define WEFT_HOST_HAS(host, field)                                                                 \
    (offsetof(weft_host, field) + sizeof((host)->field) <= (host)->size)

/*
 * Declare the entry point after defining weft_plugin_init, as
 * WEFT_PLUGIN_ENTRY(myname): also exports myname_LTX_weft_plugin_init so the
 * plugin can be preloaded into a static build.
 */
#define WEFT_PLUGIN_ENTRY(name)                                                                    \
    WEFT_EXPORT int name##_LTX_weft_plugin_init(const weft_host *host)                             \
        __attribute__((alias("weft_plugin_init")));

/*
 * What a plugin registers: the descriptor WEFT_PLUGIN builds. types and
 * locks are arrays of structs (static storage) of ntypes / nlocks entries;
 * host, when set, receives the host table before anything is registered.
 */
typedef struct weft_plugin {
    const weft_task_type *types;
    size_t ntypes;
    const weft_lock_provider *locks;
    size_t nlocks;
    const weft_host **host;
} weft_plugin;

/* Initializers with the size set, e.g.
 *     static const weft_task_type t = WEFT_TASK_TYPE(.name = "X", .execute = x_execute); */
#define WEFT_TASK_TYPE(...)                                                                        \
    {                                                                                              \
        .size = sizeof(weft_task_type), __VA_ARGS__                                                \
    }
#define WEFT_LOCK_PROVIDER(...)                                                                    \
    {                                                                                              \
        .size = sizeof(weft_lock_provider), __VA_ARGS__                                            \
    }

/* The number of entries of an array (for weft_plugin's ntypes and nlocks). */
#define WEFT_COUNT(a) (sizeof(a) / sizeof((a)[0]))

/* Declare the ABI and register everything p lists; returns the first error. */
static inline int weft_plugin_register(const weft_host *host, const weft_plugin *p)
{
    weft_error err;
    size_t i;
    int rc;
    WEFT_PLUGIN_BEGIN(host);
    if (p->host) *p->host = host;
    for (i = 0; i < p->ntypes; i++)
        if ((rc = host->register_task_type(&p->types[i], &err)) != 0) return rc;
    for (i = 0; i < p->nlocks; i++)
        if ((rc = host->register_lock_provider(&p->locks[i], &err)) != 0) return rc;
    return 0;
}

/*
 * The whole entry point of a plugin named `name` (its file's name):
 *     WEFT_PLUGIN(simple, .types = &simple_type, .ntypes = 1)
 * with weft_plugin's fields as designated initializers.
 */
#define WEFT_PLUGIN(name, ...)                                                                     \
    static const weft_plugin name##_weft_plugin_ = {__VA_ARGS__};                                  \
    int weft_plugin_init(const weft_host *host)                                                    \
    {                                                                                              \
        return weft_plugin_register(host, &name##_weft_plugin_);                                   \
    }                                                                                              \
    WEFT_PLUGIN_ENTRY(name)

/* The one symbol a plugin defines. */
WEFT_EXPORT int weft_plugin_init(const weft_host *host);

/* The string member key of o (borrowed), or NULL when it is missing or not a string. */
static inline const char *weft_json_str(json_object *o, const char *key)
{
    json_object *v;
    if (json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string))
        return json_object_get_string(v);
    return NULL;
}

/*
 * End the task on its own terms: r->status = status (FAILED or
 * FAILED_WITH_TERMINAL_ERROR) with a printf-style reason. Returns 0, what
 * execute or map then return. weft_fail(r, fmt, ...): status FAILED.
 */
static inline int weft_fail_as(weft_result *r, weft_task_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline int weft_fail_as(weft_result *r, weft_task_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->reason, sizeof r->reason, fmt, ap);
    va_end(ap);
    r->status = status;
    return 0;
}
#define weft_fail(r, ...) weft_fail_as((r), WEFT_TASK_FAILED, __VA_ARGS__)

/* Name of a status ("COMPLETED"...). */
static inline const char *weft_task_status_name(weft_task_status s)
{
    static const char *const names[] = {
        "SCHEDULED", "IN_PROGRESS",
        "COMPLETED", "COMPLETED_WITH_ERRORS",
        "FAILED",    "FAILED_WITH_TERMINAL_ERROR",
        "TIMED_OUT", "CANCELED",
        "SKIPPED",
    };
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "UNKNOWN";
}

static inline const char *weft_wf_status_name(weft_wf_status s)
{
    static const char *const names[] = {
        "RUNNING", "COMPLETED", "FAILED", "TIMED_OUT", "TERMINATED", "PAUSED",
    };
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "UNKNOWN";
}

#ifdef __cplusplus
}
#endif
#endif
