/*
 * The embedded engine: plugins, definitions, the decider and a memory store
 * with in-process queues, all in one thread (weft run). Prefix eng_.
 */
#ifndef WEFT_ENGINE_H
#define WEFT_ENGINE_H

#include <stdio.h>
#include "core/def.h"
#include "core/exec.h"
#include "plugin/loader.h"

typedef struct eng eng;

typedef struct eng_opts {
    const char *plugin_path;  /* NULL: $WEFT_PLUGIN_PATH, else the default path */
    const char *def_path;     /* where sub-workflows are found by name (colon-separated) */
    FILE *trace;              /* task/workflow transitions go here (NULL = none) */
    const def_limits *limits; /* copied; NULL = def_limits_default */
} eng_opts;

/* Load plugins. Plugins that fail to load are reported on stderr as warnings. */
int eng_new(const eng_opts *opts, eng **out, weft_error *err);
void eng_free(eng *e);

pl_registry *eng_plugins(eng *e);

/* Compile a definition from a .lua or .json file, or from JSON. */
int eng_load_file(eng *e, const char *path, def_workflow **out, weft_error *err);
int eng_load_json(eng *e, json_object *json, const char *source, def_workflow **out,
                  weft_error *err);

/* Start an execution of def with input (borrowed). */
int eng_start(eng *e, def_workflow *def, json_object *input, xc_exec **out, weft_error *err);

/*
 * Run until x ends. Returns 0 when it is terminal, WEFT_ESTATE when nothing
 * can move it on (a WAIT for a signal, an unserved task type) with err
 * naming the tasks it waits on.
 */
int eng_run(eng *e, xc_exec *x, weft_error *err);

/* Called as an execution ends (any execution of the engine, children too);
 * x is borrowed, valid until the callback returns. */
typedef void (*eng_ended_fn)(void *ud, const xc_exec *x);

/*
 * Run until every one of xs[0..n) is terminal, calling on_end (may be NULL)
 * as each execution ends meanwhile (benchmarks: many executions in flight).
 * Returns 0, or WEFT_ESTATE as eng_run for the first one that nothing can
 * move on. xs is borrowed.
 */
int eng_run_all(eng *e, xc_exec *const *xs, size_t n, eng_ended_fn on_end, void *ud,
                weft_error *err);

/* Deliver an external result to a task (signal, worker). */
int eng_complete_task(eng *e, const char *workflow_id, const char *task_ref,
                      weft_task_status status, json_object *output, weft_error *err);

#endif
