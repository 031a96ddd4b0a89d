/*
 * The weft_host table handed to plugins, and the call context behind
 * weft_ctx. Prefix host_.
 */
#ifndef WEFT_HOST_H
#define WEFT_HOST_H

#include "weft/plugin.h"
#include "exec.h"
#include "lua_sandbox.h"

/* What the engine provides to task callbacks. */
typedef struct host_services {
    void *ud;
    /* The Lua sandbox of the calling thread. */
    sbx *(*sandbox)(void *ud);
    /* Start a child workflow for task t of x (see weft_host.start_child). */
    int (*start_child)(void *ud, xc_exec *x, xc_task *t, json_object *def, const char *name,
                       int version, json_object *input, char *id_out, size_t id_size,
                       weft_error *err);
    /* The value of secret `name` (malloc'd), or WEFT_ENOTFOUND. */
    int (*secret)(void *ud, const char *name, char **value, weft_error *err);
    const def_limits *limits; /* NULL = def_limits_default */
} host_services;

struct weft_ctx {
    const host_services *svc;
    xc_exec *x;
    xc_task *t;
    weft_task_view view;
    wu_vec views;          /* views handed out by lookup(), freed by host_ctx_done */
    json_object *resolved; /* the input with its secrets filled in (owned), or NULL */
    wu_vec secrets;        /* values filled in (malloc'd), redacted from results */
};

/* The one host table (static storage). */
const weft_host *host_table(void);

void host_ctx_init(weft_ctx *c, const host_services *svc, xc_exec *x, xc_task *t);
void host_ctx_done(weft_ctx *c);

/*
 * Before execute: fill "${secrets.NAME}" placeholders in the task's input
 * from svc->secret (stored inputs keep the placeholders: secrets are never
 * saved). WEFT_ENOTFOUND naming the secret when one is not set.
 */
int host_ctx_secrets(weft_ctx *c, weft_error *err);

/* v with its "${secrets.NAME}" placeholders filled in by secret() (a new
 * value, caller owns; v itself when it has none, with a reference taken):
 * what an external worker is handed. */
int host_fill_secrets(json_object *v,
                      int (*secret)(void *ud, const char *name, char **value, weft_error *err),
                      void *ud, json_object **out, weft_error *err);

/* After execute: replace every secret value used by this task in the
 * result's output and reason with "***". */
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
