/*
 * Fuzz target for the Redis store's reply handling (runtime/store/redis/):
 * the store runs as on weftd, over a stand-in for hiredis's transport
 * defined here (connect, append, write, read, free: the executable's
 * definitions win over libhiredis's), whose replies are the input's. So
 * every reply a Redis or a Redis Cluster could send reaches the code that
 * reads it: the greeting (SCRIPT LOAD, INFO cluster, the epoch), the layout,
 * each operation's decoding (executions, claims, the decider queue, search
 * and the index, definitions, events), NOSCRIPT reloads, and on a cluster
 * the slot map from CLUSTER SLOTS, MOVED, ASK, TRYAGAIN and CLUSTERDOWN, and
 * nodes lost. Nothing connects anywhere; backoff sleeps return at once.
 *
 * The bytes: a first line of operations (a letter each, see run_op), then
 * optionally a space and option letters (e: early steps, h: home rounds,
 * p: 4 partitions, s: queue shards 2); then the replies, a line each, in
 * the order they are read, on whichever connection:
 *
 *   +text  status      -text  error      :n  integer      _  nil
 *   $text  bulk string (\n \r \t \\ \0 \xHH escapes)     *n  array of the next n
 *   =loads the 14 SCRIPT LOAD replies     =noscript  a NOSCRIPT error
 *   !refused  the next connect fails      !timeout  the next read times out
 *   #...   a comment                      other text: a bulk string
 *
 * Replies that run out read as a connection closed by the server.
 *
 * Invariants checked (abort() when broken): an operation fails with a
 * WEFT_E* code and a message, or gives what its contract says (the id
 * asked for, claims with ids and tokens, at most the page asked for); every
 * command sent is well-formed RESP, an EVALSHA names a SHA1 and its keys
 * share one hash tag (DESIGN.md 7); every connection opened is closed by
 * st_free.
 *
 * WEFT_FUZZ_REDIS_RECORD=redis://127.0.0.1:PORT runs the operations against
 * that Redis instead and prints the replies it read in the form above: a
 * seed (the README says how).
 */
#define _GNU_SOURCE /* RTLD_NEXT */
#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <hiredis/hiredis.h>
#include <json-c/json.h>

#include "base/keyslot.h"
#include "base/util.h"
#include "core/def.h"
#include "core/exec.h"
#include "plugin/host.h"
#include "store/redis/backend.h"
#include "store/redis/internal.h"

#define FUZZ_NAME "fuzz_redis"
#include "fuzz.h"

#define OPS_MAX 48
#define REPLIES_MAX 4096
#define ARRAY_MAX 1024 /* elements of one array reply */
#define NEST_MAX 6     /* hiredis reads 7 levels of arrays */
#define REFUSED "!refused"
#define TIMEOUT "!timeout"

/* ---- the transport ---- */

static struct {
    redisReply **rep; /* this input's replies, in order */
    size_t n, next;
    int never[2]; /* a pipe: a context's fd, never readable */
    int contexts; /* open now */
    int record;   /* WEFT_FUZZ_REDIS_RECORD */
} F;

/* hiredis's own, for WEFT_FUZZ_REDIS_RECORD */
static void *real(const char *name)
{
    void *f = dlsym(RTLD_NEXT, name);
    check(f != NULL, "hiredis is linked");
    return f;
}

static redisReply *peek(void)
{
    return F.next < F.n ? F.rep[F.next] : NULL;
}

static int is_marker(const redisReply *x, const char *what)
{
    return x && x->type == REDIS_REPLY_ERROR && !strcmp(x->str, what);
}

static redisContext *fake_context(const char *why)
{
    redisContext *c = calloc(1, sizeof *c);
    check(c != NULL, "calloc");
    c->fd = F.never[0];
    if (why) {
        c->err = REDIS_ERR_IO;
        snprintf(c->errstr, sizeof c->errstr, "%s", why);
    }
    F.contexts++;
    return c;
}

static redisContext *connect_fake(void)
{
    if (is_marker(peek(), REFUSED)) {
        freeReplyObject(F.rep[F.next++]);
        return fake_context("Connection refused");
    }
    return fake_context(NULL);
}

redisContext *redisConnectWithTimeout(const char *ip, int port, const struct timeval tv)
{
    if (F.record)
        return ((redisContext * (*)(const char *, int, struct timeval))
                    real("redisConnectWithTimeout"))(ip, port, tv);
    check(ip && *ip && port > 0 && port < 65536, "a connect names a host and port");
    return connect_fake();
}

redisContext *redisConnectUnixWithTimeout(const char *path, const struct timeval tv)
{
    if (F.record)
        return ((redisContext * (*)(const char *, struct timeval))
                    real("redisConnectUnixWithTimeout"))(path, tv);
    check(path && *path, "a connect names a path");
    return connect_fake();
}

int redisSetTimeout(redisContext *c, const struct timeval tv)
{
    if (F.record) return ((int (*)(redisContext *, struct timeval))real("redisSetTimeout"))(c, tv);
    return c->err ? REDIS_ERR : REDIS_OK;
}

int redisEnableKeepAlive(redisContext *c)
{
    if (F.record) return ((int (*)(redisContext *))real("redisEnableKeepAlive"))(c);
    return REDIS_OK;
}

void redisFree(redisContext *c)
{
    if (F.record) {
        ((void (*)(redisContext *))real("redisFree"))(c);
        return;
    }
    if (!c) return;
    F.contexts--;
    free(c);
}

#define ARGS_MAX 4096 /* arguments of a command looked at */

/* The whole RESP command at p (before end): where it ends. Its arguments
 * must be well-formed; an EVALSHA <sha> <nkeys> <key>... must name a SHA1
 * and keys of one hash tag (one slot on a cluster). */
static const char *resp_command(const char *p, const char *end)
{
    static const char *args[ARGS_MAX];
    static size_t lens[ARGS_MAX];
    char *e;
    long argc, i, len, nkeys;
    check(p < end && *p == '*', "a command starts with *");
    argc = strtol(p + 1, &e, 10);
    check(argc >= 1 && e + 2 <= end && !memcmp(e, "\r\n", 2), "a command's count");
    p = e + 2;
    for (i = 0; i < argc; i++) {
        check(p < end && *p == '$', "an argument starts with $");
        len = strtol(p + 1, &e, 10);
        check(len >= 0 && e + 2 <= end && !memcmp(e, "\r\n", 2), "an argument's length");
        p = e + 2;
        check(end - p >= len + 2 && !memcmp(p + len, "\r\n", 2), "an argument's bytes");
        if (i < ARGS_MAX) args[i] = p, lens[i] = (size_t)len;
        p += len + 2;
    }
    if (argc >= 3 && argc <= ARGS_MAX && lens[0] == 7 && !memcmp(args[0], "EVALSHA", 7)) {
        check(lens[1] == 40, "EVALSHA names a SHA1 SCRIPT LOAD answered");
        nkeys = strtol(args[2], NULL, 10);
        check(nkeys >= 0 && nkeys <= argc - 3, "EVALSHA's keys are there");
        for (i = 1; i < nkeys; i++)
            check(rc_key_slot(args[3 + i], lens[3 + i]) == rc_key_slot(args[3], lens[3]),
                  "a script's keys share one hash tag");
    }
    return p;
}

/* Commands in RESP as the store formats them (several at once). */
static void check_commands(const char *cmd, size_t len)
{
    const char *p = cmd, *end = cmd + len;
    while (p < end)
        p = resp_command(p, end);
}

int redisAppendFormattedCommand(redisContext *c, const char *cmd, size_t len)
{
    check_commands(cmd, len);
    if (F.record)
        return ((int (*)(redisContext *, const char *, size_t))real("redisAppendFormattedCommand"))(
            c, cmd, len);
    return c->err ? REDIS_ERR : REDIS_OK;
}

int redisAppendCommandArgv(redisContext *c, int argc, const char **argv, const size_t *argvlen)
{
    char *cmd = NULL;
    long long len = redisFormatCommandArgv(&cmd, argc, argv, argvlen);
    int rc;
    check(len > 0, "redisFormatCommandArgv");
    rc = redisAppendFormattedCommand(c, cmd, (size_t)len);
    free(cmd);
    return rc;
}

int redisvAppendCommand(redisContext *c, const char *format, va_list ap)
{
    char *cmd = NULL;
    int len = redisvFormatCommand(&cmd, format, ap), rc;
    check(len > 0, "redisvFormatCommand");
    rc = redisAppendFormattedCommand(c, cmd, (size_t)len);
    free(cmd);
    return rc;
}

int redisAppendCommand(redisContext *c, const char *format, ...)
{
    va_list ap;
    int rc;
    va_start(ap, format);
    rc = redisvAppendCommand(c, format, ap);
    va_end(ap);
    return rc;
}

int redisBufferWrite(redisContext *c, int *done)
{
    if (F.record) return ((int (*)(redisContext *, int *))real("redisBufferWrite"))(c, done);
    *done = 1;
    return c->err ? REDIS_ERR : REDIS_OK;
}

static void print_reply(const redisReply *x)
{
    size_t i;
    switch (x->type) {
    case REDIS_REPLY_STATUS:
    case REDIS_REPLY_ERROR:
        printf("%c%s\n", x->type == REDIS_REPLY_STATUS ? '+' : '-', x->str);
        break;
    case REDIS_REPLY_INTEGER:
        printf(":%lld\n", x->integer);
        break;
    case REDIS_REPLY_NIL:
        printf("_\n");
        break;
    case REDIS_REPLY_STRING:
        putchar('$');
        for (i = 0; i < x->len; i++) {
            unsigned char ch = (unsigned char)x->str[i];
            if (ch == '\\')
                printf("\\\\");
            else if (ch == '\n')
                printf("\\n");
            else if (ch < 0x20 || ch >= 0x7f)
                printf("\\x%02x", ch);
            else
                putchar(ch);
        }
        putchar('\n');
        break;
    case REDIS_REPLY_ARRAY:
        printf("*%zu\n", x->elements);
        for (i = 0; i < x->elements; i++)
            print_reply(x->element[i]);
        break;
    }
}

int redisGetReply(redisContext *c, void **reply)
{
    redisReply *x;
    *reply = NULL;
    if (F.record) {
        int rc = ((int (*)(redisContext *, void **))real("redisGetReply"))(c, reply);
        if (rc == REDIS_OK && *reply) print_reply(*reply);
        return rc;
    }
    if (c->err) return REDIS_ERR;
    x = peek();
    if (!x || is_marker(x, REFUSED)) {
        c->err = REDIS_ERR_EOF;
        snprintf(c->errstr, sizeof c->errstr, "Server closed the connection");
        return REDIS_ERR;
    }
    F.next++;
    if (is_marker(x, TIMEOUT)) {
        freeReplyObject(x);
        c->err = REDIS_ERR_IO;
        snprintf(c->errstr, sizeof c->errstr, "%s", strerror(EAGAIN));
        return REDIS_ERR;
    }
    *reply = x;
    return REDIS_OK;
}

/* The cluster's backoff (10, 20, 40 ... ms between tries) costs nothing here. */
int nanosleep(const struct timespec *req, struct timespec *rem)
{
    return 0;
}

/* ---- the replies: text to RESP, read by hiredis's own reader ---- */

static void add(wu_buf *b, const char *s, size_t n)
{
    check(wu_buf_add(b, s, n) == 0, "wu_buf_add");
}

static void add_bulk(wu_buf *b, const char *s, size_t n)
{
    char num[32];
    snprintf(num, sizeof num, "$%zu\r\n", n);
    add(b, num, strlen(num));
    add(b, s, n);
    add(b, "\r\n", 2);
}

static void add_line(wu_buf *b, char type, const char *s, size_t n)
{
    size_t i;
    add(b, &type, 1);
    for (i = 0; i < n; i++)
        if (s[i] != '\r' && s[i] != '\n') add(b, s + i, 1);
    add(b, "\r\n", 2);
}

/* A bulk string's text with its escapes undone, into out. */
static void unescape(const char *s, size_t n, wu_buf *out)
{
    size_t i;
    out->len = 0;
    for (i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == '\\' && i + 1 < n) {
            ch = s[++i];
            if (ch == 'n') {
                ch = '\n';
            } else if (ch == 'r') {
                ch = '\r';
            } else if (ch == 't') {
                ch = '\t';
            } else if (ch == '0') {
                ch = 0;
            } else if (ch == 'x' && i + 2 < n) {
                char hex[3] = {s[i + 1], s[i + 2], 0};
                ch = (char)strtol(hex, NULL, 16);
                i += 2;
            }
        }
        add(out, &ch, 1);
    }
}

/* A whole number of a line (n bytes), or 0 when it is none. */
static int whole(const char *s, size_t n, long long *v)
{
    char buf[32], *e;
    if (!n || n >= sizeof buf) return 0;
    memcpy(buf, s, n);
    buf[n] = 0;
    errno = 0;
    *v = strtoll(buf, &e, 10);
    return !*e && !errno;
}

/* One reply written: it counts in the arrays it completes. */
static void counted(long long *left, int *depth)
{
    while (*depth && --left[*depth] == 0)
        --*depth;
}

/*
 * The replies' text (data, n bytes: the lines after the first) into
 * F.rep. Arrays nest as their counts say; nesting past what hiredis reads
 * and counts past ARRAY_MAX are written as strings instead.
 */
static void read_replies(const char *data, size_t n)
{
    const char *p = data, *end = data + n;
    long long left[NEST_MAX + 1];
    int depth = 0, i;
    wu_buf resp = {0}, s = {0};
    redisReader *rd = redisReaderCreate();
    void *x;
    check(rd != NULL, "redisReaderCreate");
    while (p < end) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        size_t len;
        long long v;
        if (!e) e = end;
        len = (size_t)(e - p);
        if (len && p[len - 1] == '\r') len--;
        if (!len || *p == '#') {
            p = e + 1;
            continue;
        }
        if (*p == '*' && whole(p + 1, len - 1, &v) && v >= -1 && v <= ARRAY_MAX &&
            (depth < NEST_MAX || v <= 0)) {
            add_line(&resp, '*', p + 1, len - 1);
            if (v > 0)
                left[++depth] = v;
            else
                counted(left, &depth);
        } else if (len == 6 && !memcmp(p, "=loads", 6)) {
            for (i = 0; i < S_COUNT; i++) {
                char sha[41];
                snprintf(sha, sizeof sha, "%040d", i + 1);
                add_bulk(&resp, sha, 40);
                counted(left, &depth);
            }
        } else {
            if (*p == ':' && whole(p + 1, len - 1, &v)) {
                add_line(&resp, ':', p + 1, len - 1);
            } else if ((*p == '+' || *p == '-') && len > 1) {
                add_line(&resp, *p, p + 1, len - 1);
            } else if (len == 1 && *p == '_') {
                add(&resp, "$-1\r\n", 5);
            } else if (len == 9 && !memcmp(p, "=noscript", 9)) {
                add_line(&resp, '-', "NOSCRIPT No matching script. Please use EVAL.", 45);
            } else if ((len == strlen(REFUSED) && !memcmp(p, REFUSED, len)) ||
                       (len == strlen(TIMEOUT) && !memcmp(p, TIMEOUT, len))) {
                add_line(&resp, '-', p, len);
            } else {
                unescape(*p == '$' ? p + 1 : p, *p == '$' ? len - 1 : len, &s);
                add_bulk(&resp, s.data ? s.data : "", s.len);
            }
            counted(left, &depth);
        }
        p = e + 1;
    }
    if (resp.len) check(redisReaderFeed(rd, resp.data, resp.len) == REDIS_OK, "reader feed");
    while (F.n < REPLIES_MAX && redisReaderGetReply(rd, &x) == REDIS_OK && x)
        F.rep[F.n++] = x;
    redisReaderFree(rd);
    wu_buf_free(&resp);
    wu_buf_free(&s);
}

/* ---- the operations ---- */

static def_env env;
static def_workflow *wf;

static const char DEF[] = "{\"name\":\"order\",\"version\":1,\"tasks\":["
                          "{\"name\":\"task_a\",\"taskReferenceName\":\"a\",\"type\":\"SIMPLE\"},"
                          "{\"name\":\"b\",\"taskReferenceName\":\"b\",\"type\":\"LAMBDA\"}]}";

/* What the operations share within one input. */
typedef struct state {
    st_store *st;
    xc_exec *x; /* wf-1, as this process made it */
    st_lease leases[8];
    int nleases;
} state;

/* A failed operation says why, with a code of the interface. */
static void check_fail(int rc, const weft_error *err)
{
    check(rc >= WEFT_ETIMEOUT, "a failure is a WEFT_E* code");
    check(err->code == rc && err->msg[0] != 0, "a failure has a message");
}

static void check_leases(const st_lease *l, int n, int max)
{
    int i;
    check(n <= max, "no more claims than asked for");
    for (i = 0; i < n; i++)
        check(l[i].workflow_id[0] && l[i].task_id[0] && l[i].lease[0] &&
                  memchr(l[i].type, 0, sizeof l[i].type),
              "a claim names its workflow, task and lease");
}

static int on_event(void *ud, const char *id, const char *json)
{
    check(id && *id && json, "an event has an id and a text");
    (*(int *)ud)++;
    return 0;
}

static void free_names(char **v, size_t n)
{
    while (n)
        free(v[--n]);
    free(v);
}

static void run_op(state *S, char op)
{
    static const char *const types[] = {"task_a", "b"};
    static const char *const ids[] = {"wf-1", "wf-2"};
    weft_error err = {0};
    st_store *st = S->st;
    xc_exec *y = NULL, *got[2] = {NULL, NULL};
    char *text = NULL, **names = NULL, due_ids[4][64], status[32], existing[64];
    int rc = 0, n = 0, rcs[2], exists[2], ok[8], version = 0, events = 0;
    long long total = 0, ready, leased;
    size_t k, nnames = 0;
    uint64_t fence = 0;
    st_doc d = {0};
    st_hit *hits = NULL;
    json_object *j = NULL;
    st_qmember m;
    int64_t ms;
    char next_id[ST_EVENT_ID_MAX];

    switch (op) {
    case 'l': /* an execution, decoded */
        if (!(rc = ST(st, exec_load, "wf-1", &y, &fence, &err))) {
            check(y && !strcmp(y->id, "wf-1"), "exec_load gives the execution asked for");
            xc_free(y);
        }
        break;
    case 'L':
        if (!(rc = ST(st, exec_load_many, ids, 2, got, rcs, &err)))
            for (k = 0; k < 2; k++) {
                check(!rcs[k] == !!got[k], "a load gives an execution or a code");
                if (got[k]) check(!strcmp(got[k]->id, ids[k]), "the execution asked for");
                if (rcs[k]) check(rcs[k] < 0, "a load's code is a WEFT_E* code");
                xc_free(got[k]);
            }
        break;
    case 'r':
        if (!(rc = ST(st, exec_read, "wf-1", &d, &err)))
            check(d.doc && d.status, "exec_read gives a document and a status");
        st_doc_clear(&d);
        break;
    case 'c': { /* a create with its first task pushed */
        st_step step = {.kind = ST_PUSH, .type = "task_a", .task_id = "t1", .at = 1};
        const char *ev[1] = {"{\"status\":\"RUNNING\"}"};
        st_create c;
        memset(&c, 0, sizeof c);
        c.x = S->x;
        c.steps = &step;
        c.nsteps = 1;
        c.events = ev;
        c.nevents = 1;
        if (!(rc = ST(st, exec_create_many, &c, 1, &err)))
            check(c.rc <= 0 && (!c.rc || c.why[0]), "a create's own code says why");
        break;
    }
    case 's': /* a fenced save with steps, events and the claims it consumes */
    case 'S': {
        st_step steps[3] = {{.kind = ST_PUSH, .type = "task_a", .task_id = "t2", .at = 5},
                            {.kind = ST_UNQUEUE, .type = "task_a", .task_id = "t1"},
                            {.kind = ST_WAKE, .at = 10}};
        const char *ev[2] = {"{\"status\":\"RUNNING\"}", "{\"taskId\":\"t2\"}"};
        st_save sv;
        memset(&sv, 0, sizeof sv);
        sv.x = S->x;
        sv.fence = op == 's' ? 1 : 0;
        sv.loaded_fence = 1;
        sv.steps = steps;
        sv.nsteps = op == 's' ? 3 : 1;
        sv.events = ev;
        sv.nevents = 2;
        sv.acks = S->leases;
        sv.nacks = (size_t)S->nleases;
        if (op == 'S') S->x->status = WEFT_WF_COMPLETED;
        rc = ST(st, exec_save_many, &sv, 1, &err);
        S->x->status = WEFT_WF_RUNNING;
        check(sv.rc <= 0 && (!sv.rc || sv.why[0]), "a save's own code says why");
        if (rc) check(sv.rc != 0, "a failed batch fails its items");
        break;
    }
    case 'f':
        rc = ST(st, exec_flush, "wf-1", &err);
        break;
    case 'F':
        rc = ST(st, exec_fail, "wf-1", 3, "unreadable", &err);
        break;
    case 'm':
        text = NULL;
        rc = ST(st, exec_command, "wf-1", "tok|terminate|why", "terminate", &text, status, &err);
        if (rc == ST_CMD_OTHER) check(text != NULL, "another command is named");
        check(rc <= ST_CMD_OTHER, "exec_command answers one of its outcomes");
        free(text);
        text = NULL;
        break;
    case 'e':
        rc = ST(st, exec_exists_many, ids, 2, exists, &err);
        break;
    case 'q': /* the decider queue and claims, in one */
        n = 0;
        rc = ST(st, due_claim, 0, 4, 1000, due_ids, &n, types, 2, 4, 30000, S->leases, &err);
        if (rc >= 0) {
            check(n >= 0 && n <= 4, "no more due ids than asked for");
            for (k = 0; k < (size_t)n; k++)
                check(due_ids[k][0] && memchr(due_ids[k], 0, 64), "a due id is a string");
            check_leases(S->leases, rc, 4);
            S->nleases = rc;
        } else {
            S->nleases = 0;
        }
        break;
    case 'p': {
        int reaped = 0;
        rc = ST(st, poll, "task_a", 3, 30000, 2, S->leases, &reaped, &names, &nnames, &err);
        if (rc >= 0) {
            check_leases(S->leases, rc, 3);
            S->nleases = rc;
            for (k = 0; k < nnames; k++)
                check(names[k] != NULL, "an exhausted member is named");
        } else {
            S->nleases = 0;
        }
        free_names(names, nnames);
        break;
    }
    case 'n':
        if (S->nleases) rc = ST(st, renew_many, S->leases, (size_t)S->nleases, 30000, ok, &err);
        break;
    case 'a':
        if (S->nleases) rc = ST(st, ack, &S->leases[0], &err);
        break;
    case 'R':
        rc = ST(st, reap, "task_a", 2, &names, &nnames, &err);
        if (!rc)
            for (k = 0; k < nnames; k++)
                check(names[k] != NULL, "a reaped member is named");
        free_names(names, nnames);
        break;
    case 'E':
        rc = ST(st, lease_extend, "task_a", "wf-1", "t1", 5000, &err);
        break;
    case 'z':
        rc = ST(st, queue_sizes, "task_a", &ready, &leased, &err);
        break;
    case 'h':
        rc = ST(st, queue_has, "task_a", "wf-1", "t1", &err);
        break;
    case 'P':
        rc = ST(st, queue_polled, "d1:task_a", &ms, &err);
        break;
    case 'M':
        rc = ST(st, queue_member, "task_a", "wf-1", "t1", &m, &err);
        break;
    case 'i':
        if (!(rc = ST(st, queue_limits, "task_a", &j, &err)))
            check(json_object_is_type(j, json_type_object), "queue limits are an object");
        json_object_put(j);
        break;
    case 'w':
        rc = ST(st, wake, "wf-1", 1000, 1, &err);
        break;
    case 'g':
        rc = ST(st, forget, "wf-1", 1, &err);
        break;
    case 'u':
        rc = ST(st, unfinished, &total, &err);
        break;
    case 'd':
        rc = ST(st, def_register, "order", 1, DEF, &err);
        break;
    case 'D':
        if (!(rc = ST(st, def_get, "order", 0, &text, &version, &err)))
            check(text != NULL && version >= 1, "a definition and its version");
        break;
    case 'x':
        if (!(rc = ST(st, def_list, &text, &err))) check(text != NULL, "a list of definitions");
        break;
    case 't':
        rc = ST(st, taskdef_put, "task_a", "{\"name\":\"task_a\",\"retryCount\":2}", &err);
        break;
    case 'T': {
        char *jsons[2] = {NULL, NULL};
        if (!(rc = ST(st, taskdefs_get, types, 2, jsons, &err)))
            for (k = 0; k < 2; k++)
                free(jsons[k]);
        break;
    }
    case 'U':
        if (!(rc = ST(st, taskdef_get, "task_a", &text, &err)))
            check(text != NULL, "a task definition");
        break;
    case 'V':
        if (!(rc = ST(st, taskdef_list, &text, &err))) check(text != NULL, "a list of them");
        break;
    case 'k':
        rc = ST(st, idem_claim, "key-1", "wf-1", existing, &err);
        break;
    case 'b':
        rc = ST(st, daemon_beat, "d1", "{\"serves\":[\"task_a\"]}", &err);
        break;
    case 'B':
        if (!(rc = ST(st, daemons, &text, &err))) check(text != NULL, "the daemons");
        break;
    case 'K':
        rc = ST(st, secret_set, "TOKEN", "s3cr3t", &err);
        break;
    case 'G':
        if (!(rc = ST(st, secret_get, "TOKEN", &text, &err))) check(text != NULL, "a secret");
        break;
    case 'X':
        rc = ST(st, secret_delete, "TOKEN", &err);
        break;
    case 'N':
        rc = ST(st, secret_names, &names, &nnames, &err);
        if (!rc) free_names(names, nnames);
        break;
    case 'v':
        rc = ST(st, events, "wf-1", "0", next_id, 0, on_event, &events, &err);
        if (rc >= 0) check(memchr(next_id, 0, sizeof next_id) != NULL, "the next id is a string");
        break;
    case 'Q': { /* a search: the index, then each run of the page */
        static const char *const statuses[] = {"RUNNING", "COMPLETED"};
        static const char *const wnames[] = {"order"};
        st_query q;
        memset(&q, 0, sizeof q);
        q.statuses = statuses;
        q.nstatuses = 2;
        q.names = wnames;
        q.nnames = 1;
        q.start = 1;
        q.size = 3;
        q.start_after = 5;
        if (!(rc = ST(st, search, &q, &total, &hits, &k, &err))) {
            size_t i;
            check(k <= q.size, "no more hits than the page");
            for (i = 0; i < k; i++)
                check(hits[i].id[0] && memchr(hits[i].id, 0, 64), "a hit names its run");
        }
        free(hits);
        break;
    }
    case 'o': {
        const char *lines[2] = {"{\"log\":\"a\"}", "{\"log\":\"b\"}"};
        rc = ST(st, task_log_add, "wf-1", "t1", lines, 2, &err);
        break;
    }
    case 'O':
        if (!(rc = ST(st, task_log, "wf-1", "t1", &text, &err))) check(text != NULL, "a log");
        break;
    case 'y':
        ST(st, revive);
        break;
    case 'Y':
        rc = ST(st, ping, &err);
        break;
    default:
        return;
    }
    free(text);
    if (fuzz_verbose()) {
        printf("op %c: %d %s (replies read: %zu)\n", op, rc, rc < 0 ? err.msg : "", F.next);
        fflush(stdout);
    }
    if (rc < 0) check_fail(rc, &err);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *p = (const char *)data, *end = p + size, *nl, *sp;
    char ops[OPS_MAX + 1] = "", opts[16] = "";
    st_redis_opts o;
    weft_error err = {0};
    state S;
    size_t i, n;
    int rc;

    if (size > FUZZ_MAX_INPUT) return 0;
    if (!wf) {
        json_object *j = NULL;
        env.find_type = fuzz_find_type;
        env.host = host_table();
        env.allow_unknown = 1;
        check(pipe(F.never) == 0, "pipe");
        check(wu_parse_json("def", DEF, &j, &err) == 0, "the definition parses");
        check(def_compile(&env, j, "def", NULL, &wf, &err) == 0, "the definition compiles");
        json_object_put(j);
        F.record = getenv("WEFT_FUZZ_REDIS_RECORD") != NULL;
        F.rep = calloc(REPLIES_MAX, sizeof *F.rep);
        check(F.rep != NULL, "calloc");
    }
    nl = memchr(p, '\n', size);
    if (!nl) nl = end;
    sp = memchr(p, ' ', (size_t)(nl - p));
    n = (size_t)((sp ? sp : nl) - p);
    memcpy(ops, p, n < OPS_MAX ? n : OPS_MAX);
    if (sp) snprintf(opts, sizeof opts, "%.*s", (int)(nl - sp - 1), sp + 1);
    if (F.record) printf("%.*s\n", (int)(nl - p), p);
    F.n = F.next = 0;
    if (nl < end) read_replies(nl + 1, (size_t)(end - nl - 1));

    memset(&o, 0, sizeof o);
    memset(&S, 0, sizeof S);
    o.rs.url = F.record ? getenv("WEFT_FUZZ_REDIS_RECORD")
                        : "redis://fuzz-a.invalid:7000,redis://fuzz-b.invalid:7001";
    o.rs.prefix = "w:";
    o.rs.timeout_ms = 1000;
    o.rs.early_steps = strchr(opts, 'e') != NULL;
    o.rs.home_rounds = strchr(opts, 'h') != NULL;
    o.rs.partitions = strchr(opts, 'p') ? 4 : 0;
    o.rs.queue_shards = strchr(opts, 's') ? "2" : NULL;
    o.rs.epoch = rs_epoch_new(NULL, NULL);
    o.defs = &env;
    rc = st_redis_open(&o, &S.st, &err);
    if (fuzz_verbose()) printf("open: %d %s\n", rc, rc ? err.msg : "");
    if (rc) check_fail(rc, &err);
    /* as st_redis_open says: a store that could not connect is still given */
    if (S.st) {
        check(xc_new(wf, NULL, "wf-1", &S.x, &err) == 0, "xc_new");
        check(xc_add_task(S.x, wf->root.tasks[0], 0, 0) != NULL, "xc_add_task");
        for (i = 0; ops[i]; i++)
            run_op(&S, ops[i]);
        st_free(S.st);
        xc_free(S.x);
    }
    rs_epoch_free(o.rs.epoch);
    if (!F.record) check(F.contexts == 0, "every connection opened is closed");
    for (i = F.next; i < F.n; i++)
        freeReplyObject(F.rep[i]);
    return 0;
}
