#define _GNU_SOURCE /* memmem */
/*
 * Fuzz target for the REST API (runtime/api/): each input is up to 8 HTTP
 * requests to a real server (ap_start, libmicrohttpd, one pool thread) on
 * 127.0.0.1, a port the kernel picks, serving from a memory store
 * (ap_config.open_store): routing, percent-decoding, auth, browser checks,
 * query arguments, and the JSON bodies of every route through the handlers
 * and ops.c down to the store. A fresh server and store per input, so an
 * input replays alike.
 *
 * The bytes: requests separated by a line "~~~". A request is a line
 * "METHOD TARGET" (just TARGET: GET), header lines, an empty line and the
 * body. The request sent is made of them: the target's bytes outside
 * 0x21-0x7e percent-encoded (so every byte reaches the server), Host and
 * the bearer token added unless given, Content-Length the body's (the
 * input's Content-Length, Transfer-Encoding, Expect and Connection are
 * dropped, and lines without a field name). "$WF" and "$TASK" anywhere
 * stand for the last workflow id and task id a response named, so a later
 * request can poll, report or stop what an earlier one started.
 *
 * Invariants checked (abort() when broken): every request but a long poll
 * or an event stream is answered in time with a status the API uses and
 * no 5xx (the memory store does not fail); a JSON response is RFC 8259 JSON
 * and an error one has Conductor's shape {status, message, retryable} with
 * the response's status; a text response is UTF-8; 401 says how to
 * authenticate and 405 which methods are allowed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <json-c/json.h>

#include "api/api.h"
#include "base/util.h"
#include "plugin/host.h"
#include "store/memory.h"

#define FUZZ_NAME "fuzz_api"
#include "fuzz.h"

#define REQUESTS_MAX 8
#define SEPARATOR "\n~~~\n"
#define TOKEN "fuzz-token"
/* An answer must come before the process spent ANSWER_CPU_MS of CPU time on
 * it (a Lua definition may spin to its instruction limit: seconds under
 * ASan), or ANSWER_MS went by: wall clock alone says little when a busy
 * machine starves a run under nice -n 19. */
#define ANSWER_CPU_MS 20000
#define ANSWER_MS 300000
#define WAITING_MS 60 /* what a long poll or an event stream is given */

static const char *const hosts[] = {"weft.example", "other.example:8080"};
static const char *const types[] = {"task_a", "LAMBDA", "HTTP"};

/* What a response said, and what the session learnt from it. */
typedef struct reply {
    int code;
    char type[128];
    int allow, authenticate, chunked;
    long long length; /* Content-Length; -1 when none */
    wu_buf raw;       /* the whole response */
    size_t head;      /* where its body starts in raw; 0 until the head is in */
    wu_buf body;      /* the body (chunks joined) */
    int complete;
} reply;

typedef struct session {
    char wf[64], task[64];
} session;

static int open_memory(void *ud, st_store **out, weft_error *err)
{
    return st_memory_open(NULL, out, err);
}

static void add(wu_buf *b, const char *s, size_t n)
{
    check(wu_buf_add(b, s, n) == 0, "wu_buf_add");
}

static void adds(wu_buf *b, const char *s)
{
    add(b, s, strlen(s));
}

/* in (n bytes) with $WF and $TASK replaced, into out. */
static void expand(const char *in, size_t n, const session *ss, wu_buf *out)
{
    size_t i;
    out->len = 0;
    for (i = 0; i < n; i++) {
        if (in[i] == '$' && n - i >= 3 && !memcmp(in + i, "$WF", 3)) {
            adds(out, ss->wf);
            i += 2;
        } else if (in[i] == '$' && n - i >= 5 && !memcmp(in + i, "$TASK", 5)) {
            adds(out, ss->task);
            i += 4;
        } else {
            add(out, in + i, 1);
        }
    }
}

static int header_is(const char *line, size_t n, const char *name)
{
    size_t k = strlen(name);
    return n > k && line[k] == ':' && !strncasecmp(line, name, k);
}

/*
 * The request in (n bytes) as HTTP into out; *waits set when it may wait
 * for something to happen (a batch poll, an event stream).
 */
static void build(const char *in, size_t n, wu_buf *out, int *waits)
{
    const char *end = in + n, *nl = memchr(in, '\n', n), *sp, *p, *target;
    size_t tlen, i;
    int host = 0, auth = 0;
    char num[32];
    if (!nl) nl = end;
    sp = memchr(in, ' ', (size_t)(nl - in));
    out->len = 0;
    if (sp && sp > in) {
        for (p = in; p < sp; p++)
            if ((unsigned char)*p > 0x20 && (unsigned char)*p < 0x7f) add(out, p, 1);
        target = sp + 1;
    } else {
        adds(out, "GET");
        target = in;
    }
    if (out->len == 0) adds(out, "GET");
    tlen = (size_t)(nl - target);
    adds(out, " ");
    if (!tlen) adds(out, "/");
    for (i = 0; i < tlen; i++) {
        unsigned char ch = (unsigned char)target[i];
        if (ch > 0x20 && ch < 0x7f) {
            add(out, (const char *)&ch, 1);
        } else {
            snprintf(num, sizeof num, "%%%02X", ch);
            adds(out, num);
        }
    }
    *waits = memmem(target, tlen, "/poll/batch/", 12) || memmem(target, tlen, "/events", 7);
    adds(out, " HTTP/1.1\r\n");
    /* headers, up to an empty line */
    p = nl < end ? nl + 1 : end;
    while (p < end) {
        const char *e = memchr(p, '\n', (size_t)(end - p));
        size_t len;
        if (!e) e = end;
        len = (size_t)(e - p);
        if (len && p[len - 1] == '\r') len--;
        if (!len) {
            p = e < end ? e + 1 : end;
            break;
        }
        /* a line without a field name (":x") is left out: libmicrohttpd
         * 0.9.75 ends the header section there, answers the rest as a second
         * request, and can crash if the server stops meanwhile (README) */
        if (memchr(p, ':', len) && *p != ':' && !memchr(p, 0, len) && !memchr(p, '\r', len) &&
            !header_is(p, len, "Content-Length") && !header_is(p, len, "Transfer-Encoding") &&
            !header_is(p, len, "Expect") && !header_is(p, len, "Connection")) {
            host |= header_is(p, len, "Host");
            auth |= header_is(p, len, "Authorization") || header_is(p, len, "X-Authorization");
            add(out, p, len);
            adds(out, "\r\n");
        }
        p = e < end ? e + 1 : end;
    }
    if (!host) adds(out, "Host: 127.0.0.1\r\n");
    if (!auth) adds(out, "Authorization: Bearer " TOKEN "\r\n");
    snprintf(num, sizeof num, "%zu", (size_t)(end - p));
    adds(out, "Content-Length: ");
    adds(out, num);
    adds(out, "\r\n\r\n");
    add(out, p, (size_t)(end - p));
}

/* The value of header name in the head (NULL), into buf. */
static const char *header(const reply *r, const char *name, char *buf, size_t size)
{
    const char *p = r->raw.data, *end = r->raw.data + r->head;
    size_t k = strlen(name);
    while (p < end) {
        const char *e = memmem(p, (size_t)(end - p), "\r\n", 2);
        if (!e) break;
        if ((size_t)(e - p) > k && p[k] == ':' && !strncasecmp(p, name, k)) {
            const char *v = p + k + 1;
            while (v < e && *v == ' ')
                v++;
            snprintf(buf, size, "%.*s", (int)(e - v), v);
            return buf;
        }
        p = e + 2;
    }
    return NULL;
}

/* Read what raw holds so far: the head, then the body. */
static void parse(reply *r)
{
    char buf[128];
    if (!r->head) {
        const char *e = r->raw.len ? memmem(r->raw.data, r->raw.len, "\r\n\r\n", 4) : NULL;
        if (!e) return;
        r->head = (size_t)(e - r->raw.data) + 4;
        check(r->raw.len >= 12 && !memcmp(r->raw.data, "HTTP/1.1 ", 9),
              "a response starts with its status line");
        r->code = atoi(r->raw.data + 9);
        r->length = header(r, "Content-Length", buf, sizeof buf) ? atoll(buf) : -1;
        r->chunked = header(r, "Transfer-Encoding", buf, sizeof buf) && strstr(buf, "chunked");
        if (!header(r, "Content-Type", r->type, sizeof r->type)) r->type[0] = 0;
        r->allow = header(r, "Allow", buf, sizeof buf) != NULL;
        r->authenticate = header(r, "WWW-Authenticate", buf, sizeof buf) != NULL;
    }
    if (r->code == 204 || r->code == 304) {
        r->complete = 1;
    } else if (r->length >= 0) {
        r->complete = r->raw.len - r->head >= (size_t)r->length;
        if (r->complete) {
            r->body.len = 0;
            add(&r->body, r->raw.data + r->head, (size_t)r->length);
        }
    } else if (r->chunked) {
        const char *p = r->raw.data + r->head, *end = r->raw.data + r->raw.len;
        r->body.len = 0;
        for (;;) {
            const char *e = memmem(p, (size_t)(end - p), "\r\n", 2);
            unsigned long k;
            if (!e) break;
            k = strtoul(p, NULL, 16);
            if ((size_t)(end - e - 2) < k + 2) break;
            if (!k) {
                r->complete = 1;
                break;
            }
            add(&r->body, e + 2, k);
            p = e + 2 + k + 2;
        }
    }
}

/* The CPU time the process used, in ms. */
static int64_t cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Send one request and read its answer (in time, see ANSWER_CPU_MS; one
 * that may wait is given WAITING_MS). -1 when the server could not be reached. */
static int exchange(int port, const wu_buf *req, int waits, reply *r)
{
    struct sockaddr_in a;
    struct linger lg = {1, 0};
    int64_t until = wu_mono_ms() + (waits ? WAITING_MS : ANSWER_MS);
    int64_t cpu_until = cpu_ms() + ANSWER_CPU_MS;
    size_t off = 0;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), eof = 0;
    check(fd >= 0, "socket");
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    /* closed with a reset: no TIME_WAIT left behind by a million inputs */
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    if (connect(fd, (struct sockaddr *)&a, sizeof a)) {
        close(fd);
        return -1;
    }
    while (!r->complete && !eof) {
        struct pollfd p = {fd, POLLIN | (off < req->len ? POLLOUT : 0), 0};
        int64_t left = until - wu_mono_ms();
        char buf[16384];
        ssize_t n;
        if (left <= 0 || cpu_ms() >= cpu_until) break;
        if (poll(&p, 1, left < 1000 ? (int)left : 1000) <= 0) continue;
        if ((p.revents & POLLOUT) && off < req->len) {
            n = send(fd, req->data + off, req->len - off, MSG_NOSIGNAL);
            if (n > 0)
                off += (size_t)n;
            else if (n < 0 && errno != EAGAIN && errno != EINTR)
                off = req->len; /* answered early */
        }
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
            n = recv(fd, buf, sizeof buf, 0);
            if (n > 0)
                add(&r->raw, buf, (size_t)n);
            else if (n == 0 || (errno != EAGAIN && errno != EINTR))
                eof = 1;
            parse(r);
        }
    }
    if (eof && r->head && r->length < 0 && !r->chunked) {
        add(&r->body, r->raw.data + r->head, r->raw.len - r->head);
        r->complete = 1;
    }
    close(fd);
    return 0;
}

/* A string member's value of the response body's JSON: the last one named key. */
static void learn(const reply *r, const char *key, char *into)
{
    char pat[64];
    const char *p = r->body.data, *end, *q;
    size_t k = (size_t)snprintf(pat, sizeof pat, "\"%s\":\"", key);
    if (!p) return;
    end = p + r->body.len;
    while (p < end && (q = memmem(p, (size_t)(end - p), pat, k))) {
        const char *v = q + k, *e = memchr(v, '"', (size_t)(end - v));
        if (e && e - v > 0 && e - v < 64) {
            memcpy(into, v, (size_t)(e - v));
            into[e - v] = 0;
        }
        p = e;
    }
}

static void check_reply(const reply *r, const char *req)
{
    static const int codes[] = {200, 204, 400, 401, 403, 404, 405, 409, 413, 0};
    const int *k;
    size_t i, n;
    for (k = codes; *k && *k != r->code; k++)
        ;
    if (fuzz_verbose()) {
        printf("-> %d %s %.*s\n", r->code, r->type, (int)(r->body.len > 400 ? 400 : r->body.len),
               r->body.data ? r->body.data : "");
        fflush(stdout);
    }
    if (!*k) {
        fprintf(stderr, "fuzz_api: %d for %.300s\n%.500s\n", r->code, req,
                r->body.data ? r->body.data : "");
        check(r->code < 500, "no 5xx: the memory store does not fail");
        check(0, "a status the API uses");
    }
    if (!strncmp(r->type, "application/json", 16)) {
        json_object *j = NULL, *v;
        check(fuzz_json_valid(r->body.data ? r->body.data : "", r->body.len),
              "a JSON response is valid UTF-8 JSON");
        if (r->code >= 400) {
            check(wu_parse_json_stored("error", r->body.data, &j, NULL) == 0, "an error parses");
            check(json_object_object_get_ex(j, "status", &v) && json_object_get_int(v) == r->code,
                  "an error's status is the response's");
            check(json_object_object_get_ex(j, "message", &v) &&
                      json_object_is_type(v, json_type_string) && json_object_get_string_len(v),
                  "an error has a message");
            check(json_object_object_get_ex(j, "retryable", &v) &&
                      json_object_is_type(v, json_type_boolean),
                  "an error says whether to retry");
            json_object_put(j);
        }
    } else if (!strncmp(r->type, "text/plain", 10)) {
        for (i = 0; i < r->body.len; i += n)
            check((n = wu_utf8_seq((const unsigned char *)r->body.data + i, r->body.len - i)) > 0,
                  "a text response is UTF-8");
    }
    if (r->code == 401) check(r->authenticate, "401 says how to authenticate");
    if (r->code == 405) check(r->allow, "405 says which methods are allowed");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static def_env env;
    ap_config cfg;
    ap_server *s = NULL;
    weft_error err = {0};
    session ss;
    wu_buf part = {0}, req = {0};
    const char *p = (const char *)data, *end = p + size, *addr;
    int port, nreq = 0;

    if (size > FUZZ_MAX_INPUT) return 0;
    if (!env.find_type) {
        env.find_type = fuzz_find_type;
        env.host = host_table();
        env.searched = "/fuzz/plugins";
        env.allow_unknown = 1; /* as weftd: a type no plugin here has is for whoever serves it */
        env.known = FUZZ_TYPE_NAMES;
    }
    memset(&cfg, 0, sizeof cfg);
    cfg.listen = "127.0.0.1:0";
    cfg.token = TOKEN;
    cfg.hosts = hosts;
    cfg.nhosts = sizeof hosts / sizeof hosts[0];
    cfg.body_limit = 1 << 16;
    cfg.threads = 1;
    cfg.max_conns = 8;
    cfg.request_timeout_ms = ANSWER_MS;
    cfg.idle_timeout_ms = ANSWER_MS;
    cfg.defs = &env;
    cfg.command_wait_ms = 1000;
    cfg.fencing = 1;
    cfg.max_reaps = 2;
    cfg.metrics = mt_new();
    cfg.types = types;
    cfg.ntypes = sizeof types / sizeof types[0];
    cfg.serves = types;
    cfg.nserves = sizeof types / sizeof types[0];
    cfg.open_store = open_memory;
    check(ap_start(&cfg, &s, &err) == 0, "ap_start on 127.0.0.1:0");
    addr = strrchr(ap_address(s), ':');
    port = addr ? atoi(addr + 1) : 0;
    check(port > 0, "the address has a port");

    memset(&ss, 0, sizeof ss);
    while (p < end && nreq++ < REQUESTS_MAX) {
        const char *sep = memmem(p, (size_t)(end - p), SEPARATOR, strlen(SEPARATOR));
        const char *stop = sep ? sep : end;
        reply r;
        int waits = 0;
        memset(&r, 0, sizeof r);
        expand(p, (size_t)(stop - p), &ss, &part);
        build(part.data ? part.data : "", part.len, &req, &waits);
        if (fuzz_verbose()) printf("%.*s\n", (int)strcspn(req.data, "\r"), req.data);
        check(exchange(port, &req, waits, &r) == 0, "the server is there");
        if (r.complete) {
            check_reply(&r, req.data);
            if (r.code == 200 && !strncmp(r.type, "text/plain", 10) && r.body.len > 0 &&
                r.body.len < sizeof ss.wf && !memchr(r.body.data, ' ', r.body.len) &&
                !memcmp(req.data, "POST /api/workflow", 18)) {
                memcpy(ss.wf, r.body.data, r.body.len);
                ss.wf[r.body.len] = 0;
            }
            learn(&r, "workflowId", ss.wf);
            learn(&r, "workflowInstanceId", ss.wf);
            learn(&r, "taskId", ss.task);
        } else {
            check(waits || r.head, "a request is answered in time (ANSWER_CPU_MS)");
        }
        wu_buf_free(&r.raw);
        wu_buf_free(&r.body);
        p = sep ? sep + strlen(SEPARATOR) : end;
    }
    ap_stop(s);
    mt_free(cfg.metrics);
    wu_buf_free(&part);
    wu_buf_free(&req);
    return 0;
}
