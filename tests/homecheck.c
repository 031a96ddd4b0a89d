/*
 * homecheck URL PREFIX: a worker's rounds on a Redis Cluster (rs_opts
 * home_rounds, early_steps), against the cluster at URL under PREFIX (a new
 * key prefix: the default layout, a queue shard per primary):
 *  - 30 tasks queued over the shards; claims that do not wait each take
 *    only from one primary's shards (a worker keeps to a node for 4
 *    rounds), twelve of them from all three, and between them all 30;
 *  - after a claim kept to one node, a claim that would wait takes the
 *    tasks on the other nodes at once, without waiting;
 *  - a save's steps sent in flight: the task it queues is claimed, and the
 *    outbox it was recorded in is trimmed, after the next exchange.
 * Prints "ok ..." lines and exits 0, or says what failed and exits 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/util.h"
#include "store/redis/internal.h"

#define DOC "{\"workflowId\":\"x\",\"status\":\"RUNNING\",\"tasks\":[]}"
#define DEF "{\"name\":\"order\",\"version\":1,\"tasks\":[]}"
#define TYPE "HOMECHK"
#define LATE 4000000000000LL

static int failed;

static void check(int ok, const char *what)
{
    printf("%s - %s\n", ok ? "ok" : "not ok", what);
    if (!ok) failed = 1;
}

static rs *open_handle(const char *url, const char *prefix, int worker)
{
    rs_opts o = {0};
    rs *x = NULL;
    weft_error err = {0};
    o.url = url;
    o.prefix = prefix;
    o.home_rounds = worker;
    o.early_steps = worker;
    if (rs_open(&o, &x, &err) != 0) {
        fprintf(stderr, "homecheck: %s\n", err.msg);
        exit(1);
    }
    return x;
}

/* Workflow id, created, with one task of TYPE queued (visible now). */
static void queue_one(rs *p, const char *id)
{
    weft_error err = {0};
    rs_step s = {.kind = RS_PUSH, .type = TYPE, .task_id = "t", .at = 0};
    if (rs_exec_create(p, id, DOC, DEF, "k", LATE, &err) != 0 ||
        rs_exec_save(p, id, 1, DOC, "RUNNING", 0, &s, 1, NULL, 0, NULL, &err) != 0) {
        fprintf(stderr, "homecheck: %s: %s\n", id, err.msg);
        exit(1);
    }
}

/* The node of the shard a workflow's task of TYPE goes to. */
static int node_of_wf(rs *x, const char *id)
{
    char key[KEY_MAX], member[ID_MAX * 2 + 2];
    int node;
    snprintf(member, sizeof member, "%s|t", id);
    rs_k_qs(x, TYPE, rs_qshard_of(x, TYPE, member, 0), "ready", key);
    if ((node = rs_cl_node_of(x, key)) < 0 || node > 31) {
        fprintf(stderr, "homecheck: no node for %s\n", key);
        exit(1);
    }
    return node;
}

/* Every wake token gone: a poll that waits finds none. */
static void no_tokens(rs *p)
{
    char key[KEY_MAX];
    int part;
    for (part = 0; part < p->parts; part++) {
        rs_cmd c = {0};
        redisReply *x = NULL;
        weft_error err = {0};
        rs_k_wake(p, part, key);
        rs_cmd_add(&c, "DEL");
        rs_cmd_add(&c, key);
        if (rs_one(p, &c, &x, key, &err) == 0) rs_replies_free(&x, 1);
        rs_cmd_free(&c);
    }
}

/* The nodes a claim's leases came from, as a bit set. */
static unsigned nodes_of(rs *x, const rs_lease *l, int n)
{
    char key[KEY_MAX];
    unsigned bits = 0;
    int i;
    for (i = 0; i < n; i++) {
        int node;
        rs_k_qs(x, TYPE, l[i].qshard - 1, "ready", key);
        if ((node = rs_cl_node_of(x, key)) >= 0 && node < 32) bits |= 1u << node;
    }
    return bits;
}

static int count_bits(unsigned b)
{
    int n = 0;
    for (; b; b &= b - 1)
        n++;
    return n;
}

int main(int argc, char **argv)
{
    const char *types[] = {TYPE};
    rs_lease got[64];
    weft_error err = {0};
    char id[64];
    unsigned all = 0, seen = 0;
    int i, k, total = 0, one_node = 1, nd = 0;
    rs *w, *p;
    int64_t t0;

    if (argc != 3) {
        fprintf(stderr, "usage: homecheck URL PREFIX\n");
        return 2;
    }
    p = open_handle(argv[1], argv[2], 0);
    w = open_handle(argv[1], argv[2], 1);
    if (!w->cl || rs_cl_primaries(w) != 3) {
        fprintf(stderr, "homecheck: wants a cluster of 3 primaries\n");
        return 1;
    }

    /* three rounds: a node each, all three in turn */
    for (i = 0; i < 30; i++) {
        snprintf(id, sizeof id, "hc%d", i);
        queue_one(p, id);
    }
    for (k = 0; k < 12; k++) {
        int n = rs_claim(w, types, 1, 64, 60000, got, &err);
        unsigned b = n > 0 ? nodes_of(w, got, n) : 0;
        if (n < 0) fprintf(stderr, "homecheck: claim: %s\n", err.msg);
        one_node = one_node && n >= 0 && count_bits(b) <= 1;
        all |= b;
        total += n > 0 ? n : 0;
    }
    check(one_node, "each claim that does not wait takes from one primary's shards only");
    check(count_bits(all) == 3 && total == 30, "twelve claims: all 3 primaries, all 30 tasks");

    /* a task on each node; a round kept to one, then a claim that would wait */
    for (i = 0; i < 200 && count_bits(seen) < 3; i++) {
        unsigned b;
        snprintf(id, sizeof id, "hw%d", i);
        b = 1u << node_of_wf(w, id);
        if (seen & b) continue;
        seen |= b;
        queue_one(p, id);
    }
    k = rs_claim(w, types, 1, 64, 60000, got, &err);
    check(k == 1, "a round kept to one node takes its one task");
    no_tokens(p); /* (the starts' tokens would end a wait at once) */
    t0 = wu_mono_ms();
    k = rs_due_claim(w, 3000, 0, 0, NULL, &nd, types, 1, 64, 60000, got, &err);
    check(k == 2 && wu_mono_ms() - t0 < 1500,
          "then a claim that would wait takes the other nodes' two at once");

    /* steps in flight: applied, and the outbox trimmed, by the next exchange */
    {
        rs_step s = {.kind = RS_PUSH, .type = TYPE, .task_id = "f", .at = 0};
        rs_save sv = {0};
        char out[KEY_MAX];
        long long left = -1;
        redisReply *x = NULL;
        rs_cmd c = {0};
        if (rs_exec_create(p, "hf", DOC, DEF, "k", LATE, &err) != 0) return 1;
        sv.id = "hf";
        sv.fence = 1;
        sv.doc = DOC;
        sv.status = "RUNNING";
        sv.steps = &s;
        sv.nsteps = 1;
        if (rs_exec_save_many(w, &sv, 1, &err) != 0 || sv.rc != 0) {
            fprintf(stderr, "homecheck: save: %s %s\n", err.msg, sv.why);
            return 1;
        }
        check(w->fly != NULL, "a save's steps go out in flight on a cluster");
        for (k = 0, i = 0; i < 12 && !k; i++)
            if ((k = rs_claim(w, types, 1, 64, 60000, got, &err)) < 0) k = 0;
        check(k == 1 && !strcmp(got[0].workflow_id, "hf") && !strcmp(got[0].task_id, "f"),
              "the task the flight queued is claimed");
        rs_k_exec(p, "hf", ":out", out);
        rs_cmd_add(&c, "ZCARD");
        rs_cmd_add(&c, out);
        if (rs_one(p, &c, &x, out, &err) == 0 && x->type == REDIS_REPLY_INTEGER) left = x->integer;
        rs_replies_free(&x, 1);
        rs_cmd_free(&c);
        check(left == 0 && w->fly == NULL, "its outbox was trimmed, its replies read");
    }
    rs_free(w);
    rs_free(p);
    return failed;
}
