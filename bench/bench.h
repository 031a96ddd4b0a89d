/*
 * bench.h: what the parts of weft-bench share (private to bench/): the
 * workloads, the options, one run's results and the two modes. weft-bench.c
 * holds the options, the workloads, the results and main; embedded.c and
 * redis.c run the embedded and the Redis mode.
 */
#ifndef WEFT_BENCH_H
#define WEFT_BENCH_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#include <hiredis/hiredis.h>
#include <json-c/json.h>

typedef struct workload {
    const char *name;
    int tasks_per_wf; /* worker-run tasks (LAMBDA); FORK_JOIN/JOIN are decided, not run */
    json_object *(*def)(void);
    long long (*expect)(long long x); /* the workflow's output "result" for input x */
} workload;

typedef struct opts {
    const workload *wl;
    long n;
    int serial;
    const char *redis_url;
    int embedded;
    int daemons, workers;
    const char *weftd;
    const char *plugin_path;
    const char **sets;
    int nsets;
    long baseline_n;
    int keep, stats;
    int timeout_s;
} opts;

enum { PENDING = 0, DONE_OK, DONE_FAILED, DONE_WRONG };

typedef struct run {
    const opts *o;
    long n;
    int64_t *t_sub, *t_done; /* monotonic us, per workflow */
    char *state;
    long done;         /* atomic: workflows seen ending */
    char tag[26];      /* "xxxxxxxx-xxxx-4xxx-8xxx-": ids are tag + 12 hex digits of the index */
    redisContext *sub; /* Redis mode: the PSUBSCRIBE connection */
    size_t prefix_len;
    int64_t deadline_us;
    int failed_io;
} run;

/* Set by SIGINT/SIGTERM: the runs stop submitting and waiting. */
extern volatile sig_atomic_t bn_interrupted;

/* Now on the monotonic clock, in microseconds. */
int64_t bn_now_us(void);

/* CPU time (user + system) this process has used, in seconds. */
double bn_cpu_self_s(void);

/* Sets up R for o->n workflows (times and states zeroed). Returns 0, or -1
 * when out of memory; free with bn_run_free either way. */
int bn_run_init(run *R, const opts *o);

/* Frees what bn_run_init allocated (not R itself). */
void bn_run_free(run *R);

/* Records the end of workflow i (the first time only): ok says it completed,
 * output (borrowed) is checked against the workload's expected result. */
void bn_record_end(run *R, long i, int ok, json_object *output);

/* Adds key = v to o as a double printed with the given decimals. */
void bn_put_num(json_object *o, const char *key, double v, int decimals);

/* Adds the common fields to j: counts, rates, latency percentiles; stores the
 * tasks per second in *tasks_per_s. Returns the number of workflows that did
 * not complete with the right result. */
long bn_report(const run *R, json_object *j, double *tasks_per_s);

/* The result line's first fields (system, version, workload, mode, store).
 * Returns a new object the caller owns. */
json_object *bn_result_head(const opts *o, const char *store);

/* The input of workflow i: {"x": i}. Returns a new object the caller owns. */
json_object *bn_input_of(long i);

/* Runs o's workload in this process on the memory store and prints the result
 * line. Returns the exit status: 0, or 1 on failure or interruption. */
int bn_run_embedded(const opts *o);

/* Runs o's workload against o->redis_url with o->daemons weftd processes and
 * prints the result line. Returns the exit status: 0, 1 on failure or
 * interruption, 2 when the URL is not valid. */
int bn_run_redis(const opts *o);

#endif
