/* The host services of a worker's task callbacks: its sandbox, sub-workflows, secrets. */
#include "daemon/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static sbx *svc_sandbox(void *ud)
{
    return ((worker *)ud)->sandbox;
}

static int svc_start_child(void *ud, xc_exec *x, xc_task *t, json_object *defj, const char *name,
                           int version, json_object *input, char *id_out, size_t id_size,
                           weft_error *err)
{
    worker *w = ud;
    def_workflow *d = NULL;
    op_start_args a = {0};
    char id[64], key[128];
    int rc;
    if (defj) {
        char src[160];
        snprintf(src, sizeof src, "%s: sub-workflow '%s'", x->def->name, t->ref);
        rc = op_def(&w->op, json_object_to_json_string_ext(defj, JSON_C_TO_STRING_PLAIN), src, &d,
                    err);
    } else if (!name || !*name) {
        return wu_err(err, WEFT_EINVAL, "sub-workflow needs a name or a definition");
    } else {
        char *json = NULL;
        int v = 0;
        if ((rc = ST(w->st, def_get, name, version, &json, &v, err)) == 0)
            rc = op_def(&w->op, json, name, &d, err);
        free(json);
    }
    if (rc) return rc;
    /* one child per task instance, even if the task runs twice */
    snprintf(key, sizeof key, "sub:%s", t->id);
    a.def = d;
    a.input = input;
    a.parent_id = x->id;
    a.parent_task_id = t->id;
    a.depth = x->depth + 1;
    /* a child is as urgent as its parent unless its task says, and its tasks
     * go to the same domains */
    a.priority = xc_child_priority(x, t);
    a.task_to_domain = x->task_to_domain;
    a.idempotency_key = key;
    rc = op_start(&w->op, &a, id, err);
    def_unref(d);
    if (rc) return rc;
    free(t->child_id);
    t->child_id = strdup(id);
    snprintf(id_out, id_size, "%s", id);
    return 0;
}

/* Secrets are kept in Redis (weft secret set NAME). */
static int svc_secret(void *ud, const char *name, char **value, weft_error *err)
{
    return op_secret(((worker *)ud)->st, name, value, err);
}

void nd_services_init(worker *w)
{
    w->svc.ud = w;
    w->svc.sandbox = svc_sandbox;
    w->svc.start_child = svc_start_child;
    w->svc.secret = svc_secret;
    w->svc.limits = &w->n->limits;
}
