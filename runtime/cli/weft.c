/* weft: the command line (embedded runs, compile, validate, plugins). */
#include "autoconf.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/log.h"
#include "lua/dsl.h"
#include "core/engine.h"
#include "cli/cli.h"
#include "base/util.h"


static const char usage[] =
    "usage: weft <command> [options]\n"
    "\n"
    "  run FILE.lua|FILE.json [--input JSON|@file]   run a workflow in this process\n"
    "  compile FILE.lua                              print the definition as Conductor JSON\n"
    "  validate FILE.lua|FILE.json                   check a definition\n"
    "  plugins                                       list plugins and their task types\n"
    "\n"
    "workflows in Redis (WEFT_REDIS_URL or --redis URL; a running weftd does the work):\n"
    "  start FILE|NAME [--version V] [--input JSON] [--correlation-id X] [--idempotency-key K]\n"
    "                                                prints the new workflow id\n"
    "  status ID                                     the workflow as Conductor's Workflow JSON\n"
    "  wait ID [--timeout S]                         until it ends; prints its output\n"
    "  watch ID                                      its transitions, history first, then live\n"
    "  register FILE                                 store a definition (versioned)\n"
    "  terminate ID [--reason R] | pause ID | resume ID | retry ID | restart ID\n"
    "                                                terminate, pause, resume: applied even to a\n"
    "                                                busy workflow; --timeout S (default 10) caps\n"
    "                                                the wait for it to land (exit 3 past it)\n"
    "  signal ID REF [JSON] [--status FAILED]        complete a WAIT (or any waiting task)\n"
    "  secret set NAME < value | secret list | secret delete NAME\n"
    "                                                secrets for ${secrets.NAME} (weft run: the\n"
    "                                                environment, WEFT_SECRET_NAME)\n"
    "  --api URL (or WEFT_API_URL): the same commands (but secret) through a weftd's REST API,\n"
    "                                                with WEFT_API_TOKEN as the Bearer token\n"
    "\n"
    "options:\n"
    "  --input JSON|@file     workflow input (a JSON object)\n"
    "  --plugin-path DIRS     plugin directories, colon-separated (also WEFT_PLUGIN_PATH);\n"
    "                         an empty element stands for the default directories\n"
    "  --defs DIRS            where sub-workflows are found by name (default: the file's dir)\n"
    "  --quiet                no task transitions on stderr\n"
    "\n"
    "exit status: 0 completed, 1 the workflow failed/terminated/timed out (or the\n"
    "operation is not allowed in its state), 2 usage, definition error or unknown id,\n"
    "3 wait (or a command's --timeout) timed out\n";

int die(int code, const char *fmt, const char *arg)
{
    fprintf(stderr, "weft: ");
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    return code;
}

/* Options that take a value, and where it goes. */
static const struct {
    const char *name;
    size_t offset;
} value_opts[] = {
    {"--input", offsetof(cli, input)},
    {"--plugin-path", offsetof(cli, plugin_path)},
    {"--defs", offsetof(cli, defs)},
    {"--redis", offsetof(cli, redis)},
    {"--prefix", offsetof(cli, prefix)},
    {"--version", offsetof(cli, version)},
    {"--correlation-id", offsetof(cli, correlation_id)},
    {"--idempotency-key", offsetof(cli, idempotency_key)},
    {"--timeout", offsetof(cli, timeout)},
    {"--reason", offsetof(cli, reason)},
    {"--status", offsetof(cli, status)},
    {"--api", offsetof(cli, api)},
};

static int parse_args(int argc, char **argv, cli *c)
{
    int i;
    size_t k;
    memset(c, 0, sizeof *c);
    for (i = 1; i < argc; i++) {
        const char *a = argv[i];
        for (k = 0; k < sizeof value_opts / sizeof value_opts[0]; k++) {
            size_t n = strlen(value_opts[k].name);
            if (!strncmp(a, value_opts[k].name, n) && (a[n] == 0 || a[n] == '='))
                break;
        }
        if (k < sizeof value_opts / sizeof value_opts[0]) {
            const char **slot = (const char **)((char *)c + value_opts[k].offset);
            const char *eq = strchr(a, '=');
            if (eq) {
                *slot = eq + 1;
            } else if (i + 1 < argc) {
                *slot = argv[++i];
            } else {
                return die(EXIT_USAGE, "%s needs a value", a);
            }
        } else if (!strcmp(a, "--quiet") || !strcmp(a, "-q")) {
            c->quiet = 1;
        } else if (a[0] == '-' && a[1]) {
            return die(EXIT_USAGE, "unknown option %s (see weft --help)", a);
        } else if (!c->cmd) {
            c->cmd = a;
        } else if (c->nargs < 4) {
            c->args[c->nargs++] = a;
        } else {
            return die(EXIT_USAGE, "unexpected argument '%s'", a);
        }
    }
    c->file = c->args[0];
    return 0;
}

int read_input(const char *arg, json_object **out)
{
    weft_error err = {0};
    char *text = NULL;
    int rc;
    *out = NULL;
    if (!arg) {
        *out = json_object_new_object();
        return 0;
    }
    if (arg[0] == '@') {
        if (wu_read_file(arg + 1, &text, NULL, &err))
            return die(EXIT_USAGE, "--input: %s", err.msg);
        rc = wu_parse_json(arg + 1, text, out, &err);
        free(text);
    } else {
        rc = wu_parse_json("--input", arg, out, &err);
    }
    if (rc)
        return die(EXIT_USAGE, "%s", err.msg);
    if (!json_object_is_type(*out, json_type_object)) {
        json_object_put(*out);
        *out = NULL;
        return die(EXIT_USAGE, "--input must be a JSON object, e.g. '{\"id\": 7}'%s", "");
    }
    return 0;
}

static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        return strdup(".");
    if (slash == path)
        return strdup("/");
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
    if (rc)
        return die(EXIT_USAGE, "%s", err.msg);
    return 0;
}

static int cmd_run(const cli *c)
{
    weft_error err = {0};
    json_object *input;
    def_workflow *def = NULL;
    xc_exec *x = NULL;
    eng *e = NULL;
    int rc;
    if ((rc = read_input(c->input, &input)))
        return rc;
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
    if (eng_run(e, x, &err))
        fprintf(stderr, "weft: %s\n", err.msg);
    printf("%s\n", json_object_to_json_string_ext(x->output ? x->output : input,
                                                  JSON_C_TO_STRING_PLAIN |
                                                      JSON_C_TO_STRING_NOSLASHESCAPE));
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
    if ((rc = open_engine(c, e)))
        return rc;
    if (eng_load_file(*e, c->file, def, &err))
        return die(EXIT_USAGE, "%s", err.msg);
    return 0;
}

/* compile is the DSL alone: it needs no plugins, so definitions that use
 * types served elsewhere (HTTP, SIMPLE, third-party) still compile. */
static int cmd_compile(const cli *c)
{
    weft_error err = {0};
    json_object *json = NULL;
    if (dsl_load(c->file, &json, NULL, &err))
        return die(EXIT_USAGE, "%s", err.msg);
    printf("%s\n", json_object_to_json_string_ext(json, JSON_C_TO_STRING_PRETTY |
                                                           JSON_C_TO_STRING_SPACED |
                                                           JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(json);
    return EXIT_OK;
}

static int cmd_validate(const cli *c)
{
    eng *e = NULL;
    def_workflow *def = NULL;
    int rc = load_checked(c, &e, &def);
    if (rc == 0)
        printf("%s: ok (workflow '%s' version %d, %zu tasks)\n", c->file, def->name, def->version,
               def->all.len);
    def_unref(def);
    eng_free(e);
    return rc;
}

static int cmd_plugins(const cli *c)
{
    eng *e = NULL;
    pl_registry *r;
    size_t i, j;
    int rc = open_engine(c, &e);
    if (rc)
        return rc;
    r = eng_plugins(e);
    printf("searched: %s\n", pl_searched(r));
    for (i = 0; i < pl_count(r); i++) {
        const pl_plugin *p = pl_get(r, i);
        printf("%s\n  file: %s\n  abi: %u\n  task types:", p->name, p->file, p->abi_major);
        for (j = 0; j < p->ntypes; j++)
            printf(" %s", p->types[j]->name);
        if (!p->ntypes)
            printf(" (none)");
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

int main(int argc, char **argv)
{
    cli c;
    int rc;
    if (argc > 1 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") ||
                     !strcmp(argv[1], "help"))) {
        fputs(usage, stdout);
        return EXIT_OK;
    }
    if (argc > 1 && !strcmp(argv[1], "--version")) {
        printf("weft %s (plugin ABI %d)\n", PACKAGE_VERSION, WEFT_ABI_MAJOR);
        return EXIT_OK;
    }
    if ((rc = parse_args(argc, argv, &c)))
        return rc;
    if (!c.cmd) {
        fputs(usage, stderr);
        return EXIT_USAGE;
    }
    if (!strcmp(c.cmd, "plugins"))
        return cmd_plugins(&c);
    if (client_has(c.cmd))
        return client_main(&c);
    if (strcmp(c.cmd, "run") && strcmp(c.cmd, "compile") && strcmp(c.cmd, "validate"))
        return die(EXIT_USAGE, "unknown command '%s' (see weft --help)", c.cmd);
    if (!c.file)
        return die(EXIT_USAGE, "%s needs a file", c.cmd);
    if (!strcmp(c.cmd, "run"))
        return cmd_run(&c);
    if (!strcmp(c.cmd, "compile"))
        return cmd_compile(&c);
    return cmd_validate(&c);
}
