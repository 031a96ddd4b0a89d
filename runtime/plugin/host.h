/*
 * The weft_host table handed to plugins, and the call context behind
 * weft_ctx. Prefix host_.
 */
#ifndef WEFT_HOST_H
#define WEFT_HOST_H

#include "weft/plugin.h"
#include "core/exec.h"
#include "lua/sandbox.h"

/* The value of secret `name` (malloc'd), or WEFT_ENOTFOUND naming it. */
typedef int (*host_secret_fn)(void *ud, const char *name, char **value, weft_error *err);

/* What the engine provides to task callbacks. */
typedef struct host_services {
    void *ud;
    /* The Lua sandbox of the calling thread. */
    sbx *(*sandbox)(void *ud);
    /* Start a child workflow for task t of x (see weft_host.start_child). */
    int (*start_child)(void *ud, xc_exec *x, xc_task *t, json_object *def, const char *name,
                       int version, json_object *input, char *id_out, size_t id_size,
                       weft_error *err);
    host_secret_fn secret;
    const def_limits *limits; /* NULL = def_limits_default */
} host_services;

struct weft_ctx {
    const host_services *svc;
    xc_exec *x;
    xc_task *t;
    weft_task_view view;
    wu_vec views;          /* views handed out by lookup(), freed by host_ctx_done */
    json_object *resolved; /* the input with its secrets filled in (owned), or NULL */
    wu_vec secrets;        /* values filled in (malloc'd, longest first), redacted from results */
    weft_ctx *outer;       /* the callback this one runs inside (same thread), or NULL */
    int oom;               /* a lookup could not be answered for want of memory (it gave NULL, which
                            * means "not scheduled"): the callback's result is not to be used */
};

/* The one host table (static storage). */
const weft_host *host_table(void);

/* A plugin's log line (host->log), with the secrets of the task it runs for
 * masked; plugin: the plugin's name (NULL when no plugin code runs). */
typedef void (*host_log_fn)(void *ud, int level, const char *plugin, const char *msg);

/*
 * Send plugins' log lines to fn (which filters by level) instead of the
 * process's logger (base/log.h: its level and format); reg (borrowed, may be
 * NULL) names the plugin of a task type. Process-wide: call before threads
 * start, and with NULLs before fn's ud goes away.
 */
struct pl_registry;
void host_set_log(host_log_fn fn, void *ud, const struct pl_registry *reg);

void host_ctx_init(weft_ctx *c, const host_services *svc, xc_exec *x, xc_task *t);
void host_ctx_done(weft_ctx *c);

/*
 * Before execute: fill "${secrets.NAME}" placeholders in the task's input
 * from svc->secret (stored inputs keep the placeholders: secrets are never
 * saved). Only where the task's own inputParameters in the definition write
 * that placeholder: one that came in with data (a workflow input, an output,
 * a variable, a dynamic fork's task) stays text, so a client cannot ask for a
 * secret. WEFT_ENOTFOUND naming the secret
 * when one is not set.
 */
int host_ctx_secrets(weft_ctx *c, weft_error *err);

/* v (t's input) with its "${secrets.NAME}" placeholders filled in by
 * secret() (a new value, caller owns; v itself when it has none, with a
 * reference taken): what an external worker is handed. As for execute, only
 * the placeholders that t's inputParameters write where they stand are
 * filled (host_ctx_secrets). */
int host_fill_secrets(const xc_task *t, json_object *v, host_secret_fn secret, void *ud,
                      json_object **out, weft_error *err);

/*
 * A result reported from outside the engine (an external worker, a signal)
 * for task t: every secret filled into t's input (host_fill_secrets; looked up with
 * secret(); one that is no longer set is skipped) is replaced by "***" in
 * *output, and in reason (may be NULL), which is masked whole and then cut
 * into reason_out (reason_size bytes; may be reason itself). *output is a reference the caller
 * owns, replaced by a masked copy when needed (the object given is never
 * changed). Costs nothing for a task whose input names no secret.
 */
void host_redact_reported(const xc_task *t, host_secret_fn secret, void *ud, json_object **output,
                          const char *reason, char *reason_out, size_t reason_size);

/* After execute: replace every secret value used by this task in the
 * result's output and reason with "***" (also a secret's beginning at the
 * end of a reason the plugin filled to its last byte). */
void host_ctx_redact(weft_ctx *c, weft_result *r);

/*
 * Run a queued task: fill its secrets, call its type's execute, redact the
 * secrets from the result. r must be initialised; returns execute's code
 * (0 with r failed when a secret is missing).
 */
int host_execute(const host_services *svc, xc_exec *x, xc_task *t, weft_result *r);

/* Initialise a result before a callback. */
void host_result_init(weft_result *r);
void host_result_clear(weft_result *r);

/* The task's WorkflowTask JSON (dynamic tasks carry their own). */
static inline json_object *host_task_json(const xc_task *t)
{
    return t->dyn_json ? t->dyn_json : t->def->json;
}

#endif
