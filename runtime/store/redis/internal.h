/*
 * What the files of the Redis store (conn.c, epoch.c, outbox.c, exec.c,
 * queue.c, due.c, meta.c, events.c) share, and nothing else includes: the
 * rs handle, its commands and round trips, keys and names, the outbox
 * steps. The public API is redis.h; each function's comment is at its
 * definition.
 */
#ifndef WEFT_STORE_REDIS_INTERNAL_H
#define WEFT_STORE_REDIS_INTERNAL_H

#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>

#include <hiredis/hiredis.h>

#include "base/keyslot.h"
#include "base/redis_url.h"
#include "base/util.h"
#include "store/redis/redis.h"

/* The scripts (the .lua files here), by index into rs.src and rs.sha. */
enum {
    S_CREATE,
    S_SAVE,
    S_FLUSH,
    S_CLAIM,
    S_RENEW,
    S_ACK,
    S_CHECK,
    S_REAP,
    S_DUE,
    S_UNQUEUE,
    S_COMMAND,
    S_SEARCH,
    S_TASKLOG,
    S_FORGET,
    S_COUNT
};

#define KEY_MAX 512
#define PREFIX_MAX 64
#define ID_MAX 64     /* workflow and task ids, with the NUL (rs_claim, rs_due) */
#define TYPE_MAX 128  /* task type names, with the NUL (rs_claim) */
#define NAME_MAX_ 257 /* definition names, idempotency keys, daemon ids */
#define STREAM_MAXLEN "1000"
#define REAP_BATCH 1000
#define FLUSH_BATCH 1000
#define EVENTS_COUNT "100"
#define DEFAULT_RETENTION_MS (7LL * 24 * 3600 * 1000)
#define DEFAULT_TIMEOUT_MS 5000

#define RS_QSHARDS_MAX 64 /* shards of one type's queue */
#define RS_QSEEN 32       /* types whose claims are remembered (rs.qseen) */
#define RS_QNOTE_MS 10000 /* how often one rs adds a queue it pushes to to Pqueues */

struct rs {
    redisContext *c;
    ru_url url; /* the seed in use (a copy of seeds[seed]); url.shown, the password masked,
                 * is the only form put in messages */
    ru_url seeds[RU_SEEDS_MAX]; /* the URL's list: tried in turn when a connect fails */
    size_t nseeds, seed;
    char *prefix;
    int64_t retention_ms;
    int timeout_ms;
    int broken;
    unsigned rr;             /* rotates which type rs_claim serves first */
    unsigned srr;            /* rotates the queue shards that claims visit first */
    unsigned erot;           /* rotates the empty queues a busy worker asks */
    struct rs_qseen {        /* what the last claims of a type found (rs_claim_cmds) */
        char type[TYPE_MAX]; /* "": a free place */
        int base;            /* claims from its base queue */
        int base_empty;      /* the base queue had none */
        uint64_t shorts;     /* bit s-1: shard s had fewer than it was asked for */
        uint64_t empty;      /* bit s-1: shard s had none */
    } qseen[RS_QSEEN];       /* a few types at a time */
    unsigned qseen_next;     /* the place a type not among them takes */
    struct rs_qnote {        /* a queue this rs put in Pqueues lately (rs_queue_note) */
        char type[TYPE_MAX]; /* "": a free place */
        int64_t at;          /* when (monotonic ms) */
    } qnote[RS_QSEEN];       /* a few queues at a time */
    unsigned qnote_next;     /* the place a queue not among them takes */
    int early;               /* rs_opts.early_steps */
    int homes;               /* rs_opts.home_rounds */
    int homed;               /* the last rs_due_claim kept to one node */
    int guard;               /* SIGPIPE is not ignored: block it around each exchange */
    struct flight *fly;      /* a steps pipeline sent, its replies not read yet */
    struct rs_cluster *cl;   /* a Redis Cluster (cluster.c); NULL: a single Redis, on c */
    /* the layout (P layout, read at the first connect): partitions of the
     * decider queue and wake tokens, each a hash tag (ptag) */
    int want_parts; /* configured; 0 = what Redis holds */
    int parts;      /* 0 until read */
    int loading;    /* reading it */
    int parts_crc;  /* a layout from before partitions by slot range: by CRC16 */
    char (*ptag)[RC_TAG_MAX];
    /* queue shards (rs_qshards): the text configured (NULL: what Redis
     * holds), the default count and the types that differ */
    char *want_qs;
    int qshards;
    struct rs_qover *qover;
    size_t nqover;
    unsigned wrr;    /* rotates the partitions an idle worker waits on and polls */
    int long_ms;     /* > 0: the next exchange waits this long in Redis (BLPOP) */
    rs_epoch *epoch; /* shared; NULL = no epoch checks */
    wu_buf proto;    /* commands in the wire format, before they go to hiredis */
    const char *src[S_COUNT];
    char sha[S_COUNT][41];
};

/*
 * One command's arguments; strings are borrowed unless copied by
 * rs_cmd_addf/rs_cmd_dup. wave and group order a pipeline on a Redis
 * Cluster, where the commands of different nodes run side by side: a
 * command is not sent before the commands of a lower wave in its group (or
 * in group 0, which every group shares) have been answered, unless they go
 * to its node ahead of it in the same exchange (one node runs its commands
 * in order); a command of a group below 0 has no order. A single Redis runs
 * a pipeline in order anyway.
 */
typedef struct rs_cmd {
    int argc, cap, oom, wave, group;
    const char **argv;
    size_t *len;
    char **own;
} rs_cmd;

/*
 * A write to a socket the server closed raises SIGPIPE, which would kill a
 * process that did not ignore it; hiredis uses write(2), so block the
 * signal for this thread around the exchange and swallow one it caused.
 * A process that ignores SIGPIPE when it opens the store (weftd does) is
 * spared those four system calls per round trip.
 */
typedef struct sigpipe_guard {
    sigset_t old;
    int was_pending, on;
} sigpipe_guard;

#define WAKE_TOKENS_MAX "63" /* kept tokens: enough to wake every idle worker */

/* The outbox's own kind of step, after the interface's: a run's index entry
 * (rs_index), "index|<status>||<end>|<start>:<version>:<name length>:<name><correlation id>". */
#define RS_INDEX ((rs_step_kind)(RS_DONE + 1))

/* One outbox entry: a queue step and the fence of the save that decided it. */
typedef struct rs_entry {
    uint64_t fence;
    rs_step_kind kind;
    const char *type, *task;
    int64_t at;
    const char *lease; /* a push leased to the saver at once (its own steps only) */
    int64_t lease_until;
    /* a push's queue controls (st_step's): priority, and limit when
     * limit_name is set */
    int priority;
    const char *limit_name;
    def_qlimit limit;
    const char *ix; /* RS_INDEX (type: the status, at: the end): "<start>:<version>:..." */
    char *raw;      /* "<fence>|<kind>|<type>|<taskid>|<at>[|<controls>]", owned */
    char *buf;      /* owned copy the fields point into (parsed entries) */
} rs_entry;

/* The steps of one execution to apply: its entries, the command trimming
 * them from its outbox, and claims to drop. */
typedef struct step_set {
    const char *id;
    const rs_entry *e;
    size_t n;
    rs_cmd *trim;
    const rs_lease *acks;
    size_t nacks;
    size_t ntrim;     /* set by rs_steps_build: 1, or 0 when the trim has nothing to remove */
    size_t nackcmds;  /* set by rs_steps_build: the acks' commands */
    redisReply **rep; /* out: per entry, the reply that tells whether it applied */
} step_set;

/* A steps pipeline sent early (outbox.c). */
typedef struct flight flight;

/* conn.c */
void rs_cmd_addn(rs_cmd *c, const char *s, size_t n, char *owned);
void rs_cmd_add(rs_cmd *c, const char *s);
void rs_cmd_dup(rs_cmd *c, const char *s);
char *rs_digits(char buf[24], unsigned long long v, int neg);
/* v's decimal digits (and sign) in buf: where they start. */
char *rs_ll(char buf[24], long long v);
void rs_cmd_addf(rs_cmd *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void rs_cmd_script_load(rs_cmd *c, const rs *r, int s);
void rs_cmd_script(rs_cmd *c, rs *r, int s, int nkeys);
void rs_cmd_free(rs_cmd *c);
void rs_cmds_free(rs_cmd *c, size_t n);
void rs_replies_free(redisReply **rep, size_t n);
int rs_append_cmds(rs *r, redisContext *c, const rs_cmd *cmds, size_t n);
int rs_ctx_exchange(rs *r, redisContext *c, const rs_cmd *cmds, size_t n, redisReply **rep);
void rs_long_wait(const rs *r, redisContext *c, int on);
redisContext *rs_dial(rs *r, const char *host, int port, const char *path, const char *shown,
                      weft_error *err);
int rs_greet(rs *r, redisContext *c, const char *shown, int first, int *cluster, weft_error *err);
int rs_script_of(const rs *r, const rs_cmd *c);
int rs_transient(const char *msg);
int rs_oom(weft_error *err);
int rs_is_err(const redisReply *x);
void rs_drop(rs *r);
int rs_reply_err(rs *r, const redisReply *x, const char *key, weft_error *err);
int rs_bad_reply(rs *r, const char *key, weft_error *err);
int rs_conn_fail(rs *r, const char *key, weft_error *err);
void rs_sigpipe_block(const rs *r, sigpipe_guard *g);
void rs_sigpipe_restore(sigpipe_guard *g);
int rs_write_out(redisContext *c);
struct timeval rs_ms_tv(int ms);
int rs_ensure(rs *r, weft_error *err);
int rs_is_noscript(const redisReply *x);
int rs_pipe(rs *r, rs_cmd *cmds, size_t n, redisReply **rep, const char *key, weft_error *err);
int rs_one(rs *r, rs_cmd *c, redisReply **rep, const char *key, weft_error *err);
int rs_array(rs *r, rs_cmd *c, redisReply **x, const char *key, weft_error *err);
int rs_strings(rs *r, const char *cmd, const char *key, int (*keep)(const char *s), char ***out,
               size_t *n, weft_error *err);
void rs_cat(char *dst, size_t cap, ...);
void rs_k_exec(const rs *r, const char *id, const char *suffix, char key[KEY_MAX]);
void rs_k_queue(const rs *r, const char *type, const char *which, char key[KEY_MAX]);
/* Queue shards: a type's queue is its base queue P{q:<type>} (shard 0), which
 * holds every member with controls (priority, limits: their counts stay
 * exact in one slot), and, when the layout gives the type S > 1 shards,
 * S more, P{q:<type>|<s>:<n>} (s = 1..S, the tag's slot in the (s-1)-th of
 * S slot ranges), over which members without controls are spread by their
 * workflow's slot (rs_qshard_of). With S = 1 (a single Redis's default)
 * there is only the base queue. */
int rs_qs_parse(rs *r, const char *text, char why[128]);
char *rs_qs_text(const rs *r);
void rs_qs_clear(rs *r);
int rs_qshards(const rs *r, const char *type);
int rs_qshard_of(const rs *r, const char *type, const char *member, int controlled);
void rs_k_qs(const rs *r, const char *type, int shard, const char *which, char key[KEY_MAX]);
/* The shards a member may sit in when its controls are not known: the
 * base queue and its own; 1 or 2 of them into sh. */
int rs_qshard_candidates(const rs *r, const char *type, const char *member, int sh[2]);
/* The shard a claim sits in. */
int rs_lease_shard(const rs *r, const rs_lease *cl);
void rs_token_seed(char seed[37]);
/* One claim.lua of rs_claim_cmds: the queue it asks, for how many, and how
 * many it got (the caller's). */
typedef struct rs_qclaim {
    int shard, asked, got;
} rs_qclaim;
/* How a claim asks: a busy worker's (the queues found empty take turns), an
 * idle worker's (every queue), a REST poll's (every queue, also with a
 * batch smaller than the queues) */
enum { RS_CLAIM_BUSY, RS_CLAIM_IDLE, RS_CLAIM_COVER };
int rs_claim_cmds(rs *r, const char *type, long long now, int64_t lease_ms, int max, int how,
                  int home, const char *seed, rs_cmd *c, rs_qclaim *q);
void rs_claim_noted(rs *r, const char *type, int max, const rs_qclaim *q, int n);
/* How many queues type has: the base queue (0), then its shards (1..). */
int rs_nqueues(const rs *r, const char *type);
/* Whether a push to type's queue should add it to Pqueues (rs_queue_list):
 * 1 when this rs did not in the last RS_QNOTE_MS (and it counts as done
 * now), else 0. */
int rs_queue_note(rs *r, const char *type);
/* A key in partition part's hash tag: P{dq}<suffix> with one partition. */
void rs_k_part(const rs *r, int part, const char *suffix, char key[KEY_MAX]);
void rs_k_dq(const rs *r, int part, char key[KEY_MAX]);
/* The execution index of partition part (index_lib.lua): P{dq}:ix with one. */
void rs_k_ix(const rs *r, int part, char key[KEY_MAX]);
void rs_k_wake(const rs *r, int part, char key[KEY_MAX]);
int rs_part(const rs *r, const char *id);
void rs_k_name(const rs *r, const char *kind, const char *name, char key[KEY_MAX]);
int rs_check_id(const char *id, weft_error *err);
char *rs_reply_dup(const redisReply *x);
int rs_is_str(const redisReply *x);
void rs_copy_str(char *dst, size_t n, const redisReply *x);
int rs_reply_id(const redisReply *x);
void rs_claim_member(const rs_lease *c, char *buf, size_t n);

/* cluster.c */
int rs_cl_start(rs *r, redisContext *seed, weft_error *err);
int rs_cl_ensure(rs *r, weft_error *err);
int rs_cl_pipe(rs *r, rs_cmd *cmds, size_t n, redisReply **rep, const char *key, weft_error *err);
int rs_cl_command(rs *r, const char *fmt, va_list ap, weft_error *err);
void rs_cl_drop(rs *r);
void rs_cl_revive(rs *r);
void rs_cl_free(rs *r);
/* The primaries that serve slots in the map (1 when none, or not a cluster). */
int rs_cl_primaries(rs *r);
/* The node for a worker's round (rs_opts.home_rounds): of those that serve
 * slots, each in turn for a few rounds; -1 when fewer than two serve, or
 * the map is to be read again. */
int rs_cl_home(rs *r);
/* The node that serves key's slot, as rs_cl_home names it; -1 for none. */
int rs_cl_node_of(const rs *r, const char *key);
/* Steps in flight on a cluster: whether cmds (as rs_steps_build makes them)
 * can go in one exchange to nodes connected now, each group's commands to
 * one node; rs_cl_fly writes them there without reading (each one's node
 * and connection into at[]): 0, or -1 when a write failed (every connection
 * dropped: the steps stay in their outboxes); rs_cl_land reads their
 * replies, NULL for those whose connection was lost or opened again. */
typedef struct rs_fly_at {
    int node;
    unsigned serial;
} rs_fly_at;
int rs_cl_one_exchange(rs *r, const rs_cmd *cmds, size_t n);
int rs_cl_fly(rs *r, const rs_cmd *cmds, size_t n, rs_fly_at *at);
void rs_cl_land(rs *r, const rs_fly_at *at, size_t n, redisReply **rep);
/* Every script loaded on every node connected (after a NOSCRIPT in flight:
 * a promoted replica has none). A round trip per node. */
void rs_cl_scripts_load(rs *r);

/* due.c */
/* The partition for a wake token about workflow id: one an idle worker of
 * this process waits on, else id's own. */
int rs_wake_part(const rs *r, const char *id);

/* epoch.c */
void rs_epoch_seen(rs *r, const redisReply *x, long long unfinished);

/* outbox.c */
void rs_entries_free(rs_entry *e, size_t n);
int rs_entry_parse(rs_entry *e, const redisReply *x);
/* A push's controls text ("<priority>:<count>:<per ms>:<concurrency>:<name>")
 * into e (pointing into text); 0 or -1 when malformed. */
int rs_controls_parse(char *text, rs_entry *e);
char *rs_step_text(const rs_step *s);
int rs_step_entry(rs_entry *e, const rs_step *st, uint64_t fence);
/* What a search reads of a run: "<start>:<version>:<name length>:<name>
 * <correlation id>" (a run's field "ix", the end of its index entries);
 * an index entry's step text (after its fence), and its entry (owning its
 * strings); NULL / -1 when out of memory. */
char *rs_index_what(const rs_index *ix);
char *rs_index_text(const rs_index *ix);
/* A run's "ix" text read back (pointing into what): 0, or -1 when
 * malformed (what could be read is in w). */
typedef struct rs_what {
    int64_t start_ms;
    int version;
    const char *name; /* name_len bytes, then the correlation id */
    size_t name_len;
    const char *corr;
} rs_what;
int rs_index_what_parse(const char *what, rs_what *w);
int rs_index_entry(rs_entry *e, const rs_index *ix, uint64_t fence);
int rs_check_step(const rs_step *s, weft_error *err);
void rs_lease_cmd(rs *r, const rs_lease *cl, int s, int64_t expiry, rs_cmd *c);
int rs_steps_check(rs *r, const char *id, const rs_entry *e, size_t n, redisReply **rep,
                   weft_error *err);
int rs_steps_build(rs *r, rs_cmd *head, size_t nhead, step_set *sets, size_t nsets,
                   rs_cmd **cmds_out, size_t *k_out, size_t **first_out, weft_error *err);
int rs_steps_now(rs *r, rs_cmd *cmds, size_t k, const size_t *first, size_t nhead,
                 redisReply **head_rep, step_set *sets, size_t nsets, weft_error *err);
int rs_steps_apply(rs *r, rs_cmd *head, size_t nhead, redisReply **head_rep, step_set *sets,
                   size_t nsets, weft_error *err);
void rs_flight_free(flight *f);
flight *rs_flight_new(step_set *sets, size_t nsets, rs_entry **es, size_t nes, size_t k,
                      size_t *first);
void rs_flight_send(rs *r, flight *f, const rs_cmd *cmds);
int rs_flight_read(rs *r, flight *f);
int rs_flight_is_read(const flight *f);
void rs_flight_finish(rs *r, flight *f);
void rs_flight_land(rs *r);
int rs_steps_run(rs *r, const char *id, rs_cmd *head, rs_cmd *trim, const rs_entry *e, size_t n,
                 redisReply **head_rep, redisReply **step_rep, weft_error *err);

/* queue.c */
/* The keys every queue script takes (queue_lib.lua) and its first argument. */
void rs_queue_keys(rs *r, const char *type, int shard, rs_cmd *c);
/* A claim script's reply {member, token, controlled, ...} of `type` into
 * out[*n...] (at most max in all). */
void rs_claims_of(const redisReply *x, const char *type, int shard, int max, rs_lease *out,
                  size_t *n);
int rs_check_claim(const rs_lease *c, weft_error *err);
void rs_claim_release(rs *r, const rs_lease *cl, size_t n);

#endif
