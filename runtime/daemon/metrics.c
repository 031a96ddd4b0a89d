#include "autoconf.h"
#include "daemon/metrics.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "weft/plugin.h"

/* Upper bounds (seconds) of the duration buckets, from 100 us (a LAMBDA
 * task takes tens of microseconds); +Inf is implied. */
static const double bounds[] = {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01,
                                0.025,  0.05,    0.1,    0.25,  0.5,    1,     2.5,
                                5,      10,      30,     60,    300,    900,   3600};
#define NB (sizeof bounds / sizeof bounds[0] + 1)

/* One labelled series: a counter, or a histogram (count, sum, buckets). */
typedef struct series {
    char *l1, *l2;        /* label values, NULL when the family has fewer labels */
    uint64_t count;       /* counter value, or the histogram's count */
    uint64_t sum_us;      /* histogram: sum of observations in microseconds */
    uint64_t buckets[NB]; /* histogram: observations per bucket, not cumulative */
} series;

/*
 * Series of one metric. Entries are appended under the mutex and published
 * by storing n with release order; readers scan the first n without it.
 * Entries are never removed, so a pointer to one stays valid.
 */
typedef struct family {
    pthread_mutex_t mu;
    size_t n;
    series s[MT_SERIES_MAX];
    series other; /* label values "other": what did not fit */
} family;

struct mt_metrics {
    uint64_t started;
    uint64_t reaps;
    uint64_t slow_dropped; /* connections dropped by the request timeout */
    uint64_t losses;       /* times the store was found to have lost its data */
    uint64_t lost_at_ms;   /* the last of those (wall clock), 0 = never */
    family ended;          /* {status} */
    family tasks;          /* {type, status} */
    family duration;       /* {type} histogram */
    family wf_duration;    /* {name, status} histogram */
    family api;            /* {code} */
    family queues;         /* queue names polled through the API (no values) */
};

static const char *const wf_statuses[] = {"COMPLETED", "FAILED", "TIMED_OUT", "TERMINATED", NULL};

static void family_init(family *f)
{
    pthread_mutex_init(&f->mu, NULL);
    f->other.l1 = "other";
    f->other.l2 = "other";
}

static void family_fini(family *f)
{
    size_t i;
    for (i = 0; i < f->n; i++) {
        free(f->s[i].l1);
        free(f->s[i].l2);
    }
    pthread_mutex_destroy(&f->mu);
}

static int same(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

static series *scan(family *f, size_t n, const char *l1, const char *l2)
{
    size_t i;
    for (i = 0; i < n; i++)
        if (same(f->s[i].l1, l1) && same(f->s[i].l2, l2)) return &f->s[i];
    return NULL;
}

/* The series with these label values, made on first use. */
static series *find(family *f, const char *l1, const char *l2)
{
    size_t n = __atomic_load_n(&f->n, __ATOMIC_ACQUIRE);
    series *s = scan(f, n, l1, l2);
    if (s) return s;
    pthread_mutex_lock(&f->mu);
    n = f->n;
    if (!(s = scan(f, n, l1, l2))) {
        if (n < MT_SERIES_MAX) {
            s = &f->s[n];
            s->l1 = l1 ? strdup(l1) : NULL;
            s->l2 = l2 ? strdup(l2) : NULL;
            if ((l1 && !s->l1) || (l2 && !s->l2)) {
                free(s->l1);
                free(s->l2);
                s->l1 = s->l2 = NULL;
                s = &f->other;
            } else {
                __atomic_store_n(&f->n, n + 1, __ATOMIC_RELEASE);
            }
        } else {
            s = &f->other;
        }
    }
    pthread_mutex_unlock(&f->mu);
    return s;
}

static void add(uint64_t *v, uint64_t n)
{
    __atomic_add_fetch(v, n, __ATOMIC_RELAXED);
}

static uint64_t get(const uint64_t *v)
{
    return __atomic_load_n(v, __ATOMIC_RELAXED);
}

mt_metrics *mt_new(void)
{
    mt_metrics *m = calloc(1, sizeof *m);
    size_t i;
    if (!m) return NULL;
    family_init(&m->ended);
    family_init(&m->tasks);
    family_init(&m->duration);
    family_init(&m->wf_duration);
    family_init(&m->api);
    family_init(&m->queues);
    /* every end status shows from the start, at 0 */
    for (i = 0; wf_statuses[i]; i++)
        find(&m->ended, wf_statuses[i], NULL);
    return m;
}

void mt_free(mt_metrics *m)
{
    if (!m) return;
    family_fini(&m->ended);
    family_fini(&m->tasks);
    family_fini(&m->duration);
    family_fini(&m->wf_duration);
    family_fini(&m->api);
    family_fini(&m->queues);
    free(m);
}

void mt_workflow_started(mt_metrics *m)
{
    if (m) add(&m->started, 1);
}

/* One observation of a histogram series. */
static void observe(series *h, double seconds)
{
    size_t b;
    for (b = 0; b < NB - 1 && seconds > bounds[b]; b++)
        ;
    add(&h->buckets[b], 1);
    add(&h->sum_us, (uint64_t)(seconds * 1e6));
}

void mt_workflow_ended(mt_metrics *m, const char *name, const char *status, double seconds)
{
    if (!m || !status) return;
    add(&find(&m->ended, status, NULL)->count, 1);
    if (seconds >= 0 && name) observe(find(&m->wf_duration, name, status), seconds);
}

void mt_task(mt_metrics *m, const char *type, const char *status, double seconds)
{
    if (!m || !type || !status) return;
    add(&find(&m->tasks, type, status)->count, 1);
    if (seconds >= 0) observe(find(&m->duration, type, NULL), seconds);
}

void mt_lease_reaps(mt_metrics *m, long n)
{
    if (m && n > 0) add(&m->reaps, (uint64_t)n);
}

void mt_api_slow_dropped(mt_metrics *m, long n)
{
    if (m && n > 0) add(&m->slow_dropped, (uint64_t)n);
}

void mt_store_lost(mt_metrics *m, int64_t at_ms)
{
    if (!m) return;
    add(&m->losses, 1);
    __atomic_store_n(&m->lost_at_ms, (uint64_t)at_ms, __ATOMIC_RELEASE);
}

void mt_api_request(mt_metrics *m, int code)
{
    char c[16];
    if (!m) return;
    snprintf(c, sizeof c, "%d", code);
    add(&find(&m->api, c, NULL)->count, 1);
}

void mt_queue_seen(mt_metrics *m, const char *queue)
{
    if (m && queue && *queue) find(&m->queues, queue, NULL);
}

void mt_queues(const mt_metrics *m, int (*fn)(void *ud, const char *queue), void *ud)
{
    size_t i, n;
    if (!m) return;
    n = __atomic_load_n(&m->queues.n, __ATOMIC_ACQUIRE);
    for (i = 0; i < n; i++)
        if (fn(ud, m->queues.s[i].l1)) return;
}

/* ---- rendering ---- */

typedef struct out {
    wu_buf *b;
    int oom;
} out;

__attribute__((format(printf, 2, 3))) static void put(out *o, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n >= sizeof buf)
        n = (int)sizeof buf - 1; /* label values are escaped and bounded before this */
    if (wu_buf_add(o->b, buf, (size_t)n)) o->oom = 1;
}

/* A label value escaped as the exposition format wants (\\, \", \n), cut at 200 bytes. */
static const char *esc(const char *s, char buf[256])
{
    size_t j = 0;
    for (; s && *s && j < 200; s++) {
        if (*s == '\\' || *s == '"') {
            buf[j++] = '\\';
            buf[j++] = *s;
        } else if (*s == '\n') {
            buf[j++] = '\\';
            buf[j++] = 'n';
        } else {
            buf[j++] = *s;
        }
    }
    buf[j] = 0;
    return buf;
}

static void head(out *o, const char *name, const char *type, const char *help)
{
    put(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* A family's series as counter lines with one or two labels. */
static void counters(out *o, const family *f, const char *name, const char *k1, const char *k2)
{
    size_t i, n = __atomic_load_n(&f->n, __ATOMIC_ACQUIRE);
    char e1[256], e2[256];
    for (i = 0; i <= n; i++) {
        const series *s = i < n ? &f->s[i] : &f->other;
        uint64_t v = get(&s->count);
        if (i == n && !v) continue;
        if (k2)
            put(o, "%s{%s=\"%s\",%s=\"%s\"} %llu\n", name, k1, esc(s->l1, e1), k2, esc(s->l2, e2),
                (unsigned long long)v);
        else
            put(o, "%s{%s=\"%s\"} %llu\n", name, k1, esc(s->l1, e1), (unsigned long long)v);
    }
}

/* A family's series as histograms with one label (k2 NULL) or two. */
static void histograms(out *o, const family *f, const char *name, const char *k1, const char *k2)
{
    size_t i, b, n = __atomic_load_n(&f->n, __ATOMIC_ACQUIRE);
    char e1[256], e2[256], labels[600];
    for (i = 0; i <= n; i++) {
        const series *s = i < n ? &f->s[i] : &f->other;
        uint64_t cum = 0, c[NB];
        for (b = 0; b < NB; b++)
            cum += c[b] = get(&s->buckets[b]);
        if (i == n && !cum) continue;
        if (k2)
            snprintf(labels, sizeof labels, "%s=\"%s\",%s=\"%s\"", k1, esc(s->l1, e1), k2,
                     esc(s->l2, e2));
        else
            snprintf(labels, sizeof labels, "%s=\"%s\"", k1, esc(s->l1, e1));
        cum = 0;
        for (b = 0; b < NB; b++) {
            cum += c[b];
            if (b < NB - 1)
                put(o, "%s_bucket{%s,le=\"%g\"} %llu\n", name, labels, bounds[b],
                    (unsigned long long)cum);
            else
                put(o, "%s_bucket{%s,le=\"+Inf\"} %llu\n", name, labels, (unsigned long long)cum);
        }
        put(o, "%s_sum{%s} %.6f\n", name, labels, (double)get(&s->sum_us) / 1e6);
        put(o, "%s_count{%s} %llu\n", name, labels, (unsigned long long)cum);
    }
}

/* One gauge per queue and limit name from the queues' limit states. */
static void limit_gauges(out *o, const mt_depth *depths, size_t ndepths, const char *metric,
                         const char *field, const char *help)
{
    char e[256], e2[256];
    size_t i;
    head(o, metric, "gauge", help);
    for (i = 0; i < ndepths; i++) {
        json_object *limits;
        if (!depths[i].limits || !json_object_object_get_ex(depths[i].limits, "limits", &limits))
            continue;
        json_object_object_foreach(limits, name, l)
        {
            json_object *v;
            if (json_object_object_get_ex(l, field, &v))
                put(o, "%s{queue=\"%s\",name=\"%s\"} %lld\n", metric, esc(depths[i].queue, e),
                    esc(name, e2), (long long)json_object_get_int64(v));
        }
    }
}

/* The process's own, as Prometheus's client libraries name them, from
 * /proc (Linux); what cannot be read is left out. */
static void process_metrics(out *o)
{
    char buf[1024], *p;
    unsigned long long utime, stime, start, vsize;
    long long rss, boot = -1;
    long tick = sysconf(_SC_CLK_TCK), page = sysconf(_SC_PAGESIZE);
    struct rlimit rl;
    FILE *f = fopen("/proc/self/stat", "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    DIR *d;
    if (f) fclose(f);
    buf[n] = 0;
    /* after the command name in parentheses (which may hold spaces): fields 3 on */
    if ((p = strrchr(buf, ')')) != NULL && tick > 0 &&
        sscanf(p + 1,
               " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d "
               "%llu %llu %lld",
               &utime, &stime, &start, &vsize, &rss) == 5) {
        head(o, "process_cpu_seconds_total", "counter", "User and system CPU time spent, seconds.");
        put(o, "process_cpu_seconds_total %.2f\n", (double)(utime + stime) / (double)tick);
        head(o, "process_virtual_memory_bytes", "gauge", "Virtual memory size, bytes.");
        put(o, "process_virtual_memory_bytes %llu\n", vsize);
        head(o, "process_resident_memory_bytes", "gauge", "Resident memory size, bytes.");
        put(o, "process_resident_memory_bytes %lld\n", rss * (long long)page);
        if ((f = fopen("/proc/stat", "r")) != NULL) {
            while (fgets(buf, sizeof buf, f))
                if (sscanf(buf, "btime %lld", &boot) == 1) break;
            fclose(f);
        }
        if (boot >= 0) {
            head(o, "process_start_time_seconds", "gauge",
                 "Start time of the process since the Unix epoch, seconds.");
            put(o, "process_start_time_seconds %.2f\n",
                (double)boot + (double)start / (double)tick);
        }
    }
    if ((d = opendir("/proc/self/fd")) != NULL) {
        long fds = -1; /* the directory's own */
        while (readdir(d))
            fds++;
        closedir(d);
        head(o, "process_open_fds", "gauge", "Open file descriptors.");
        put(o, "process_open_fds %ld\n", fds - 2); /* without . and .. */
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        head(o, "process_max_fds", "gauge", "The most file descriptors the process may open.");
        put(o, "process_max_fds %llu\n", (unsigned long long)rl.rlim_cur);
    }
}

int mt_render(const mt_metrics *m, const mt_depth *depths, size_t ndepths, long long unfinished,
              wu_buf *b)
{
    out o = {b, 0};
    size_t i;
    char e[256];
    head(&o, "weft_build_info", "gauge", "The weft version this daemon runs; always 1.");
    put(&o, "weft_build_info{version=\"%s\",plugin_abi=\"%d\"} 1\n", PACKAGE_VERSION,
        WEFT_ABI_MAJOR);
    head(&o, "weft_workflows_started_total", "counter",
         "Runs this daemon saved for the first time since their start or restart (each run "
         "once, however it was started).");
    put(&o, "weft_workflows_started_total %llu\n", (unsigned long long)get(&m->started));
    head(&o, "weft_workflows_ended_total", "counter",
         "Workflows whose end this daemon saved, by final status.");
    counters(&o, &m->ended, "weft_workflows_ended_total", "status", NULL);
    if (unfinished >= 0) {
        head(&o, "weft_workflows_unfinished", "gauge",
             "Workflows not ended (running or paused), in the whole store, read at scrape.");
        put(&o, "weft_workflows_unfinished %lld\n", unfinished);
    }
    head(&o, "weft_tasks_total", "counter",
         "Task results this daemon applied, by type and status.");
    counters(&o, &m->tasks, "weft_tasks_total", "type", "status");
    head(&o, "weft_task_duration_seconds", "histogram",
         "How long tasks ran (execute in a worker; poll to result for external workers).");
    histograms(&o, &m->duration, "weft_task_duration_seconds", "type", NULL);
    head(&o, "weft_workflow_duration_seconds", "histogram",
         "How long workflows ran, start to end, by name and final status (counted where "
         "weft_workflows_ended_total is).");
    histograms(&o, &m->wf_duration, "weft_workflow_duration_seconds", "name", "status");
    head(&o, "weft_queue_depth", "gauge", "Tasks in a queue (ready plus leased), read at scrape.");
    for (i = 0; i < ndepths; i++)
        put(&o, "weft_queue_depth{queue=\"%s\"} %lld\n", esc(depths[i].queue, e), depths[i].depth);
    head(&o, "weft_queue_last_poll_timestamp_seconds", "gauge",
         "When a worker last polled a queue (Unix time; 0 = none on record), read at scrape.");
    for (i = 0; i < ndepths; i++)
        put(&o, "weft_queue_last_poll_timestamp_seconds{queue=\"%s\"} %.3f\n",
            esc(depths[i].queue, e), (double)depths[i].polled_ms / 1000.0);
    head(&o, "weft_queue_waiting", "gauge",
         "Tasks of a queue held back by a rate or concurrency limit, read at scrape.");
    for (i = 0; i < ndepths; i++) {
        json_object *v;
        if (depths[i].limits && json_object_object_get_ex(depths[i].limits, "waiting", &v))
            put(&o, "weft_queue_waiting{queue=\"%s\"} %lld\n", esc(depths[i].queue, e),
                (long long)json_object_get_int64(v));
    }
    limit_gauges(&o, depths, ndepths, "weft_queue_slots_held", "held",
                 "Slots of a concurrency limit held now, by queue and task name.");
    limit_gauges(&o, depths, ndepths, "weft_queue_window_claims", "windowClaims",
                 "Claims in a rate limit's current window, by queue and task name.");
    head(&o, "weft_lease_reaps_total", "counter",
         "Expired task leases returned to their queue (the worker died or hung).");
    put(&o, "weft_lease_reaps_total %llu\n", (unsigned long long)get(&m->reaps));
    head(&o, "weft_api_requests_total", "counter", "REST API requests, by HTTP status code.");
    counters(&o, &m->api, "weft_api_requests_total", "code", NULL);
    head(&o, "weft_api_slow_connections_dropped_total", "counter",
         "REST API connections dropped because their request did not arrive within "
         "api_request_timeout.");
    put(&o, "weft_api_slow_connections_dropped_total %llu\n",
        (unsigned long long)get(&m->slow_dropped));
    head(&o, "weft_store_data_losses_total", "counter",
         "Times the store was found to have lost its data (its epoch key gone or changed: Redis "
         "restarted empty, flushed, or replaced).");
    put(&o, "weft_store_data_losses_total %llu\n", (unsigned long long)get(&m->losses));
    head(&o, "weft_store_data_lost_timestamp_seconds", "gauge",
         "When the store was last found to have lost its data (Unix time; 0 = never).");
    put(&o, "weft_store_data_lost_timestamp_seconds %.3f\n",
        (double)__atomic_load_n(&m->lost_at_ms, __ATOMIC_ACQUIRE) / 1000.0);
    process_metrics(&o);
    return o.oom ? WEFT_ENOMEM : 0;
}
