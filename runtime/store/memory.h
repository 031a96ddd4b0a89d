/*
 * The memory store: every st_ops operation in one process (`weft run`, the
 * embedded engine, tests). Prefix mem_ (statics), st_memory_ (public).
 *
 * What differs from redis, on purpose:
 *
 * - Executions are kept as objects, not documents. exec_create_many takes a
 *   reference (xc_ref) to each c[i].x; exec_load hands out a new reference
 *   to the stored object itself, not a copy. So a change made to a loaded
 *   execution is visible at once to every other holder and to exec_read,
 *   and a change not saved is not undone: saving is what moves the fence,
 *   applies the steps and appends the events, not what stores the state.
 *   A save whose x is another object than the stored one replaces the
 *   stored reference. A committed save sets x->fence to the new fence and
 *   x->cmd to NULL (x is what is stored: no command waits for it); a load
 *   sets them from the store (x->cmd a copy of the waiting command). As the
 *   object is shared, a load by one holder sets them for all.
 * - A save applies its queue steps at once: nothing is left in an outbox,
 *   so exec_flush has nothing to do and returns 0.
 * - No retention: terminal executions, idempotency keys and events are
 *   kept until st_free. The status lane is not capped.
 * - No mutex: one thread uses a memory store (the handle is not shared
 *   between threads, as the st contract says of every handle), so nothing
 *   can change the store while a call waits. Hence events() with block_ms
 *   returns at once when nothing is there, and due_claim with wait_ms
 *   sleeps only until the earliest due or visible time (at most wait_ms).
 * - A wake of an id with no execution is kept, as redis keeps it: due_claim
 *   hands that id out, and the decider finds nothing there.
 *
 * Queues follow claim/renew/ack/reap.lua: ready members ordered by
 * (visible-at, insertion), leases with tokens ("m<slot>.<counter>") and expiry,
 * reap counts. Each operation is O(1) or O(log n); a push whose step
 * carries its task (st_step.task) allocates no string, and a claim fills
 * st_lease.x/.t, so the caller needs no lookup.
 */
#ifndef WEFT_STORE_MEMORY_H
#define WEFT_STORE_MEMORY_H

#include "store/store.h"

typedef struct st_memory_opts {
    /* 0: the status lane keeps nothing and events() finds none (the
     * embedded engine then need not build events); NULL opts keep them */
    int keep_events;
    /* 1: a task leased to the saver at once (a PUSH step with a lease:
     * eager dispatch) is the saver's alone and leaves no record: one
     * thread saves, claims and runs, so nothing else could claim it or
     * find its lease expired, and its ack (never_reaped) finds nothing to
     * drop. The embedded engine's; 0 (and NULL opts) record it as redis
     * does. */
    int unrecorded_eager;
} st_memory_opts;

/* A new, empty memory store into *out (st_free it). o may be NULL (the
 * defaults: events kept). Returns 0 or WEFT_ENOMEM (*out NULL). */
int st_memory_open(const st_memory_opts *o, st_store **out, weft_error *err);

/* When the next thing of memory store s comes due: the earliest time an
 * execution is due on the decider queue or a ready member of types[0..n)
 * becomes visible (at least 1); 0 when nothing is queued there at all (what waits then
 * waits for something outside, or forever: the embedded engine says what
 * is blocked). */
int64_t st_memory_next(st_store *s, const char *const *types, size_t ntypes);

#endif
