/* The weft command line: parsed options, shared by its command files. */
#ifndef WEFT_CLI_H
#define WEFT_CLI_H

#include <json-c/json.h>

enum { EXIT_OK = 0, EXIT_WF_FAILED = 1, EXIT_USAGE = 2, EXIT_TIMEOUT = 3 };

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
    const char *version;
    const char *correlation_id;
    const char *idempotency_key;
    const char *timeout;
    const char *reason;
    const char *status;
    const char *api; /* --api URL: the commands go through a weftd's REST API */
    int quiet;
} cli;

/* Print "weft: <message>" on stderr; returns code. */
int die(int code, const char *fmt, const char *arg);
/* --input JSON|@file (NULL = {}): a JSON object, or an error printed (exit code). */
int read_input(const char *arg, json_object **out);

/* Commands that work on workflows kept in Redis (client.c), directly or
 * through a weftd's REST API (--api URL or WEFT_API_URL; WEFT_API_TOKEN is
 * sent as a Bearer token). 1 if cmd is one. */
int client_has(const char *cmd);
int client_main(const cli *c);

#endif
