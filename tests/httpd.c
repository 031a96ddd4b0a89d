/*
 * A small HTTP server for the HTTP task's tests (libmicrohttpd).
 *
 *     httpd PORTFILE [BLACKHOLE_PORTFILE]
 *
 * Binds 127.0.0.1 on a port the kernel picks, writes the port number to
 * PORTFILE (atomically: readers never see a partial file) and serves until
 * SIGTERM or SIGINT. With BLACKHOLE_PORTFILE it also opens a port whose
 * accept queue is kept full, so connecting to it hangs (connect timeouts).
 *
 * Routes (any method):
 *   /json               200 {"qty":3,"unit":4} (application/json)
 *   /text               200 "hello" (text/plain)
 *   /status/<n>         status n, {"status":n}
 *   /echo               200 {method, path, query, headers{lower-case}, body (raw string),
 *                       peer (the client's port)}
 *   /slow?ms=N          sleeps N ms, then 200 {"slept":N}
 *   /latin1             200, text that is not UTF-8 ("caf\xe9")
 *   /redirect           302 to /json; ?to=URL to URL; ?code=N with status N
 *   /loop               302 to itself
 *   /big?bytes=N        N bytes of 'x' (text/plain); &chunked=1 without Content-Length
 *   /headers?n=N        N headers "X-H: v<i>"; &distinct=1 names them X-H-<i>
 *   /as?type=T&body=B   200 with content type T and body B
 *   /flaky/<key>?fail=N the first N requests for key get 503, then 200 {"hits":n}
 *   /hits/<key>         200 {"hits":n}: requests /flaky/<key> has seen
 * Anything else is 404 {"error":"no route"}.
 */
#define _GNU_SOURCE /* asprintf */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <microhttpd.h>

#if MHD_VERSION < 0x00097002
typedef int mhd_result;
#else
typedef enum MHD_Result mhd_result;
#endif

/* The body of a request, gathered across calls of the handler. */
typedef struct upload {
    char *p;
    size_t len;
} upload;

#define MAX_UPLOAD ((size_t)64 << 20)

static volatile sig_atomic_t stopping;

/* /flaky counters */
static pthread_mutex_t hits_lock = PTHREAD_MUTEX_INITIALIZER;
static struct hit {
    char key[64];
    long n;
} hits[64];

static long hit(const char *key, int count)
{
    size_t i;
    long n = 0;
    pthread_mutex_lock(&hits_lock);
    for (i = 0; i < sizeof hits / sizeof hits[0]; i++) {
        if (!hits[i].key[0]) snprintf(hits[i].key, sizeof hits[i].key, "%s", key);
        if (!strcmp(hits[i].key, key)) {
            n = count ? ++hits[i].n : hits[i].n;
            break;
        }
    }
    pthread_mutex_unlock(&hits_lock);
    return n;
}

static mhd_result reply(struct MHD_Connection *c, unsigned status, const char *type,
                        const char *body, size_t len)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    mhd_result ok;
    if (!r) return MHD_NO;
    if (type) MHD_add_response_header(r, "Content-Type", type);
    MHD_add_response_header(r, "X-Test-Server", "weft-httpd");
    ok = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ok;
}

/* Reply with a JSON value (consumed). */
static mhd_result reply_json(struct MHD_Connection *c, unsigned status, json_object *v)
{
    const char *s =
        json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
    mhd_result ok = reply(c, status, "application/json", s, strlen(s));
    json_object_put(v);
    return ok;
}

static long arg_long(struct MHD_Connection *c, const char *name, long def)
{
    const char *v = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
    return v ? strtol(v, NULL, 10) : def;
}

static mhd_result add_header(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    char name[256];
    size_t i;
    json_object *o = cls, *old;
    for (i = 0; key[i] && i + 1 < sizeof name; i++)
        name[i] = (char)(key[i] >= 'A' && key[i] <= 'Z' ? key[i] + 32 : key[i]);
    name[i] = '\0';
    if (json_object_object_get_ex(o, name, &old)) {
        /* repeated header: joined as a proxy would */
        char *s = NULL;
        if (asprintf(&s, "%s, %s", json_object_get_string(old), value ? value : "") < 0)
            return MHD_NO;
        json_object_object_add(o, name, json_object_new_string(s));
        free(s);
    } else {
        json_object_object_add(o, name, json_object_new_string(value ? value : ""));
    }
    return MHD_YES;
}

static mhd_result add_arg(void *cls, enum MHD_ValueKind kind, const char *key, const char *value)
{
    json_object_object_add(cls, key, value ? json_object_new_string(value) : NULL);
    return MHD_YES;
}

/* The client's port: the same port on two requests means a kept-alive connection. */
static int peer_port(struct MHD_Connection *c)
{
    const union MHD_ConnectionInfo *i =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (!i || !i->client_addr || i->client_addr->sa_family != AF_INET) return 0;
    return ntohs(((const struct sockaddr_in *)i->client_addr)->sin_port);
}

static mhd_result echo(struct MHD_Connection *c, const char *method, const char *url,
                       const upload *u)
{
    json_object *o = json_object_new_object(), *h = json_object_new_object(),
                *q = json_object_new_object();
    MHD_get_connection_values(c, MHD_HEADER_KIND, add_header, h);
    MHD_get_connection_values(c, MHD_GET_ARGUMENT_KIND, add_arg, q);
    json_object_object_add(o, "method", json_object_new_string(method));
    json_object_object_add(o, "path", json_object_new_string(url));
    json_object_object_add(o, "query", q);
    json_object_object_add(o, "headers", h);
    json_object_object_add(o, "body", json_object_new_string_len(u->p ? u->p : "", (int)u->len));
    json_object_object_add(o, "peer", json_object_new_int(peer_port(c)));
    return reply_json(c, 200, o);
}

/* Streamed 'x' bytes for /big?chunked=1 (size unknown: chunked encoding). */
static ssize_t big_chunk(void *cls, uint64_t pos, char *buf, size_t max)
{
    uint64_t total = *(uint64_t *)cls;
    size_t n;
    if (pos >= total) return MHD_CONTENT_READER_END_OF_STREAM;
    n = total - pos < max ? (size_t)(total - pos) : max;
    memset(buf, 'x', n);
    return (ssize_t)n;
}

static mhd_result big(struct MHD_Connection *c)
{
    long n = arg_long(c, "bytes", 0);
    struct MHD_Response *r;
    mhd_result ok;
    if (n < 0 || n > (1L << 30)) return reply(c, 400, "text/plain", "bad bytes", 9);
    if (arg_long(c, "chunked", 0)) {
        uint64_t *total = malloc(sizeof *total);
        if (!total) return MHD_NO;
        *total = (uint64_t)n;
        r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, big_chunk, total, free);
        if (!r) {
            free(total);
            return MHD_NO;
        }
    } else {
        char *p = malloc((size_t)n + 1);
        if (!p) return MHD_NO;
        memset(p, 'x', (size_t)n);
        r = MHD_create_response_from_buffer((size_t)n, p, MHD_RESPMEM_MUST_FREE);
        if (!r) {
            free(p);
            return MHD_NO;
        }
    }
    MHD_add_response_header(r, "Content-Type", "text/plain");
    ok = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ok;
}

/* /headers?n=N: N headers X-H: v0 ... v<N-1> (repeats of one name), or X-H-<i> with &distinct=1. */
static mhd_result many_headers(struct MHD_Connection *c)
{
    long n = arg_long(c, "n", 0), i, distinct = arg_long(c, "distinct", 0);
    struct MHD_Response *r =
        MHD_create_response_from_buffer(2, (void *)"{}", MHD_RESPMEM_PERSISTENT);
    mhd_result ok;
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Content-Type", "application/json");
    for (i = 0; i < n; i++) {
        char name[32], value[32];
        snprintf(name, sizeof name, distinct ? "X-H-%ld" : "X-H", i);
        snprintf(value, sizeof value, "v%ld", i);
        MHD_add_response_header(r, name, value);
    }
    ok = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    return ok;
}

static mhd_result redirect(struct MHD_Connection *c)
{
    const char *to = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "to");
    long code = arg_long(c, "code", 302);
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    mhd_result ok;
    if (!r) return MHD_NO;
    MHD_add_response_header(r, "Location", to ? to : "/json");
    ok = MHD_queue_response(c, (unsigned)code, r);
    MHD_destroy_response(r);
    return ok;
}

static mhd_result route(struct MHD_Connection *c, const char *method, const char *url,
                        const upload *u)
{
    json_object *o;
    if (!strcmp(url, "/json")) {
        static const char body[] = "{\"qty\":3,\"unit\":4}";
        return reply(c, 200, "application/json", body, sizeof body - 1);
    }
    if (!strcmp(url, "/text")) return reply(c, 200, "text/plain", "hello", 5);
    if (!strcmp(url, "/latin1")) /* "café" in Latin-1: not UTF-8 */
        return reply(c, 200, "text/plain; charset=iso-8859-1", "caf\xe9", 4);
    if (!strncmp(url, "/status/", 8)) {
        long n = strtol(url + 8, NULL, 10);
        if (n < 100 || n > 599) n = 400;
        o = json_object_new_object();
        json_object_object_add(o, "status", json_object_new_int((int)n));
        return reply_json(c, (unsigned)n, o);
    }
    if (!strcmp(url, "/echo")) return echo(c, method, url, u);
    if (!strcmp(url, "/slow")) {
        long ms = arg_long(c, "ms", 1000), left;
        /* in steps, so that shutting down need not wait for a long sleep */
        for (left = ms; left > 0 && !stopping; left -= 10) {
            struct timespec ts = {0, (left < 10 ? left : 10) * 1000000L};
            while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
                ;
        }
        o = json_object_new_object();
        json_object_object_add(o, "slept", json_object_new_int64(ms));
        return reply_json(c, 200, o);
    }
    if (!strcmp(url, "/redirect")) return redirect(c);
    if (!strcmp(url, "/loop")) {
        struct MHD_Response *r =
            MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        mhd_result ok;
        if (!r) return MHD_NO;
        MHD_add_response_header(r, "Location", "/loop");
        ok = MHD_queue_response(c, 302, r);
        MHD_destroy_response(r);
        return ok;
    }
    if (!strcmp(url, "/big")) return big(c);
    if (!strcmp(url, "/headers")) return many_headers(c);
    if (!strcmp(url, "/as")) {
        const char *type = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "type");
        const char *body = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "body");
        return reply(c, 200, type ? type : "text/plain", body ? body : "", body ? strlen(body) : 0);
    }
    if (!strncmp(url, "/flaky/", 7)) {
        long n = hit(url + 7, 1), fail = arg_long(c, "fail", 1);
        o = json_object_new_object();
        json_object_object_add(o, "hits", json_object_new_int64(n));
        return reply_json(c, n <= fail ? 503 : 200, o);
    }
    if (!strncmp(url, "/hits/", 6)) {
        o = json_object_new_object();
        json_object_object_add(o, "hits", json_object_new_int64(hit(url + 6, 0)));
        return reply_json(c, 200, o);
    }
    o = json_object_new_object();
    json_object_object_add(o, "error", json_object_new_string("no route"));
    return reply_json(c, 404, o);
}

static mhd_result handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                          const char *version, const char *data, size_t *size, void **state)
{
    upload *u = *state;
    if (!u) { /* first call: headers only */
        if (!(u = calloc(1, sizeof *u))) return MHD_NO;
        *state = u;
        return MHD_YES;
    }
    if (*size) {
        char *p;
        if (u->len + *size > MAX_UPLOAD || !(p = realloc(u->p, u->len + *size + 1))) return MHD_NO;
        memcpy(p + u->len, data, *size);
        u->p = p;
        u->len += *size;
        *size = 0;
        return MHD_YES;
    }
    return route(c, method, url, u);
}

static void completed(void *cls, struct MHD_Connection *c, void **state,
                      enum MHD_RequestTerminationCode why)
{
    upload *u = *state;
    if (u) {
        free(u->p);
        free(u);
        *state = NULL;
    }
}

/* Write "port\n" to path through a temporary file and rename. */
static int write_port(const char *path, unsigned port)
{
    char tmp[4096];
    FILE *f;
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) return -1;
    if (!(f = fopen(tmp, "w"))) return -1;
    fprintf(f, "%u\n", port);
    if (fclose(f) != 0) return -1;
    return rename(tmp, path);
}

static unsigned bound_port(int fd)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    return getsockname(fd, (struct sockaddr *)&a, &len) == 0 ? ntohs(a.sin_port) : 0;
}

/*
 * A listening socket with a backlog of 0 whose queue we fill ourselves: the
 * kernel then drops further SYNs, so a client's connect hangs until its
 * timeout. The filler sockets are returned in fill[] to close at exit.
 */
static int blackhole(int fill[4], unsigned *port)
{
    struct sockaddr_in a;
    int fd = socket(AF_INET, SOCK_STREAM, 0), i;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) != 0 || listen(fd, 0) != 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    *port = bound_port(fd);
    a.sin_port = htons((uint16_t)*port);
    for (i = 0; i < 4; i++) {
        fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        if (fill[i] >= 0) (void)connect(fill[i], (struct sockaddr *)&a, sizeof a);
    }
    return fd;
}

int main(int argc, char **argv)
{
    struct sockaddr_in addr;
    struct MHD_Daemon *d;
    const union MHD_DaemonInfo *info;
    sigset_t set;
    int sig, hole = -1, fill[4] = {-1, -1, -1, -1}, i;
    unsigned hole_port = 0;

    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: httpd PORTFILE [BLACKHOLE_PORTFILE]\n");
        return 2;
    }
    /* signals are taken by sigwait below; MHD's threads inherit the mask */
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD, 0, NULL,
                         NULL, handler, NULL, MHD_OPTION_SOCK_ADDR, &addr,
                         MHD_OPTION_NOTIFY_COMPLETED, completed, NULL,
                         MHD_OPTION_CONNECTION_TIMEOUT, 30u, MHD_OPTION_END);
    if (!d) {
        fprintf(stderr, "httpd: cannot start the server\n");
        return 1;
    }
    info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    if (!info || !info->port || write_port(argv[1], info->port) != 0) {
        fprintf(stderr, "httpd: cannot write the port to %s\n", argv[1]);
        MHD_stop_daemon(d);
        return 1;
    }
    if (argc == 3 &&
        ((hole = blackhole(fill, &hole_port)) < 0 || write_port(argv[2], hole_port) != 0)) {
        fprintf(stderr, "httpd: cannot open the blackhole port\n");
        MHD_stop_daemon(d);
        return 1;
    }
    while (sigwait(&set, &sig) != 0)
        ;
    stopping = 1;
    MHD_stop_daemon(d);
    for (i = 0; i < 4; i++)
        if (fill[i] >= 0) close(fill[i]);
    if (hole >= 0) close(hole);
    return 0;
}
