/*
 * weft-bench: the benchmark driver (docs/performance.md).
 *
 *   weft-bench --workload queue|chain5|fanout10 [--n N] [--serial]
 *              (--redis URL [--daemons K] [--workers W] [--weftd PATH] | --embedded)
 *
 * Redis mode starts K weftd processes on a private key prefix (no REST
 * API), submits with op_start (what `weft start` does) and watches the
 * status lane: one PSUBSCRIBE on the prefix's event channels, so every
 * workflow's terminal event reaches the driver the moment the deciding
 * save publishes it, with no polling load on Redis. Embedded mode runs the
 * engine in this process (memory store). Progress goes to stderr; the
 * result is one JSON line, the last line of stdout.
 *
 * This file holds the options, the workloads, the results and main;
 * embedded.c and redis.c run the two modes (bench.h).
 */
#include "autoconf.h"

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <json-c/json.h>

#include "bench.h"

static const char usage[] =
    "usage: weft-bench --workload queue|chain5|fanout10 [--n N] [--serial|--burst]\n"
    "                  (--redis URL [--daemons K] [--workers W] [--weftd PATH]\n"
    "                               [--set KEY=VALUE]... [--baseline-n N] [--keep] [--stats]\n"
    "                   | --embedded) [--plugin-path DIRS] [--timeout SECONDS]\n"
    "\n"
    "Workloads: queue = N one-task workflows; chain5 = five sequential LAMBDA\n"
    "steps, each returning its input + 1; fanout10 = a fork of ten LAMBDA tasks,\n"
    "the join, and a LAMBDA summing them.\n"
    "--burst (default) submits every workflow as fast as the client can while\n"
    "the workers run; --serial keeps one workflow in flight (unloaded latency).\n"
    "--redis URL: start K weftd processes (default 1, each with W worker threads,\n"
    "default 4) on a private key prefix, run, stop them (SIGTERM) and delete the\n"
    "run's keys (--keep: leave them). It also runs redis-benchmark -t set -c 50\n"
    "-n N (--baseline-n, default 200000; 0 = skip) against the same server first\n"
    "and reports the ratios to its requests/s. --stats: per-command Redis calls\n"
    "per task on stderr.\n"
    "--embedded: the memory store, everything in this process.\n"
    "Output: one JSON line (the last line of stdout); progress on stderr.\n";

/* ---- time ---- */

int64_t bn_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

double bn_cpu_self_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

volatile sig_atomic_t bn_interrupted;

static void on_signal(int sig)
{
    bn_interrupted = 1;
}

/* ---- workloads ---- */

static json_object *lambda(const char *ref, const char *v_expr, const char *vname,
                           const char *script)
{
    json_object *t = json_object_new_object(), *in = json_object_new_object();
    json_object_object_add(t, "name", json_object_new_string(ref));
    json_object_object_add(t, "taskReferenceName", json_object_new_string(ref));
    json_object_object_add(t, "type", json_object_new_string("LAMBDA"));
    json_object_object_add(in, vname, json_object_new_string(v_expr));
    json_object_object_add(in, "scriptExpression", json_object_new_string(script));
    json_object_object_add(t, "inputParameters", in);
    return t;
}

static json_object *workflow(const char *name, const char *result, json_object *tasks)
{
    json_object *w = json_object_new_object(), *ins = json_object_new_array(),
                *out = json_object_new_object();
    json_object_object_add(w, "name", json_object_new_string(name));
    json_object_object_add(w, "version", json_object_new_int(1));
    json_object_array_add(ins, json_object_new_string("x"));
    json_object_object_add(w, "inputParameters", ins);
    json_object_object_add(out, "x", json_object_new_string("${workflow.input.x}"));
    json_object_object_add(out, "result", json_object_new_string(result));
    json_object_object_add(w, "outputParameters", out);
    json_object_object_add(w, "tasks", tasks);
    return w;
}

static json_object *def_queue(void)
{
    json_object *tasks = json_object_new_array();
    json_object_array_add(tasks, lambda("t1", "${workflow.input.x}", "v", "return input.v + 1"));
    return workflow("bench_queue", "${t1.output.result}", tasks);
}

static long long expect_queue(long long x)
{
    return x + 1;
}

static json_object *def_chain5(void)
{
    json_object *tasks = json_object_new_array();
    char ref[16], prev[64];
    int i;
    snprintf(prev, sizeof prev, "${workflow.input.x}");
    for (i = 1; i <= 5; i++) {
        snprintf(ref, sizeof ref, "s%d", i);
        json_object_array_add(tasks, lambda(ref, prev, "v", "return input.v + 1"));
        snprintf(prev, sizeof prev, "${s%d.output.result}", i);
    }
    return workflow("bench_chain5", "${s5.output.result}", tasks);
}

static long long expect_chain5(long long x)
{
    return x + 5;
}

static json_object *def_fanout10(void)
{
    json_object *tasks = json_object_new_array(), *fork = json_object_new_object(),
                *branches = json_object_new_array(), *join = json_object_new_object(),
                *on = json_object_new_array();
    char ref[16], script[64];
    int i;
    json_object_object_add(fork, "name", json_object_new_string("fan"));
    json_object_object_add(fork, "taskReferenceName", json_object_new_string("fan"));
    json_object_object_add(fork, "type", json_object_new_string("FORK_JOIN"));
    for (i = 1; i <= 10; i++) {
        json_object *branch = json_object_new_array();
        snprintf(ref, sizeof ref, "f%d", i);
        snprintf(script, sizeof script, "return input.v + %d", i);
        json_object_array_add(branch, lambda(ref, "${workflow.input.x}", "v", script));
        json_object_array_add(branches, branch);
        json_object_array_add(on, json_object_new_string(ref));
    }
    json_object_object_add(fork, "forkTasks", branches);
    json_object_array_add(tasks, fork);
    json_object_object_add(join, "name", json_object_new_string("fan_join"));
    json_object_object_add(join, "taskReferenceName", json_object_new_string("fan_join"));
    json_object_object_add(join, "type", json_object_new_string("JOIN"));
    json_object_object_add(join, "joinOn", on);
    json_object_array_add(tasks, join);
    json_object_array_add(tasks, lambda("sum", "${fan_join.output}", "all",
                                        "local s = 0\n"
                                        "for _, o in pairs(input.all) do s = s + o.result end\n"
                                        "return s"));
    return workflow("bench_fanout10", "${sum.output.result}", tasks);
}

static long long expect_fanout10(long long x)
{
    return 10 * x + 55;
}

static const workload workloads[] = {
    {"queue", 1, def_queue, expect_queue},
    {"chain5", 5, def_chain5, expect_chain5},
    {"fanout10", 11, def_fanout10, expect_fanout10},
};

/* ---- options ---- */

static int parse_long(const char *flag, const char *s, long lo, long hi, long *out)
{
    char *end;
    long v;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, "weft-bench: %s: '%s' is not a number from %ld to %ld\n", flag, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

enum {
    OPT_SERIAL = 256,
    OPT_BURST,
    OPT_EMBEDDED,
    OPT_KEEP,
    OPT_STATS,
    OPT_VERSION,
    OPT_WORKLOAD,
    OPT_N,
    OPT_REDIS,
    OPT_DAEMONS,
    OPT_WORKERS,
    OPT_WEFTD,
    OPT_PLUGIN_PATH,
    OPT_SET,
    OPT_BASELINE_N,
    OPT_TIMEOUT
};

static const struct option longopts[] = {
    {"help", no_argument, NULL, 'h'},
    {"version", no_argument, NULL, OPT_VERSION},
    {"serial", no_argument, NULL, OPT_SERIAL},
    {"burst", no_argument, NULL, OPT_BURST},
    {"embedded", no_argument, NULL, OPT_EMBEDDED},
    {"keep", no_argument, NULL, OPT_KEEP},
    {"stats", no_argument, NULL, OPT_STATS},
    {"workload", required_argument, NULL, OPT_WORKLOAD},
    {"n", required_argument, NULL, OPT_N},
    {"redis", required_argument, NULL, OPT_REDIS},
    {"daemons", required_argument, NULL, OPT_DAEMONS},
    {"workers", required_argument, NULL, OPT_WORKERS},
    {"weftd", required_argument, NULL, OPT_WEFTD},
    {"plugin-path", required_argument, NULL, OPT_PLUGIN_PATH},
    {"set", required_argument, NULL, OPT_SET},
    {"baseline-n", required_argument, NULL, OPT_BASELINE_N},
    {"timeout", required_argument, NULL, OPT_TIMEOUT},
    {NULL, 0, NULL, 0},
};

/* One option's value into o: 0, or 2 after saying what is wrong. */
static int set_opt(opts *o, int opt, const char *flag, const char *val)
{
    long v;
    size_t w;
    switch (opt) {
    case OPT_WORKLOAD:
        for (w = 0; w < sizeof workloads / sizeof workloads[0]; w++)
            if (!strcmp(val, workloads[w].name)) o->wl = &workloads[w];
        if (!o->wl) {
            fprintf(stderr, "weft-bench: --workload: '%s' is not queue, chain5 or fanout10\n", val);
            return 2;
        }
        return 0;
    case OPT_N:
        return parse_long(flag, val, 1, 100000000, &o->n) ? 2 : 0;
    case OPT_DAEMONS:
    case OPT_WORKERS:
        if (parse_long(flag, val, 1, 256, &v)) return 2;
        *(opt == OPT_DAEMONS ? &o->daemons : &o->workers) = (int)v;
        return 0;
    case OPT_SET:
        if (!strchr(val, '=')) {
            fprintf(stderr, "weft-bench: --set wants KEY=VALUE, not '%s'\n", val);
            return 2;
        }
        o->sets[o->nsets++] = val;
        return 0;
    case OPT_BASELINE_N:
        return parse_long(flag, val, 0, 100000000, &o->baseline_n) ? 2 : 0;
    case OPT_TIMEOUT:
        if (parse_long(flag, val, 1, 86400, &v)) return 2;
        o->timeout_s = (int)v;
        return 0;
    case OPT_REDIS:
        o->redis_url = val;
        return 0;
    case OPT_WEFTD:
        o->weftd = val;
        return 0;
    default:
        o->plugin_path = val;
        return 0;
    }
}

/* argv -> o (getopt_long). Returns 0, 1 after printing --help or --version,
 * or 2 after saying what is wrong. */
static int parse_opts(int argc, char **argv, opts *o)
{
    int opt, idx, rc;
    memset(o, 0, sizeof *o);
    o->n = 1000;
    o->daemons = 1;
    o->workers = 4;
    o->baseline_n = 200000;
    o->timeout_s = 600;
    o->sets = calloc((size_t)argc, sizeof *o->sets);
    if (!o->sets) return 2;
    opterr = 0;
    /* ':' first: a missing value is told apart from an unknown option */
    while ((opt = getopt_long(argc, argv, ":h", longopts, &idx)) != -1) {
        char flag[40];
        if (opt == 'h') {
            fputs(usage, stdout);
            return 1;
        } else if (opt == OPT_VERSION) {
            printf("weft-bench %s\n", PACKAGE_VERSION);
            return 1;
        } else if (opt == OPT_SERIAL || opt == OPT_BURST) {
            o->serial = opt == OPT_SERIAL;
        } else if (opt == OPT_EMBEDDED) {
            o->embedded = 1;
        } else if (opt == OPT_KEEP) {
            o->keep = 1;
        } else if (opt == OPT_STATS) {
            o->stats = 1;
        } else if (opt == ':') {
            fprintf(stderr, "weft-bench: unknown or incomplete option %s (see --help)\n",
                    argv[optind - 1]);
            return 2;
        } else if (opt == '?') {
            fprintf(stderr, "weft-bench: unknown option %s (see --help)\n", argv[optind - 1]);
            return 2;
        } else {
            snprintf(flag, sizeof flag, "--%s", longopts[idx].name);
            if ((rc = set_opt(o, opt, flag, optarg))) return rc;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "weft-bench: unknown option %s (see --help)\n", argv[optind]);
        return 2;
    }
    if (!o->wl) {
        fprintf(stderr, "weft-bench: --workload queue|chain5|fanout10 is required\n");
        return 2;
    }
    if (!o->embedded == !o->redis_url) {
        fprintf(stderr, "weft-bench: choose one of --redis URL and --embedded\n");
        return 2;
    }
    return 0;
}

/* ---- results ---- */

int bn_run_init(run *R, const opts *o)
{
    memset(R, 0, sizeof *R);
    R->o = o;
    R->n = o->n;
    R->t_sub = calloc((size_t)o->n, sizeof *R->t_sub);
    R->t_done = calloc((size_t)o->n, sizeof *R->t_done);
    R->state = calloc((size_t)o->n, 1);
    return R->t_sub && R->t_done && R->state ? 0 : -1;
}

void bn_run_free(run *R)
{
    free(R->t_sub);
    free(R->t_done);
    free(R->state);
}

/* Record the end of workflow i (the first time only). */
void bn_record_end(run *R, long i, int ok, json_object *output)
{
    json_object *v;
    int st = DONE_FAILED;
    if (i < 0 || i >= R->n || R->state[i] != PENDING) return;
    R->t_done[i] = bn_now_us();
    if (ok) {
        st = DONE_WRONG;
        if (json_object_object_get_ex(output, "result", &v) &&
            json_object_is_type(v, json_type_int) &&
            json_object_get_int64(v) == R->o->wl->expect(i))
            st = DONE_OK;
    }
    R->state[i] = (char)st;
    __atomic_add_fetch(&R->done, 1, __ATOMIC_RELEASE);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of sorted v[0..n). */
static double pct(const double *v, size_t n, double p)
{
    size_t k;
    if (!n) return 0;
    k = (size_t)(p / 100.0 * (double)n + 0.999999);
    if (k < 1) k = 1;
    if (k > n) k = n;
    return v[k - 1];
}

void bn_put_num(json_object *o, const char *key, double v, int decimals)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%.*f", decimals, v);
    json_object_object_add(o, key, json_object_new_double_s(v, buf));
}

/* The common fields: counts, rates, latency percentiles. Returns failures. */
long bn_report(const run *R, json_object *j, double *tasks_per_s)
{
    double *lat = malloc((size_t)R->n * sizeof *lat), secs, wps;
    int64_t first = INT64_MAX, last = 0;
    size_t k = 0;
    long i, bad = 0, wrong = 0;
    for (i = 0; i < R->n; i++) {
        if (R->t_sub[i] && R->t_sub[i] < first) first = R->t_sub[i];
        if (R->state[i] == PENDING) {
            bad++;
            continue;
        }
        if (R->state[i] != DONE_OK) bad++;
        if (R->state[i] == DONE_WRONG) wrong++;
        if (R->t_done[i] > last) last = R->t_done[i];
        if (lat) lat[k++] = (double)(R->t_done[i] - R->t_sub[i]) / 1000.0;
    }
    if (lat) qsort(lat, k, sizeof *lat, cmp_double);
    secs = last > first ? (double)(last - first) / 1e6 : 0;
    wps = secs > 0 ? (double)k / secs : 0;
    *tasks_per_s = wps * R->o->wl->tasks_per_wf;
    json_object_object_add(j, "concurrency", json_object_new_int64(R->o->serial ? 1 : R->n));
    json_object_object_add(j, "n", json_object_new_int64(R->n));
    json_object_object_add(j, "tasks_per_wf", json_object_new_int(R->o->wl->tasks_per_wf));
    bn_put_num(j, "seconds", secs, 3);
    bn_put_num(j, "workflows_per_s", wps, 1);
    bn_put_num(j, "tasks_per_s", *tasks_per_s, 1);
    bn_put_num(j, "p50_ms", lat ? pct(lat, k, 50) : 0, 3);
    bn_put_num(j, "p99_ms", lat ? pct(lat, k, 99) : 0, 3);
    bn_put_num(j, "max_ms", lat && k ? lat[k - 1] : 0, 3);
    json_object_object_add(j, "failed", json_object_new_int64(bad));
    if (wrong)
        fprintf(stderr, "weft-bench: %ld workflow(s) completed with a wrong result\n", wrong);
    free(lat);
    return bad;
}

json_object *bn_result_head(const opts *o, const char *store)
{
    json_object *j = json_object_new_object();
    json_object_object_add(j, "system", json_object_new_string("weft"));
    json_object_object_add(j, "version", json_object_new_string(PACKAGE_VERSION));
    json_object_object_add(j, "workload", json_object_new_string(o->wl->name));
    json_object_object_add(j, "mode", json_object_new_string(o->serial ? "serial" : "burst"));
    json_object_object_add(j, "store", json_object_new_string(store));
    return j;
}

json_object *bn_input_of(long i)
{
    json_object *in = json_object_new_object();
    json_object_object_add(in, "x", json_object_new_int64(i));
    return in;
}

int main(int argc, char **argv)
{
    opts o;
    struct sigaction sa;
    int rc = parse_opts(argc, argv, &o);
    if (rc) {
        free(o.sets);
        return rc == 1 ? 0 : 2;
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal; /* no SA_RESTART: waits end early, then the daemons are stopped */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    rc = o.embedded ? bn_run_embedded(&o) : bn_run_redis(&o);
    free(o.sets);
    return rc;
}
