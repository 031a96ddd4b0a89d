/*
 * The seam between a weft command and where its workflows are: the same
 * operations, implemented once over Redis (transport_redis.c) and once over
 * a weftd's REST API (transport_http.c). Each operation prints its own
 * errors and returns an exit code (EXIT_OK on success).
 */
#ifndef WEFT_CLI_TRANSPORT_H
#define WEFT_CLI_TRANSPORT_H

#include "cli/cli.h"
#include "store/store.h"

/* What wait sees of a workflow. */
typedef struct tp_wf {
    weft_wf_status status;
    int terminal;
    char *reason;        /* why it did not complete (malloc'd), or NULL */
    json_object *output; /* owned; NULL prints as {} */
} tp_wf;

typedef enum tp_act { TP_TERMINATE, TP_PAUSE, TP_RESUME, TP_RETRY, TP_RESTART } tp_act;

/* poll's answer when the store or daemon is restarting: try again. */
enum { TP_AGAIN = -1 };

/* The operations, one table per transport (like a VFS). */
typedef struct tp_ops {
    /* Start FILE.lua|FILE.json|NAME (--version, --correlation-id and
     * --idempotency-key from c) with input (borrowed); *id is the new
     * workflow's id (malloc'd). */
    int (*start)(cli_tp *t, const char *what, json_object *input, char **id);
    /* Store the definition in file; *name (malloc'd) and *version say which. */
    int (*reg)(cli_tp *t, const char *file, char **name, int *version);
    /* The workflow as Conductor's Workflow JSON (*doc owned); *doc may stay
     * NULL when the answer was printed as it came. */
    int (*status)(cli_tp *t, const char *id, json_object **doc);
    /* One look at the workflow for wait (w filled, caller clears it with
     * tp_wf_clear). TP_AGAIN when it cannot be reached now and final is 0;
     * with final set the failure is reported instead. */
    int (*poll)(cli_tp *t, const char *id, int final, tp_wf *w);
    /* Print its status events through cli_event(w), history first, until
     * the workflow ends (EXIT_OK then, w->end says how). */
    int (*watch)(cli_tp *t, const char *id, cli_watcher *w);
    /* Terminate (reason may be NULL), pause, resume, retry or restart. */
    int (*act)(cli_tp *t, const char *id, tp_act act, const char *reason);
    /* Complete (failed = 0) or fail the waiting task ref with output
     * (borrowed, may be NULL) and, when failed, reason. */
    int (*signal)(cli_tp *t, const char *id, const char *ref, int failed, const char *reason,
                  json_object *output);
    /* The runs q finds: *res is {totalHits, results: [WorkflowSummary]}
     * (owned), as GET /api/workflow/search answers. */
    int (*list)(cli_tp *t, const st_query *q, json_object **res);
    void (*close)(cli_tp *t);
} tp_ops;

struct cli_tp {
    const cli *c;
    void *impl; /* the transport's own state */
    const tp_ops *ops;
};

/* Open t over Redis (--redis, --prefix, their environment); plugins: load
 * them to check definitions from files. Returns an exit code. */
int tp_open_redis(cli_tp *t, const cli *c, int plugins);
/* Open t over the REST API at url. Returns an exit code. */
int tp_open_http(cli_tp *t, const cli *c, const char *url);
/* The Redis store under t (opened by tp_open_redis), for Redis-only commands. */
st_store *tp_store(cli_tp *t);
void tp_wf_clear(tp_wf *w);

#endif
