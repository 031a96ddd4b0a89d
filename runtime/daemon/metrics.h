/*
 * Counters and histograms of one weftd, updated with atomics from any
 * thread and rendered as Prometheus text (exposition format 0.0.4) by the
 * REST API's GET /metrics. Prefix mt_.
 *
 * Labelled series (a task type, a status, an HTTP code, a queue) are made on
 * first use and live as long as the registry; past MT_SERIES_MAX distinct
 * label sets per metric, new ones are counted under the label value "other".
 */
#ifndef WEFT_METRICS_H
#define WEFT_METRICS_H

#include <stddef.h>
#include <stdint.h>
#include "base/util.h"

#define MT_SERIES_MAX 256

typedef struct mt_metrics mt_metrics;

mt_metrics *mt_new(void);
void mt_free(mt_metrics *m);

/* weft_workflows_started_total. */
void mt_workflow_started(mt_metrics *m);
/* weft_workflows_ended_total{status}: status is a workflow status name
 * (borrowed); and when seconds >= 0 an observation of
 * weft_workflow_duration_seconds{name,status} (name: the workflow's). */
void mt_workflow_ended(mt_metrics *m, const char *name, const char *status, double seconds);
/* weft_tasks_total{type,status}, and when seconds >= 0 an observation of
 * weft_task_duration_seconds{type}. Strings are borrowed (copied on first use). */
void mt_task(mt_metrics *m, const char *type, const char *status, double seconds);
/* weft_lease_reaps_total += n. */
void mt_lease_reaps(mt_metrics *m, long n);
/* weft_api_slow_connections_dropped_total += n. */
void mt_api_slow_dropped(mt_metrics *m, long n);
/* weft_store_data_losses_total += 1; weft_store_data_lost_timestamp_seconds = at_ms / 1000. */
void mt_store_lost(mt_metrics *m, int64_t at_ms);
/* weft_api_requests_total{code}. */
void mt_api_request(mt_metrics *m, int code);
/* Remember a queue polled through the API, so GET /metrics reports its depth too. */
void mt_queue_seen(mt_metrics *m, const char *queue);

/* Queue names to report depths for: the remembered ones (mt_queue_seen).
 * Calls fn for each; stops when fn returns non-zero. */
void mt_queues(const mt_metrics *m, int (*fn)(void *ud, const char *queue), void *ud);

/* Gauge values of a queue read at scrape time: weft_queue_depth{queue} and
 * weft_queue_last_poll_timestamp_seconds{queue}. */
typedef struct mt_depth {
    const char *queue;   /* borrowed */
    long long depth;     /* ready + leased */
    int64_t polled_ms;   /* when a worker last polled it (Unix ms); 0: none on record */
    json_object *limits; /* borrowed, may be NULL: st_ops.queue_limits' answer */
} mt_depth;

/* Append the Prometheus text of every metric, plus the queue depths given
 * and the executions not ended (unfinished < 0: not known, left out), to
 * out. Returns 0 or WEFT_ENOMEM. */
int mt_render(const mt_metrics *m, const mt_depth *depths, size_t ndepths, long long unfinished,
              wu_buf *out);

#endif
