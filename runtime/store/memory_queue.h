/*
 * The memory store's work queues (memory.c): per task type, members
 * "<wfid>|<taskid>" ready in (visible-at, insertion) order, leases with
 * tokens ("m<slot>.<counter>") and expiry, reap counts: what claim.lua, renew.lua,
 * ack.lua, reap.lua and unqueue.lua do in Redis, in O(1) or O(log n) per
 * operation, without a string allocation per task. Prefix mq_. The caller
 * (memory.c) checks names and ids first; nothing here fails but for
 * memory (WEFT_ENOMEM). One thread uses it.
 */
#ifndef WEFT_STORE_MEMORY_QUEUE_H
#define WEFT_STORE_MEMORY_QUEUE_H

#include <stdint.h>
#include "store/store.h"

#define MQ_ID_MAX 64    /* workflow and task ids, with the NUL (as redis) */
#define MQ_TYPE_MAX 128 /* task type names, with the NUL */

/* One entry of an ordered queue: obj is queued at `at` while the uint64_t
 * at the queue's seq_off inside obj still equals seq (else it is stale:
 * removal and re-queueing are lazy). */
typedef struct mq_item {
    int64_t at;
    uint64_t seq;
    void *obj;
} mq_item;

/*
 * Items in (at, seq) order, as the embedded engine's queue: those that come
 * in order (most: due now, or leases of one length) go to a FIFO ring, the
 * rest to a heap; the next is the smaller of the two heads.
 */
typedef struct mq_order {
    size_t seq_off;
    mq_item *heap;
    size_t nheap, capheap;
    mq_item *fifo; /* capfifo is a power of 2 */
    size_t fhead, nfifo, capfifo;
} mq_order;

/* Queue obj at `at` under seq; the caller stores seq in obj's slot
 * (seq_off) and removes the item by changing that slot. 0 or WEFT_ENOMEM. */
int mq_order_push(mq_order *q, int64_t at, uint64_t seq, void *obj);
/* Room for n more items: the next n pushes cannot fail. 0 or WEFT_ENOMEM. */
int mq_order_reserve(mq_order *q, size_t n);
/* The first live item (stale ones in front are dropped), or NULL; valid
 * until the next push or pop. */
mq_item *mq_order_peek(mq_order *q);
/* Drop the item mq_order_peek just returned. */
void mq_order_pop(mq_order *q, const mq_item *it);
void mq_order_free(mq_order *q);

typedef struct mq mq;
/* Empty queues; NULL when out of memory. */
mq *mq_new(void);
void mq_free(mq *w);
/* Push member wf|task to type's queue, visible at `at`, or leased at once
 * (lease: its token, until lease_until). xslot: where the execution is
 * stored (borrowed, outlives w; may be NULL), t: its task (optional, may
 * go away: checked before a claim hands it out). 0 or WEFT_ENOMEM. */
int mq_push(mq *w, const char *type, const char *wf, const char *task, xc_exec *const *xslot,
            xc_task *t, int64_t at, const char *lease, int64_t lease_until, const st_step *ctl);
/* Room in type's queue (made when create; nothing to do for a queue that
 * is not there otherwise) for n members: after it, that many mq_push,
 * mq_unqueue and mq_ack of that queue cannot fail (limit_name: pushes
 * with that limit). A store makes the room for a write's steps first, so
 * that the write is applied whole or not at all. 0 or WEFT_ENOMEM. */
int mq_reserve(mq *w, const char *type, size_t n, const char *limit_name, int create);
/* Take the member off its queue, ready or leased, and forget its reap count. */
void mq_unqueue(mq *w, const char *type, const char *wf, const char *task);
/* Lease up to max members visible at now for lease_ms into out (with the
 * execution and task objects): the count, or WEFT_ENOMEM. */
int mq_claim(mq *w, const char *type, int64_t now, int64_t lease_ms, int max, st_lease *out);
/* The room mq_claim of up to max members of type makes first (a store
 * claiming from several queues makes it in all of them before the first
 * claim). 0 or WEFT_ENOMEM. */
int mq_claim_room(mq *w, const char *type, int max);
/* Move c's lease to expiry if it is current: 1, 0 (stale), WEFT_ENOMEM. */
int mq_renew(mq *w, const st_lease *c, int64_t expiry);
/* Drop c's lease and reap count if current (check 0: whatever the token):
 * 1, or 0 when stale. */
int mq_ack(mq *w, const st_lease *c, int check);
/* Expired leases of type back to ready; members over max_reaps listed in
 * *exhausted (malloc'd "<wf>|<task>", caller frees). Count or WEFT_ENOMEM. */
int mq_reap(mq *w, const char *type, int max_reaps, char ***exhausted, size_t *nexhausted);
/* The member's lease ends at expiry, whoever holds it; nothing when not
 * leased. 0 or WEFT_ENOMEM. */
int mq_extend(mq *w, const char *type, const char *wf, const char *task, int64_t expiry);
void mq_sizes(mq *w, const char *type, long long *ready, long long *leased);
/* When a claim last polled type's queue (0: never). */
int64_t mq_polled(mq *w, const char *type);
/* Every queue holding members, ready or leased (st_ops.queue_list): into
 * *out (malloc'd; NULL when none) and *n. 0 or WEFT_ENOMEM. */
int mq_list(mq *w, st_qinfo **out, size_t *n);
/* Where member wf|task of type's queue stands (st_ops.queue_member). */
void mq_member_state(mq *w, const char *type, const char *wf, const char *task, st_qmember *out);
/* The state of type's limits (st_ops.queue_limits); NULL when out of memory. */
json_object *mq_limits(mq *w, const char *type);
/* 1 when the member is ready or leased, else 0. */
int mq_has(mq *w, const char *type, const char *wf, const char *task);
/* When type's first ready member is visible, INT64_MAX when none is ready. */
int64_t mq_next(mq *w, const char *type);

#endif
