/* What the weft command files share: option parsing, help, messages, input. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/util.h"
#include "cli/cli.h"
#include "core/ops.h"

/* The options, in CLI_O_* bit order: name, value (NULL = a flag, an int set
 * to 1), where it goes, and their help. */
static const struct cli_opt {
    const char *name;
    const char *value;
    size_t offset;
    const char *help;
} opts[] = {
    {"input", "JSON|@file", offsetof(cli, input), "workflow input (a JSON object)"},
    {"plugin-path", "DIRS", offsetof(cli, plugin_path),
     "plugin directories, colon-separated (also WEFT_PLUGIN_PATH);\n"
     "an empty element stands for the default directories"},
    {"defs", "DIRS", offsetof(cli, defs),
     "where sub-workflows are found by name (default: the file's dir)"},
    {"redis", "URL", offsetof(cli, redis), "the Redis to use (default: WEFT_REDIS_URL)"},
    {"prefix", "P", offsetof(cli, prefix), "the key prefix (default: WEFT_KEY_PREFIX)"},
    {"api", "URL", offsetof(cli, api),
     "through a weftd's REST API instead (also WEFT_API_URL);\n"
     "WEFT_API_TOKEN is sent as the Bearer token"},
    {"version", "V", offsetof(cli, version), "the definition's version (default: the latest)"},
    {"correlation-id", "X", offsetof(cli, correlation_id), "the workflow's correlation id"},
    {"idempotency-key", "K", offsetof(cli, idempotency_key),
     "start at most once per key: the same key gives the same id"},
    {"timeout", "S", offsetof(cli, timeout), "seconds to wait at most (exit 3 past them)"},
    {"reason", "R", offsetof(cli, reason), "why (kept with the workflow or task)"},
    {"status", "S", offsetof(cli, status),
     "signal: how the task ends, COMPLETED (default) or FAILED;\n"
     "list: the runs of these statuses (comma-separated: RUNNING, PAUSED,\n"
     "COMPLETED, FAILED, TIMED_OUT, TERMINATED)"},
    {"quiet", NULL, offsetof(cli, quiet), "no task transitions on stderr (also -q)"},
    {"priority", "0-99", offsetof(cli, priority),
     "its tasks are claimed before those of lower priorities (default 0)"},
    {"domain", "TASK=D[,D..] ...", offsetof(cli, domain),
     "task domains (Conductor's taskToDomain): TASK is a task name or *,\n"
     "a list falls back in order to the first domain with a worker polling"},
    {"output", "text|json", offsetof(cli, output),
     "text for people (default), or json (also -o json)"},
    {"no-color", NULL, offsetof(cli, no_color),
     "no colours (also NO_COLOR=1; colours only on a terminal)"},
    {"name", "N", offsetof(cli, name), "the runs of these workflows (comma-separated names)"},
    {"since", "D", offsetof(cli, since), "the runs started in the last D (30s, 15m, 1h, 7d)"},
    {"limit", "N", offsetof(cli, limit), "how many runs, newest first (1 to 1000, default 20)"},
};

#define NOPTS (sizeof opts / sizeof opts[0])
#define OPT_HELP 'h'

/* The options that have a one-letter form too. */
static const struct {
    char letter;
    unsigned opt; /* its CLI_O_* bit */
} letters[] = {{'q', CLI_O_QUIET}, {'o', CLI_O_OUTPUT}};

#define NLETTERS (sizeof letters / sizeof letters[0])

int die(int code, const char *fmt, const char *arg)
{
    fprintf(stderr, "weft: ");
    fprintf(stderr, fmt, arg);
    fputc('\n', stderr);
    return code;
}

int cli_fail(const weft_error *err)
{
    fprintf(stderr, "weft: %s\n", err->msg);
    if (err->code == WEFT_ESTATE) return EXIT_WF_FAILED;
    return err->code == WEFT_EIO ? EXIT_UNREACHABLE : EXIT_USAGE;
}

int cli_json(const cli *c)
{
    return c->output && !strcmp(c->output, "json");
}

int cli_color(const cli *c, FILE *f)
{
    const char *no = getenv("NO_COLOR"), *term = getenv("TERM");
    if (c->no_color || (no && *no) || (term && !strcmp(term, "dumb"))) return 0;
    return isatty(fileno(f));
}

int cli_priority(const cli *c, int *out)
{
    char *end;
    long v;
    *out = 0;
    if (!c->priority) return 0;
    v = strtol(c->priority, &end, 10);
    if (end == c->priority || *end || v < 0 || v > 99)
        return die(EXIT_USAGE, "--priority must be a whole number from 0 to 99, not '%s'",
                   c->priority);
    *out = (int)v;
    return 0;
}

int cli_domains(const cli *c, json_object **out)
{
    char *text, *save = NULL, *e;
    json_object *m;
    weft_error err = {0};
    *out = NULL;
    if (!c->domain) return 0;
    if (!(text = strdup(c->domain)) || !(m = json_object_new_object())) {
        free(text);
        return die(EXIT_USAGE, "%s", "out of memory");
    }
    for (e = strtok_r(text, " ;", &save); e; e = strtok_r(NULL, " ;", &save)) {
        char *eq = strchr(e, '=');
        if (!eq || eq == e || !eq[1]) {
            int rc = die(EXIT_USAGE, "--domain: '%s' is not TASK=DOMAIN", e);
            json_object_put(m);
            free(text);
            return rc;
        }
        *eq = 0;
        json_object_object_add(m, e, json_object_new_string(eq + 1));
    }
    free(text);
    if (op_check_domains(m, &err)) {
        json_object_put(m);
        return die(EXIT_USAGE, "--domain: %s", err.msg);
    }
    *out = m;
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
    if (rc) return die(EXIT_USAGE, "%s", err.msg);
    if (!json_object_is_type(*out, json_type_object)) {
        json_object_put(*out);
        *out = NULL;
        return die(EXIT_USAGE, "--input must be a JSON object, e.g. '{\"id\": 7}'%s", "");
    }
    return 0;
}

int cli_is_file(const char *s)
{
    size_t n = strlen(s);
    return n > 4 && (!strcmp(s + n - 4, ".lua") || !strcmp(s + n - 5, ".json"));
}

void cli_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR)
        ;
}

/* The index in opts of the option whose one-letter form is o (one getopt
 * was given, so there is one). */
static int by_letter(int o)
{
    size_t i;
    int b = 0;
    for (i = 0; i < NLETTERS; i++)
        if (letters[i].letter == o)
            while (!(letters[i].opt & (1u << b)))
                b++;
    return b;
}

int cli_parse(int argc, char **argv, cli *c)
{
    struct option longopts[NOPTS + 2];
    /* ':' first: a missing value is told apart from an unknown option */
    char shorts[2 * NLETTERS + 3] = ":h";
    size_t i, n = 2;
    int o;
    memset(c, 0, sizeof *c);
    for (i = 0; i < NOPTS; i++) {
        longopts[i].name = opts[i].name;
        longopts[i].has_arg = opts[i].value ? required_argument : no_argument;
        longopts[i].flag = NULL;
        longopts[i].val = 256 + (int)i;
    }
    for (i = 0; i < NLETTERS; i++) {
        shorts[n++] = letters[i].letter;
        if (opts[by_letter(letters[i].letter)].value) shorts[n++] = ':';
    }
    shorts[n] = 0;
    longopts[NOPTS] = (struct option){"help", no_argument, NULL, OPT_HELP};
    longopts[NOPTS + 1] = (struct option){NULL, 0, NULL, 0};
    opterr = 0;
    optind = 1;
    while ((o = getopt_long(argc, argv, shorts, longopts, NULL)) != -1) {
        if (o != OPT_HELP && o < 256 && o != ':' && o != '?') o = 256 + by_letter(o);
        if (o == OPT_HELP) {
            c->help = 1;
        } else if (o >= 256) {
            const struct cli_opt *opt = &opts[o - 256];
            if (opt->value)
                *(const char **)((char *)c + opt->offset) = optarg;
            else
                *(int *)((char *)c + opt->offset) = 1;
            c->seen |= 1u << (o - 256);
        } else if (o == ':') {
            return die(EXIT_USAGE, "%s needs a value", argv[optind - 1]);
        } else if (optopt) {
            char s[3] = {'-', (char)optopt, 0};
            return die(EXIT_USAGE, "unknown option %s (see weft --help)", s);
        } else {
            return die(EXIT_USAGE, "unknown option %s (see weft --help)", argv[optind - 1]);
        }
    }
    for (; optind < argc; optind++) {
        if (!c->cmd)
            c->cmd = argv[optind];
        else if (c->nargs < 4)
            c->args[c->nargs++] = argv[optind];
        else
            return die(EXIT_USAGE, "unexpected argument '%s'", argv[optind]);
    }
    c->file = c->args[0];
    return 0;
}

const cli_cmd *cli_find(const cli_cmd *table, size_t n, const char *name)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (!strcmp(table[i].name, name)) return &table[i];
    return NULL;
}

/* Lines of text: the first indented by first columns, the others by rest. */
static void put_lines(FILE *f, const char *text, int first, int rest)
{
    int indent = first;
    for (;;) {
        const char *nl = strchr(text, '\n');
        fprintf(f, "%*s%.*s\n", indent, "", nl ? (int)(nl - text) : (int)strlen(text), text);
        if (!nl) return;
        text = nl + 1;
        indent = rest;
    }
}

void cli_usage(FILE *f, const cli_cmd *table, size_t n)
{
    size_t i;
    int remote = 0;
    fputs("usage: weft <command> [options]     (weft <command> --help: its options)\n\n", f);
    for (i = 0; i < n; i++) {
        char head[64];
        if (!remote && !(table[i].where & CLI_LOCAL)) {
            fputs("\nworkflows in Redis (WEFT_REDIS_URL or --redis URL; a running weftd does the "
                  "work;\nwith --api URL or WEFT_API_URL through a weftd's REST API):\n",
                  f);
            remote = 1;
        }
        snprintf(head, sizeof head, "%s%s%s", table[i].name, *table[i].args ? " " : "",
                 table[i].args);
        fprintf(f, "  %-32s %s\n", head, table[i].summary);
    }
    fputs("\noutput: text for people (colours only on a terminal; --no-color or NO_COLOR=1\n"
          "turn them off); status and watch print Conductor's JSON with -o json\n"
          "\nexit status:\n"
          "  0  done; the workflow completed (wait, watch)\n"
          "  1  the workflow failed, was terminated or timed out (run, wait, watch), or\n"
          "     the operation is not allowed in its state\n"
          "  2  usage or definition error, or no such workflow (or definition)\n"
          "  3  wait (or a command's --timeout) timed out\n"
          "  4  the server could not be used: Redis or the REST API unreachable, refusing\n"
          "     the connection or its credentials, or unable to serve now (HTTP 503)\n",
          f);
}

void cli_cmd_usage(FILE *f, const cli_cmd *cmd)
{
    size_t i;
    fprintf(f, "usage: weft %s%s%s [options]\n\n", cmd->name, *cmd->args ? " " : "", cmd->args);
    fprintf(f, "%s\n", cmd->summary);
    if (cmd->about) put_lines(f, cmd->about, 0, 0);
    fputs("\noptions:\n", f);
    for (i = 0; i < NOPTS; i++) {
        char head[64];
        if (!(cmd->opts & (1u << i))) continue;
        snprintf(head, sizeof head, "--%s%s%s", opts[i].name, opts[i].value ? " " : "",
                 opts[i].value ? opts[i].value : "");
        fprintf(f, "  %-28s ", head);
        /* the first help line follows the option, the others line up under it */
        put_lines(f, opts[i].help, 0, 31);
    }
    fprintf(f, "  %-28s %s\n", "--help", "this text");
}

int cli_check(const cli *c, const cli_cmd *cmd)
{
    size_t i;
    unsigned extra = c->seen & ~cmd->opts;
    for (i = 0; i < NOPTS && extra; i++) {
        if (extra & (1u << i)) {
            fprintf(stderr, "weft: --%s does not apply to weft %s (see weft %s --help)\n",
                    opts[i].name, cmd->name, cmd->name);
            return EXIT_USAGE;
        }
    }
    if (c->output && strcmp(c->output, "json") && strcmp(c->output, "text"))
        return die(EXIT_USAGE, "--output %s: use text or json", c->output);
    if (c->nargs < cmd->min_args) {
        if (cmd->where & CLI_LOCAL) return die(EXIT_USAGE, "%s needs a file", cmd->name);
        return die(EXIT_USAGE, "%s needs an argument (see weft --help)", cmd->name);
    }
    return 0;
}
