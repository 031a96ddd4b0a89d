/* weft's commands that run in this process: run, compile, validate, plugins. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/log.h"
#include "base/util.h"
#include "cli/cli.h"
#include "core/engine.h"
#include "lua/dsl.h"

static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash) return strdup(".");
    if (slash == path) return strdup("/");
    return strndup(path, (size_t)(slash - path));
}

static int open_engine(const cli *c, eng **e)
{
    weft_error err = {0};
    eng_opts o = {0};
    def_limits lim;
    char *dir = c->file ? dir_of(c->file) : NULL;
    int rc;
    o.plugin_path = c->plugin_path;
    o.def_path = c->defs ? c->defs : dir;
    o.trace = c->quiet ? NULL : stderr;
    /* plugins' lines pass the one threshold, as weftd's log_level sets it */
    if (lg_set_level_name(getenv("WEFT_LOG_LEVEL"), &err)) {
        free(dir);
        return die(EXIT_USAGE, "WEFT_LOG_LEVEL: %s", err.msg);
    }
    if (cf_env_limits(&lim, &err)) {
        free(dir);
        return die(EXIT_USAGE, "%s", err.msg);
    }
    o.limits = &lim;
    rc = eng_new(&o, e, &err);
    free(dir);
    if (rc) return die(EXIT_USAGE, "%s", err.msg);
    return 0;
}

int cli_run(const cli *c, cli_tp *t)
{
    weft_error err = {0};
    json_object *input;
    def_workflow *def = NULL;
    xc_exec *x = NULL;
    eng *e = NULL;
    int rc;
    (void)t;
    if ((rc = read_input(c->input, &input))) return rc;
    if ((rc = open_engine(c, &e))) {
        json_object_put(input);
        return rc;
    }
    if (eng_load_file(e, c->file, &def, &err)) {
        rc = die(EXIT_USAGE, "%s", err.msg);
        goto out;
    }
    if (eng_start(e, def, input, &x, &err)) {
        rc = die(EXIT_USAGE, "%s", err.msg);
        goto out;
    }
    if (eng_run(e, x, &err)) fprintf(stderr, "weft: %s\n", err.msg);
    printf("%s\n",
           json_object_to_json_string_ext(x->output ? x->output : input,
                                          JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    if (x->status != WEFT_WF_COMPLETED && x->reason)
        fprintf(stderr, "weft: workflow %s %s: %s\n", x->id, weft_wf_status_name(x->status),
                x->reason);
    rc = x->status == WEFT_WF_COMPLETED ? EXIT_OK : EXIT_WF_FAILED;
out:
    def_unref(def);
    eng_free(e);
    json_object_put(input);
    return rc;
}

/* DSL (or JSON) -> a definition checked against the loaded plugins. */
static int load_checked(const cli *c, eng **e, def_workflow **def)
{
    weft_error err = {0};
    int rc;
    if ((rc = open_engine(c, e))) return rc;
    if (eng_load_file(*e, c->file, def, &err)) return die(EXIT_USAGE, "%s", err.msg);
    return 0;
}

/* compile is the DSL alone: it needs no plugins, so definitions that use
 * types served elsewhere (HTTP, SIMPLE, third-party) still compile. */
int cli_compile(const cli *c, cli_tp *t)
{
    weft_error err = {0};
    json_object *json = NULL;
    (void)t;
    if (dsl_load(c->file, &json, NULL, &err)) return die(EXIT_USAGE, "%s", err.msg);
    printf("%s\n",
           json_object_to_json_string_ext(json, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_SPACED |
                                                    JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(json);
    return EXIT_OK;
}

int cli_validate(const cli *c, cli_tp *t)
{
    eng *e = NULL;
    def_workflow *def = NULL;
    int rc = load_checked(c, &e, &def);
    (void)t;
    if (rc == 0)
        printf("%s: ok (workflow '%s' version %d, %zu tasks)\n", c->file, def->name, def->version,
               def->all.len);
    def_unref(def);
    eng_free(e);
    return rc;
}

int cli_plugins(const cli *c, cli_tp *t)
{
    eng *e = NULL;
    pl_registry *r;
    size_t i, j;
    int rc = open_engine(c, &e);
    (void)t;
    if (rc) return rc;
    r = eng_plugins(e);
    printf("searched: %s\n", pl_searched(r));
    for (i = 0; i < pl_count(r); i++) {
        const pl_plugin *p = pl_get(r, i);
        printf("%s\n  file: %s\n  abi: %u\n  task types:", p->name, p->file, p->abi_major);
        for (j = 0; j < p->ntypes; j++)
            printf(" %s", p->types[j]->name);
        if (!p->ntypes) printf(" (none)");
        if (p->nlocks) {
            printf("\n  lock providers:");
            for (j = 0; j < p->nlocks; j++)
                printf(" %s", p->locks[j]->name);
        }
        printf("\n");
    }
    rc = pl_failure_count(r) ? EXIT_WF_FAILED : EXIT_OK;
    eng_free(e);
    return rc;
}
