/*
 * The store: where executions, work queues, the decider queue, definitions,
 * secrets and the status lane live. One interface, a table of operations
 * (st_ops), and two backends: redis (store/redis/: many processes on many
 * hosts) and memory (store/memory.c: one process, `weft run` and the
 * embedded bench). Everything above the store (ops, the daemon, the API,
 * the CLI, the embedded engine) talks to it only through the st_*
 * functions below. Prefix st_.
 *
 * A handle (st_store) is used by one thread at a time. Executions go in and out
 * as xc_exec objects; how a backend keeps them is its own business (redis
 * encodes a document, memory keeps the object itself).
 *
 * The contract every backend keeps (tests/unit/test_store.c runs the same
 * cases against both):
 *
 * - A save is fenced: it commits only if nobody saved the execution since
 *   the copy was loaded (fence), else WEFT_ESTATE. It records its queue
 *   steps, appends its events and then applies the steps; a process that
 *   dies in between leaves them for exec_flush.
 * - A queue member is "<workflow id>|<task id>"; a claim leases it with a
 *   fresh token for lease_ms; renew/ack/check need the current token;
 *   reap returns expired leases to the queue and lists members whose lease
 *   expired more than max_reaps times.
 * - Every unfinished execution is on the decider queue, due when a decider
 *   should look at it next; due_claim hands it out and holds it hold_ms.
 *
 * Round trips: each redis operation's comment in store/redis/ says what it
 * costs; the interface adds none (one call = one backend call).
 */
#ifndef WEFT_STORE_H
#define WEFT_STORE_H

#include <stddef.h>
#include <stdint.h>
#include "weft/plugin.h"
#include "core/exec.h"

typedef struct st_store st_store;

/* ---- the shapes the operations exchange ---- */

/* A queue step recorded with a save (the outbox). */
typedef enum st_step_kind {
    ST_PUSH,    /* add member "<wfid>|<task>" to queue `type`, visible at `at` */
    ST_UNQUEUE, /* remove that member from queue `type` (ready and leases) */
    ST_WAKE,    /* the execution is due for a decider at `at` */
    ST_DONE,    /* the execution finished: off the decider queue */
} st_step_kind;

typedef struct st_step {
    st_step_kind kind;
    const char *type;    /* PUSH/UNQUEUE */
    const char *task_id; /* PUSH/UNQUEUE */
    int64_t at;          /* PUSH/WAKE */
    /* PUSH only, optional: lease the member to the saver at once (this token,
     * expiring at lease_until ms) instead of making it ready: eager dispatch.
     * The outbox records a plain push, which is what a replay does. */
    const char *lease;
    int64_t lease_until;
    /* PUSH/UNQUEUE, optional: the task object itself (a backend that keeps
     * objects, memory, queues it instead of looking its ids up) */
    xc_task *task;
    /* PUSH, optional: queue controls. Among members visible now, a higher
     * priority (0..99) is claimed first, FIFO within one; limit (NULL:
     * none) is counted under limit_name in its queue: at most rate_count
     * claims per fixed window of rate_per_ms, at most concurrency leased at
     * once. A member waiting on a limit stays queued. A push with controls
     * is never leased at once (lease is ignored). */
    int priority;
    const char *limit_name;
    const def_qlimit *limit;
} st_step;

/* One claimed task: which, and the lease that proves the claim is current. */
typedef struct st_lease {
    char workflow_id[64];
    char task_id[64];
    char lease[40];
    char type[128];
    int never_reaped; /* a lease the saver took at once (eager): no reap count to clear */
    int controlled;   /* its member has queue controls (priority, limits): its ack frees them */
    int qshard;       /* redis: 1 + the queue shard it was claimed from; 0: not known (an
                       * eager lease), worked out from its workflow and controls */
    /* the objects themselves when the backend keeps them (memory): borrowed,
     * valid while the execution is stored; NULL from redis */
    xc_exec *x;
    xc_task *t;
} st_lease;

/* One create of st_exec_create_many. */
typedef struct st_create {
    xc_exec *x; /* borrowed (the memory backend keeps a reference) */
    /* optional: the start's own queue steps (the starter decided the first
     * task) in place of a wake now, and its status-lane events */
    const st_step *steps;
    size_t nsteps;
    const char *const *events; /* one line of JSON each */
    size_t nevents;
    int rc; /* out: 0, WEFT_EEXIST (the id is taken), ... */
    char why[WEFT_ERROR_MAX];
} st_create;

/* One save of st_exec_save_many. */
typedef struct st_save {
    xc_exec *x;     /* borrowed: what to store (its id, status, cmd, revived) */
    uint64_t fence; /* the fence it was loaded at; 0 = unfenced (last writer wins) */
    /* fence 0: the fence the copy was loaded at, so that its save is refused
     * if an operator command landed since (0 = unknown) */
    uint64_t loaded_fence;
    const st_step *steps;
    size_t nsteps;
    const char *const *events;
    size_t nevents;
    /* claims known current, dropped without a token check once committed */
    const st_lease *acks;
    size_t nacks;
    int rc;             /* out: 0, WEFT_ESTATE (lost a fence race or a command waits) */
    uint64_t new_fence; /* out */
    char why[WEFT_ERROR_MAX];
} st_save;

/* What a reader sees of a stored execution without decoding it. */
typedef struct st_doc {
    char *doc;    /* malloc'd: the execution's JSON (Conductor's Workflow, codec.h) */
    char *status; /* malloc'd */
    char *cmd;    /* malloc'd: the operator command waiting (exec_command), or NULL */
    uint64_t fence;
} st_doc;
void st_doc_clear(st_doc *d);

/* Where one queue member stands (queue_member), for telling why a task
 * waits. */
typedef enum st_qstate { ST_Q_NONE, ST_Q_READY, ST_Q_LEASED, ST_Q_WAITING } st_qstate;
typedef struct st_qmember {
    st_qstate state;  /* ST_Q_READY: due or not yet; ST_Q_WAITING: on a limit */
    int64_t visible;  /* ST_Q_READY: when it became or becomes visible (0: due) */
    char name[128];   /* its limits' name, "" when none */
    def_qlimit limit; /* and its limits */
    int held;         /* slots of name held now */
    int64_t window_start;
    int window_claims; /* claims in the rate window that started then */
} st_qmember;

/* A queue and what it holds (queue_list). */
typedef struct st_qinfo {
    char name[128];    /* a task type's queue, or a domain's ("<domain>:<type>") */
    long long ready;   /* as queue_sizes: queued, visible or not, waiting on a limit or not */
    long long leased;  /* claimed */
    int64_t polled_ms; /* as queue_polled: when a claim last polled it; 0: none on record */
} st_qinfo;

/* exec_command's outcomes (besides WEFT_ESTATE with the status, WEFT_ENOTFOUND). */
enum { ST_CMD_RECORDED = 1, ST_CMD_SAME = 2, ST_CMD_OTHER = 3 };

#define ST_EVENT_ID_MAX 64

/*
 * A search of the executions (the store's index; Conductor's query subset):
 * every filter given must hold; an empty list or NULL matches any.
 */
typedef struct st_query {
    const char *const *statuses; /* workflow statuses */
    size_t nstatuses;
    const char *const *names; /* workflow names */
    size_t nnames;
    int64_t start_after, start_before; /* start time, exclusive (ms); 0: no bound */
    const char *correlation_id;
    const char *free_text; /* a run id or a correlation id, exactly */
    int version;           /* the definition's version; 0: any */
    int by_end;            /* sorted by end time (0 for a run not ended), else start */
    int asc;               /* ascending, else descending; ties by id alike */
    size_t start, size;    /* the page: start + size at most ST_SEARCH_MAX */
} st_query;
#define ST_SEARCH_MAX 10000

/* One run a search found, and the time it is sorted by. */
typedef struct st_hit {
    char id[64];
    int64_t key;
} st_hit;

/* The longest log line kept (longer ones are cut, "..." marking the cut),
 * and the lines kept per task (the newest). */
#define ST_LOG_LINE_MAX 4096
#define ST_LOG_LINES_MAX 200

/* ---- the operations ---- */

typedef struct st_ops {
    /* sizeof(st_ops) the backend was built with: the table only grows at
     * its end; opening a store refuses a table shorter than this
     * interface's (st_check). */
    size_t size;
    const char *name; /* "redis", "memory" */
    void (*free)(st_store *s);
    const char *(*where)(st_store *s); /* for messages: the URL (password masked) or "memory" */
    void (*revive)(st_store *s);
    int (*broken)(const st_store *s);
    int (*ping)(st_store *s, weft_error *err);

    /* executions */
    /* Create each c[i].x (WEFT_EEXIST when its id is taken) with its steps,
     * else due now; returns an error only when the whole call failed. */
    int (*exec_create_many)(st_store *s, st_create *c, size_t n, weft_error *err);
    /* *out: a new reference to id's execution (xc_free it), with the fence
     * it was stored at in ->fence and a waiting operator command in ->cmd.
     * WEFT_ENOTFOUND; WEFT_EINVAL when it cannot be read, with *fence
     * (optional) still set when it exists, so that st_exec_fail can end it. */
    int (*exec_load)(st_store *s, const char *id, xc_exec **out, uint64_t *fence, weft_error *err);
    /* exec_load for several ids at once: out[i] or rcs[i]. Returns an error
     * only when the whole call failed. */
    int (*exec_load_many)(st_store *s, const char *const *ids, size_t n, xc_exec **out, int *rcs,
                          weft_error *err);
    /* The stored document, for readers (GET, status): no decoding. */
    int (*exec_read)(st_store *s, const char *id, st_doc *out, weft_error *err);
    /* Fenced saves (see the contract above); sv[i].rc each. A failure of
     * the whole call sets every item's rc too (the caller reads them only). */
    int (*exec_save_many)(st_store *s, st_save *sv, size_t n, weft_error *err);
    /* Fail an execution that cannot be read, so nothing waits on it. */
    int (*exec_fail)(st_store *s, const char *id, uint64_t fence, const char *why, weft_error *err);
    /* Record an operator command ("<token>|<kind>|<reason>"): ST_CMD_*. */
    int (*exec_command)(st_store *s, const char *id, const char *text, const char *kind,
                        char **pending, char status[32], weft_error *err);
    /* Apply what a save left in its outbox: entries applied, or WEFT_E*. */
    int (*exec_flush)(st_store *s, const char *id, weft_error *err);
    int (*exec_exists_many)(st_store *s, const char *const *ids, size_t n, int *exists,
                            weft_error *err);

    /* work queues and leases */
    int (*renew_many)(st_store *s, const st_lease *c, size_t n, int64_t lease_ms, int *ok,
                      weft_error *err);
    int (*ack)(st_store *s, const st_lease *c, weft_error *err);
    int (*reap)(st_store *s, const char *type, int max_reaps, char ***exhausted, size_t *nexhausted,
                weft_error *err);
    int (*poll)(st_store *s, const char *queue, int max, int64_t lease_ms, int max_reaps,
                st_lease *out, int *reaped, char ***exhausted, size_t *nexhausted, weft_error *err);
    int (*lease_extend)(st_store *s, const char *queue, const char *workflow_id,
                        const char *task_id, int64_t lease_ms, weft_error *err);
    int (*queue_sizes)(st_store *s, const char *type, long long *ready, long long *leased,
                       weft_error *err);
    int (*queue_has)(st_store *s, const char *type, const char *workflow_id, const char *task_id,
                     weft_error *err);

    /* the decider queue */
    int (*due_claim)(st_store *s, int wait_ms, int due_max, int64_t hold_ms, char (*due_ids)[64],
                     int *ndue, const char *const *types, size_t ntypes, int max, int64_t lease_ms,
                     st_lease *out, weft_error *err);
    int (*wake)(st_store *s, const char *id, int64_t at, int only_earlier, weft_error *err);
    /* Take an execution off the decider queue: it ended, or (missing) a
     * decider found it not there. A missing one may be about to be created
     * (its create's steps can land first on a Redis Cluster): it leaves only
     * once it has been missing for a while, and is looked at again meanwhile. */
    int (*forget)(st_store *s, const char *id, int missing, weft_error *err);
    /* How many executions have not ended (running or paused): the decider
     * queue's size, every partition's. */
    int (*unfinished)(st_store *s, long long *n, weft_error *err);

    /* definitions, task definitions, idempotency, daemons, secrets */
    int (*def_register)(st_store *s, const char *name, int version, const char *json,
                        weft_error *err);
    int (*def_get)(st_store *s, const char *name, int version, char **json, int *version_out,
                   weft_error *err);
    int (*def_list)(st_store *s, char **json, weft_error *err);
    int (*taskdef_put)(st_store *s, const char *name, const char *json, weft_error *err);
    int (*taskdef_get)(st_store *s, const char *name, char **json, weft_error *err);
    int (*taskdef_list)(st_store *s, char **json, weft_error *err);
    int (*taskdefs_get)(st_store *s, const char *const *names, size_t n, char **jsons,
                        weft_error *err);
    int (*idem_claim)(st_store *s, const char *key, const char *id, char existing[64],
                      weft_error *err);
    int (*daemon_beat)(st_store *s, const char *daemon_id, const char *info_json, weft_error *err);
    int (*daemons)(st_store *s, char **json, weft_error *err);
    /* Forget the daemons whose last heartbeat is from before seen_before
     * (ms since the epoch), or unreadable: *n of them (optional). */
    int (*daemons_forget)(st_store *s, int64_t seen_before, size_t *n, weft_error *err);
    int (*secret_set)(st_store *s, const char *name, const char *value, weft_error *err);
    int (*secret_get)(st_store *s, const char *name, char **value, weft_error *err);
    int (*secret_delete)(st_store *s, const char *name, weft_error *err);
    int (*secret_names)(st_store *s, char ***names, size_t *n, weft_error *err);

    /* the status lane */
    int (*events)(st_store *s, const char *workflow_id, const char *after_id, char *next_id,
                  int block_ms, int (*fn)(void *ud, const char *id, const char *json), void *ud,
                  weft_error *err);

    /* When a claim last polled queue (a task type's, or a domain's
     * "<domain>:<type>"), in ms since the epoch; 0 when none is on record.
     * A claim that finds the queue empty counts. For taskToDomain's active
     * workers and for telling a queue no worker polls (queue_list). The
     * redis backend writes it at most once a second and keeps it for the
     * retention. */
    int (*queue_polled)(st_store *s, const char *queue, int64_t *ms, weft_error *err);
    /* Where member workflow_id|task_id of queue stands. */
    int (*queue_member)(st_store *s, const char *queue, const char *workflow_id,
                        const char *task_id, st_qmember *out, weft_error *err);
    /* The state of queue's limits as a JSON object (caller puts it):
     * {"waiting": <members waiting on limits>, "limits": {<name>:
     * {"held": n, "windowStart": ms, "windowClaims": n}}}. */
    int (*queue_limits)(st_store *s, const char *queue, json_object **out, weft_error *err);

    /* the execution index */
    /* The runs matching q: how many in *total, the page of them in
     * (*hits)[0..*n) (malloc'd; the caller frees it). WEFT_EINVAL for a
     * page beyond ST_SEARCH_MAX. */
    int (*search)(st_store *s, const st_query *q, long long *total, st_hit **hits, size_t *n,
                  weft_error *err);
    /* A task's log: append lines (JSON texts, one TaskExecLog each, no
     * newline), keeping the newest ST_LOG_LINES_MAX; they live as long as
     * the execution. WEFT_ENOTFOUND for no such execution. */
    int (*task_log_add)(st_store *s, const char *workflow_id, const char *task_id,
                        const char *const *lines, size_t n, weft_error *err);
    /* The lines kept, oldest first, a line each (malloc'd; "" for none). */
    int (*task_log)(st_store *s, const char *workflow_id, const char *task_id, char **lines,
                    weft_error *err);

    /* Every queue that holds tasks (ready, not visible yet, waiting on a
     * limit, or leased), whoever pushed them and whether anyone serves it,
     * with its sizes and last poll, in no particular order, into *out
     * (malloc'd, the caller frees it; NULL when none) and *n. A queue that
     * holds none is not listed. */
    int (*queue_list)(st_store *s, st_qinfo **out, size_t *n, weft_error *err);
} st_ops;

/* Every backend's handle starts with this. */
struct st_store {
    const st_ops *ops;
};

/* Call operation op of store s: ST(s, wake, id, at, 0, err), ST(s, broken). */
#define ST(s, op, ...) ((s)->ops->op((s), ##__VA_ARGS__))

/*
 * The argument checks every backend makes alike, so that both refuse the
 * same: a name (what names it in the message) is non-empty, under max
 * bytes, and without '|' unless bar_ok (ids, task ids and types end up in
 * members split at '|'); a lease is positive; due_claim's arguments (it
 * sets *ntypes to 0 when no claim is asked for). 0 or WEFT_EINVAL.
 */
int st_check_name(const char *what, const char *s, size_t max, int bar_ok, weft_error *err);
int st_check_lease(const char *what, int64_t lease_ms, weft_error *err);
int st_check_due_claim(int due_max, int64_t hold_ms, const char *const *types, size_t *ntypes,
                       int max, int64_t lease_ms, weft_error *err);

/* A stored event (cd_event_text's {...}) as delivered, into *b (emptied
 * first): {"workflowId":..,"time":<ms>,...}. One that carries them
 * already is passed as it is. 0 or WEFT_ENOMEM. */
int st_event_text(wu_buf *b, const char *workflow_id, uint64_t ms, const char *line, size_t len);

/* Whether a stored heartbeat (info, as daemons() gives it) is from before
 * seen_before, or unreadable: one rule for both backends' daemons_forget. */
int st_daemon_stale(json_object *info, int64_t seen_before);

/* A daemon's heartbeat info (a JSON object text, NULL = {}) with "seen":
 * now added, into *out (caller owns). WEFT_EINVAL when it is no object. */
int st_daemon_info(const char *daemon_id, const char *info_json, json_object **out,
                   weft_error *err);

/* A search's page checked: 0 or WEFT_EINVAL. */
int st_check_query(const st_query *q, weft_error *err);
/* Whether a run matches q (the free text against its id and correlation id). */
int st_query_match(const st_query *q, const char *id, const char *status, const char *name,
                   int version, const char *correlation_id, int64_t start_ms);
/* Sort hits in q's order (by key, then id), keep the page of the first
 * `have` ones: hits[0..*n) are then hits[q->start ..]. */
void st_hits_page(const st_query *q, st_hit *hits, size_t have, size_t *n);

/* 0, or WEFT_EABI when a backend's table is older than this interface. */
int st_check(const st_ops *ops, weft_error *err);
void st_free(st_store *s);

/*
 * Event ids are "<entry>-<index>" ("1700000000000-0-2": the third event of
 * entry 1700000000000-0): parse one into entry and *index (-1 for a plain
 * entry id "<ms>-<seq>" or "<ms>", meaning the whole entry; "0" means
 * before everything). WEFT_EINVAL naming the id.
 */
int st_event_id_parse(const char *id, char entry[ST_EVENT_ID_MAX], long long *index,
                      weft_error *err);

#endif
