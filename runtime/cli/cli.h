/*
 * The weft command line: its parsed options, its command table, and the
 * helpers every command file shares (common.c).
 */
#ifndef WEFT_CLI_H
#define WEFT_CLI_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <json-c/json.h>

#include "weft/plugin.h"

/* Exit codes, the same over Redis and through the REST API (weft --help,
 * docs/operations.md). EXIT_UNREACHABLE: the server could not be used (not
 * reachable, refused the connection or its credentials, or answered that it
 * cannot serve now), told apart from EXIT_USAGE, which unknown ids give. */
enum { EXIT_OK = 0, EXIT_WF_FAILED = 1, EXIT_USAGE = 2, EXIT_TIMEOUT = 3, EXIT_UNREACHABLE = 4 };

/* One bit per option (common.c keeps their names and help in this order). */
enum {
    CLI_O_INPUT = 1u << 0,
    CLI_O_PLUGIN_PATH = 1u << 1,
    CLI_O_DEFS = 1u << 2,
    CLI_O_REDIS = 1u << 3,
    CLI_O_PREFIX = 1u << 4,
    CLI_O_API = 1u << 5,
    CLI_O_VERSION = 1u << 6,
    CLI_O_CORRELATION_ID = 1u << 7,
    CLI_O_IDEMPOTENCY_KEY = 1u << 8,
    CLI_O_TIMEOUT = 1u << 9,
    CLI_O_REASON = 1u << 10,
    CLI_O_STATUS = 1u << 11,
    CLI_O_QUIET = 1u << 12,
    CLI_O_PRIORITY = 1u << 13,
    CLI_O_DOMAIN = 1u << 14,
    CLI_O_OUTPUT = 1u << 15,
    CLI_O_NO_COLOR = 1u << 16,
    CLI_O_NAME = 1u << 17,
    CLI_O_SINCE = 1u << 18,
    CLI_O_LIMIT = 1u << 19,
};

/* How status and watch print: for people, or Conductor's JSON (-o json). */
#define CLI_O_SHOW (CLI_O_OUTPUT | CLI_O_NO_COLOR)

/* What every command on workflows in Redis takes: where they are. */
#define CLI_O_REMOTE (CLI_O_REDIS | CLI_O_PREFIX | CLI_O_API)

typedef struct cli {
    const char *cmd;
    const char *file; /* = args[0] */
    const char *args[4];
    int nargs;
    const char *input;
    const char *plugin_path;
    const char *defs;
    const char *redis;
    const char *prefix;
    const char *api; /* --api URL: the commands go through a weftd's REST API */
    const char *version;
    const char *correlation_id;
    const char *idempotency_key;
    const char *timeout;
    const char *reason;
    const char *status;
    int quiet;
    const char *priority;
    const char *domain;
    const char *output; /* -o text|json (checked by cli_check) */
    int no_color;
    const char *name;  /* list: workflow names, comma-separated */
    const char *since; /* list: a duration */
    const char *limit; /* list: how many */
    int help;          /* --help / -h was given */
    unsigned seen;     /* CLI_O_* bits of the options given */
} cli;

typedef struct cli_tp cli_tp;

/* Where a command runs: in this process, or on workflows kept in Redis,
 * reached directly and/or through a weftd's REST API. */
enum { CLI_LOCAL = 1, CLI_REDIS = 2, CLI_HTTP = 4, CLI_PLUGINS = 8 };

/* One command: everything `weft help`, `weft CMD --help` and dispatch need. */
typedef struct cli_cmd {
    const char *name;
    const char *args;    /* its arguments, as the usage line shows them */
    const char *summary; /* one line for `weft help` */
    const char *about;   /* more for `weft CMD --help`, or NULL */
    unsigned opts;       /* the CLI_O_* options it takes */
    int min_args;
    unsigned where; /* CLI_LOCAL, or CLI_REDIS and/or CLI_HTTP (| CLI_PLUGINS: loads them) */
    /* Runs the command; t is NULL for CLI_LOCAL ones. Returns the exit code. */
    int (*run)(const cli *c, cli_tp *t);
} cli_cmd;

/* Print "weft: <message>" on stderr; returns code. */
int die(int code, const char *fmt, const char *arg);
/* An error's message on stderr; returns its exit code: 1 for a state that
 * forbids the operation, 4 for a store that cannot be reached (WEFT_EIO),
 * else 2 (unknown ids and bad input are usage errors). */
int cli_fail(const weft_error *err);
/* 1 when -o json was given. */
int cli_json(const cli *c);
/* 1 when colour suits f: a terminal, no --no-color, NO_COLOR unset or empty,
 * TERM not "dumb". */
int cli_color(const cli *c, FILE *f);
/* --input JSON|@file (NULL = {}): a JSON object (caller owns), or an error
 * printed (exit code returned). */
int read_input(const char *arg, json_object **out);
/* --priority into *out (0 when not given): 0, or EXIT_USAGE said on stderr. */
int cli_priority(const cli *c, int *out);
/* --domain "task=domain[,domain...] ..." as a taskToDomain object into *out
 * (NULL when not given; caller puts it): 0, or EXIT_USAGE said on stderr. */
int cli_domains(const cli *c, json_object **out);
/* 1 if s names a definition file (.lua or .json), existing or not. */
int cli_is_file(const char *s);
void cli_sleep_ms(long ms);

/* What a watch has printed (view.c): how, when each task started, and how
 * the workflow ended. */
typedef struct cli_watcher {
    int json;             /* -o json: the events as they are */
    int color;            /* colours (a terminal, see cli_color) */
    json_object *started; /* taskId -> ms of its SCHEDULED/IN_PROGRESS event (owned) */
    int ended;            /* the workflow's end was seen ... */
    weft_wf_status end;   /* ... and this is how it ended */
} cli_watcher;

void cli_watch_init(cli_watcher *w, const cli *c);
void cli_watch_clear(cli_watcher *w);
/* Print one status event (JSON text) on stdout as w says, flushed; 1 if it
 * is the workflow's end (w->ended and w->end set). */
int cli_event(cli_watcher *w, const char *json);
/* The workflow (Conductor's Workflow JSON, borrowed) for people: a summary,
 * then a table of its tasks; colour when color is set. */
void cli_show_status(FILE *f, json_object *wf, int color);
/* A search's answer ({totalHits, results: [WorkflowSummary]}, borrowed) as
 * a table of runs, then how many of how many; colour when color is set. */
void cli_show_list(FILE *f, json_object *res, int color);
/* ms since the epoch in local time: "YYYY-MM-DD HH:MM:SS.mmm ZONE" with date
 * set, else "HH:MM:SS.mmm". */
void cli_local_time(char *buf, size_t n, int64_t ms, int date);

/*
 * Parse argv with getopt_long into c (which borrows argv's strings). Options
 * may come before or after the command. Returns 0, or EXIT_USAGE after
 * printing what was wrong (an unknown option, a missing value).
 */
int cli_parse(int argc, char **argv, cli *c);
/* The command named name in table (n entries), or NULL. */
const cli_cmd *cli_find(const cli_cmd *table, size_t n, const char *name);
/* Does c suit cmd: only options it takes, enough arguments? Returns 0, or
 * EXIT_USAGE after saying what is wrong. */
int cli_check(const cli *c, const cli_cmd *cmd);
/* `weft help`: every command of table with its summary, on f. */
void cli_usage(FILE *f, const cli_cmd *table, size_t n);
/* `weft CMD --help`: the command's usage line, notes and options, on f. */
void cli_cmd_usage(FILE *f, const cli_cmd *cmd);

/* Local commands (local.c). */
int cli_run(const cli *c, cli_tp *t);
int cli_compile(const cli *c, cli_tp *t);
int cli_validate(const cli *c, cli_tp *t);
int cli_plugins(const cli *c, cli_tp *t);

/* Commands on workflows kept in Redis (client.c), one handler each for both
 * transports. */
int cli_start(const cli *c, cli_tp *t);
int cli_register(const cli *c, cli_tp *t);
int cli_status(const cli *c, cli_tp *t);
int cli_list(const cli *c, cli_tp *t);
int cli_wait(const cli *c, cli_tp *t);
int cli_watch(const cli *c, cli_tp *t);
int cli_terminate(const cli *c, cli_tp *t);
int cli_pause(const cli *c, cli_tp *t);
int cli_resume(const cli *c, cli_tp *t);
int cli_retry(const cli *c, cli_tp *t);
int cli_restart(const cli *c, cli_tp *t);
int cli_signal(const cli *c, cli_tp *t);
int cli_secret(const cli *c, cli_tp *t);

/*
 * Run a Redis-side command: over a weftd's REST API with --api URL (or
 * WEFT_API_URL when --redis is not given; WEFT_API_TOKEN is sent as a Bearer
 * token), else directly over Redis. Returns the exit code.
 */
int cli_remote(const cli_cmd *cmd, const cli *c);

#endif
