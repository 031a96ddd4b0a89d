/*
 * The Redis store (hiredis): executions, work queues, the decider queue,
 * definitions, the status lane. Prefix rs_. One rs is one connection and is
 * not thread-safe: use one per thread.
 *
 * Keys (P = the key prefix, default "weft:"):
 *
 *   P{<wfid>}            HASH  doc (execution JSON, codec.h), def (definition
 *                              JSON), defkey (its cache key), fence, status
 *   P{<wfid>}:out        ZSET  outbox: queue steps recorded by the save that
 *                              decided them, scored by that save's fence
 *   P{<wfid>}:ev         STREAM status lane (capped), also PUBLISHed on the
 *                              channel P{<wfid>}:ev
 *   P{q:<type>}:ready    ZSET  member "<wfid>|<taskid>", score = visible-at ms
 *   P{q:<type>}:leases   ZSET  claimed members, score = lease expiry ms
 *   P{q:<type>}:lease    HASH  member -> current lease token
 *   P{q:<type>}:reaped   HASH  member -> times its lease expired
 *   P{q:<type>}:polled   STRING when a claim last polled it (ms), kept for the retention
 *   P{dq}:due            ZSET  every unfinished execution, score = when a
 *                              decider should look at it next
 *   Pdef:<name>          HASH  version -> definition JSON (registered)
 *   Pidem:<key>          STRING workflow id started with this idempotency key
 *   Pdaemons             HASH  daemon id -> JSON {types, pid, host, seen}
 *   Pqueues              SET   the queues tasks were pushed to (rs_queue_list)
 *
 * (so with the default prefix: weft:{<wfid>}, weft:def:order, weft:daemons)
 *
 * Outbox entries are "<fence>|<kind>|<type>|<taskid>|<at>" with kind push,
 * unqueue, wake or done; ids, task ids and types therefore may not hold '|'
 * (WEFT_EINVAL), and ids and task ids are under 64 bytes, types under 128.
 * Each function's comment in the store/redis .c files says how many round
 * trips it costs.
 *
 * Every script touches the keys of one hash tag only, so the same code runs
 * on Redis Cluster. A change that spans an execution and a queue is saved
 * with its queue steps in the execution's outbox (one script), then the
 * steps are applied (idempotent: the task id is the member) and the outbox
 * trimmed, pipelined in one round trip; a process that dies in between
 * leaves the outbox to the sweeper.
 */
#ifndef WEFT_STORE_REDIS_H
#define WEFT_STORE_REDIS_H

#include <stddef.h>
#include <stdint.h>
#include "weft/plugin.h"
#include "store/store.h"

typedef struct rs rs;

/* A queue step recorded in the outbox: the store interface's (store.h). */
typedef st_step rs_step;
typedef st_step_kind rs_step_kind;
#define RS_PUSH ST_PUSH
#define RS_UNQUEUE ST_UNQUEUE
#define RS_WAKE ST_WAKE
#define RS_DONE ST_DONE

/* One claimed task: the store interface's st_lease (store.h). */
typedef st_lease rs_lease;

/*
 * The store's epoch: a random id under P"epoch", written at first use.
 * Each connect reads it in its own round trip, and so does each
 * rs_daemon_beat; gone or changed while this process knew one means the
 * store lost its data (Redis restarted empty, FLUSHALL, another server).
 * The loss is counted and reported once per process, and a new epoch
 * written. One rs_epoch is shared (thread-safe) by every rs of a process.
 */
typedef struct rs_epoch rs_epoch;
typedef struct rs_loss {
    long long count;      /* losses seen by this process, this one included */
    int64_t at_ms;        /* when found (wall clock) */
    int gone;             /* 1: the key was gone; 0: it held another epoch */
    long long unfinished; /* unfinished workflows at the last heartbeat before; -1 = unknown */
    char key[160];        /* the epoch key */
    char was[40], now[40];
} rs_loss;
/* lost (may be NULL) is called on the thread that found the loss, after
 * the new epoch is written. NULL when out of memory. */
rs_epoch *rs_epoch_new(void (*lost)(void *ud, const rs_loss *l), void *ud);
void rs_epoch_free(rs_epoch *e);
/* The last loss into out (out->count 0: none). */
void rs_epoch_last(rs_epoch *e, rs_loss *out);

typedef struct rs_opts {
    const char *url; /* redis://[:password@]host[:port][/db] or unix:///path; NULL = $WEFT_REDIS_URL
                        or redis://127.0.0.1:6379 */
    const char *prefix;   /* NULL = $WEFT_KEY_PREFIX or "weft:" */
    int64_t retention_ms; /* terminal executions expire after this; 0 = 7 days */
    int timeout_ms;       /* connect/command timeout; 0 = 5000 */
    int early_steps;      /* rs_exec_save_many sends its steps pipeline without waiting:
                           * the replies are read at the start of the next round trip on
                           * this handle (or by rs_free). For a loop that saves often. */
    int home_rounds;      /* on a cluster, a poll of rs_due_claim that does not wait keeps to
                           * one node, the next in turn (internal.h, rs_cl_home). For a
                           * worker's loop, which polls all the time. */
    rs_epoch *epoch;      /* NULL = no epoch checks; else shared, outlives the rs */
    /* the key prefix's layout (docs/operations.md), fixed at its first use and
     * kept in Redis (P layout): 0 = $WEFT_PARTITIONS, else what Redis holds. A
     * number that differs from Redis's is refused. */
    int partitions; /* 1-1024; new: 1, on a cluster a multiple of the primaries >= 8 */
    /* queue shards, "<n>[,<type>=<n>]..." (n 1-64): a type's queue spread
     * over n shards (docs/operations.md); NULL or "" = $WEFT_QUEUE_SHARDS,
     * else what Redis holds (new: "1", or a cluster's primaries) */
    const char *queue_shards;
} rs_opts;

/* Connect. WEFT_EIO with the reason ("redis://127.0.0.1:6390: Connection
 * refused") when Redis cannot be reached; the rs is still returned in *out
 * in that case, and every later call tries to reconnect first. */
int rs_open(const rs_opts *opts, rs **out, weft_error *err);
void rs_free(rs *r);
const char *rs_prefix(const rs *r);
/* The URL with any password masked (":***@"): the form used in messages. */
const char *rs_url(const rs *r);
/* Drop the connection if the server closed it (Redis restarted), so that
 * the next call connects again rather than fails once. A system call, no
 * round trip: for a connection that may have sat idle (an API thread's). */
void rs_revive(rs *r);
/* 1 when the last call failed for connection reasons (the caller backs off). */
int rs_broken(const rs *r);

/* ---- executions ---- */

/*
 * Create an execution: HSETNX-style (WEFT_EEXIST if the id exists), fence 1,
 * status from the document's "status" (else RUNNING), and put it on the
 * decider queue due at `due_ms` (recorded in the outbox as well, so it is
 * never lost). doc/def are JSON text. The queue step is pipelined with the
 * create, so it runs for a taken id too, as ZADD LT: it can only make that
 * execution due earlier.
 */
int rs_exec_create(rs *r, const char *id, const char *doc, const char *def, const char *defkey,
                   int64_t due_ms, weft_error *err);

/*
 * A run's entry in the execution index: recorded in the outbox of the save
 * that ends it (or makes it run again) and applied with its steps, one
 * RPUSH onto the index log of its partition (the decider queue's hash
 * tag), folded into the index in bulk by the deciders' polls and by each
 * search (index_lib.lua), so a search asks each partition once. Status,
 * name, correlation id, start and end time. A run not ended has none:
 * every one is on the decider queue, and its create stores what a search
 * reads of it in its field "ix".
 */
typedef struct rs_index {
    const char *status, *name, *correlation_id; /* correlation id NULL: none */
    int version;
    int64_t start_ms, end_ms; /* end 0: not ended */
    const char *what;         /* optional: the run's field "ix" as stored, in place of start,
                               * version, name and correlation id (a run failed unread) */
} rs_index;

/* One create of rs_exec_create_many: rs_exec_create's arguments and outcome. */
typedef struct rs_create {
    const char *id, *doc, *def, *defkey;
    const char *status; /* optional: the document's status (else read from doc) */
    int64_t due_ms;     /* with no steps: the decider wakes at this time */
    /* optional: the start's own queue steps (the starter decided the first
     * task) in place of the wake, and its status-lane events */
    const rs_step *steps;
    size_t nsteps;
    const char *const *events;
    size_t nevents;
    const rs_index *ix; /* what a search reads of it (its field "ix") */
    int rc;             /* out */
    char why[WEFT_ERROR_MAX];
} rs_create;
/* Several creates in one round trip; each c[i].rc as rs_exec_create returns.
 * The call returns an error only when the round trip failed. */
int rs_exec_create_many(rs *r, rs_create *c, size_t n, weft_error *err);

typedef struct rs_exec {
    char *doc;    /* malloc'd */
    char *def;    /* malloc'd; NULL when not asked for */
    char *defkey; /* malloc'd */
    char *status; /* malloc'd */
    uint64_t fence;
    char *cmd; /* malloc'd: the operator command waiting (rs_exec_command), or NULL */
} rs_exec;
void rs_exec_clear(rs_exec *e);

/* Load doc, defkey, status, fence, cmd (and def if want_def). WEFT_ENOTFOUND for
 * an unknown id; WEFT_EINVAL when the key holds something else. */
int rs_exec_load(rs *r, const char *id, int want_def, rs_exec *out, weft_error *err);
/* One field of a hash of execution id (its own: suffix "", its task logs:
 * ":log") into *out (malloc'd; NULL when it has none). One round trip:
 * HGET. */
int rs_exec_field(rs *r, const char *id, const char *suffix, const char *field, char **out,
                  weft_error *err);
/* Just the definition JSON (after a cache miss on defkey). */
int rs_exec_def(rs *r, const char *id, char **def, weft_error *err);

/*
 * Save an execution if its fence is still `fence` (else WEFT_ESTATE: someone
 * saved newer state; reload and redo). fence 0 saves whatever is stored
 * (fencing switched off: the last writer wins). In the same script: bump the fence,
 * record the steps in the outbox, append events (JSON texts) to the status
 * stream and publish them, and set expiry on every key of the execution when
 * `terminal`. Then apply the steps and trim the outbox, pipelined. On
 * success *new_fence (optional) is the fence now stored. It overrides (drops)
 * any waiting operator command.
 *
 * Once the fenced write is done the call returns 0, even if applying the
 * steps then failed: they stay in the outbox (rs_broken tells a lost
 * connection) for rs_exec_flush or the next save, which applies entries of
 * earlier saves still in the outbox before its own.
 */
int rs_exec_save(rs *r, const char *id, uint64_t fence, const char *doc, const char *status,
                 int terminal, const rs_step *steps, size_t nsteps, const char *const *events,
                 size_t nevents, uint64_t *new_fence, weft_error *err);

/* One save of rs_exec_save_many: rs_exec_save's arguments, plus claims to
 * drop (ack) in the steps pipeline once this save is committed, and the
 * outcome. */
typedef struct rs_save {
    const char *id;
    uint64_t fence;
    const char *doc, *status;
    int terminal;
    const rs_step *steps;
    size_t nsteps;
    const char *const *events; /* one line of JSON each */
    size_t nevents;
    int revive; /* a finished execution made to run again: keep its keys again */
    /* fence 0 (unfenced): the fence the saver's copy was loaded at, so its
     * save is refused if an operator command landed since (0 = unknown) */
    uint64_t loaded_fence;
    /* the operator command (rs_exec.cmd) this save applied, NULL for none,
     * "*" to drop any: while one waits, a save that did not apply it is
     * refused (rc WEFT_ESTATE, as a lost fence race) */
    const char *cmd;
    /* claims known current (the saver's own, taken less than half a lease
     * ago): dropped without a token check once the save is committed */
    const rs_lease *acks;
    size_t nacks;
    const rs_index *ix;       /* optional: the index entry of an end or a revival */
    int rc;                   /* out: as rs_exec_save returns */
    uint64_t new_fence;       /* out */
    char why[WEFT_ERROR_MAX]; /* out: the message when rc != 0 */
} rs_save;

/*
 * Several saves of different executions in two round trips: every save.lua
 * in one pipeline, then every committed save's steps, trims and acks in
 * another. Each s[i].rc tells that save's outcome; the call returns an
 * error only when the first pipeline failed (then nothing was committed
 * that this call knows of: s[i].rc is that error).
 */
int rs_exec_save_many(rs *r, rs_save *s, size_t n, weft_error *err);

/* Load several executions (rs_exec_load, without def) in one round trip;
 * rcs[i] is 0 or what rs_exec_load would return for ids[i]. The call
 * returns an error only when the round trip failed. */
int rs_exec_load_many(rs *r, const char *const *ids, size_t n, rs_exec *out, int *rcs,
                      weft_error *err);

/* Which of ids[0..n) have an execution stored (EXISTS, one round trip):
 * exists[i] = 1 or 0. An id that cannot be one is 0. Returns an error only
 * when the round trip failed. (The payload sweep: payload.h.) */
int rs_exec_exists_many(rs *r, const char *const *ids, size_t n, int *exists, weft_error *err);

/* ---- the execution index and task logs (index.c): st_ops' search,
 * task_log_add and task_log ---- */
int rs_search(rs *r, const st_query *q, long long *total, st_hit **hits, size_t *n,
              weft_error *err);
int rs_task_log_add(rs *r, const char *workflow_id, const char *task_id, const char *const *lines,
                    size_t n, weft_error *err);
int rs_task_log(rs *r, const char *workflow_id, const char *task_id, char **lines, weft_error *err);

/*
 * Record an operator command for an execution, in its hash: text is
 * "<token>|<kind>|<reason>" with kind terminate, pause or resume. Every save
 * from then on is refused (WEFT_ESTATE) unless it applied this very command
 * (rs_save.cmd), so the next save of any decider applies it. Returns
 * RS_CMD_RECORDED; RS_CMD_SAME when a command of that kind waits already
 * (its text into *pending, malloc'd); RS_CMD_OTHER when another waits
 * (*pending: apply it first, then ask again); WEFT_ESTATE when the status
 * does not allow the command (the status into status); WEFT_ENOTFOUND.
 * One round trip.
 */
enum { RS_CMD_RECORDED = 1, RS_CMD_SAME = 2, RS_CMD_OTHER = 3 };
int rs_exec_command(rs *r, const char *id, const char *text, const char *kind, char **pending,
                    char status[32], weft_error *err);

/* Apply and trim whatever is left in an execution's outbox (sweeper).
 * Returns the number of entries applied (at most 1000 per call), or a
 * WEFT_E* code (entries Redis refused stay in the outbox). Replaying a push
 * whose task was claimed meanwhile queues it again (at least once): flush
 * outboxes that have been there a while, not ones a save is applying now. */
int rs_exec_flush(rs *r, const char *id, weft_error *err);

/* ---- work queues ---- */

/*
 * Claim up to max visible members from the queues of `types` (one pipelined
 * round trip), each with a fresh lease token that expires after lease_ms
 * (the type is named rs_lease; the function rs_claim).
 * Returns the number claimed (>= 0) or a WEFT_E* code.
 */
int rs_claim(rs *r, const char *const *types, size_t ntypes, int max, int64_t lease_ms,
             rs_lease *out, weft_error *err);
/* Extend a lease; WEFT_ESTATE when the lease is no longer current. */
int rs_renew(rs *r, const rs_lease *c, int64_t lease_ms, weft_error *err);
/* rs_renew for n leases in one round trip: ok[i] = 1 when c[i] was renewed,
 * 0 when it is no longer current. An error is the first failed reply's. */
int rs_renew_many(rs *r, const rs_lease *c, size_t n, int64_t lease_ms, int *ok, weft_error *err);
/* Drop a claim after its result was handled; WEFT_ESTATE when the lease is
 * no longer current (the result must be discarded). */
int rs_ack(rs *r, const rs_lease *c, weft_error *err);
/* Whether the lease is still current (0) or not (WEFT_ESTATE). */
int rs_check_lease(rs *r, const rs_lease *c, weft_error *err);

/*
 * Return expired leases of `type` to its queue. Members whose lease has now
 * expired more than max_reaps times are not returned but listed in
 * *exhausted (malloc'd array of malloc'd "<wfid>|<taskid>", caller frees)
 * for the caller to fail. Returns the number put back, or a WEFT_E* code.
 */
int rs_reap(rs *r, const char *type, int max_reaps, char ***exhausted, size_t *nexhausted,
            weft_error *err);

/* Number of members ready / leased in a queue (status, tests, metrics). */
int rs_queue_sizes(rs *r, const char *type, long long *ready, long long *leased, weft_error *err);
/* Whether member is in the queue (ready or leased): 1 or 0, or a WEFT_E*
 * code. The sweeper's repair. */
int rs_queue_has(rs *r, const char *type, const char *workflow_id, const char *task_id,
                 weft_error *err);
/* When a claim last polled queue, 0 when none is on record. One round trip. */
int rs_queue_polled(rs *r, const char *queue, int64_t *ms, weft_error *err);
/* Every queue holding tasks (st_ops.queue_list): the names in Pqueues,
 * then their sizes and poll times. Two round trips. */
int rs_queue_list(rs *r, st_qinfo **out, size_t *n, weft_error *err);
/* Where a member stands (st_ops.queue_member). Two round trips at most. */
int rs_queue_member(rs *r, const char *queue, const char *workflow_id, const char *task_id,
                    st_qmember *out, weft_error *err);
/* The state of queue's limits (st_ops.queue_limits). One round trip. */
int rs_queue_limits(rs *r, const char *queue, json_object **out, weft_error *err);

/* ---- decider queue ---- */

/*
 * Take up to max executions due now: each is pushed `hold_ms` into the future
 * (so other deciders skip it meanwhile) and its id copied to ids[i]
 * (64 bytes each). Returns the count or a WEFT_E* code.
 */
int rs_due(rs *r, int max, int64_t hold_ms, char (*ids)[64], weft_error *err);
/*
 * rs_due (when due_max > 0; the count in *ndue) and rs_claim (when max > 0
 * and ntypes > 0; the count returned) in one round trip. On an error
 * neither took anything: claims are given back, and the due executions come
 * due again after hold_ms.
 *
 * wait_ms > 0 (an idle worker): first wait up to wait_ms for new work. Every
 * save that makes a task or an execution due now also pushes a token to
 * Pwake (kept to a few dozen); the polls run in Redis right after the token
 * is taken or the wait ends, still one round trip. Timed work (retry
 * backoff, WAIT) pushes no token: the wait ending is its poll.
 */
int rs_due_claim(rs *r, int wait_ms, int due_max, int64_t hold_ms, char (*due_ids)[64], int *ndue,
                 const char *const *types, size_t ntypes, int max, int64_t lease_ms, rs_lease *out,
                 weft_error *err);
/* Set when an execution is next due (ZADD; `only_earlier` keeps an earlier time). */
int rs_wake(rs *r, const char *id, int64_t at, int only_earlier, weft_error *err);
/* Take an execution off the decider queue: it ended (ZREM), or (missing) a
 * decider found it not there, and it leaves once missing for a while
 * (forget.lua). */
int rs_forget(rs *r, const char *id, int missing, weft_error *err);
/* Executions not ended: ZCARD of every decider-queue partition, one round trip. */
int rs_unfinished(rs *r, long long *n, weft_error *err);

/* ---- definitions, idempotency, daemons ---- */

/* Register a definition JSON under name/version (replacing that version). */
int rs_def_put(rs *r, const char *name, int version, const char *json, weft_error *err);
/* Version `version`, or the latest when version <= 0 (*version_out gets it). */
int rs_def_get(rs *r, const char *name, int version, char **json, int *version_out,
               weft_error *err);

/* SET NX Pidem:<key> = id (expiring with the retention). Returns 0 when
 * this id was set (or the key already names this same id); WEFT_EEXIST with
 * the existing id copied to existing (optional). */
int rs_idem_claim(rs *r, const char *key, const char *id, char existing[64], weft_error *err);

/* A daemon says it is alive and which types it serves (a JSON object text;
 * "seen": now in ms is added). WEFT_EINVAL when it is not an object. */
int rs_daemon_beat(rs *r, const char *daemon_id, const char *info_json, weft_error *err);
/* All daemons' info as a JSON object text { id: info } (caller frees). */
int rs_daemons(rs *r, char **json, weft_error *err);
/* Forget the daemons not seen since seen_before (st_daemon_stale): *n. */
int rs_daemons_forget(rs *r, int64_t seen_before, size_t *n, weft_error *err);

/* ---- secrets ---- */

/* Secrets live in the hash Psecrets (NAME -> value). get: WEFT_ENOTFOUND when
 * unset (*value malloc'd otherwise); names: a malloc'd array of malloc'd names. */
int rs_secret_set(rs *r, const char *name, const char *value, weft_error *err);
int rs_secret_get(rs *r, const char *name, char **value, weft_error *err);
int rs_secret_delete(rs *r, const char *name, weft_error *err);
int rs_secret_names(rs *r, char ***names, size_t *n, weft_error *err);

/* ---- status lane ---- */

/*
 * Read events after the event `after_id` (st_event_id_parse, store.h; "0" or NULL =
 * from the start) from an execution's stream, waiting up to block_ms (0 = no
 * wait) for new ones. Calls fn for each (event id, JSON text). Stops early
 * when fn returns non-zero, after the rest of that event's entry. next_id
 * (ST_EVENT_ID_MAX bytes, may be NULL, may be after_id's buffer) gets where
 * the next call resumes: the entry id of the last entry read, else after_id.
 * Returns the number of events given to fn, or a WEFT_E* code.
 */
int rs_events(rs *r, const char *workflow_id, const char *after_id, char *next_id, int block_ms,
              int (*fn)(void *ud, const char *id, const char *json), void *ud, weft_error *err);

/* Raw command for tests and tools (hiredis format); the reply is discarded. */
int rs_command(rs *r, weft_error *err, const char *fmt, ...);

/* ---- the REST API's calls ----
 *
 * More keys (P = the key prefix):
 *
 *   Pdefnames            SET   names of definitions registered with rs_def_register
 *   Ptaskdefs            HASH  task name -> Conductor TaskDef JSON
 */

/*
 * One queue by name, for external workers: return its expired leases to it
 * (as rs_reap, with max_reaps; *reaped gets the count put back and
 * *exhausted the members over the limit, caller frees) and claim up to max
 * visible members with leases of lease_ms. Returns the number claimed or a
 * WEFT_E* code.
 */
int rs_poll(rs *r, const char *queue, int max, int64_t lease_ms, int max_reaps, rs_lease *out,
            int *reaped, char ***exhausted, size_t *nexhausted, weft_error *err);

/* Make the lease of member "<workflow_id>|<task_id>" of `queue` expire lease_ms
 * from now, whoever holds it; nothing when it is not leased (ZADD XX). */
int rs_lease_extend(rs *r, const char *queue, const char *workflow_id, const char *task_id,
                    int64_t lease_ms, weft_error *err);

/* rs_def_put, and the name recorded in Pdefnames for rs_def_list. */
int rs_def_register(rs *r, const char *name, int version, const char *json, weft_error *err);
/* Every version of every definition in Pdefnames, as the text of a JSON array
 * of WorkflowDef objects, by name then version (caller frees). */
int rs_def_list(rs *r, char **json, weft_error *err);

/* Task definitions (Conductor's TaskDef JSON, by task name). get:
 * WEFT_ENOTFOUND when unknown. list: a JSON array text. */
int rs_taskdef_put(rs *r, const char *name, const char *json, weft_error *err);
int rs_taskdef_get(rs *r, const char *name, char **json, weft_error *err);
int rs_taskdef_list(rs *r, char **json, weft_error *err);
/* Several at once: jsons[i] is the definition of names[i] (malloc'd) or NULL. */
int rs_taskdefs_get(rs *r, const char *const *names, size_t n, char **jsons, weft_error *err);

#endif
