/*
 * weft-bench --redis: the runs against a Redis server (docs/performance.md).
 * It starts the weftd daemons on a private key prefix, submits with op_start,
 * listens for terminal events on one PSUBSCRIBE connection, reads INFO
 * commandstats and runs the redis-benchmark SET baseline. The driver's
 * options and results are in weft-bench.c.
 */
#include "autoconf.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#include <hiredis/hiredis.h>
#include <json-c/json.h>

#include "plugin/host.h"
#include "core/ops.h"
#include "plugin/loader.h"
#include "base/redis_url.h"
#include "store/redis/backend.h"
#include "store/redis/slots.h"
#include "base/util.h"

#include "bench.h"

#define BN_STATS_MAX 64
#define SUBMIT_CHUNK 64 /* burst: starts per round trip */

/* ---- Redis: the server ---- */

static redisReply *cmd(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    redisReply *x;
    va_start(ap, fmt);
    x = redisvCommand(c, fmt, ap);
    va_end(ap);
    if (x && x->type == REDIS_REPLY_ERROR) {
        fprintf(stderr, "weft-bench: redis: %s\n", x->str);
        freeReplyObject(x);
        return NULL;
    }
    return x;
}

static redisContext *r_connect(const ru_url *u, const char *url)
{
    struct timeval tv = {5, 0};
    redisContext *c = u->path ? redisConnectUnixWithTimeout(u->path, tv)
                              : redisConnectWithTimeout(u->host, u->port, tv);
    redisReply *x = NULL;
    if (!c || c->err) {
        fprintf(stderr, "weft-bench: %s: %s\n", url, c ? c->errstr : "out of memory");
        if (c) redisFree(c);
        return NULL;
    }
    if (u->password)
        x = u->user ? cmd(c, "AUTH %s %s", u->user, u->password) : cmd(c, "AUTH %s", u->password);
    if (u->password && !x) goto fail;
    if (x) freeReplyObject(x);
    if (u->db && !(x = cmd(c, "SELECT %d", u->db))) goto fail;
    if (u->db) freeReplyObject(x);
    return c;
fail:
    redisFree(c);
    return NULL;
}

/*
 * The servers the run's keys live on: the seed alone, or on a Redis Cluster
 * its primaries (from CLUSTER SLOTS), each with a connection of the bench's
 * own for INFO, key counts and the clean-up.
 */
typedef struct servers {
    redisContext *c[64];
    char name[64][300];
    int n;
    rc_map map;
} servers;

static int servers_open(servers *v, redisContext *seed, const ru_url *u)
{
    redisReply *x = cmd(seed, "INFO cluster");
    weft_error err = {0};
    size_t i;
    int cluster = x && x->type == REDIS_REPLY_STRING && strstr(x->str, "cluster_enabled:1");
    if (x) freeReplyObject(x);
    memset(v, 0, sizeof *v);
    if (!cluster) {
        v->c[0] = seed;
        snprintf(v->name[0], sizeof v->name[0], "%s", u->shown);
        v->n = 1;
        return 0;
    }
    x = cmd(seed, "CLUSTER SLOTS");
    if (rc_map_read(&v->map, x, &err)) {
        fprintf(stderr, "weft-bench: %s\n", err.msg);
        if (x) freeReplyObject(x);
        return -1;
    }
    freeReplyObject(x);
    for (i = 0; i < v->map.nnodes && i < 64; i++) {
        ru_url nu = *u;
        nu.host = v->map.nodes[i].host;
        nu.port = v->map.nodes[i].port;
        nu.path = NULL;
        snprintf(v->name[i], sizeof v->name[i], "%s:%d", nu.host, nu.port);
        if (!(v->c[i] = r_connect(&nu, v->name[i]))) return -1;
        v->n++;
    }
    return 0;
}

static void servers_close(servers *v, redisContext *seed)
{
    int i;
    for (i = 0; i < v->n; i++)
        if (v->c[i] != seed) redisFree(v->c[i]);
    rc_map_free(&v->map);
}

/* The connection serving key. */
static redisContext *server_of(const servers *v, const char *key)
{
    const rc_node *n = v->map.nnodes ? rc_map_node(&v->map, rc_key_slot(key, strlen(key))) : NULL;
    return n ? v->c[n - v->map.nodes] : v->c[0];
}

/* INFO <section> as text (caller frees), or NULL. */
static char *info(redisContext *c, const char *section)
{
    redisReply *x = cmd(c, "INFO %s", section);
    char *s = x && x->type == REDIS_REPLY_STRING ? strdup(x->str) : NULL;
    if (x) freeReplyObject(x);
    return s;
}

static double info_num(const char *text, const char *field)
{
    size_t n = strlen(field);
    const char *p = text;
    while (p && *p) {
        if (!strncmp(p, field, n) && p[n] == ':') return strtod(p + n + 1, NULL);
        p = strchr(p, '\n');
        if (p) p++;
    }
    return 0;
}

/* What the server did, for deltas across the run. */
typedef struct rstats {
    double used_memory, cpu_s, reads, commands;
    int ncmds;
    char cmd_name[BN_STATS_MAX][48];
    double cmd_calls[BN_STATS_MAX], cmd_usec[BN_STATS_MAX];
} rstats;

static int rstats_one(redisContext *c, rstats *s)
{
    char *mem = info(c, "memory"), *cpu = info(c, "cpu"), *st = info(c, "stats"),
         *cs = info(c, "commandstats"), *p;
    int ok = mem && cpu && st && cs;
    memset(s, 0, sizeof *s);
    if (ok) {
        s->used_memory = info_num(mem, "used_memory");
        s->cpu_s = info_num(cpu, "used_cpu_sys") + info_num(cpu, "used_cpu_user");
        s->reads = info_num(st, "total_reads_processed");
        s->commands = info_num(st, "total_commands_processed");
        /* cmdstat_<name>:calls=N,... */
        for (p = cs; p && *p && s->ncmds < BN_STATS_MAX; p = strchr(p, '\n'), p = p ? p + 1 : p) {
            const char *colon, *calls, *usec;
            if (strncmp(p, "cmdstat_", 8) || !(colon = strchr(p, ':')) ||
                !(calls = strstr(colon, "calls=")) || !(usec = strstr(colon, "usec=")))
                continue;
            snprintf(s->cmd_name[s->ncmds], sizeof s->cmd_name[0], "%.*s", (int)(colon - p - 8),
                     p + 8);
            s->cmd_usec[s->ncmds] = strtod(usec + 5, NULL);
            s->cmd_calls[s->ncmds++] = strtod(calls + 6, NULL);
        }
    }
    free(mem);
    free(cpu);
    free(st);
    free(cs);
    return ok ? 0 : -1;
}

/* The servers' stats, summed (per command too), and each one's commands and
 * keys under prefix (cmds[i], keys[i]). */
static int rstats_take(const servers *v, const char *prefix, rstats *s, double *cmds, double *keys)
{
    int i, k;
    memset(s, 0, sizeof *s);
    for (i = 0; i < v->n; i++) {
        rstats one;
        char cursor[32] = "0";
        if (rstats_one(v->c[i], &one)) return -1;
        s->used_memory += one.used_memory;
        s->cpu_s += one.cpu_s;
        s->reads += one.reads;
        s->commands += one.commands;
        cmds[i] = one.commands;
        for (k = 0; k < one.ncmds; k++) {
            int at = -1, j;
            for (j = 0; j < s->ncmds && at < 0; j++)
                if (!strcmp(s->cmd_name[j], one.cmd_name[k])) at = j;
            if (at < 0 && s->ncmds < BN_STATS_MAX) {
                at = s->ncmds++;
                snprintf(s->cmd_name[at], sizeof s->cmd_name[at], "%s", one.cmd_name[k]);
            }
            if (at >= 0) {
                s->cmd_calls[at] += one.cmd_calls[k];
                s->cmd_usec[at] += one.cmd_usec[k];
            }
        }
        keys[i] = 0;
        do { /* the run's keys on this server */
            redisReply *x = cmd(v->c[i], "SCAN %s MATCH %s* COUNT 1000", cursor, prefix);
            if (!x || x->type != REDIS_REPLY_ARRAY || x->elements != 2) {
                if (x) freeReplyObject(x);
                break;
            }
            snprintf(cursor, sizeof cursor, "%s", x->element[0]->str);
            keys[i] += (double)x->element[1]->elements;
            freeReplyObject(x);
        } while (strcmp(cursor, "0"));
    }
    return 0;
}

static int rstats_find(const rstats *s, const char *name)
{
    int i;
    for (i = 0; i < s->ncmds; i++)
        if (!strcmp(s->cmd_name[i], name)) return i;
    return -1;
}

static void print_cmd_stats(const rstats *a, const rstats *b, double tasks)
{
    int i;
    fprintf(stderr,
            "weft-bench: Redis commands per task (scripts' inner calls counted too; "
            "a script's time includes theirs):\n  %-24s %8s %10s\n",
            "command", "calls", "usec");
    for (i = 0; i < b->ncmds; i++) {
        int k = rstats_find(a, b->cmd_name[i]);
        double d = b->cmd_calls[i] - (k >= 0 ? a->cmd_calls[k] : 0),
               us = b->cmd_usec[i] - (k >= 0 ? a->cmd_usec[k] : 0);
        if (d > 0 && strcmp(b->cmd_name[i], "info"))
            fprintf(stderr, "  %-24s %8.3f %10.2f\n", b->cmd_name[i], d / tasks, us / tasks);
    }
}

/* redis-benchmark -t set -c 50 -n N -q against the server: requests/s, or 0. */
static double set_baseline(const ru_url *u, long n)
{
    char command[1024], line[512], *p;
    FILE *f;
    double rps = 0;
    int len;
    if (u->path)
        len = snprintf(command, sizeof command, "redis-benchmark -s '%s'", u->path);
    else
        len = snprintf(command, sizeof command, "redis-benchmark -h '%s' -p %d", u->host, u->port);
    if (u->password)
        len += snprintf(command + len, sizeof command - (size_t)len, " -a '%s'%s%s%s", u->password,
                        u->user ? " --user '" : "", u->user ? u->user : "", u->user ? "'" : "");
    snprintf(command + len, sizeof command - (size_t)len,
             " --dbnum %d -t set -c 50 -n %ld -q 2>/dev/null", u->db, n);
    if (system("command -v redis-benchmark >/dev/null 2>&1")) {
        fprintf(stderr, "weft-bench: redis-benchmark not installed: no SET baseline\n");
        return 0;
    }
    fprintf(stderr, "weft-bench: SET baseline: redis-benchmark -t set -c 50 -n %ld\n", n);
    if (!(f = popen(command, "r"))) return 0;
    /* progress lines end in \r; the result is the last "SET: <n> requests per second" */
    while (fgets(line, sizeof line, f)) {
        char *seg = line;
        while ((p = strstr(seg, "SET: ")) != NULL) {
            char *end;
            double v = strtod(p + 5, &end);
            if (end != p + 5 && strstr(end, "requests per second")) rps = v;
            seg = p + 5;
        }
    }
    pclose(f);
    return rps;
}

/* ---- Redis: the daemons ---- */

typedef struct daemons {
    pid_t *pid;
    int n;
    char (*log)[PATH_MAX];
} daemons;

static int exe_at(const char *dir, const char *rel, char out[PATH_MAX])
{
    if ((size_t)snprintf(out, PATH_MAX, "%s/%s", dir, rel) >= PATH_MAX) return 0;
    return access(out, X_OK) == 0;
}

/* --weftd, else the weftd next to this program (installed, or the build tree), else PATH. */
static void find_weftd(const opts *o, char out[PATH_MAX])
{
    char self[PATH_MAX], *slash;
    ssize_t k;
    if (o->weftd) {
        snprintf(out, PATH_MAX, "%s", o->weftd);
        return;
    }
    k = readlink("/proc/self/exe", self, sizeof self - 1);
    if (k > 0) {
        self[k] = 0;
        if ((slash = strrchr(self, '/'))) {
            *slash = 0;
            if (exe_at(self, "weftd", out) || exe_at(self, "../runtime/weftd", out)) return;
        }
    }
    snprintf(out, PATH_MAX, "weftd");
}

static void log_tail(const char *path)
{
    char cmdline[PATH_MAX + 32];
    fprintf(stderr, "weft-bench: --- last lines of %s ---\n", path);
    snprintf(cmdline, sizeof cmdline, "tail -n 20 '%s' >&2", path);
    if (system(cmdline)) fprintf(stderr, "(could not read it)\n");
}

static int daemons_start(const opts *o, const char *prefix, daemons *d)
{
    char weftd[PATH_MAX], workers[16], id[128];
    const char *tmp = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    int k;
    find_weftd(o, weftd);
    d->n = 0;
    d->pid = calloc((size_t)o->daemons, sizeof *d->pid);
    d->log = calloc((size_t)o->daemons, sizeof *d->log);
    if (!d->pid || !d->log) return -1;
    snprintf(workers, sizeof workers, "%d", o->workers);
    fprintf(stderr, "weft-bench: starting %d x %s (%d workers each), prefix %s\n", o->daemons,
            weftd, o->workers, prefix);
    for (k = 0; k < o->daemons; k++) {
        const char *argv[64];
        int a = 0, s;
        pid_t pid;
        snprintf(id, sizeof id, "%sd%d", prefix, k);
        snprintf(d->log[k], PATH_MAX, "%s/weft-bench.%ld.%d.log", tmp, (long)getpid(), k);
        argv[a++] = weftd;
        argv[a++] = "--redis";
        argv[a++] = o->redis_url;
        argv[a++] = "--prefix";
        argv[a++] = prefix;
        argv[a++] = "--no-api";
        argv[a++] = "--id";
        argv[a++] = id;
        argv[a++] = "--workers";
        argv[a++] = workers;
        if (o->plugin_path) {
            argv[a++] = "--plugin-path";
            argv[a++] = o->plugin_path;
        }
        for (s = 0; s < o->nsets && a < 60; s++) {
            argv[a++] = "--set";
            argv[a++] = o->sets[s];
        }
        argv[a] = NULL;
        pid = fork();
        if (pid < 0) {
            fprintf(stderr, "weft-bench: fork: %s\n", strerror(errno));
            return -1;
        }
        if (pid == 0) {
            FILE *lf = freopen(d->log[k], "w", stderr);
            if (!lf) _exit(127);
            if (!freopen("/dev/null", "w", stdout)) _exit(127);
#ifdef __linux__
            prctl(PR_SET_PDEATHSIG, SIGTERM); /* never outlive the driver */
#endif
            execvp(weftd, (char *const *)argv);
            fprintf(stderr, "weft-bench: cannot run %s: %s\n", weftd, strerror(errno));
            _exit(127);
        }
        d->pid[d->n++] = pid;
    }
    return 0;
}

/* Until every daemon has said it is alive (Pdaemons has K entries). */
static int daemons_wait(const servers *v, const char *prefix, daemons *d, int timeout_s)
{
    int64_t until = bn_now_us() + (int64_t)timeout_s * 1000000;
    char key[128];
    snprintf(key, sizeof key, "%sdaemons", prefix);
    while (bn_now_us() < until && !bn_interrupted) {
        redisReply *x = cmd(server_of(v, key), "HLEN %s", key);
        long long up = x && x->type == REDIS_REPLY_INTEGER ? x->integer : 0;
        int k;
        if (x) freeReplyObject(x);
        if (up >= d->n) return 0;
        for (k = 0; k < d->n; k++) {
            int st;
            if (d->pid[k] > 0 && waitpid(d->pid[k], &st, WNOHANG) == d->pid[k]) {
                fprintf(stderr, "weft-bench: weftd %d exited before it was up\n", k);
                d->pid[k] = 0;
                log_tail(d->log[k]);
                return -1;
            }
        }
        usleep(20000);
    }
    fprintf(stderr, "weft-bench: the daemons did not come up in %d s\n", timeout_s);
    return -1;
}

/* CPU seconds a process used so far (/proc/<pid>/stat utime + stime), or 0. */
static double proc_cpu_s(pid_t pid)
{
    char path[64], buf[1024], *p;
    unsigned long ut = 0, st = 0;
    FILE *f;
    size_t k;
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    if (!(f = fopen(path, "r"))) return 0;
    k = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[k] = 0;
    /* fields after the command name (in parentheses): state is field 3, utime 14, stime 15 */
    if (!(p = strrchr(buf, ')')) ||
        sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2)
        return 0;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static double daemons_cpu_s(const daemons *d)
{
    double s = 0;
    int k;
    for (k = 0; k < d->n; k++)
        if (d->pid[k] > 0) s += proc_cpu_s(d->pid[k]);
    return s;
}

/* SIGTERM, wait (up to 30 s, the daemon's grace is 10 s), then SIGKILL. */
static int daemons_stop(daemons *d, int keep_logs)
{
    int k, bad = 0;
    for (k = 0; k < d->n; k++)
        if (d->pid[k] > 0) kill(d->pid[k], SIGTERM);
    for (k = 0; k < d->n; k++) {
        int64_t until = bn_now_us() + 30000000;
        int st = 0;
        pid_t got = 0;
        if (d->pid[k] <= 0) continue;
        while ((got = waitpid(d->pid[k], &st, WNOHANG)) == 0 && bn_now_us() < until)
            usleep(10000);
        if (got == 0) {
            kill(d->pid[k], SIGKILL);
            waitpid(d->pid[k], &st, 0);
            fprintf(stderr, "weft-bench: weftd %d did not stop on SIGTERM: killed\n", k);
            bad = 1;
        } else if (got > 0 && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
            fprintf(stderr, "weft-bench: weftd %d ended with status %d\n", k, st);
            bad = 1;
        }
        if (bad) log_tail(d->log[k]);
        d->pid[k] = 0;
    }
    for (k = 0; k < d->n; k++)
        if (!bad && !keep_logs) unlink(d->log[k]);
    free(d->pid);
    free(d->log);
    d->pid = NULL;
    d->log = NULL;
    return bad;
}

/* Delete every key under the run's prefix. */
static void delete_prefix(redisContext *c, const char *prefix)
{
    char cursor[32] = "0";
    long long deleted = 0;
    do {
        redisReply *x = cmd(c, "SCAN %s MATCH %s* COUNT 1000", cursor, prefix);
        size_t i;
        if (!x || x->type != REDIS_REPLY_ARRAY || x->elements != 2) {
            if (x) freeReplyObject(x);
            return;
        }
        snprintf(cursor, sizeof cursor, "%s", x->element[0]->str);
        for (i = 0; i < x->element[1]->elements; i++) {
            redisReply *k = x->element[1]->element[i];
            redisAppendCommand(c, "UNLINK %b", k->str, (size_t)k->len);
        }
        for (i = 0; i < x->element[1]->elements; i++) {
            void *r = NULL;
            if (redisGetReply(c, &r) != REDIS_OK) break;
            freeReplyObject(r);
            deleted++;
        }
        freeReplyObject(x);
    } while (strcmp(cursor, "0"));
    fprintf(stderr, "weft-bench: deleted the run's %lld keys\n", deleted);
}

/* ---- Redis: completion via the status lane ---- */

/* The next Pub/Sub message, waiting up to timeout_ms: 1 got one, 0 none, -1 error. */
static int sub_next(redisContext *c, int timeout_ms, redisReply **out)
{
    void *rep = NULL;
    *out = NULL;
    for (;;) {
        struct pollfd p;
        int k;
        if (redisGetReplyFromReader(c, &rep) != REDIS_OK) return -1;
        if (rep) {
            *out = rep;
            return 1;
        }
        p.fd = c->fd;
        p.events = POLLIN;
        p.revents = 0;
        k = poll(&p, 1, timeout_ms);
        if (k < 0 && errno == EINTR) return 0;
        if (k < 0) return -1;
        if (k == 0) return 0;
        if (redisBufferRead(c) != REDIS_OK) return -1;
    }
}

/* The JSON text up to the end of its line. */
static json_object *line_json(const char *s)
{
    const char *end = strchr(s, '\n');
    json_tokener *tok = json_tokener_new();
    json_object *j;
    if (!tok) return NULL;
    j = json_tokener_parse_ex(tok, s, end ? (int)(end - s) : (int)strlen(s));
    json_tokener_free(tok);
    return j;
}

/*
 * One status-lane message: ["pmessage", pattern, "<P>{<id>}:ev", events]. Task
 * events are skipped unparsed; a workflow event with a terminal status ends
 * workflow <index in the id>.
 */
static void on_message(run *R, const redisReply *x)
{
    const char *ch, *payload, *brace;
    json_object *ev = NULL, *v, *out = NULL;
    const char *status;
    long idx;
    if (x->type != REDIS_REPLY_ARRAY || x->elements != 4 ||
        x->element[2]->type != REDIS_REPLY_STRING || x->element[3]->type != REDIS_REPLY_STRING)
        return;
    ch = x->element[2]->str;
    brace = ch + R->prefix_len;
    if (*brace != '{' || strlen(brace) < 1 + 36 + 4 || strncmp(brace + 1, R->tag, 24)) return;
    idx = strtol(brace + 1 + 24, NULL, 16);
    /* one message per save, one event per line: the workflow's own event,
     * if any, is the one without a taskId */
    for (payload = x->element[3]->str; payload; payload = strchr(payload, '\n')) {
        const char *end, *task;
        if (*payload == '\n') payload++;
        end = strchr(payload, '\n');
        task = strstr(payload, "\"taskId\"");
        if (!task || (end && task > end)) break;
    }
    if (!payload) return;
    if (!(ev = line_json(payload))) return;
    status = json_object_object_get_ex(ev, "status", &v) ? json_object_get_string(v) : "";
    if (!strcmp(status, "COMPLETED") || !strcmp(status, "FAILED") || !strcmp(status, "TIMED_OUT") ||
        !strcmp(status, "TERMINATED")) {
        json_object_object_get_ex(ev, "output", &out);
        bn_record_end(R, idx, !strcmp(status, "COMPLETED"), out);
        if (strcmp(status, "COMPLETED"))
            fprintf(stderr, "weft-bench: workflow %ld ended %s\n", idx, status);
    }
    json_object_put(ev);
}

/* Read events until workflow `until_idx` ended (serial; -1 = until all did) or the deadline. */
static int drain(run *R, long until_idx)
{
    while (!bn_interrupted && bn_now_us() < R->deadline_us) {
        redisReply *x;
        int k;
        if (until_idx >= 0 ? R->state[until_idx] != PENDING
                           : __atomic_load_n(&R->done, __ATOMIC_ACQUIRE) >= R->n)
            return 0;
        k = sub_next(R->sub, 200, &x);
        if (k < 0) {
            fprintf(stderr, "weft-bench: status lane: %s\n",
                    R->sub->errstr[0] ? R->sub->errstr : "connection lost");
            R->failed_io = 1;
            return -1;
        }
        if (k > 0) {
            on_message(R, x);
            freeReplyObject(x);
        }
    }
    return -1;
}

static void *listener_main(void *arg)
{
    drain(arg, -1);
    return NULL;
}

static const weft_task_type *find_type(void *ud, const char *name)
{
    return pl_find_type(ud, name, NULL);
}

int bn_run_redis(const opts *o)
{
    ru_url u = {0};
    redisContext *ctl = NULL;
    st_store *r = NULL;
    st_redis_opts ro = {0};
    weft_error err = {0};
    pl_registry *plugins = NULL;
    def_env defs = {0};
    dec_env dec = {0};
    op_env env = {0};
    def_workflow *def = NULL;
    daemons d = {0};
    run R;
    rstats s0, s1;
    servers sv = {0};
    double cmd0[64], cmd1[64], key0[64], key1[64];
    char prefix[64], id[64];
    double set_rps = 0, cpu_d0 = 0, cpu_d1 = 0, cpu_c0, cpu_c1, tps;
    int64_t submitted_us = 0;
    json_object *dj, *j;
    unsigned seed;
    pthread_t listener;
    int listening = 0, rc = 1;
    long i, bad, done;

    {
        ru_url seeds[RU_SEEDS_MAX];
        size_t n = 0;
        int prc = ru_parse_list(o->redis_url, seeds, RU_SEEDS_MAX, &n, &err);
        /* a list of seed nodes: the bench's own reads go to the first */
        if (prc == 0) {
            u = seeds[0];
            memset(&seeds[0], 0, sizeof seeds[0]);
        }
        while (n)
            ru_clear(&seeds[--n]);
        if (prc) {
            fprintf(stderr, "weft-bench: --redis: %s\n", err.msg);
            return 2;
        }
    }
    if (bn_run_init(&R, o)) {
        fprintf(stderr, "weft-bench: out of memory\n");
        return 1;
    }
    if (!(ctl = r_connect(&u, o->redis_url)) || servers_open(&sv, ctl, &u)) goto out;
    if (o->baseline_n > 0) set_rps = set_baseline(&u, o->baseline_n);

    seed = (unsigned)getpid() ^ (unsigned)bn_now_us();
    snprintf(prefix, sizeof prefix, "wbench%ld-%04x:", (long)getpid(), rand_r(&seed) & 0xffff);
    snprintf(R.tag, sizeof R.tag, "%08x-%04x-4%03x-8%03x-", (unsigned)rand_r(&seed),
             (unsigned)rand_r(&seed) & 0xffff, (unsigned)rand_r(&seed) & 0xfff,
             (unsigned)rand_r(&seed) & 0xfff);
    R.prefix_len = strlen(prefix);

    /* the client side: what `weft start` sets up */
    plugins = pl_new(host_table());
    if (plugins) {
        char *dflt = o->plugin_path ? NULL : pl_default_path();
        pl_load_path(plugins, o->plugin_path ? o->plugin_path : dflt ? dflt : "");
        free(dflt);
    }
    defs.find_type = find_type;
    defs.ud = plugins;
    defs.searched = plugins ? pl_searched(plugins) : "";
    defs.host = host_table();
    defs.allow_unknown = 1;
    ro.rs.url = o->redis_url;
    ro.rs.prefix = prefix;
    ro.defs = &defs;
    if (st_redis_open(&ro, &r, &err)) {
        fprintf(stderr, "weft-bench: %s\n", err.msg);
        goto out;
    }
    dec.defs = &defs;
    dec.now = wu_now_ms;
    env.st = r;
    env.defs = &defs;
    env.dec = &dec;
    env.sweep_ms = 30000;
    env.client = 1;
    dj = o->wl->def();
    rc = def_compile(&defs, dj, o->wl->name, NULL, &def, &err);
    json_object_put(dj);
    if (rc) {
        fprintf(stderr, "weft-bench: workload %s: %s\n", o->wl->name, err.msg);
        rc = 1;
        goto out;
    }
    rc = 1;

    if (daemons_start(o, prefix, &d) || daemons_wait(&sv, prefix, &d, 30)) goto out;

    if (!(R.sub = r_connect(&u, o->redis_url))) goto out;
    {
        redisReply *x = cmd(R.sub, "PSUBSCRIBE %s{*}:ev", prefix);
        if (!x) goto out;
        freeReplyObject(x);
    }
    if (rstats_take(&sv, prefix, &s0, cmd0, key0)) goto out;
    cpu_d0 = daemons_cpu_s(&d);
    cpu_c0 = bn_cpu_self_s();
    R.deadline_us = bn_now_us() + (int64_t)o->timeout_s * 1000000;
    fprintf(stderr, "weft-bench: redis %s, %s, n=%ld, %d daemon(s)\n", o->wl->name,
            o->serial ? "serial" : "burst", o->n, o->daemons);
    if (!o->serial) {
        if (pthread_create(&listener, NULL, listener_main, &R)) {
            fprintf(stderr, "weft-bench: cannot start the listener thread\n");
            goto out;
        }
        listening = 1;
    }
    /* burst: pipelined, SUBMIT_CHUNK starts per round trip (op_start_many) */
    for (i = 0; !o->serial && i < o->n && !bn_interrupted && !R.failed_io;) {
        op_start_args a[SUBMIT_CHUNK];
        json_object *in[SUBMIT_CHUNK];
        char ids[SUBMIT_CHUNK][64], want[SUBMIT_CHUNK][64];
        int rcs[SUBMIT_CHUNK], k, m = o->n - i < SUBMIT_CHUNK ? (int)(o->n - i) : SUBMIT_CHUNK;
        memset(a, 0, sizeof a);
        for (k = 0; k < m; k++) {
            in[k] = bn_input_of(i + k);
            snprintf(want[k], sizeof want[k], "%s%012lx", R.tag, (unsigned long)(i + k));
            a[k].def = def;
            a[k].input = in[k];
            a[k].id = want[k];
        }
        for (k = 0; k < m; k++)
            R.t_sub[i + k] = bn_now_us();
        k = op_start_many(&env, a, (size_t)m, ids, rcs, &err);
        for (int q = 0; q < m; q++)
            json_object_put(in[q]);
        if (k) {
            fprintf(stderr, "weft-bench: start: %s\n", err.msg);
            goto out;
        }
        i += m;
    }
    for (i = 0; o->serial && i < o->n && !bn_interrupted && !R.failed_io; i++) {
        op_start_args a = {0};
        json_object *in = bn_input_of(i);
        snprintf(id, sizeof id, "%s%012lx", R.tag, (unsigned long)i);
        a.def = def;
        a.input = in;
        a.id = id;
        R.t_sub[i] = bn_now_us();
        if (op_start(&env, &a, id, &err)) {
            fprintf(stderr, "weft-bench: start: %s\n", err.msg);
            json_object_put(in);
            goto out;
        }
        json_object_put(in);
        if (o->serial && drain(&R, i)) break;
    }
    submitted_us = bn_now_us();
    if (listening) {
        int64_t next = bn_now_us() + 1000000;
        while (!bn_interrupted && !R.failed_io && bn_now_us() < R.deadline_us &&
               (done = __atomic_load_n(&R.done, __ATOMIC_ACQUIRE)) < R.n) {
            usleep(10000);
            if (bn_now_us() >= next) {
                fprintf(stderr, "weft-bench: %ld/%ld done\n", done, R.n);
                next += 1000000;
            }
        }
        pthread_join(listener, NULL);
        listening = 0;
    }
    cpu_c1 = bn_cpu_self_s();
    cpu_d1 = daemons_cpu_s(&d);
    done = __atomic_load_n(&R.done, __ATOMIC_ACQUIRE);
    if (done < R.n)
        fprintf(stderr, "weft-bench: only %ld of %ld workflows ended (%s)\n", done, R.n,
                bn_interrupted ? "interrupted" : "timed out");
    if (rstats_take(&sv, prefix, &s1, cmd1, key1)) goto out;

    j = bn_result_head(o, "redis");
    bad = bn_report(&R, j, &tps);
    json_object_object_add(j, "daemons", json_object_new_int(o->daemons));
    json_object_object_add(j, "workers", json_object_new_int(o->workers));
    if (!o->serial) bn_put_num(j, "submit_s", (double)(submitted_us - R.t_sub[0]) / 1e6, 3);
    bn_put_num(j, "redis_bytes_per_wf", done ? (s1.used_memory - s0.used_memory) / (double)done : 0,
               0);
    if (set_rps > 0) {
        bn_put_num(j, "set_rps", set_rps, 1);
        bn_put_num(j, "tasks_ratio_to_set", tps / set_rps, 3);
        bn_put_num(j, "workflows_ratio_to_set", tps / o->wl->tasks_per_wf / set_rps, 3);
    } else {
        json_object_object_add(j, "set_rps", NULL);
    }
    if (done) {
        double tasks = (double)done * o->wl->tasks_per_wf;
        bn_put_num(j, "redis_round_trips_per_task", (s1.reads - s0.reads) / tasks, 2);
        bn_put_num(j, "redis_cmds_per_task", (s1.commands - s0.commands) / tasks, 2);
        bn_put_num(j, "redis_cpu_us_per_task", (s1.cpu_s - s0.cpu_s) * 1e6 / tasks, 1);
        bn_put_num(j, "weftd_cpu_us_per_task", (cpu_d1 - cpu_d0) * 1e6 / tasks, 1);
        bn_put_num(j, "client_cpu_us_per_task", (cpu_c1 - cpu_c0) * 1e6 / tasks, 1);
        if (o->stats) print_cmd_stats(&s0, &s1, tasks);
    }
    if (sv.n > 1) {
        /* a cluster: each primary's share of the commands and of the run's keys */
        json_object *per = json_object_new_array();
        double tc = 0, tk = 0, mc = 0, mk = 0;
        int k;
        for (k = 0; k < sv.n; k++) {
            tc += cmd1[k] - cmd0[k];
            tk += key1[k];
        }
        for (k = 0; k < sv.n; k++) {
            json_object *one = json_object_new_object();
            double c = tc > 0 ? (cmd1[k] - cmd0[k]) / tc : 0, kk = tk > 0 ? key1[k] / tk : 0;
            json_object_object_add(one, "node", json_object_new_string(sv.name[k]));
            bn_put_num(one, "cmds_share", c, 3);
            bn_put_num(one, "keys_share", kk, 3);
            json_object_array_add(per, one);
            mc = c > mc ? c : mc;
            mk = kk > mk ? kk : mk;
        }
        json_object_object_add(j, "primaries", per);
        bn_put_num(j, "max_cmds_share", mc, 3);
        bn_put_num(j, "max_keys_share", mk, 3);
    }
    printf("%s\n", json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN));
    fflush(stdout);
    json_object_put(j);
    rc = bad || done < R.n ? 1 : 0;
out:
    if (listening) {
        bn_interrupted = 1;
        pthread_join(listener, NULL);
    }
    if (d.pid && daemons_stop(&d, rc != 0)) rc = 1;
    if (ctl && !o->keep && R.prefix_len) {
        int k;
        for (k = 0; k < sv.n; k++)
            delete_prefix(sv.c[k], prefix);
        if (!sv.n) delete_prefix(ctl, prefix);
    } else if (ctl && R.prefix_len)
        fprintf(stderr, "weft-bench: kept the run's keys under %s\n", prefix);
    if (R.sub) redisFree(R.sub);
    servers_close(&sv, ctl);
    if (ctl) redisFree(ctl);
    def_unref(def);
    st_free(r);
    pl_free(plugins);
    bn_run_free(&R);
    ru_clear(&u);
    return rc;
}
