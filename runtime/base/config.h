/*
 * weftd configuration: declared, not parsed by hand. A config file is a Lua
 * table (evaluated in the sandbox, no io/os):
 *
 *     return {
 *       redis_url = "redis://127.0.0.1:6379",
 *       workers = 4,
 *       lock = "redis",
 *       retention = "7d",
 *     }
 *
 * Precedence: defaults < file < environment (WEFT_REDIS_URL, WEFT_KEY_PREFIX,
 * WEFT_PLUGIN_PATH, WEFT_API_LISTEN, WEFT_API_TOKEN) < flags. Prefix cf_.
 */
#ifndef WEFT_CONFIG_H
#define WEFT_CONFIG_H

#include <stddef.h>
#include <stdio.h>
#include <stdint.h>
#include <json-c/json.h>
#include "weft/plugin.h"
#include "core/def.h"

/* Where the REST API listens unless configured (weftd falls back to no API
 * when this default is taken: several daemons on one host). */
#define CF_API_LISTEN_DEFAULT "127.0.0.1:8080"

typedef struct cf_config {
    char *redis_url;         /* redis_url: "redis://127.0.0.1:6379" */
    char *key_prefix;        /* key_prefix: "weft:" */
    char *plugin_path;       /* plugin_path: NULL = default */
    char *daemon_id;         /* daemon_id: NULL = "<host>-<pid>" */
    int workers;             /* workers: threads that claim and decide (4) */
    char *lock;              /* lock: "none" | "local" | "redis" ("redis") */
    int64_t lock_ttl_ms;     /* lock_ttl: "10s" */
    int64_t lock_wait_ms;    /* lock_wait: "2s" */
    int64_t command_wait_ms; /* command_wait: "10s" (terminate/pause/resume landing) */
    int fencing;             /* fencing: true */
    int64_t retention_ms;    /* retention: "7d" */
    int64_t lease_ms;        /* lease: "30s" (renewed while a task runs) */
    int64_t sweep_ms;        /* sweep_interval: "30s" (longest a running workflow goes unchecked) */
    int64_t grace_ms;        /* grace: "10s" (SIGTERM: time for in-flight tasks) */
    int64_t poll_ms;         /* poll_interval: "50ms" (longest idle wait between polls) */
    int partitions;          /* partitions: 0 (stored; new: 1, or k * primaries >= 8) */
    char *queue_shards;      /* queue_shards: NULL (stored; new: "1", or a cluster's primaries) */
    int max_reaps;           /* max_reaps: 3 (lease expiries before a task fails) */
    char *log_level;         /* log_level: "info" (error|warn|info|debug) */
    char *log_format;        /* log_format: "logfmt" (logfmt|json) */
    char **types;            /* types: task types to serve; NULL = every queued type loaded */
    size_t ntypes;
    char **domains; /* domains: task domains to serve; NULL = none (plain queues) */
    size_t ndomains;
    /* queue_unpolled_after: "5m" (a queue with ready tasks no worker polls) */
    int64_t queue_unpolled_ms;
    json_object *plugins; /* plugins: { <plugin or lock name> = { ... } }, owned */
    int api;              /* api: true (serve the REST API) */
    char *api_listen;     /* api_listen: "127.0.0.1:8080" (port 0: any free port) */
    char *api_token;      /* api_token: NULL = no auth; else Bearer token for /api/ */
    char **api_hosts;     /* api_hosts: names the REST API answers to besides loopback ones */
    size_t napi_hosts;
    int64_t api_body_limit;     /* api_body_limit: "8MiB" (bytes) */
    char *payload_dir;          /* payload_dir: NULL = $TMPDIR/weft-payloads */
    int64_t payload_soft;       /* payload_soft: "128KiB" */
    int64_t payload_hard;       /* payload_hard: "16MiB" */
    int64_t lua_memory;         /* lua_memory: "32MiB" (per script evaluation) */
    int lua_instructions;       /* lua_instructions: 10000000 */
    int64_t lua_time_ms;        /* lua_time: "5s" */
    int64_t lua_result;         /* lua_result: "16MiB" (a result as JSON) */
    int64_t payload_sweep_ms;   /* payload_sweep: "10m" (0 = never) */
    int64_t payload_grace_ms;   /* payload_grace: "1h" (files younger are never removed) */
    int max_tasks;              /* max_tasks: 1000 (tasks in one definition) */
    int max_retry_count;        /* max_retry_count: 100 */
    int max_fork_width;         /* max_fork_width: 1000 */
    int max_subworkflow_depth;  /* max_subworkflow_depth: 1000 */
    int max_loop_iterations;    /* max_loop_iterations: 1000 (DO_WHILE without maxIterations) */
    int64_t max_variables_size; /* max_variables_size: "256KiB" */

    /* the REST API's connections (docs/rest-api.md) */
    int api_threads;                /* api_threads: 16 */
    int api_max_connections;        /* api_max_connections: 512 (more: 503) */
    int api_max_connections_per_ip; /* api_max_connections_per_ip: 128 (0 = no limit) */
    int64_t api_request_timeout_ms; /* api_request_timeout: "60s" (headers and body) */
    int64_t api_idle_timeout_ms;    /* api_idle_timeout: "30s" */
} cf_config;

/* The recursion and size limits of c (def.h). */
void cf_limits(const cf_config *c, def_limits *out);

/* The limits as the defaults and the environment set them (weft run and the
 * client, which read no config file): WEFT_MAX_TASKS ... */
int cf_env_limits(def_limits *out, weft_error *err);

/* Fill with defaults (allocates strings). */
void cf_defaults(cf_config *c);
void cf_free(cf_config *c);

/* Read a config file. Errors name the file, line and key: "weftd.lua: key
 * 'wrokers' is unknown", "weftd.lua: workers: expected a number". */
int cf_load_file(cf_config *c, const char *path, weft_error *err);

/* Apply the environment (WEFT_REDIS_URL, WEFT_KEY_PREFIX, WEFT_PLUGIN_PATH,
 * WEFT_API_LISTEN, WEFT_API_TOKEN). */
int cf_apply_env(cf_config *c, weft_error *err);

/* Set one key from text (a command-line flag): cf_set(c, "workers", "8"). */
int cf_set(cf_config *c, const char *key, const char *value, weft_error *err);

/* Describe every key, its type and default (weftd --help-config). */
void cf_describe(FILE *out);

#endif
