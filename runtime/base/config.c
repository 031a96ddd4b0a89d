#include "base/config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <lauxlib.h>

#include "lua/sandbox.h"
#include "base/util.h"

typedef enum cf_type {
    CF_STRING,
    CF_INT,
    CF_BOOL,
    CF_DURATION,
    CF_LIST,
    CF_OBJECT,
    CF_BYTES
} cf_type;

static const char *const type_names[] = {
    "a string", "an integer", "a boolean", "a duration", "a list of strings", "a table", "a size",
};
static const char *const type_short[] = {"string", "int",   "bool", "duration",
                                         "list",   "table", "bytes"};

/*
 * One row per key. def is the default written as cf_set would take it
 * (NULL = unset); cf_defaults parses it with the same code. min bounds int
 * and duration values; choices ("a|b|c") restricts a string.
 */
typedef struct cf_field {
    const char *key;
    cf_type type;
    size_t offset;
    size_t count_offset; /* CF_LIST: where the item count goes */
    const char *def;
    int64_t min;
    const char *choices;
    const char *env;
    const char *help;
} cf_field;

#define F(field) offsetof(cf_config, field)

static const cf_field fields[] = {
    {"redis_url", CF_STRING, F(redis_url), 0, "redis://127.0.0.1:6379", 0, NULL, "WEFT_REDIS_URL",
     "Redis server: redis://[:password@]host[:port][/db], or a comma-separated list of them "
     "(seed nodes: the first that answers is used)"},
    {"key_prefix", CF_STRING, F(key_prefix), 0, "weft:", 0, NULL, "WEFT_KEY_PREFIX",
     "prefix of every Redis key"},
    {"plugin_path", CF_STRING, F(plugin_path), 0, NULL, 0, NULL, "WEFT_PLUGIN_PATH",
     "plugin directories, colon-separated (unset: the default directories)"},
    {"daemon_id", CF_STRING, F(daemon_id), 0, NULL, 0, NULL, NULL,
     "this daemon's id (unset: <host>-<pid>)"},
    {"workers", CF_INT, F(workers), 0, "4", 1, NULL, NULL, "threads that claim and decide"},
    {"lock", CF_STRING, F(lock), 0, "none", 0, NULL, NULL,
     "lock provider guarding each workflow: none, local, redis or a plugin's"},
    {"lock_ttl", CF_DURATION, F(lock_ttl_ms), 0, "10s", 1, NULL, NULL,
     "how long a lock is held at most"},
    {"lock_wait", CF_DURATION, F(lock_wait_ms), 0, "2s", 0, NULL, NULL,
     "how long to wait for a held lock"},
    {"command_wait", CF_DURATION, F(command_wait_ms), 0, "10s", 1, NULL, NULL,
     "how long terminate, pause and resume through the REST API wait for their command to land "
     "on a busy workflow before answering 503 (it stays recorded and lands at the next save)"},
    {"fencing", CF_BOOL, F(fencing), 0, "true", 0, NULL, NULL,
     "refuse state writes from a stale decider"},
    {"retention", CF_DURATION, F(retention_ms), 0, "7d", 0, NULL, NULL,
     "how long ended workflows are kept"},
    {"lease", CF_DURATION, F(lease_ms), 0, "30s", 1, NULL, NULL,
     "task lease (renewed while the task runs)"},
    {"sweep_interval", CF_DURATION, F(sweep_ms), 0, "30s", 1, NULL, NULL,
     "longest a running workflow goes unchecked"},
    {"grace", CF_DURATION, F(grace_ms), 0, "10s", 0, NULL, NULL,
     "on SIGTERM: time for in-flight tasks"},
    {"poll_interval", CF_DURATION, F(poll_ms), 0, "50ms", 1, NULL, NULL,
     "longest idle wait between polls"},
    {"partitions", CF_INT, F(partitions), 0, "0", 0, NULL, "WEFT_PARTITIONS",
     "partitions of the keys every workflow touches (decider queue, wake tokens), 1-1024, "
     "fixed when the key prefix is first used (0: the stored number; for a new prefix 1, or on a "
     "Redis Cluster the smallest multiple of the primaries that is at least 8)"},
    {"queue_shards", CF_STRING, F(queue_shards), 0, NULL, 0, NULL, "WEFT_QUEUE_SHARDS",
     "queue shards per task queue, \"<n>[,<queue>=<n>]...\" (n 1-64): a queue's tasks without "
     "priority or limits spread over n shards; fixed when the key prefix is first used (unset: "
     "the stored text; for a new prefix \"1\", or the number of primaries on a Redis Cluster)"},
    {"max_reaps", CF_INT, F(max_reaps), 0, "3", 0, NULL, NULL,
     "lease expiries before a task fails"},
    {"queue_unpolled_after", CF_DURATION, F(queue_unpolled_ms), 0, "5m", 1, NULL, NULL,
     "a queue holding ready tasks that no worker polled this long is reported as unpolled (the "
     "Queues page, GET /api/queue/{name}, poll data)"},
    {"log_level", CF_STRING, F(log_level), 0, "info", 0, "error|warn|info|debug", NULL,
     "log verbosity (SIGHUP applies a new value)"},
    {"log_format", CF_STRING, F(log_format), 0, "logfmt", 0, "logfmt|json", NULL,
     "weftd's log lines: logfmt (ts=... level=... msg=\"...\") or json (one object a line)"},
    {"types", CF_LIST, F(types), F(ntypes), NULL, 0, NULL, NULL,
     "task types to serve (unset: every queued type loaded)"},
    {"domains", CF_LIST, F(domains), F(ndomains), NULL, 0, NULL, NULL,
     "task domains (worker labels) to serve: their queues of the served types; NO_DOMAIN "
     "stands for the plain queues (unset: only the plain queues)"},
    {"plugins", CF_OBJECT, F(plugins), 0, "{}", 0, NULL, NULL,
     "per-plugin config: { <plugin or lock name> = { ... } }"},
    {"api", CF_BOOL, F(api), 0, "true", 0, NULL, NULL, "serve the REST API (weftd --no-api)"},
    {"api_listen", CF_STRING, F(api_listen), 0, CF_API_LISTEN_DEFAULT, 0, NULL, "WEFT_API_LISTEN",
     "REST API address HOST:PORT ([v6]:PORT; port 0 = any free port, logged)"},
    {"api_token", CF_STRING, F(api_token), 0, NULL, 0, NULL, "WEFT_API_TOKEN",
     "Bearer token every /api/ request must carry (unset: no auth)"},
    {"api_hosts", CF_LIST, F(api_hosts), F(napi_hosts), NULL, 0, NULL, "WEFT_API_HOSTS",
     "host names the REST API answers to (the Host header; \"*\": any), besides localhost and "
     "IP addresses; their pages' browser requests are taken too (unset: any name when api_token "
     "is set and api_listen is not a loopback address, else none)"},
    {"api_body_limit", CF_BYTES, F(api_body_limit), 0, "8MiB", 1, NULL, NULL,
     "largest request body the REST API accepts (bytes, or 512KiB, 8MiB ...)"},
    {"api_threads", CF_INT, F(api_threads), 0, "16", 1, NULL, NULL,
     "threads serving the REST API (one epoll loop each; event streams and long polls wait off "
     "them)"},
    {"api_max_connections", CF_INT, F(api_max_connections), 0, "512", 1, NULL, NULL,
     "REST API connections served at once; a request on one past this is answered 503"},
    {"api_max_connections_per_ip", CF_INT, F(api_max_connections_per_ip), 0, "128", 0, NULL, NULL,
     "REST API connections from one client address; past this 503 (0 = no limit; raise it "
     "behind a proxy)"},
    {"api_request_timeout", CF_DURATION, F(api_request_timeout_ms), 0, "60s", 1, NULL, NULL,
     "time a client has to send a whole request (headers and body); slower ones are dropped"},
    {"api_idle_timeout", CF_DURATION, F(api_idle_timeout_ms), 0, "30s", 1000, NULL, NULL,
     "a REST API connection with no traffic this long is closed"},
    {"payload_dir", CF_STRING, F(payload_dir), 0, NULL, 0, NULL, "WEFT_PAYLOAD_DIR",
     "where large payloads are kept (shared between hosts; unset: $TMPDIR/weft-payloads)"},
    {"payload_soft", CF_BYTES, F(payload_soft), 0, "128KiB", 0, NULL, "WEFT_PAYLOAD_SOFT",
     "inputs/outputs larger than this are kept outside the execution (0 = never)"},
    {"lua_memory", CF_BYTES, F(lua_memory), 0, "32MiB", 65536, NULL, NULL,
     "memory a LAMBDA, decision expr or loop condition may allocate"},
    {"lua_instructions", CF_INT, F(lua_instructions), 0, "10000000", 1000, NULL, NULL,
     "Lua instructions a LAMBDA, decision expr or loop condition may run"},
    {"lua_time", CF_DURATION, F(lua_time_ms), 0, "5s", 1, NULL, NULL,
     "wall-clock time a LAMBDA, decision expr or loop condition may take"},
    {"lua_result", CF_BYTES, F(lua_result), 0, "16MiB", 1024, NULL, NULL,
     "size of what a LAMBDA returns, counted as JSON while it is converted"},
    {"payload_hard", CF_BYTES, F(payload_hard), 0, "16MiB", 0, NULL, "WEFT_PAYLOAD_HARD",
     "inputs/outputs larger than this are refused (0 = no limit)"},
    {"payload_sweep", CF_DURATION, F(payload_sweep_ms), 0, "10m", 0, NULL, NULL,
     "how often this daemon removes payload files of executions that no longer exist (0 = never)"},
    {"payload_grace", CF_DURATION, F(payload_grace_ms), 0, "1h", 1000, NULL, NULL,
     "payload files younger than this are never removed (a start writes them before it creates the "
     "execution)"},
    /* recursion and size limits (def_limits; weft run reads the same variables) */
    {"max_tasks", CF_INT, F(max_tasks), 0, "1000", 1, NULL, "WEFT_MAX_TASKS",
     "tasks in one definition, nested ones counted (more fails the definition)"},
    {"max_retry_count", CF_INT, F(max_retry_count), 0, "100", 0, NULL, "WEFT_MAX_RETRY_COUNT",
     "largest retryCount a task may declare (more fails the definition)"},
    {"max_fork_width", CF_INT, F(max_fork_width), 0, "1000", 1, NULL, "WEFT_MAX_FORK_WIDTH",
     "branches of a fork (or cases of a decision); tasks a dynamic fork starts at once"},
    {"max_subworkflow_depth", CF_INT, F(max_subworkflow_depth), 0, "1000", 1, NULL,
     "WEFT_MAX_SUBWORKFLOW_DEPTH", "sub-workflow nesting below the root (deeper fails the task)"},
    {"max_loop_iterations", CF_INT, F(max_loop_iterations), 0, "1000", 1, NULL,
     "WEFT_MAX_LOOP_ITERATIONS", "DO_WHILE iterations when the loop sets no maxIterations"},
    {"max_variables_size", CF_BYTES, F(max_variables_size), 0, "256KiB", 1, NULL,
     "WEFT_MAX_VARIABLES_SIZE", "workflow.variables as JSON (a SET_VARIABLE beyond fails)"},
};

#define NFIELDS (sizeof fields / sizeof fields[0])

#define AT(c, f, T) ((T *)(void *)((char *)(c) + (f)->offset))

void cf_limits(const cf_config *c, def_limits *out)
{
    out->max_tasks = c->max_tasks;
    out->max_retry_count = c->max_retry_count;
    out->max_fork_width = c->max_fork_width;
    out->max_depth = c->max_subworkflow_depth;
    out->max_loop_iterations = c->max_loop_iterations;
    out->max_variables = c->max_variables_size;
}

int cf_env_limits(def_limits *out, weft_error *err)
{
    cf_config c;
    int rc;
    cf_defaults(&c);
    rc = cf_apply_env(&c, err);
    if (rc == 0) cf_limits(&c, out);
    cf_free(&c);
    return rc;
}

static const cf_field *field_of(const char *key)
{
    size_t i;
    for (i = 0; i < NFIELDS; i++)
        if (!strcmp(fields[i].key, key)) return &fields[i];
    return NULL;
}

/* Levenshtein distance, capped: anything above 3 reads as 3. */
static int distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b), i, j;
    int row[64], prev, tmp;
    if (la > 60 || lb > 60) return 3;
    for (j = 0; j <= lb; j++)
        row[j] = (int)j;
    for (i = 1; i <= la; i++) {
        prev = row[0];
        row[0] = (int)i;
        for (j = 1; j <= lb; j++) {
            int best = prev + (a[i - 1] != b[j - 1]);
            if (row[j] + 1 < best) best = row[j] + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            tmp = row[j];
            row[j] = best;
            prev = tmp;
        }
    }
    return row[lb] > 3 ? 3 : row[lb];
}

/* The known key closest to key, if within distance 2; else NULL. */
static const char *suggest(const char *key)
{
    const char *best = NULL;
    int bd = 3;
    size_t i;
    for (i = 0; i < NFIELDS; i++) {
        int d = distance(key, fields[i].key);
        if (d < bd) {
            bd = d;
            best = fields[i].key;
        }
    }
    return best;
}

static int unknown_key(const char *key, weft_error *err)
{
    const char *s = suggest(key);
    if (s) return wu_err(err, WEFT_EINVAL, "key '%s' is unknown (did you mean '%s'?)", key, s);
    return wu_err(err, WEFT_EINVAL, "key '%s' is unknown", key);
}

/* ---- values ---- */

/* Release what field f of c holds and clear it. */
static void field_clear(cf_config *c, const cf_field *f)
{
    switch (f->type) {
    case CF_STRING:
        free(*AT(c, f, char *));
        *AT(c, f, char *) = NULL;
        break;
    case CF_LIST: {
        char **v = *AT(c, f, char **);
        size_t i, n = *(size_t *)(void *)((char *)c + f->count_offset);
        for (i = 0; i < n; i++)
            free(v[i]);
        free(v);
        *AT(c, f, char **) = NULL;
        *(size_t *)(void *)((char *)c + f->count_offset) = 0;
        break;
    }
    case CF_OBJECT:
        json_object_put(*AT(c, f, json_object *));
        *AT(c, f, json_object *) = NULL;
        break;
    default:
        break;
    }
}

/*
 * The typed value of one field, parsed but not yet stored, so a bad value
 * leaves the config untouched. Owns its pointers until stored.
 */
typedef struct value {
    char *s;
    int64_t i;
    char **list;
    size_t n;
    json_object *obj;
} value;

static void value_free(value *v)
{
    size_t i;
    free(v->s);
    for (i = 0; i < v->n; i++)
        free(v->list[i]);
    free(v->list);
    json_object_put(v->obj);
    memset(v, 0, sizeof *v);
}

/* Move v into field f of c (c's old value is freed). */
static void value_store(cf_config *c, const cf_field *f, value *v)
{
    field_clear(c, f);
    switch (f->type) {
    case CF_STRING:
        *AT(c, f, char *) = v->s;
        v->s = NULL;
        break;
    case CF_INT:
    case CF_BOOL:
        *AT(c, f, int) = (int)v->i;
        break;
    case CF_DURATION:
    case CF_BYTES:
        *AT(c, f, int64_t) = v->i;
        break;
    case CF_LIST:
        *AT(c, f, char **) = v->list;
        *(size_t *)(void *)((char *)c + f->count_offset) = v->n;
        v->list = NULL;
        v->n = 0;
        break;
    case CF_OBJECT:
        *AT(c, f, json_object *) = v->obj;
        v->obj = NULL;
        break;
    }
    value_free(v);
}

static int nomem(weft_error *err)
{
    return wu_err(err, WEFT_ENOMEM, "out of memory");
}

/* Range and choice checks shared by files and text. */
static int check_value(const cf_field *f, value *v, weft_error *err)
{
    if (f->type == CF_INT && (v->i < f->min || v->i > INT_MAX))
        return wu_err(err, WEFT_EINVAL, "%s: must be between %lld and %d (got %lld)", f->key,
                      (long long)f->min, INT_MAX, (long long)v->i);
    if (f->type == CF_DURATION && v->i < f->min)
        return wu_err(err, WEFT_EINVAL, "%s: must be at least %lld ms", f->key, (long long)f->min);
    if (f->type == CF_BYTES && v->i < f->min)
        return wu_err(err, WEFT_EINVAL, "%s: must be at least %lld bytes", f->key,
                      (long long)f->min);
    if (f->type == CF_STRING && f->choices && v->s) {
        const char *p = f->choices;
        size_t n = strlen(v->s);
        while (p) {
            const char *bar = strchr(p, '|');
            size_t m = bar ? (size_t)(bar - p) : strlen(p);
            if (m == n && !strncmp(p, v->s, n)) return 0;
            p = bar ? bar + 1 : NULL;
        }
        return wu_err(err, WEFT_EINVAL, "%s: expected one of %s (got '%s')", f->key, f->choices,
                      v->s);
    }
    return 0;
}

static int push_item(value *v, const char *s, size_t len, weft_error *err)
{
    char **grown = realloc(v->list, (v->n + 1) * sizeof *grown);
    if (!grown) return nomem(err);
    v->list = grown;
    if (!(v->list[v->n] = strndup(s, len))) return nomem(err);
    v->n++;
    return 0;
}

static int parse_bool_text(const char *s, int *out)
{
    static const char *const yes[] = {"true", "yes", "on", "1"};
    static const char *const no[] = {"false", "no", "off", "0"};
    size_t i;
    for (i = 0; i < 4; i++) {
        if (!strcasecmp(s, yes[i]) || !strcasecmp(s, no[i])) {
            *out = !strcasecmp(s, yes[i]);
            return 0;
        }
    }
    return -1;
}

/* A size: a number of bytes, or with a unit (B, KB, KiB, MB, MiB, GB, GiB; k/m/g too). */
static int parse_bytes(const cf_field *f, const char *text, int64_t *out, weft_error *err)
{
    static const struct {
        const char *unit;
        int64_t mul;
    } units[] = {{"", 1},        {"b", 1},           {"k", 1024},     {"kb", 1000},
                 {"kib", 1024},  {"m", 1024 * 1024}, {"mb", 1000000}, {"mib", 1024 * 1024},
                 {"g", 1 << 30}, {"gb", 1000000000}, {"gib", 1 << 30}};
    char *end;
    double v;
    size_t i;
    errno = 0;
    v = strtod(text, &end);
    if (end == text || errno || v < 0 || v != v) goto bad;
    while (*end == ' ')
        end++;
    for (i = 0; i < sizeof units / sizeof units[0]; i++)
        if (!strcasecmp(end, units[i].unit)) {
            double b = v * (double)units[i].mul;
            if (b > 9.0e15) goto bad;
            *out = (int64_t)b;
            return 0;
        }
bad:
    return wu_err(err, WEFT_EINVAL,
                  "%s: expected a size such as 8MiB, 512KiB or 1048576 (got '%s')", f->key, text);
}

/*
 * Text as a flag gives it: "8", "true", "30s", "a,b,c", JSON for tables.
 * For a string whose default is unset, "" unsets it again.
 */
static int parse_text(const cf_field *f, const char *text, value *v, weft_error *err)
{
    switch (f->type) {
    case CF_STRING:
        if (!*text && !f->def) return 0;
        if (!(v->s = strdup(text))) return nomem(err);
        break;
    case CF_INT: {
        char *end;
        long long n;
        errno = 0;
        n = strtoll(text, &end, 10);
        if (!*text || *end || errno)
            return wu_err(err, WEFT_EINVAL, "%s: expected an integer (got '%s')", f->key, text);
        v->i = n;
        break;
    }
    case CF_BOOL: {
        int b;
        if (parse_bool_text(text, &b))
            return wu_err(err, WEFT_EINVAL, "%s: expected a boolean: true or false (got '%s')",
                          f->key, text);
        v->i = b;
        break;
    }
    case CF_DURATION:
        if (wu_parse_duration_str(text, &v->i, err))
            return wu_err_prefix(err, "%s: expected a duration: ", f->key);
        break;
    case CF_BYTES:
        if (parse_bytes(f, text, &v->i, err)) return WEFT_EINVAL;
        break;
    case CF_LIST: {
        /* "" is the empty list; otherwise comma-separated, blanks trimmed. */
        const char *p = *text ? text : NULL;
        while (p) {
            const char *comma = strchr(p, ',');
            const char *e = comma ? comma : p + strlen(p), *b = p;
            while (b < e && isspace((unsigned char)*b))
                b++;
            while (e > b && isspace((unsigned char)e[-1]))
                e--;
            if (b == e)
                return wu_err(err, WEFT_EINVAL, "%s: empty item in list '%s'", f->key, text);
            if (push_item(v, b, (size_t)(e - b), err)) return WEFT_ENOMEM;
            p = comma ? comma + 1 : NULL;
        }
        break;
    }
    case CF_OBJECT:
        if (wu_parse_json(f->key, text, &v->obj, err)) return WEFT_EINVAL;
        if (!json_object_is_type(v->obj, json_type_object))
            return wu_err(err, WEFT_EINVAL, "%s: expected a JSON object (got '%s')", f->key, text);
        break;
    }
    return check_value(f, v, err);
}

static const char *json_type_text(json_object *j)
{
    switch (json_object_get_type(j)) {
    case json_type_null:
        return "nil";
    case json_type_boolean:
        return "a boolean";
    case json_type_int:
        return "an integer";
    case json_type_double:
        return "a number";
    case json_type_string:
        return "a string";
    case json_type_array:
        return "a list";
    case json_type_object:
        return "a table";
    }
    return "?";
}

static int expected(const cf_field *f, json_object *j, weft_error *err)
{
    return wu_err(err, WEFT_EINVAL, "%s: expected %s (got %s)", f->key, type_names[f->type],
                  json_type_text(j));
}

/* A value from the config file, as JSON (borrowed). */
static int parse_json(const cf_field *f, json_object *j, value *v, weft_error *err)
{
    switch (f->type) {
    case CF_STRING:
        if (!json_object_is_type(j, json_type_string)) return expected(f, j, err);
        if (!*json_object_get_string(j) && !f->def) break; /* as in parse_text */
        if (!(v->s = strdup(json_object_get_string(j)))) return nomem(err);
        break;
    case CF_INT:
        if (json_object_is_type(j, json_type_int)) {
            v->i = json_object_get_int64(j);
        } else if (json_object_is_type(j, json_type_double)) {
            double d = json_object_get_double(j);
            if (d != (double)(int64_t)d || d < -9.0e15 || d > 9.0e15) return expected(f, j, err);
            v->i = (int64_t)d;
        } else {
            return expected(f, j, err);
        }
        break;
    case CF_BOOL:
        if (!json_object_is_type(j, json_type_boolean)) return expected(f, j, err);
        v->i = json_object_get_boolean(j);
        break;
    case CF_DURATION:
        if (!json_object_is_type(j, json_type_string) && !json_object_is_type(j, json_type_int) &&
            !json_object_is_type(j, json_type_double))
            return wu_err(err, WEFT_EINVAL,
                          "%s: expected a duration such as \"30s\" or a number of seconds (got %s)",
                          f->key, json_type_text(j));
        if (wu_parse_duration(j, &v->i, err)) return wu_err_prefix(err, "%s: ", f->key);
        break;
    case CF_BYTES:
        if (json_object_is_type(j, json_type_int) || json_object_is_type(j, json_type_double)) {
            double d = json_object_get_double(j);
            if (d < 0 || d > 9.0e15) return parse_bytes(f, "-", &v->i, err);
            v->i = (int64_t)d;
        } else if (json_object_is_type(j, json_type_string)) {
            if (parse_bytes(f, json_object_get_string(j), &v->i, err)) return WEFT_EINVAL;
        } else {
            return expected(f, j, err);
        }
        break;
    case CF_LIST: {
        size_t i, n;
        /* An empty Lua table converts as an empty object. */
        if (json_object_is_type(j, json_type_object) && json_object_object_length(j) == 0) break;
        if (!json_object_is_type(j, json_type_array)) return expected(f, j, err);
        n = json_object_array_length(j);
        for (i = 0; i < n; i++) {
            json_object *it = json_object_array_get_idx(j, i);
            if (!json_object_is_type(it, json_type_string))
                return wu_err(err, WEFT_EINVAL, "%s[%zu]: expected a string (got %s)", f->key,
                              i + 1, json_type_text(it));
            if (push_item(v, json_object_get_string(it), (size_t)json_object_get_string_len(it),
                          err))
                return WEFT_ENOMEM;
        }
        break;
    }
    case CF_OBJECT:
        if (!json_object_is_type(j, json_type_object)) return expected(f, j, err);
        v->obj = json_object_get(j);
        break;
    }
    return check_value(f, v, err);
}

/* ---- public ---- */

void cf_defaults(cf_config *c)
{
    size_t i;
    memset(c, 0, sizeof *c);
    for (i = 0; i < NFIELDS; i++) {
        value v = {0};
        if (!fields[i].def) continue;
        /* The defaults are valid by construction: only memory can fail. */
        if (parse_text(&fields[i], fields[i].def, &v, NULL) == 0)
            value_store(c, &fields[i], &v);
        else
            value_free(&v);
    }
}

void cf_free(cf_config *c)
{
    size_t i;
    if (!c) return;
    for (i = 0; i < NFIELDS; i++)
        field_clear(c, &fields[i]);
    memset(c, 0, sizeof *c);
}

int cf_set(cf_config *c, const char *key, const char *text, weft_error *err)
{
    const cf_field *f = key ? field_of(key) : NULL;
    value v = {0};
    int rc;
    if (!f) return unknown_key(key ? key : "(null)", err);
    if (!text) return wu_err(err, WEFT_EINVAL, "%s: needs a value", key);
    if ((rc = parse_text(f, text, &v, err))) {
        value_free(&v);
        return rc;
    }
    value_store(c, f, &v);
    return 0;
}

int cf_apply_env(cf_config *c, weft_error *err)
{
    size_t i;
    int rc;
    for (i = 0; i < NFIELDS; i++) {
        const char *text = fields[i].env ? getenv(fields[i].env) : NULL;
        if (!text || !*text) continue;
        if ((rc = cf_set(c, fields[i].key, text, err)))
            return wu_err_prefix(err, "%s: ", fields[i].env);
    }
    return 0;
}

/*
 * The first line of src that looks like it sets key ("key =", "["key"] ="),
 * for messages; 0 if none does (the key may have been computed).
 */
static int line_of(const char *src, const char *key)
{
    size_t n = strlen(key);
    const char *p;
    for (p = src; (p = strstr(p, key)) != NULL; p += n) {
        const char *q = p + n, *b = p;
        int quoted = b > src && (b[-1] == '"' || b[-1] == '\'');
        if (quoted) {
            if (*q != b[-1]) continue;
            b--, q++;
            while (b > src && (b[-1] == ' ' || b[-1] == '\t'))
                b--;
            if (b == src || b[-1] != '[') continue;
            while (*q == ' ' || *q == '\t')
                q++;
            if (*q++ != ']') continue;
        } else if (b > src && (isalnum((unsigned char)b[-1]) || b[-1] == '_' || b[-1] == '.')) {
            continue;
        }
        while (*q == ' ' || *q == '\t')
            q++;
        if (q[0] == '=' && q[1] != '=') {
            int line = 1;
            for (b = src; b < p; b++)
                line += *b == '\n';
            return line;
        }
    }
    return 0;
}

/* Protected: compile the file (upvalue: struct) in a fresh sandbox env. */
struct chunk {
    const char *name; /* "=path" */
    const char *src;
    size_t len;
    int syntax;
};

static int load_chunk(lua_State *L)
{
    struct chunk *ch = lua_touserdata(L, 1);
    if (luaL_loadbufferx(L, ch->src, ch->len, ch->name, "t") != LUA_OK) {
        ch->syntax = 1;
        return 1; /* the message */
    }
    sbx_push_env(L);
    lua_setupvalue(L, -2, 1);
    return 1;
}

/* Make dst a deep copy of src; on failure dst is left empty. */
static int copy_config(cf_config *dst, const cf_config *src)
{
    size_t i, j;
    memcpy(dst, src, sizeof *dst);
    for (i = 0; i < NFIELDS; i++) {
        const cf_field *f = &fields[i];
        if (f->type == CF_STRING || f->type == CF_LIST || f->type == CF_OBJECT)
            *AT(dst, f, void *) = NULL;
        if (f->type == CF_LIST) *(size_t *)(void *)((char *)dst + f->count_offset) = 0;
    }
    for (i = 0; i < NFIELDS; i++) {
        const cf_field *f = &fields[i];
        if (f->type == CF_STRING && *AT(src, f, char *)) {
            if (!(*AT(dst, f, char *) = strdup(*AT(src, f, char *)))) goto fail;
        } else if (f->type == CF_OBJECT && *AT(src, f, json_object *)) {
            json_object *copy = NULL;
            if (json_object_deep_copy(*AT(src, f, json_object *), &copy, NULL) != 0) goto fail;
            *AT(dst, f, json_object *) = copy;
        } else if (f->type == CF_LIST && *AT(src, f, char **)) {
            size_t n = *(const size_t *)(const void *)((const char *)src + f->count_offset);
            char **from = *AT(src, f, char **), **to = calloc(n ? n : 1, sizeof *to);
            if (!to) goto fail;
            *AT(dst, f, char **) = to;
            *(size_t *)(void *)((char *)dst + f->count_offset) = n;
            for (j = 0; j < n; j++)
                if (!(to[j] = strdup(from[j]))) goto fail; /* calloc: the rest stay NULL */
        }
    }
    return 0;
fail:
    cf_free(dst);
    return WEFT_ENOMEM;
}

/* Apply the file's table (borrowed) to c; on error c is unchanged. */
static int apply_table(cf_config *c, json_object *t, const char *path, const char *src,
                       weft_error *err)
{
    cf_config next;
    int rc = 0, line;
    const char *bad = NULL;

    if (copy_config(&next, c)) return wu_err(err, WEFT_ENOMEM, "%s: out of memory", path);
    json_object_object_foreach(t, k, j)
    {
        const cf_field *f = field_of(k);
        value v = {0};
        bad = k;
        if (!f) {
            rc = unknown_key(k, err);
            break;
        }
        if ((rc = parse_json(f, j, &v, err))) {
            value_free(&v);
            break;
        }
        value_store(&next, f, &v);
    }
    if (rc) {
        cf_free(&next);
        line = bad ? line_of(src, bad) : 0;
        if (line) return wu_err_prefix(err, "%s:%d: ", path, line);
        return wu_err_prefix(err, "%s: ", path);
    }
    cf_free(c);
    *c = next;
    return 0;
}

int cf_load_file(cf_config *c, const char *path, weft_error *err)
{
    struct chunk ch = {NULL, NULL, 0, 0};
    char *src = NULL, *name = NULL;
    size_t len, plen = strlen(path);
    json_object *t = NULL;
    lua_State *L;
    sbx *s;
    int rc;

    if ((rc = wu_read_file(path, &src, &len, err))) return rc;
    if (!(name = malloc(plen + 2))) {
        free(src);
        return wu_err(err, WEFT_ENOMEM, "%s: out of memory", path);
    }
    name[0] = '=';
    memcpy(name + 1, path, plen + 1);
    ch.name = name;
    ch.src = src;
    ch.len = len;
    if (!(s = sbx_new(NULL, err))) {
        free(name);
        free(src);
        return WEFT_ENOMEM;
    }
    L = sbx_state(s);

    lua_pushcfunction(L, load_chunk);
    lua_pushlightuserdata(L, &ch);
    if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
        rc = wu_err(err, WEFT_ENOMEM, "%s: %s", path, lua_tostring(L, -1));
        goto out;
    }
    if (ch.syntax) {
        /* Lua's message reads "<path>:LINE: ..." already. */
        rc = wu_err(err, WEFT_EINVAL, "%s", lua_tostring(L, -1));
        goto out;
    }
    if ((rc = sbx_pcall(s, 0, 1, err))) {
        if (rc == WEFT_ESCRIPT) rc = err ? (err->code = WEFT_EINVAL) : WEFT_EINVAL;
        if (err && (strncmp(err->msg, path, plen) != 0 || err->msg[plen] != ':'))
            wu_err_prefix(err, "%s: ", path);
        goto out;
    }
    if (!lua_istable(L, -1)) {
        rc = wu_err(err, WEFT_EINVAL, "%s: the file must return a table of settings (got %s)", path,
                    luaL_typename(L, -1));
        goto out;
    }
    if ((rc = sbx_to_json_path(L, -1, "config", &t, err))) {
        wu_err_prefix(err, "%s: ", path);
        goto out;
    }
    if (!json_object_is_type(t, json_type_object)) {
        rc = wu_err(err, WEFT_EINVAL,
                    "%s: the file must return a table of settings (key = value), not a list", path);
        goto out;
    }
    rc = apply_table(c, t, path, src, err);
out:
    json_object_put(t);
    sbx_free(s);
    free(name);
    free(src);
    return rc;
}

void cf_describe(FILE *out)
{
    size_t i;
    fprintf(out, "%-16s %-9s %-26s %s\n", "key", "type", "default", "meaning");
    for (i = 0; i < NFIELDS; i++) {
        const cf_field *f = &fields[i];
        char def[64];
        if (!f->def)
            snprintf(def, sizeof def, "(unset)");
        else if (f->type == CF_STRING)
            snprintf(def, sizeof def, "\"%s\"", f->def);
        else
            snprintf(def, sizeof def, "%s", f->def);
        fprintf(out, "%-16s %-9s %-26s %s", f->key, type_short[f->type], def, f->help);
        if (f->choices) fprintf(out, " (%s)", f->choices);
        if (f->env) fprintf(out, " [env %s]", f->env);
        fputc('\n', out);
    }
}
