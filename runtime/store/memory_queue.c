#include "store/memory_queue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REAP_BATCH 1000 /* leases reaped per call, as redis's reap */
#define POOL_CHUNK 256

struct mq_queue;

/* 2^42 ms (past the year 2100): one priority's band of due scores, as
 * queue_lib.lua's SPAN. */
#define MQ_SPAN 4398046511104LL

/* A name's limits in one queue (queue_lib.lua's lim and park:<name>): the
 * slots its members hold, its rate window, its members waiting. */
typedef struct mq_bucket {
    char *name;
    int held;        /* slots held (leased members with a concurrency limit) */
    int64_t ws;      /* the rate window's start (-1: none yet) */
    int wn;          /* claims in it */
    int64_t wake_at; /* while members wait on the rate: the window's end (0: none) */
    int wake_n;      /* and how many the window lets through */
    int64_t wake_w;  /* its length */
    mq_order park;   /* waiting members, by due score */
    long long nparked;
} mq_bucket;

/* A queue member "<wf>|<task>": ready, leased (both at once, as redis
 * allows), or only remembered for its reap count. */
typedef struct mq_member {
    struct mq_member *next;   /* hash chain, or the free list */
    struct mq_member **pprev; /* what points to it in its chain */
    struct mq_queue *q;
    xc_exec *const *xslot; /* where its execution is stored (NULL: unknown) */
    xc_task *t;            /* the task the push carried (checked before use) */
    size_t tidx;           /* its index in the execution's tasks when pushed */
    uint64_t ready_seq, lease_seq;
    uint32_t hash;
    uint32_t slot; /* its place in the pool: leases name it (token_make) */
    int reaps;
    /* queue controls (mq_push): priority; the bucket its limits count in */
    int prio;
    mq_bucket *b;
    def_qlimit lim;
    int64_t vis_at;      /* when it became visible (its due score's time) */
    unsigned ctl : 1;    /* it has controls */
    unsigned holds : 1;  /* leased, holding one of b's slots */
    unsigned in_due : 1; /* ready_seq is its item in due (else in ready, or parked) */
    unsigned parked : 1; /* ready_seq is its item in b's park */
    char lease[40];
    char wf[MQ_ID_MAX], task[MQ_ID_MAX];
} mq_member;

/* Up to this many queues, a queue is found by scanning their names. */
#define MQ_SCAN 16

typedef struct mq_queue {
    char type[MQ_TYPE_MAX];
    mq_member **buckets;
    size_t nbuckets, nmembers; /* nbuckets: a power of 2 */
    mq_order ready, leases;
    mq_order due; /* visible members while controls are around: by due score */
    long long nready, nleased, ndue;
    long long nctl; /* members with controls */
    int64_t polled; /* the last claim's time */
    wu_vec limits;  /* mq_bucket *, by name (few) */
} mq_queue;

struct mq {
    uint64_t seq, tokens;
    wu_map *queues; /* borrowing: type -> mq_queue */
    wu_vec all_queues;
    mq_member *pool; /* free members */
    size_t npool;    /* how many */
    wu_vec chunks;
};

/* ---- ordered queues ---- */

static int item_less(const mq_item *a, const mq_item *b)
{
    return a->at < b->at || (a->at == b->at && a->seq < b->seq);
}

static int item_live(const mq_order *q, const mq_item *it)
{
    return *(const uint64_t *)((const char *)it->obj + q->seq_off) == it->seq;
}

static mq_item *fifo_at(const mq_order *q, size_t i)
{
    return &q->fifo[(q->fhead + i) & (q->capfifo - 1)];
}

static int heap_push(mq_order *q, mq_item it)
{
    size_t i;
    if (q->nheap == q->capheap) {
        size_t cap = q->capheap ? q->capheap * 2 : 64;
        mq_item *h = realloc(q->heap, cap * sizeof *h);
        if (!h) return WEFT_ENOMEM;
        q->heap = h;
        q->capheap = cap;
    }
    i = q->nheap++;
    while (i > 0 && item_less(&it, &q->heap[(i - 1) / 2])) {
        q->heap[i] = q->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    q->heap[i] = it;
    return 0;
}

static void heap_pop(mq_order *q)
{
    mq_item last = q->heap[--q->nheap];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = l;
        if (l >= q->nheap) break;
        if (r < q->nheap && item_less(&q->heap[r], &q->heap[l])) m = r;
        if (!item_less(&q->heap[m], &last)) break;
        q->heap[i] = q->heap[m];
        i = m;
    }
    if (q->nheap) q->heap[i] = last;
}

static int fifo_push(mq_order *q, mq_item it)
{
    if (q->nfifo == q->capfifo) {
        size_t cap = q->capfifo ? q->capfifo * 2 : 64, i;
        mq_item *f = malloc(cap * sizeof *f);
        if (!f) return WEFT_ENOMEM;
        for (i = 0; i < q->nfifo; i++)
            f[i] = *fifo_at(q, i);
        free(q->fifo);
        q->fifo = f;
        q->fhead = 0;
        q->capfifo = cap;
    }
    *fifo_at(q, q->nfifo++) = it;
    return 0;
}

int mq_order_reserve(mq_order *q, size_t n)
{
    /* a push that finds the ring full and cannot grow it goes to the heap */
    return wu_grow(&q->heap, &q->capheap, q->nheap, n, sizeof *q->heap);
}

/* Queue obj at `at` under seq (which the caller stores in obj's slot). */
int mq_order_push(mq_order *q, int64_t at, uint64_t seq, void *obj)
{
    mq_item it = {at, seq, obj};
    if ((!q->nfifo || !item_less(&it, fifo_at(q, q->nfifo - 1))) && fifo_push(q, it) == 0) return 0;
    return heap_push(q, it);
}

/* The first live item (stale heads are dropped on the way), or NULL. */
mq_item *mq_order_peek(mq_order *q)
{
    for (;;) {
        mq_item *f = q->nfifo ? fifo_at(q, 0) : NULL, *h = q->nheap ? &q->heap[0] : NULL;
        mq_item *m = !h || (f && item_less(f, h)) ? f : h;
        if (!m || item_live(q, m)) return m;
        if (m == f) {
            q->fhead = (q->fhead + 1) & (q->capfifo - 1);
            q->nfifo--;
        } else {
            heap_pop(q);
        }
    }
}

/* Drop the item mq_order_peek returned. */
void mq_order_pop(mq_order *q, const mq_item *m)
{
    if (q->nfifo && m == fifo_at(q, 0)) {
        q->fhead = (q->fhead + 1) & (q->capfifo - 1);
        q->nfifo--;
    } else {
        heap_pop(q);
    }
}

void mq_order_free(mq_order *q)
{
    free(q->heap);
    free(q->fifo);
}

/* ---- work queues ---- */

/* s mixed into h, eight bytes a step (its length too, so that "ab"+"c"
 * and "a"+"bc" differ). */
static uint64_t hash_mix(uint64_t h, const char *s)
{
    const uint64_t k = 0x9e3779b97f4a7c15ull;
    size_t n = strlen(s), i;
    uint64_t w;
    h = (h ^ n) * k;
    for (i = 0; i + 8 <= n; i += 8) {
        memcpy(&w, s + i, 8);
        h = (h ^ w) * k;
        h ^= h >> 29;
    }
    if (i < n) {
        w = 0;
        memcpy(&w, s + i, n - i);
        h = (h ^ w) * k;
        h ^= h >> 29;
    }
    return h;
}

static uint32_t member_hash(const char *wf, const char *task)
{
    uint64_t h = hash_mix(hash_mix(0x243f6a8885a308d3ull, wf), task);
    return (uint32_t)(h ^ (h >> 32));
}

static mq_queue *queue_of(mq *w, const char *type, int create)
{
    mq_queue *q = NULL;
    size_t i;
    /* a claim round asks for each served type, most of them without a
     * queue: while the queues are few, a scan of their names is cheaper
     * than hashing the name */
    if (w->all_queues.len <= MQ_SCAN) {
        for (i = 0; i < w->all_queues.len && !q; i++)
            if (!strcmp(((mq_queue *)w->all_queues.items[i])->type, type))
                q = w->all_queues.items[i];
    } else {
        q = wu_map_get(w->queues, type);
    }
    if (q || !create) return q;
    if (!(q = calloc(1, sizeof *q))) return NULL;
    snprintf(q->type, sizeof q->type, "%s", type);
    q->ready.seq_off = offsetof(mq_member, ready_seq);
    q->due.seq_off = offsetof(mq_member, ready_seq);
    q->leases.seq_off = offsetof(mq_member, lease_seq);
    if (!(q->buckets = calloc(64, sizeof *q->buckets)) || wu_vec_push(&w->all_queues, q)) {
        free(q->buckets);
        free(q);
        return NULL;
    }
    q->nbuckets = 64;
    if (wu_map_put(w->queues, q->type, q)) {
        w->all_queues.len--;
        free(q->buckets);
        free(q);
        return NULL;
    }
    return q;
}

static void copy_cut(char *dst, size_t cap, const char *s)
{
    size_t n = strlen(s);
    if (n >= cap) n = cap - 1;
    memcpy(dst, s, n);
    dst[n] = 0;
}

static mq_member *member_find(const mq_queue *q, const char *wf, const char *task, uint32_t h)
{
    mq_member *p;
    for (p = q->buckets[h & (q->nbuckets - 1)]; p; p = p->next)
        if (p->hash == h && !strcmp(p->task, task) && !strcmp(p->wf, wf)) return p;
    return NULL;
}

/* Put p at the head of chain *head. */
static void chain_add(mq_member **head, mq_member *p)
{
    p->next = *head;
    p->pprev = head;
    if (p->next) p->next->pprev = &p->next;
    *head = p;
}

static void member_grow(mq_queue *q)
{
    size_t n = q->nbuckets * 2, i;
    mq_member **b = calloc(n, sizeof *b);
    if (!b) return; /* longer chains, still correct */
    for (i = 0; i < q->nbuckets; i++) {
        mq_member *p = q->buckets[i], *next;
        for (; p; p = next) {
            next = p->next;
            chain_add(&b[p->hash & (n - 1)], p);
        }
    }
    free(q->buckets);
    q->buckets = b;
    q->nbuckets = n;
}

/* At least n free members in the pool. 0 or WEFT_ENOMEM. */
static int pool_reserve(mq *w, size_t n)
{
    size_t i;
    while (w->npool < n) {
        mq_member *c = malloc(POOL_CHUNK * sizeof *c);
        if (!c || wu_vec_push(&w->chunks, c)) {
            free(c);
            return WEFT_ENOMEM;
        }
        for (i = POOL_CHUNK; i-- > 0;) {
            c[i].slot = (uint32_t)((w->chunks.len - 1) * POOL_CHUNK + i);
            c[i].next = w->pool;
            c[i].q = NULL;
            c[i].reaps = 0;
            c[i].ready_seq = c[i].lease_seq = 0;
            w->pool = &c[i];
        }
        w->npool += POOL_CHUNK;
    }
    return 0;
}

/* The member "<wf>|<task>" of q, made when missing (NULL: out of memory). */
static mq_member *member_get(mq *w, mq_queue *q, const char *wf, const char *task)
{
    uint32_t h = member_hash(wf, task);
    mq_member *p = member_find(q, wf, task, h);
    if (p) return p;
    if (pool_reserve(w, 1)) return NULL;
    p = w->pool;
    w->pool = p->next;
    w->npool--;
    /* ready_seq/lease_seq are 0 in a free member: stale items never match */
    p->q = q;
    p->xslot = NULL;
    p->t = NULL;
    p->tidx = 0;
    p->hash = h;
    p->reaps = 0;
    p->prio = 0;
    p->b = NULL;
    p->ctl = p->holds = p->in_due = p->parked = 0;
    p->lease[0] = 0;
    copy_cut(p->wf, sizeof p->wf, wf);
    copy_cut(p->task, sizeof p->task, task);
    if (q->nmembers >= q->nbuckets) member_grow(q);
    chain_add(&q->buckets[h & (q->nbuckets - 1)], p);
    q->nmembers++;
    return p;
}

/* Back to the pool when nothing is left of p (not ready, not leased, no
 * reap count). */
static void member_release(mq *w, mq_member *p)
{
    if (p->ready_seq || p->lease_seq || p->reaps) return;
    if (p->ctl) {
        p->ctl = 0;
        p->q->nctl--;
    }
    *p->pprev = p->next;
    if (p->next) p->next->pprev = p->pprev;
    p->q->nmembers--;
    p->next = w->pool;
    w->pool = p;
    w->npool++;
}

/* p is no longer in due or a park (its ready item moves elsewhere). */
static void member_unplace(mq_member *p)
{
    if (p->in_due) {
        p->in_due = 0;
        p->q->ndue--;
    }
    if (p->parked) {
        p->parked = 0;
        p->b->nparked--;
    }
}

/* Queue p as ready at `at` (lease 0) or leased until `at` (lease 1), in
 * place of what it was there. WEFT_ENOMEM leaves it as it was. */
static int member_put(mq *w, mq_member *p, int lease, int64_t at)
{
    uint64_t *seq = lease ? &p->lease_seq : &p->ready_seq;
    if (mq_order_reserve(lease ? &p->q->leases : &p->q->ready, 1)) return WEFT_ENOMEM;
    if (!*seq) (*(lease ? &p->q->nleased : &p->q->nready))++;
    if (!lease) member_unplace(p);
    *seq = ++w->seq;
    return mq_order_push(lease ? &p->q->leases : &p->q->ready, at, *seq, p);
}

/* A ready p into due at score (or into its bucket's park: park 1).
 * WEFT_ENOMEM leaves it as it was. */
static int member_place(mq *w, mq_member *p, int park, int64_t score)
{
    if (mq_order_reserve(park ? &p->b->park : &p->q->due, 1)) return WEFT_ENOMEM;
    if (!p->ready_seq) p->q->nready++;
    member_unplace(p);
    p->ready_seq = ++w->seq;
    if (park) {
        p->parked = 1;
        p->b->nparked++;
        return mq_order_push(&p->b->park, score, p->ready_seq, p);
    }
    p->in_due = 1;
    p->q->ndue++;
    return mq_order_push(&p->q->due, score, p->ready_seq, p);
}

/* Take p off its ready set (lease 0) or its leases (lease 1). */
static void member_take(mq_member *p, int lease)
{
    uint64_t *seq = lease ? &p->lease_seq : &p->ready_seq;
    if (*seq) {
        *seq = 0;
        (*(lease ? &p->q->nleased : &p->q->nready))--;
    }
    if (lease)
        p->lease[0] = 0;
    else
        member_unplace(p);
}

/* ---- limits (queue_lib.lua's, kept as objects) ---- */

static mq_bucket *bucket_get(mq_queue *q, const char *name)
{
    mq_bucket *b;
    size_t i;
    for (i = 0; i < q->limits.len; i++)
        if (!strcmp(((mq_bucket *)q->limits.items[i])->name, name)) return q->limits.items[i];
    if (!(b = calloc(1, sizeof *b)) || !(b->name = strdup(name)) || wu_vec_push(&q->limits, b)) {
        if (b) free(b->name);
        free(b);
        return NULL;
    }
    b->ws = -1;
    b->park.seq_off = offsetof(mq_member, ready_seq);
    return b;
}

/* Up to n members waiting on b back to due. */
static int bucket_unpark(mq *w, mq_bucket *b, int n)
{
    mq_item *it;
    while (n-- > 0 && (it = mq_order_peek(&b->park))) {
        mq_member *p = it->obj;
        int64_t score = it->at;
        mq_order_pop(&b->park, it);
        if (member_place(w, p, 0, score)) return WEFT_ENOMEM;
    }
    return 0;
}

/* Give back the slot p holds (once) and bring b's first waiting member back. */
static int member_free_slot(mq *w, mq_member *p)
{
    if (!p->holds) return 0;
    p->holds = 0;
    p->b->held--;
    return bucket_unpark(w, p->b, 1);
}

/* A fresh token for p: "m", p's pool slot and a counter, in hex
 * ("m1f.2a"): unique in this store, and a lease names its member, so
 * that an ack finds it without a lookup (lease_member). */
static void token_make(mq *w, mq_member *p)
{
    static const char hex[] = "0123456789abcdef";
    uint64_t v[2] = {p->slot, ++w->tokens};
    char *o = p->lease;
    int k, n, i;
    *o++ = 'm';
    for (k = 0; k < 2; k++) {
        for (n = 1; n < 16 && v[k] >> (4 * n); n++)
            ;
        for (i = n - 1; i >= 0; i--)
            *o++ = hex[(v[k] >> (4 * i)) & 15];
        *o++ = k ? 0 : '.';
    }
}

/* The member a token of token_make names, or NULL (another form). */
static mq_member *token_member(const mq *w, const char *lease)
{
    uint64_t slot = 0;
    const char *s = lease + 1;
    if (lease[0] != 'm') return NULL;
    for (; *s && *s != '.' && s - lease < 10; s++) {
        int d = *s >= '0' && *s <= '9' ? *s - '0' : *s >= 'a' && *s <= 'f' ? *s - 'a' + 10 : -1;
        if (d < 0) return NULL;
        slot = slot * 16 + (uint64_t)d;
    }
    if (*s != '.' || s == lease + 1 || slot / POOL_CHUNK >= w->chunks.len) return NULL;
    return (mq_member *)w->chunks.items[slot / POOL_CHUNK] + slot % POOL_CHUNK;
}

/* p's task object in its stored execution (the one the push carried when
 * it is still there), or NULL. */
static xc_task *member_task(const mq_member *p)
{
    const xc_exec *x = p->xslot ? *p->xslot : NULL;
    xc_task *t;
    if (!x) return NULL;
    if (p->t && p->tidx < x->tasks.len && x->tasks.items[p->tidx] == p->t &&
        !strcmp(((xc_task *)x->tasks.items[p->tidx])->id, p->task))
        return p->t;
    t = xc_find_id(x, p->task);
    return t;
}

/* Lease p (taken off ready, due or park) into c. */
static int lease_to(mq *w, mq_member *p, int64_t now, int64_t lease_ms, st_lease *c,
                    const mq_queue *q)
{
    member_take(p, 0);
    token_make(w, p);
    if (member_put(w, p, 1, now + lease_ms)) return WEFT_ENOMEM;
    copy_cut(c->workflow_id, sizeof c->workflow_id, p->wf);
    copy_cut(c->task_id, sizeof c->task_id, p->task);
    memcpy(c->lease, p->lease, sizeof c->lease);
    copy_cut(c->type, sizeof c->type, q->type);
    c->never_reaped = 0;
    c->controlled = p->ctl;
    c->qshard = 0;
    c->x = p->xslot ? *p->xslot : NULL;
    c->t = member_task(p);
    return 0;
}

/* Whether p may start now within its limits (claim.lua's checks): 1, and
 * counted; 0 when it must wait (the bucket's wake set for a rate). */
static int within_limits(mq_member *p, int64_t now)
{
    mq_bucket *b = p->b;
    if (!b) return 1;
    if (p->lim.concurrency > 0 && b->held >= p->lim.concurrency) return 0;
    if (p->lim.rate_count > 0) {
        int64_t ws = now - now % p->lim.rate_per_ms;
        if (b->ws != ws) {
            b->ws = ws;
            b->wn = 0;
        }
        if (b->wn >= p->lim.rate_count) {
            b->wake_n = p->lim.rate_count;
            b->wake_w = p->lim.rate_per_ms;
            if (!b->wake_at) b->wake_at = ws + p->lim.rate_per_ms;
            return 0;
        }
        b->wn++;
    }
    /* (claimed again while leased, pushed anew: its one slot counts once) */
    if (p->lim.concurrency > 0 && !p->holds) {
        b->held++;
        p->holds = 1;
    }
    return 1;
}

/* claim.lua with controls around: rate windows that ended let their
 * members back, visible members go to due by priority, and due members
 * are leased in order within their limits (the rest wait in parks). */
static int queue_claim_controlled(mq *w, mq_queue *q, int64_t now, int64_t lease_ms, int max,
                                  st_lease *out)
{
    int n = 0, looked = 0;
    size_t i;
    mq_item *it;
    for (i = 0; i < q->limits.len; i++) {
        mq_bucket *b = q->limits.items[i];
        if (!b->wake_at || b->wake_at > now) continue;
        if (bucket_unpark(w, b, b->wake_n)) return WEFT_ENOMEM;
        b->wake_at = b->nparked ? now - now % b->wake_w + b->wake_w : 0;
    }
    while (looked < 1000 && (it = mq_order_peek(&q->ready)) && it->at <= now) {
        mq_member *p = it->obj;
        int64_t at = it->at;
        mq_order_pop(&q->ready, it);
        p->vis_at = at;
        if (member_place(w, p, 0, (99 - p->prio) * MQ_SPAN + at)) return WEFT_ENOMEM;
        looked++;
    }
    looked = 0;
    while (n < max && looked < 1000 && (it = mq_order_peek(&q->due))) {
        mq_member *p = it->obj;
        int64_t score = it->at;
        mq_order_pop(&q->due, it);
        looked++;
        if (!within_limits(p, now)) {
            if (member_place(w, p, 1, score)) return WEFT_ENOMEM;
            continue;
        }
        if (lease_to(w, p, now, lease_ms, &out[n++], q)) return WEFT_ENOMEM;
    }
    return n;
}

/* Lease up to max members of q visible at now (claim.lua) into out. */
static int queue_claim(mq *w, mq_queue *q, int64_t now, int64_t lease_ms, int max, st_lease *out)
{
    int n = 0;
    mq_item *it;
    if (q->nctl || q->ndue) return queue_claim_controlled(w, q, now, lease_ms, max, out);
    while (n < max && (it = mq_order_peek(&q->ready)) && it->at <= now) {
        mq_member *p = it->obj;
        st_lease *c = &out[n++];
        mq_order_pop(&q->ready, it);
        member_take(p, 0);
        token_make(w, p);
        if (member_put(w, p, 1, now + lease_ms)) return WEFT_ENOMEM;
        copy_cut(c->workflow_id, sizeof c->workflow_id, p->wf);
        copy_cut(c->task_id, sizeof c->task_id, p->task);
        memcpy(c->lease, p->lease, sizeof c->lease);
        copy_cut(c->type, sizeof c->type, q->type);
        c->never_reaped = 0;
        c->controlled = 0;
        c->qshard = 0;
        c->x = p->xslot ? *p->xslot : NULL;
        c->t = member_task(p);
    }
    return n;
}

/* Expired leases of q back to ready (reap.lua); exhausted members listed. */
static int queue_reap(mq *w, mq_queue *q, int max_reaps, char ***exhausted, size_t *nexhausted)
{
    int64_t now = wu_now_ms();
    mq_item *it;
    wu_vec list = {0};
    int back = 0, n = 0, rc = 0;
    while (n < REAP_BATCH && (it = mq_order_peek(&q->leases)) && it->at <= now) {
        mq_member *p = it->obj;
        mq_order_pop(&q->leases, it);
        member_take(p, 1);
        if (member_free_slot(w, p)) rc = WEFT_ENOMEM;
        n++;
        if (++p->reaps > max_reaps) {
            size_t len = strlen(p->wf) + strlen(p->task) + 2;
            char *s = malloc(len);
            p->reaps = 0;
            if (!s || wu_vec_push(&list, s)) {
                free(s);
                rc = WEFT_ENOMEM;
            } else {
                snprintf(s, len, "%s|%s", p->wf, p->task);
            }
            member_release(w, p);
        } else if (member_put(w, p, 0, now)) {
            rc = WEFT_ENOMEM;
        } else {
            back++;
        }
    }
    *exhausted = (char **)list.items;
    *nexhausted = list.len;
    return rc ? rc : back;
}

/* The member of a claim, or NULL. */
static mq_member *claim_member(mq *w, const st_lease *c)
{
    mq_queue *q = queue_of(w, c->type, 0);
    return q ? member_find(q, c->workflow_id, c->task_id, member_hash(c->workflow_id, c->task_id))
             : NULL;
}

/* The member of a claim: the one its token names when that is it (no
 * lookup: the claim's own), else by its name. */
static mq_member *lease_member(mq *w, const st_lease *c)
{
    mq_member *p = token_member(w, c->lease);
    if (p && (p->lease_seq || p->ready_seq || p->reaps) && !strcmp(p->task, c->task_id) &&
        !strcmp(p->wf, c->workflow_id) && p->q == queue_of(w, c->type, 0))
        return p;
    return claim_member(w, c);
}

/* Drop p's lease and reap count (ack.lua after its token check). */
static void member_drop(mq *w, mq_member *p)
{
    member_take(p, 1);
    member_free_slot(w, p); /* out of memory: the member waits in due, not parked */
    p->reaps = 0;
    mq_order_peek(&p->q->leases); /* acks in claim order leave no stale items behind */
    member_release(w, p);
}

/* ---- the queues' interface (memory_queue.h) ---- */

mq *mq_new(void)
{
    mq *w = calloc(1, sizeof *w);
    if (w && !(w->queues = wu_map_new_borrowing())) {
        free(w);
        w = NULL;
    }
    return w;
}

void mq_free(mq *w)
{
    size_t i;
    if (!w) return;
    for (i = 0; i < w->all_queues.len; i++) {
        mq_queue *q = w->all_queues.items[i];
        size_t j;
        mq_order_free(&q->ready);
        mq_order_free(&q->due);
        mq_order_free(&q->leases);
        for (j = 0; j < q->limits.len; j++) {
            mq_bucket *b = q->limits.items[j];
            mq_order_free(&b->park);
            free(b->name);
            free(b);
        }
        wu_vec_free(&q->limits);
        free(q->buckets);
        free(q);
    }
    wu_vec_free(&w->all_queues);
    wu_map_free(w->queues);
    for (i = 0; i < w->chunks.len; i++)
        free(w->chunks.items[i]);
    wu_vec_free(&w->chunks);
    free(w);
}

/* Room in q for n members to be pushed, claimed, moved between due and
 * parks: free members, and room in each of its orders. 0 or WEFT_ENOMEM. */
static int queue_room(mq *w, mq_queue *q, size_t n)
{
    size_t i;
    if (pool_reserve(w, n) || mq_order_reserve(&q->ready, n) || mq_order_reserve(&q->leases, n) ||
        mq_order_reserve(&q->due, n))
        return WEFT_ENOMEM;
    for (i = 0; i < q->limits.len; i++)
        if (mq_order_reserve(&((mq_bucket *)q->limits.items[i])->park, n)) return WEFT_ENOMEM;
    return 0;
}

int mq_reserve(mq *w, const char *type, size_t n, const char *limit_name, int create)
{
    mq_queue *q = queue_of(w, type, create);
    if (!q) return create ? WEFT_ENOMEM : 0;
    if (limit_name && !bucket_get(q, limit_name)) return WEFT_ENOMEM;
    return queue_room(w, q, n);
}

static mq_member *member_of(mq *w, const char *type, const char *wf, const char *task)
{
    mq_queue *q = queue_of(w, type, 0);
    return q ? member_find(q, wf, task, member_hash(wf, task)) : NULL;
}

int mq_push(mq *w, const char *type, const char *wf, const char *task, xc_exec *const *xslot,
            xc_task *t, int64_t at, const char *lease, int64_t lease_until, const st_step *ctl)
{
    mq_queue *q = queue_of(w, type, 1);
    mq_member *p = q ? member_get(w, q, wf, task) : NULL;
    if (!p) return WEFT_ENOMEM;
    p->xslot = xslot;
    p->t = t;
    p->tidx = t && t->seq > 0 ? (size_t)t->seq - 1 : 0;
    if (ctl && (ctl->priority > 0 || (ctl->limit && ctl->limit_name))) {
        mq_bucket *b = NULL;
        if (ctl->limit && ctl->limit_name && !(b = bucket_get(q, ctl->limit_name)))
            return WEFT_ENOMEM;
        if (!p->ctl) q->nctl++;
        p->ctl = 1;
        p->prio = ctl->priority < 0 ? 0 : ctl->priority > 99 ? 99 : ctl->priority;
        p->b = b;
        if (b) p->lim = *ctl->limit;
        lease = NULL;                 /* a member with controls waits its turn */
    } else if (p->ctl && !p->holds) { /* pushed again without them */
        p->ctl = 0;
        p->prio = 0;
        p->b = NULL;
        q->nctl--;
    }
    if (lease) {
        copy_cut(p->lease, sizeof p->lease, lease);
        return member_put(w, p, 1, lease_until);
    }
    return member_put(w, p, 0, at);
}

void mq_unqueue(mq *w, const char *type, const char *wf, const char *task)
{
    mq_member *p = member_of(w, type, wf, task);
    if (p) {
        /* it may be the one a given-back slot let through: the next one */
        if (p->in_due && p->b) bucket_unpark(w, p->b, 1);
        member_take(p, 0);
        member_take(p, 1);
        member_free_slot(w, p);
        p->reaps = 0;
        member_release(w, p);
    }
}

int mq_claim_room(mq *w, const char *type, int max)
{
    mq_queue *q = queue_of(w, type, 1); /* made when none is: its poll is kept */
    if (!q) return WEFT_ENOMEM;
    /* controls around: every ready member may move to due, or a park */
    return queue_room(w, q, (size_t)max + (q->nctl || q->ndue ? (size_t)q->nready : 0));
}

int mq_claim(mq *w, const char *type, int64_t now, int64_t lease_ms, int max, st_lease *out)
{
    mq_queue *q;
    /* room first: a claim that stopped half-way would lose the members it
     * took (off ready, not leased) */
    if (mq_claim_room(w, type, max) || !(q = queue_of(w, type, 0))) return WEFT_ENOMEM;
    q->polled = now;
    return queue_claim(w, q, now, lease_ms, max, out);
}

int mq_list(mq *w, st_qinfo **out, size_t *n)
{
    size_t i;
    *out = NULL;
    *n = 0;
    for (i = 0; i < w->all_queues.len; i++) {
        const mq_queue *q = w->all_queues.items[i];
        st_qinfo *v;
        if (!q->nready && !q->nleased) continue;
        if (!(v = realloc(*out, (*n + 1) * sizeof *v))) {
            free(*out);
            *out = NULL;
            *n = 0;
            return WEFT_ENOMEM;
        }
        *out = v;
        v += (*n)++;
        snprintf(v->name, sizeof v->name, "%s", q->type);
        v->ready = q->nready;
        v->leased = q->nleased;
        v->polled_ms = q->polled;
    }
    return 0;
}

int64_t mq_polled(mq *w, const char *type)
{
    mq_queue *q = queue_of(w, type, 0);
    return q ? q->polled : 0;
}

int mq_renew(mq *w, const st_lease *c, int64_t expiry)
{
    mq_member *p = lease_member(w, c);
    if (!p || !p->lease_seq || strcmp(p->lease, c->lease)) return 0;
    return member_put(w, p, 1, expiry) ? WEFT_ENOMEM : 1;
}

int mq_ack(mq *w, const st_lease *c, int check)
{
    mq_member *p = lease_member(w, c);
    if (!p || (check && (!p->lease_seq || strcmp(p->lease, c->lease)))) return 0;
    member_drop(w, p);
    return 1;
}

int mq_reap(mq *w, const char *type, int max_reaps, char ***exhausted, size_t *nexhausted)
{
    mq_queue *q = queue_of(w, type, 0);
    *exhausted = NULL;
    *nexhausted = 0;
    return q ? queue_reap(w, q, max_reaps, exhausted, nexhausted) : 0;
}

int mq_extend(mq *w, const char *type, const char *wf, const char *task, int64_t expiry)
{
    mq_member *p = member_of(w, type, wf, task);
    return p && p->lease_seq && member_put(w, p, 1, expiry) ? WEFT_ENOMEM : 0;
}

void mq_sizes(mq *w, const char *type, long long *ready, long long *leased)
{
    mq_queue *q = queue_of(w, type, 0);
    if (ready) *ready = q ? q->nready : 0;
    if (leased) *leased = q ? q->nleased : 0;
}

int mq_has(mq *w, const char *type, const char *wf, const char *task)
{
    const mq_member *p = member_of(w, type, wf, task);
    return p && (p->ready_seq || p->lease_seq);
}

int64_t mq_next(mq *w, const char *type)
{
    mq_queue *q = queue_of(w, type, 0);
    const mq_item *it = q ? mq_order_peek(&q->ready) : NULL;
    int64_t at = it ? it->at : INT64_MAX;
    size_t i;
    if (!q) return at;
    if ((it = mq_order_peek(&q->due)) && ((const mq_member *)it->obj)->vis_at < at)
        at = ((const mq_member *)it->obj)->vis_at;
    for (i = 0; i < q->limits.len; i++) {
        const mq_bucket *b = q->limits.items[i];
        if (b->wake_at && b->wake_at < at) at = b->wake_at;
    }
    return at;
}

void mq_member_state(mq *w, const char *type, const char *wf, const char *task, st_qmember *out)
{
    const mq_member *p = member_of(w, type, wf, task);
    memset(out, 0, sizeof *out);
    if (!p) return;
    if (p->lease_seq)
        out->state = ST_Q_LEASED;
    else if (p->parked)
        out->state = ST_Q_WAITING;
    else if (p->ready_seq) {
        out->state = ST_Q_READY;
        if (!p->in_due) { /* still in ready: when it becomes visible */
            size_t i;
            const mq_queue *q = p->q;
            for (i = 0; i < q->ready.nheap; i++)
                if (q->ready.heap[i].obj == p && q->ready.heap[i].seq == p->ready_seq)
                    out->visible = q->ready.heap[i].at;
            for (i = 0; i < q->ready.nfifo; i++) {
                const mq_item *it = &q->ready.fifo[(q->ready.fhead + i) & (q->ready.capfifo - 1)];
                if (it->obj == p && it->seq == p->ready_seq) out->visible = it->at;
            }
        }
    }
    if (p->b) {
        snprintf(out->name, sizeof out->name, "%s", p->b->name);
        out->limit = p->lim;
        out->held = p->b->held;
        out->window_start = p->b->ws < 0 ? 0 : p->b->ws;
        out->window_claims = p->b->wn;
    }
}

json_object *mq_limits(mq *w, const char *type)
{
    mq_queue *q = queue_of(w, type, 0);
    json_object *o = json_object_new_object(), *limits = json_object_new_object();
    long long waiting = 0;
    size_t i;
    for (i = 0; q && i < q->limits.len; i++) {
        const mq_bucket *b = q->limits.items[i];
        json_object *l = json_object_new_object();
        json_object_object_add(l, "held", json_object_new_int(b->held));
        json_object_object_add(l, "windowStart", json_object_new_int64(b->ws < 0 ? 0 : b->ws));
        json_object_object_add(l, "windowClaims", json_object_new_int(b->wn));
        json_object_object_add(limits, b->name, l);
        waiting += b->nparked;
    }
    json_object_object_add(o, "waiting", json_object_new_int64(waiting));
    json_object_object_add(o, "limits", limits);
    return o;
}
