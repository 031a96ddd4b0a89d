/* The Redis store's queue shards (internal.h): the layout's text, which
 * shard a member sits in, and the shards' key names. */
#include "store/redis/internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct rs_qover {
    char *type;
    int n;
};

static int by_type(const void *a, const void *b)
{
    return strcmp(((const struct rs_qover *)a)->type, ((const struct rs_qover *)b)->type);
}

static int shards_num(const char *s, size_t n)
{
    int v = 0;
    size_t i;
    if (n == 0 || n > 2) return -1;
    for (i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v >= 1 && v <= RS_QSHARDS_MAX ? v : -1;
}

void rs_qs_clear(rs *r)
{
    while (r->nqover)
        free(r->qover[--r->nqover].type);
    free(r->qover);
    r->qover = NULL;
    r->qshards = 0;
}

/*
 * Parse text, "<n>[,<type>=<n>]..." (each n 1 to RS_QSHARDS_MAX, a type at
 * most once), into r's layout. 0, or -1 with why (r's layout cleared).
 */
int rs_qs_parse(rs *r, const char *text, char why[128])
{
    const char *p = text, *end, *eq;
    rs_qs_clear(r);
    for (;;) {
        end = strchr(p, ',');
        if (!end) end = p + strlen(p);
        if (p == text) {
            if ((r->qshards = shards_num(p, (size_t)(end - p))) < 0) {
                snprintf(why, 128, "the default is not a number from 1 to %d", RS_QSHARDS_MAX);
                break;
            }
        } else {
            struct rs_qover *v;
            size_t i;
            for (eq = end; eq > p && eq[-1] != '='; eq--)
                ;
            if (eq == p || eq - 1 == p || (size_t)(eq - 1 - p) >= TYPE_MAX ||
                memchr(p, '|', (size_t)(eq - 1 - p))) {
                snprintf(why, 128, "\"%.*s\" is not <type>=<n>", (int)(end - p > 60 ? 60 : end - p),
                         p);
                break;
            }
            if (!(v = realloc(r->qover, (r->nqover + 1) * sizeof *v))) {
                snprintf(why, 128, "out of memory");
                break;
            }
            r->qover = v;
            v = &r->qover[r->nqover];
            if ((v->n = shards_num(eq, (size_t)(end - eq))) < 0) {
                snprintf(why, 128, "%.60s: not a number from 1 to %d", eq, RS_QSHARDS_MAX);
                break;
            }
            if (!(v->type = malloc((size_t)(eq - p)))) {
                snprintf(why, 128, "out of memory");
                break;
            }
            memcpy(v->type, p, (size_t)(eq - 1 - p));
            v->type[eq - 1 - p] = 0;
            r->nqover++;
            for (i = 0; i + 1 < r->nqover; i++)
                if (!strcmp(r->qover[i].type, v->type)) break;
            if (i + 1 < r->nqover) {
                snprintf(why, 128, "type %.60s is named twice", v->type);
                break;
            }
        }
        if (!*end) {
            if (r->nqover) qsort(r->qover, r->nqover, sizeof *r->qover, by_type);
            return 0;
        }
        p = end + 1;
    }
    rs_qs_clear(r);
    return -1;
}

/* r's layout as text, types sorted (malloc'd; NULL: out of memory). */
char *rs_qs_text(const rs *r)
{
    size_t i, n = 8;
    char *t, *w;
    for (i = 0; i < r->nqover; i++)
        n += strlen(r->qover[i].type) + 5;
    if (!(t = w = malloc(n))) return NULL;
    w += sprintf(w, "%d", r->qshards);
    for (i = 0; i < r->nqover; i++)
        w += sprintf(w, ",%s=%d", r->qover[i].type, r->qover[i].n);
    return t;
}

static const struct rs_qover *find(const rs *r, const char *type, size_t len)
{
    size_t lo = 0, hi = r->nqover;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strncmp(r->qover[mid].type, type, len);
        if (!c && r->qover[mid].type[len]) c = 1; /* longer: after it */
        if (!c) return &r->qover[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* A queue's count: its own, else that of the queue a domain's queue
 * ("<domain>:<queue>") is of, else the default. */
int rs_qshards(const rs *r, const char *type)
{
    const struct rs_qover *o;
    const char *colon;
    if (!r->nqover) return r->qshards > 0 ? r->qshards : 1;
    if ((o = find(r, type, strlen(type))) != NULL) return o->n;
    if ((colon = strchr(type, ':')) != NULL && (o = find(r, colon + 1, strlen(colon + 1))) != NULL)
        return o->n;
    return r->qshards > 0 ? r->qshards : 1;
}

/*
 * A member's shard follows its workflow, not the task: a workflow's tasks
 * share a shard (a claim takes a fork's tasks together, and their results
 * are saved together), and it is the shard whose slot range holds the
 * workflow's own slot (P{<wfid>}), so that where the ranges match the
 * primaries a save and the tasks it queues go to one node.
 */
int rs_qshard_of(const rs *r, const char *type, const char *member, int controlled)
{
    const char *bar = strchr(member, '|');
    int n;
    if (controlled || (n = rs_qshards(r, type)) <= 1) return 0;
    return 1 + rc_range_of(member, bar ? (size_t)(bar - member) : strlen(member), n);
}

int rs_qshard_candidates(const rs *r, const char *type, const char *member, int sh[2])
{
    sh[0] = 0;
    sh[1] = rs_qshard_of(r, type, member, 0);
    return sh[1] ? 2 : 1;
}

void rs_k_qs(const rs *r, const char *type, int shard, const char *which, char key[KEY_MAX])
{
    char base[TYPE_MAX + 8], tag[TYPE_MAX + 32];
    if (shard <= 0) {
        rs_k_queue(r, type, which, key);
        return;
    }
    rs_cat(base, sizeof base, "q:", type, "|", (char *)NULL);
    rc_range_tag(tag, sizeof tag, base, shard, shard - 1, rs_qshards(r, type));
    rs_cat(key, KEY_MAX, r->prefix, "{", tag, "}:", which, (char *)NULL);
}

int rs_lease_shard(const rs *r, const rs_lease *cl)
{
    char member[ID_MAX * 2 + 2];
    if (cl->qshard > 0) return cl->qshard - 1; /* where the claim found it */
    rs_claim_member(cl, member, sizeof member);
    return rs_qshard_of(r, cl->type, member, cl->controlled);
}

int rs_nqueues(const rs *r, const char *type)
{
    int n = rs_qshards(r, type);
    return n <= 1 ? 1 : n + 1;
}
