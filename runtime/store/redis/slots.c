#include "store/redis/slots.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"

void rc_map_free(rc_map *m)
{
    free(m->nodes);
    m->nodes = NULL;
    m->nnodes = 0;
}

int rc_map_node_at(rc_map *m, const char *host, size_t hlen, int port)
{
    rc_node *v;
    size_t i;
    if (hlen >= RC_HOST_MAX) hlen = RC_HOST_MAX - 1;
    for (i = 0; i < m->nnodes; i++)
        if (m->nodes[i].port == port && strlen(m->nodes[i].host) == hlen &&
            !memcmp(m->nodes[i].host, host, hlen))
            return (int)i;
    if (!(v = realloc(m->nodes, (m->nnodes + 1) * sizeof *v))) return -1;
    m->nodes = v;
    memcpy(v[m->nnodes].host, host, hlen);
    v[m->nnodes].host[hlen] = 0;
    v[m->nnodes].port = port;
    return (int)m->nnodes++;
}

int rc_map_read(rc_map *m, const redisReply *x, weft_error *err)
{
    size_t i;
    rc_map_free(m);
    for (i = 0; i < RC_SLOTS; i++)
        m->slot[i] = -1;
    if (!x || x->type != REDIS_REPLY_ARRAY)
        return wu_err(err, WEFT_EIO, "CLUSTER SLOTS: not a list of slot ranges");
    /* each entry: [from, to, [host, port, id...] (the primary), replicas...] */
    for (i = 0; i < x->elements; i++) {
        const redisReply *r = x->element[i], *p;
        long long from, to, s;
        int n;
        if (r->type != REDIS_REPLY_ARRAY || r->elements < 3 ||
            r->element[0]->type != REDIS_REPLY_INTEGER ||
            r->element[1]->type != REDIS_REPLY_INTEGER ||
            (p = r->element[2])->type != REDIS_REPLY_ARRAY || p->elements < 2 ||
            p->element[0]->type != REDIS_REPLY_STRING ||
            p->element[1]->type != REDIS_REPLY_INTEGER) {
            rc_map_free(m);
            return wu_err(err, WEFT_EIO, "CLUSTER SLOTS: entry %zu is not [from, to, [host, port]]",
                          i + 1);
        }
        from = r->element[0]->integer;
        to = r->element[1]->integer;
        if (from < 0 || to >= RC_SLOTS || from > to || p->element[1]->integer <= 0 ||
            p->element[1]->integer > 65535) {
            rc_map_free(m);
            return wu_err(err, WEFT_EIO, "CLUSTER SLOTS: entry %zu: slots %lld-%lld port %lld",
                          i + 1, from, to, p->element[1]->integer);
        }
        n = rc_map_node_at(m, p->element[0]->str, p->element[0]->len, (int)p->element[1]->integer);
        if (n < 0) {
            rc_map_free(m);
            return wu_err(err, WEFT_ENOMEM, "CLUSTER SLOTS: out of memory");
        }
        for (s = from; s <= to; s++)
            m->slot[s] = (int16_t)n;
    }
    return 0;
}

const rc_node *rc_map_node(const rc_map *m, int slot)
{
    if (slot < 0 || slot >= RC_SLOTS || m->slot[slot] < 0) return NULL;
    return &m->nodes[m->slot[slot]];
}
