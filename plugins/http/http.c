/*
 * HTTP: one HTTP(S) request with libcurl, as Conductor's HTTP task.
 *
 * inputParameters (or Conductor's legacy wrapper inputParameters.http_request):
 * uri (required, http or https only), method (default GET), headers (object
 * of strings), body (a string is sent as-is, other JSON values encoded),
 * accept and contentType (default application/json), connectionTimeOut and
 * readTimeOut (ms, or duration strings; default 5000 and 30000).
 *
 * A 2xx reply completes the task; any other status fails it (retryable) with
 * the status in the reason. Output, also on a non-2xx reply:
 *     { response = { statusCode, reasonPhrase, headers = { name: value }, body } }
 * where header names are lower-case and body is parsed JSON when it parses,
 * else a string (null when empty).
 *
 * Redirects (up to MAX_REDIRECTS) are followed here rather than by libcurl so
 * that every hop passes the scheme and host checks. Once a redirect leaves
 * the origin the task named, none of its headers is sent and a body is not
 * sent again (a 307/308 there fails the task): any of them may hold a secret. Each worker thread
 * keeps one multi + easy handle pair, so connections stay alive between tasks; the multi loop is
 * ours so the read timeout (no data for readTimeOut ms) is exact and cancel() can wake a blocked
 * request.
 *
 * Config: { "allow": ["host", "*.example.org" ...], "max_response_bytes": n }.
 * Header values are never logged.
 */
#include <ctype.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <curl/curl.h>
#include <weft/plugin.h>

#define DEFAULT_CONNECT_MS 5000
#define DEFAULT_READ_MS 30000
#define DEFAULT_MAX_BODY ((size_t)16 << 20)
#define MAX_REDIRECTS 10
/* Bounds on a reply's header block: repeats are joined, so keep that cheap. */
#define MAX_HEADER_LINES 1000
#define MAX_HEADER_BYTES ((size_t)256 << 10)
#define DEFAULT_TYPE "application/json"

/* Spaces (from interpolated values) and non-ASCII bytes in a uri are sent %-encoded. */
#ifdef CURLU_ALLOW_SPACE
#define URL_FLAGS (CURLU_NON_SUPPORT_SCHEME | CURLU_ALLOW_SPACE | CURLU_URLENCODE)
#else
#define URL_FLAGS (CURLU_NON_SUPPORT_SCHEME | CURLU_URLENCODE)
#endif

static const weft_host *H;

/* One per worker thread: its handles (connection and DNS caches live in
 * multi), and the task it is running, for cancel(). */
typedef struct conn {
    CURLM *multi;
    CURL *easy;
    char task_id[64]; /* guarded by S.lock */
    int canceled;     /* guarded by S.lock */
    struct conn *prev, *next;
} conn;

static struct {
    pthread_mutex_t lock; /* guards everything below */
    int ready;            /* curl_global_init done and key created */
    pthread_key_t key;    /* -> this thread's conn */
    conn *conns;          /* every thread's conn, freed by fini */
    char **allow;         /* NULL: any host */
    size_t nallow;
    size_t max_body;
} S = {.lock = PTHREAD_MUTEX_INITIALIZER, .max_body = DEFAULT_MAX_BODY};

/* ---- small helpers ---- */

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int is_expr(const char *s)
{
    return strstr(s, "${") != NULL;
}

static void free_list(char **v, size_t n)
{
    size_t i;
    for (i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

/* RFC 9110 token characters (methods, header names). */
static int is_token(const char *s)
{
    if (!*s) return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && !strchr("!#$%&'*+-.^_`|~", *s)) return 0;
    return 1;
}

/* The scheme at the start of a URL ("ftp" of "ftp://x"), copied to out; 0 if none. */
static int url_scheme(const char *uri, char *out, size_t size)
{
    size_t n = 0;
    if (!isalpha((unsigned char)uri[0])) return 0;
    while (isalnum((unsigned char)uri[n]) || uri[n] == '+' || uri[n] == '-' || uri[n] == '.')
        n++;
    if (uri[n] != ':' || n >= size) return 0;
    memcpy(out, uri, n);
    out[n] = '\0';
    return 1;
}

static int http_scheme(const char *scheme)
{
    return !strcasecmp(scheme, "http") || !strcasecmp(scheme, "https");
}

/*
 * A host as compared with the allow-list: lower case, no [] around IPv6, no
 * trailing dot. Returns -1 when it does not fit (never compared truncated).
 */
static int norm_host(const char *in, char *out, size_t size)
{
    size_t n = 0;
    if (*in == '[') in++;
    for (; *in; in++) {
        if (n + 1 >= size) return -1;
        out[n++] = (char)tolower((unsigned char)*in);
    }
    if (n && out[n - 1] == ']') n--;
    if (n && out[n - 1] == '.') n--;
    out[n] = '\0';
    return 0;
}

/* Whether host may be called; the allow-list is read under S.lock. */
static int host_allowed(const char *host)
{
    char h[256];
    size_t i, hn;
    int ok, fits = norm_host(host, h, sizeof h) == 0;
    hn = strlen(h);
    pthread_mutex_lock(&S.lock);
    ok = S.allow == NULL;
    if (!fits) {
        pthread_mutex_unlock(&S.lock);
        return ok;
    }
    for (i = 0; !ok && i < S.nallow; i++) {
        const char *a = S.allow[i];
        if (a[0] == '*' && a[1] == '.') {
            /* "*.example.org": any name below example.org, not the name itself */
            size_t an = strlen(a + 1);
            ok = hn > an && !strcmp(h + hn - an, a + 1);
        } else {
            ok = !strcmp(h, a);
        }
    }
    pthread_mutex_unlock(&S.lock);
    return ok;
}

/* ---- config ---- */

/* One allow-list entry: a host name or address, optionally "*." + a name. */
static int check_allow_entry(const char *e, weft_error *err)
{
    const char *p = e, *why = NULL;
    size_t colons = 0;
    if (p[0] == '*' && p[1] == '.') p += 2;
    if (!*p) why = "empty";
    for (; !why && *p; p++) {
        if (*p == ':')
            colons++;
        else if (!isalnum((unsigned char)*p) && !strchr(".-_[]", *p))
            why = "a host name without scheme, port, path or wildcards other than a leading '*.'";
    }
    /* ':' only in IPv6 addresses, which have at least two */
    if (!why && colons == 1) why = "a host name without a port";
    if (why)
        return H->error(err, WEFT_EINVAL, "http plugin config: allow entry '%s' must be %s", e,
                        !strcmp(why, "empty") ? "a non-empty host name" : why);
    return 0;
}

typedef struct options {
    json_object *allow; /* NULL: any host */
    int64_t max_response_bytes;
} options;

static const weft_config_field options_table[] = {
    WEFT_CONFIG_KEY(WEFT_CONFIG_JSON, options, allow),
    WEFT_CONFIG_KEY(WEFT_CONFIG_INT, options, max_response_bytes, .dflt = "16777216", .min = 1,
                    .max = (int64_t)1 << 30),
    WEFT_CONFIG_END,
};

/* Parse config into a fresh allow-list and limit; nothing changes on error. */
static int parse_config(json_object *config, char ***allow, size_t *nallow, size_t *max_body,
                        weft_error *err)
{
    options o = {0};
    json_object *list;
    size_t i, n;
    int rc;
    *allow = NULL;
    *nallow = 0;
    if ((rc = H->config_fill(options_table, config, &o, "http plugin config", err)) != 0) return rc;
    *max_body = (size_t)o.max_response_bytes;
    if (!(list = o.allow)) return 0;
    if (!json_object_is_type(list, json_type_array))
        return H->error(err, WEFT_EINVAL,
                        "http plugin config: allow must be a list of host names (got %s)",
                        json_type_to_name(json_object_get_type(list)));
    n = json_object_array_length(list);
    *allow = calloc(n + 1, sizeof **allow);
    if (!*allow) return H->error(err, WEFT_ENOMEM, "out of memory");
    for (i = 0; i < n; i++) {
        json_object *e = json_object_array_get_idx(list, i);
        char buf[256];
        if (!json_object_is_type(e, json_type_string)) {
            rc = H->error(err, WEFT_EINVAL,
                          "http plugin config: allow[%zu] must be a host name string (got %s)", i,
                          json_type_to_name(json_object_get_type(e)));
            goto fail;
        }
        if ((rc = check_allow_entry(json_object_get_string(e), err)) != 0) goto fail;
        if (norm_host(json_object_get_string(e), buf, sizeof buf) != 0) {
            rc = H->error(err, WEFT_EINVAL, "http plugin config: allow[%zu] is too long", i);
            goto fail;
        }
        if (!((*allow)[i] = strdup(buf))) {
            rc = H->error(err, WEFT_ENOMEM, "out of memory");
            goto fail;
        }
        (*nallow)++;
        continue;
    fail:
        free_list(*allow, *nallow);
        *allow = NULL;
        *nallow = 0;
        return rc;
    }
    return 0;
}

/* ---- per-thread handles ---- */

static void conn_free(conn *c)
{
    if (c->easy) curl_easy_cleanup(c->easy);
    if (c->multi) curl_multi_cleanup(c->multi);
    free(c);
}

static void conn_unlink(conn *c)
{
    if (c->prev)
        c->prev->next = c->next;
    else
        S.conns = c->next;
    if (c->next) c->next->prev = c->prev;
}

/* Thread exit (only while the plugin is loaded: fini deletes the key). */
static void conn_destroy(void *p)
{
    conn *c = p;
    pthread_mutex_lock(&S.lock);
    conn_unlink(c);
    pthread_mutex_unlock(&S.lock);
    conn_free(c);
}

static conn *conn_get(void)
{
    conn *c = pthread_getspecific(S.key);
    if (c) return c;
    if (!(c = calloc(1, sizeof *c))) return NULL;
    c->multi = curl_multi_init();
    c->easy = curl_easy_init();
    if (!c->multi || !c->easy || pthread_setspecific(S.key, c) != 0) {
        conn_free(c);
        return NULL;
    }
    pthread_mutex_lock(&S.lock);
    c->next = S.conns;
    if (S.conns) S.conns->prev = c;
    S.conns = c;
    pthread_mutex_unlock(&S.lock);
    return c;
}

/* ---- one request ---- */

typedef struct buf {
    char *p;
    size_t len, cap;
} buf;

static int buf_add(buf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        char *p;
        while (cap < b->len + n + 1)
            cap *= 2;
        if (!(p = realloc(b->p, cap))) return -1;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

typedef struct req {
    /* what to send */
    char method[32];
    int has_body;
    const char *body; /* into body_json's string or the input (borrowed) */
    size_t body_len;
    json_object *body_json; /* a private copy of a non-string body */
    json_object *headers;   /* the input's headers object (borrowed) or NULL */
    const char *accept, *content_type;
    long connect_ms, read_ms;
    int foreign; /* a redirect left the origin: none of the task's headers, no body */
    CURLU *url;
    char shown[1024]; /* the URL for messages: no user or password */
    struct curl_slist *hdrs;
    char curl_err[CURL_ERROR_SIZE];

    /* the reply */
    conn *c;
    buf body_in;
    size_t max_body;
    int too_big;  /* the body passed max_body */
    int too_many; /* the headers passed MAX_HEADER_LINES or MAX_HEADER_BYTES */
    size_t header_lines, header_bytes;
    int nomem;
    int connected;
    int64_t last_ms; /* last sign of life (ms, monotonic) */
    curl_off_t dl_now, ul_now;
    long status;
    char reason[128];
    json_object *resp_headers;
    char last_header[128]; /* for folded continuation lines */
} req;

static void req_reset_reply(req *q)
{
    q->body_in.len = 0;
    q->too_big = q->too_many = q->nomem = q->connected = 0;
    q->header_lines = q->header_bytes = 0;
    q->dl_now = q->ul_now = 0;
    q->status = 0;
    q->reason[0] = q->last_header[0] = '\0';
    q->curl_err[0] = '\0';
    json_object_put(q->resp_headers);
    q->resp_headers = json_object_new_object();
    if (!q->resp_headers) q->nomem = 1;
}

static void req_free(req *q)
{
    curl_slist_free_all(q->hdrs);
    curl_url_cleanup(q->url);
    json_object_put(q->body_json);
    json_object_put(q->resp_headers);
    free(q->body_in.p);
}

static size_t on_body(char *data, size_t size, size_t n, void *ud)
{
    req *q = ud;
    size_t len = size * n;
    q->last_ms = mono_ms();
    if (q->body_in.len + len > q->max_body) {
        q->too_big = 1;
        return 0;
    }
    if (buf_add(&q->body_in, data, len) != 0) {
        q->nomem = 1;
        return 0;
    }
    return len;
}

static void trim(const char **s, size_t *n)
{
    while (*n && (**s == ' ' || **s == '\t')) {
        (*s)++;
        (*n)--;
    }
    while (*n && strchr(" \t\r\n", (*s)[*n - 1]))
        (*n)--;
}

/* Add value to header name, joining repeats with ", ". */
static int header_add(req *q, const char *name, const char *value, size_t vlen, const char *sep)
{
    json_object *old;
    buf b = {0};
    int rc = 0;
    if (json_object_object_get_ex(q->resp_headers, name, &old)) {
        const char *o = json_object_get_string(old);
        rc |= buf_add(&b, o, strlen(o));
        rc |= buf_add(&b, sep, strlen(sep));
    }
    rc |= buf_add(&b, value, vlen);
    if (rc == 0)
        rc = json_object_object_add(q->resp_headers, name,
                                    json_object_new_string_len(b.p, (int)b.len));
    free(b.p);
    return rc;
}

static size_t on_header(char *data, size_t size, size_t n, void *ud)
{
    req *q = ud;
    size_t len = size * n, nl;
    const char *colon, *v;
    char name[128];
    q->last_ms = mono_ms();
    if (!len) return len;
    q->header_lines++;
    q->header_bytes += len;
    if (q->header_lines > MAX_HEADER_LINES || q->header_bytes > MAX_HEADER_BYTES) {
        q->too_many = 1;
        return 0; /* stops the transfer */
    }
    if (len >= 5 && !memcmp(data, "HTTP/", 5)) {
        /* a status line starts a new header block (1xx, then the final one) */
        const char *sp = memchr(data, ' ', len), *r;
        size_t rn;
        json_object_put(q->resp_headers);
        if (!(q->resp_headers = json_object_new_object())) q->nomem = 1;
        q->reason[0] = q->last_header[0] = '\0';
        if (sp && (r = memchr(sp + 1, ' ', len - (size_t)(sp + 1 - data)))) {
            rn = len - (size_t)(r - data);
            trim(&r, &rn);
            if (rn >= sizeof q->reason) rn = sizeof q->reason - 1;
            memcpy(q->reason, r, rn);
            q->reason[rn] = '\0';
        }
        return len;
    }
    if (q->nomem || !q->resp_headers) return len;
    if ((data[0] == ' ' || data[0] == '\t') && q->last_header[0]) {
        v = data;
        nl = len;
        trim(&v, &nl);
        if (nl && header_add(q, q->last_header, v, nl, " ") != 0) q->nomem = 1;
        return len;
    }
    colon = memchr(data, ':', len);
    if (!colon || colon == data || (size_t)(colon - data) >= sizeof name) return len;
    for (nl = 0; data + nl < colon; nl++)
        name[nl] = (char)tolower((unsigned char)data[nl]);
    name[nl] = '\0';
    v = colon + 1;
    nl = len - (size_t)(v - data);
    trim(&v, &nl);
    if (header_add(q, name, v, nl, ", ") != 0) q->nomem = 1;
    snprintf(q->last_header, sizeof q->last_header, "%s", name);
    return len;
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal,
                       curl_off_t ulnow)
{
    req *q = ud;
    if (dlnow != q->dl_now || ulnow != q->ul_now) {
        q->dl_now = dlnow;
        q->ul_now = ulnow;
        q->last_ms = mono_ms();
    }
    return 0;
}

#if LIBCURL_VERSION_NUM >= 0x075000
/* The connection is up (new or reused): the read timeout starts now. */
static int on_prereq(void *ud, char *conn_primary_ip, char *conn_local_ip, int conn_primary_port,
                     int conn_local_port)
{
    req *q = ud;
    q->connected = 1;
    q->last_ms = mono_ms();
    return CURL_PREREQFUNC_OK;
}
#endif

/* Whether a header named name (case-insensitive) is among the input's headers. */
static int has_header(const req *q, const char *name)
{
    if (!q->headers) return 0;
    json_object_object_foreach(q->headers, k, v)
    {
        (void)v;
        if (!strcasecmp(k, name)) return 1;
    }
    return 0;
}

/* Append "<name><sep><value>" to the request's header list. */
static int add_line(req *q, const char *name, const char *sep, const char *value)
{
    char line[8192];
    struct curl_slist *l;
    if (snprintf(line, sizeof line, "%s%s%s", name, sep, value) >= (int)sizeof line)
        return WEFT_ELIMIT;
    if (!(l = curl_slist_append(q->hdrs, line))) return WEFT_ENOMEM;
    q->hdrs = l;
    return 0;
}

/* The request header list from the input's headers plus Accept / Content-Type. */
static int build_headers(req *q, char *why, size_t why_size)
{
    int rc = 0;
    curl_slist_free_all(q->hdrs);
    q->hdrs = NULL;
    if (q->headers) {
        json_object_object_foreach(q->headers, k, v)
        {
            char num[64];
            const char *s;
            if (!is_token(k)) {
                snprintf(why, why_size, "header name '%.64s' is not a valid HTTP token", k);
                return WEFT_EINVAL;
            }
            /* any header may hold a ${secrets.X} (an X-Api-Key as well as an
             * Authorization): none goes to an origin the task did not name */
            if (q->foreign) break;
            switch (json_object_get_type(v)) {
            case json_type_null:
                continue;
            case json_type_string:
                s = json_object_get_string(v);
                if ((size_t)json_object_get_string_len(v) != strlen(s) || strpbrk(s, "\r\n")) {
                    snprintf(why, why_size, "header '%.64s' has a line break or NUL in its value",
                             k);
                    return WEFT_EINVAL;
                }
                break;
            case json_type_int:
                snprintf(num, sizeof num, "%lld", (long long)json_object_get_int64(v));
                s = num;
                break;
            case json_type_double:
                snprintf(num, sizeof num, "%.17g", json_object_get_double(v));
                s = num;
                break;
            case json_type_boolean:
                s = json_object_get_boolean(v) ? "true" : "false";
                break;
            default:
                snprintf(why, why_size, "header '%.64s' must be a string (got %s)", k,
                         json_type_to_name(json_object_get_type(v)));
                return WEFT_EINVAL;
            }
            /* "Name;" is libcurl's way to send an empty value ("Name:" removes it) */
            rc = *s ? add_line(q, k, ": ", s) : add_line(q, k, ";", "");
            if (rc == WEFT_ELIMIT) {
                snprintf(why, why_size, "header '%.64s' is too long", k);
                return rc;
            }
            if (rc) return rc;
        }
    }
    /* "Name:" with nothing after it stops libcurl sending its own */
    if (!has_header(q, "accept")) rc = add_line(q, "Accept", ": ", q->accept);
    if (!rc && !has_header(q, "content-type")) /* no form type made up for empty POSTs */
        rc = add_line(q, "Content-Type", q->has_body ? ": " : ":",
                      q->has_body ? q->content_type : "");
    if (!rc && !has_header(q, "expect"))
        rc = add_line(q, "Expect", ":", ""); /* no 100-continue wait */
    if (rc == WEFT_ELIMIT) snprintf(why, why_size, "accept or contentType is too long");
    return rc;
}

/* The URL as shown in reasons: without user and password. */
static void show_url(req *q)
{
    CURLU *u = curl_url_dup(q->url);
    char *s = NULL;
    if (u) {
        curl_url_set(u, CURLUPART_USER, NULL, 0);
        curl_url_set(u, CURLUPART_PASSWORD, NULL, 0);
        curl_url_set(u, CURLUPART_FRAGMENT, NULL, 0);
    }
    if (u && curl_url_get(u, CURLUPART_URL, &s, 0) == CURLUE_OK)
        snprintf(q->shown, sizeof q->shown, "%s", s);
    else
        snprintf(q->shown, sizeof q->shown, "(the uri)");
    curl_free(s);
    curl_url_cleanup(u);
}

/*
 * Parse uri into q->url and check its scheme and host. On error, fills why
 * and returns WEFT_EINVAL (a bad URL) or WEFT_ESTATE (not allowed).
 */
static int set_url(req *q, const char *uri, char *why, size_t why_size)
{
    CURLU *u = curl_url();
    CURLUcode uc;
    char *scheme = NULL, *host = NULL;
    int rc = 0;
    if (!u) return WEFT_ENOMEM;
    uc = curl_url_set(u, CURLUPART_URL, uri, URL_FLAGS);
    if (uc != CURLUE_OK) {
        char s[32];
        if (url_scheme(uri, s, sizeof s) && !http_scheme(s)) {
            snprintf(why, why_size, "uri scheme '%s' is not allowed (only http and https)", s);
            rc = WEFT_ESTATE;
        } else {
            snprintf(why, why_size, "uri '%.200s' is not a valid absolute URL: %s", uri,
                     curl_url_strerror(uc));
            rc = WEFT_EINVAL;
        }
        goto out;
    }
    if (curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) != CURLUE_OK || !http_scheme(scheme)) {
        snprintf(why, why_size, "uri scheme '%s' is not allowed (only http and https)",
                 scheme ? scheme : "?");
        rc = WEFT_ESTATE;
        goto out;
    }
    if (curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK || !*host) {
        snprintf(why, why_size, "uri '%.200s' has no host", uri);
        rc = WEFT_EINVAL;
        goto out;
    }
    if (!host_allowed(host)) {
        snprintf(why, why_size, "host '%.200s' is not in the http plugin's allow-list", host);
        rc = WEFT_ESTATE;
        goto out;
    }
    curl_url_cleanup(q->url);
    q->url = u;
    u = NULL;
    show_url(q);
out:
    curl_free(scheme);
    curl_free(host);
    curl_url_cleanup(u);
    return rc;
}

static void setup(req *q)
{
    CURL *e = q->c->easy;
    curl_easy_reset(e);
    curl_easy_setopt(e, CURLOPT_CURLU, q->url);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(e, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
    curl_easy_setopt(e, CURLOPT_REDIR_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, q->curl_err);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, q->connect_ms);
    curl_easy_setopt(e, CURLOPT_ACCEPT_ENCODING, "");
    curl_easy_setopt(e, CURLOPT_MAXFILESIZE_LARGE, (curl_off_t)q->max_body);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, q);
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, q);
    curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(e, CURLOPT_XFERINFODATA, q);
    curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
#if LIBCURL_VERSION_NUM >= 0x075000
    curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, on_prereq);
    curl_easy_setopt(e, CURLOPT_PREREQDATA, q);
#endif
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, q->hdrs);
    if (H->version) {
        char ua[64];
        snprintf(ua, sizeof ua, "weft/%s", H->version);
        curl_easy_setopt(e, CURLOPT_USERAGENT, ua); /* copied by libcurl */
    }
    if (!strcmp(q->method, "HEAD")) {
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
        return;
    }
    if (!strcmp(q->method, "GET") && !q->has_body) {
        curl_easy_setopt(e, CURLOPT_HTTPGET, 1L);
        return;
    }
    if (q->has_body || !strcmp(q->method, "POST") || !strcmp(q->method, "PUT") ||
        !strcmp(q->method, "PATCH")) {
        /* a body, or an empty one with Content-Length: 0 */
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
                         (curl_off_t)(q->has_body ? q->body_len : 0));
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, q->has_body ? q->body : "");
    }
    if (strcmp(q->method, "POST") != 0) curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, q->method);
}

enum { DONE, CANCELED, READ_TIMEOUT, MULTI_ERROR };

/* Run the transfer set up on q->c->easy; *res gets curl's result when DONE. */
static int perform(req *q, CURLcode *res)
{
    conn *c = q->c;
    int running = 1, end = DONE, msgs;
    CURLMsg *m;
#if LIBCURL_VERSION_NUM >= 0x075000
    int64_t idle_ms = q->read_ms;
#else
    int64_t idle_ms = q->read_ms + q->connect_ms;
    q->connected = 1;
#endif
    *res = CURLE_OK;
    q->last_ms = mono_ms();
    if (curl_multi_add_handle(c->multi, c->easy) != CURLM_OK) return MULTI_ERROR;
    for (;;) {
        int64_t now, wait;
        int canceled;
        if (curl_multi_perform(c->multi, &running) != CURLM_OK) {
            end = MULTI_ERROR;
            break;
        }
        if (!running) break;
        pthread_mutex_lock(&S.lock);
        canceled = c->canceled;
        pthread_mutex_unlock(&S.lock);
        if (canceled) {
            end = CANCELED;
            break;
        }
        now = mono_ms();
        wait = 1000;
        if (q->connected) {
            if (now - q->last_ms >= idle_ms) {
                end = READ_TIMEOUT;
                break;
            }
            if (q->last_ms + idle_ms - now < wait) wait = q->last_ms + idle_ms - now;
        }
        /* also returns at curl's own timers (connect timeout) and on wakeup */
        if (curl_multi_poll(c->multi, NULL, 0, (int)(wait > 0 ? wait : 1), NULL) != CURLM_OK) {
            end = MULTI_ERROR;
            break;
        }
    }
    while ((m = curl_multi_info_read(c->multi, &msgs)))
        if (m->msg == CURLMSG_DONE) *res = m->data.result;
    curl_multi_remove_handle(c->multi, c->easy);
    return end;
}

/* ---- input ---- */

/* A timeout in ms: a number of ms, a string of digits (ms) or a duration string. */
static int timeout_of(json_object *params, const char *name, long def, long *out, char *why,
                      size_t why_size)
{
    json_object *v;
    weft_error err = {0};
    int64_t ms = 0;
    if (!json_object_object_get_ex(params, name, &v) || json_object_is_type(v, json_type_null)) {
        *out = def;
        return 0;
    }
    if (json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double)) {
        double d = json_object_get_double(v);
        ms = d >= 1 && d < 86400000.0 ? (int64_t)d : 0;
    } else if (json_object_is_type(v, json_type_string)) {
        const char *s = json_object_get_string(v);
        size_t n = strspn(s, "0123456789");
        if (n && !s[n] && n < 10)
            ms = strtoll(s, NULL, 10);
        else if (H->parse_duration(v, &ms, &err) != 0)
            ms = 0;
    }
    if (ms <= 0 || ms >= 86400000) {
        char got[80];
        /* not json_object_to_json_string: it caches text in a node others may share */
        if (json_object_is_type(v, json_type_string))
            snprintf(got, sizeof got, "\"%.64s\"", json_object_get_string(v));
        else if (json_object_is_type(v, json_type_int) || json_object_is_type(v, json_type_double))
            snprintf(got, sizeof got, "%.17g", json_object_get_double(v));
        else
            snprintf(got, sizeof got, "%s", json_type_to_name(json_object_get_type(v)));
        snprintf(why, why_size,
                 "%s must be a positive number of milliseconds below a day, or a duration such "
                 "as \"5s\" (got %s)",
                 name, got);
        return WEFT_EINVAL;
    }
    *out = (long)ms;
    return 0;
}

static int string_of(json_object *params, const char *name, const char *def, const char **out,
                     char *why, size_t why_size)
{
    json_object *v;
    *out = def;
    if (!json_object_object_get_ex(params, name, &v) || json_object_is_type(v, json_type_null))
        return 0;
    if (!json_object_is_type(v, json_type_string)) {
        snprintf(why, why_size, "%s must be a string (got %s)", name,
                 json_type_to_name(json_object_get_type(v)));
        return WEFT_EINVAL;
    }
    *out = json_object_get_string(v);
    return 0;
}

/* The parameters: the legacy http_request wrapper when there is one. */
static json_object *params_of(json_object *input)
{
    json_object *w;
    if (json_object_object_get_ex(input, "http_request", &w) &&
        json_object_is_type(w, json_type_object))
        return w;
    return input;
}

/* Fill q from the resolved input; a bad input gives WEFT_EINVAL or WEFT_ESTATE and why. */
static int read_input(req *q, json_object *input, char *why, size_t why_size)
{
    json_object *p = params_of(input), *v;
    const char *uri, *method;
    size_t i;
    int rc;
    if (!json_object_is_type(p, json_type_object)) {
        snprintf(why, why_size, "inputParameters must be an object");
        return WEFT_EINVAL;
    }
    if ((rc = string_of(p, "uri", NULL, &uri, why, why_size)) != 0) return rc;
    if (!uri || !*uri) {
        snprintf(why, why_size, "uri is missing or empty");
        return WEFT_EINVAL;
    }
    if (json_object_object_get_ex(p, "asyncComplete", &v) && json_object_get_boolean(v)) {
        snprintf(why, why_size, "asyncComplete is not supported: the reply completes the task");
        return WEFT_EINVAL;
    }
    if ((rc = string_of(p, "method", "GET", &method, why, why_size)) != 0) return rc;
    if (!is_token(method) || strlen(method) >= sizeof q->method) {
        snprintf(why, why_size, "method '%.40s' is not a valid HTTP method", method);
        return WEFT_EINVAL;
    }
    for (i = 0; method[i]; i++)
        q->method[i] = (char)toupper((unsigned char)method[i]);
    q->method[i] = '\0';
    if ((rc = string_of(p, "accept", DEFAULT_TYPE, &q->accept, why, why_size)) != 0 ||
        (rc = string_of(p, "contentType", DEFAULT_TYPE, &q->content_type, why, why_size)) != 0)
        return rc;
    if (strpbrk(q->accept, "\r\n") || strpbrk(q->content_type, "\r\n")) {
        snprintf(why, why_size, "accept and contentType must not contain line breaks");
        return WEFT_EINVAL;
    }
    if (json_object_object_get_ex(p, "headers", &v) && !json_object_is_type(v, json_type_null)) {
        if (!json_object_is_type(v, json_type_object)) {
            snprintf(why, why_size, "headers must be an object of strings (got %s)",
                     json_type_to_name(json_object_get_type(v)));
            return WEFT_EINVAL;
        }
        q->headers = v;
    }
    if (json_object_object_get_ex(p, "body", &v) && !json_object_is_type(v, json_type_null)) {
        q->has_body = 1;
        if (json_object_is_type(v, json_type_string)) {
            q->body = json_object_get_string(v);
            q->body_len = (size_t)json_object_get_string_len(v);
        } else {
            /* serialising caches text inside the object: use a copy of our own,
             * as the input may share nodes with a definition other threads read */
            if (json_object_deep_copy(v, &q->body_json, NULL) != 0) return WEFT_ENOMEM;
            q->body = json_object_to_json_string_ext(
                q->body_json, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE);
            q->body_len = strlen(q->body);
        }
    }
    if ((rc = timeout_of(p, "connectionTimeOut", DEFAULT_CONNECT_MS, &q->connect_ms, why,
                         why_size)) != 0 ||
        (rc = timeout_of(p, "readTimeOut", DEFAULT_READ_MS, &q->read_ms, why, why_size)) != 0)
        return rc;
    return set_url(q, uri, why, why_size);
}

/* ---- the reply ---- */

static const char *standard_reason(long status)
{
    static const struct {
        int code;
        const char *text;
    } t[] = {
        {100, "Continue"},
        {200, "OK"},
        {201, "Created"},
        {202, "Accepted"},
        {204, "No Content"},
        {206, "Partial Content"},
        {301, "Moved Permanently"},
        {302, "Found"},
        {303, "See Other"},
        {304, "Not Modified"},
        {307, "Temporary Redirect"},
        {308, "Permanent Redirect"},
        {400, "Bad Request"},
        {401, "Unauthorized"},
        {403, "Forbidden"},
        {404, "Not Found"},
        {405, "Method Not Allowed"},
        {408, "Request Timeout"},
        {409, "Conflict"},
        {410, "Gone"},
        {413, "Content Too Large"},
        {415, "Unsupported Media Type"},
        {422, "Unprocessable Content"},
        {429, "Too Many Requests"},
        {500, "Internal Server Error"},
        {501, "Not Implemented"},
        {502, "Bad Gateway"},
        {503, "Service Unavailable"},
        {504, "Gateway Timeout"},
    };
    size_t i;
    for (i = 0; i < sizeof t / sizeof t[0]; i++)
        if (t[i].code == status) return t[i].text;
    return "";
}

/* The body as JSON when it parses as JSON (whatever the content type), else a string. */
static json_object *body_value(const buf *b)
{
    json_tokener *tok;
    json_object *v = NULL;
    size_t i = 0;
    int parsed = 0;
    if (!b->len) return NULL;
    while (i < b->len && strchr(" \t\r\n", b->p[i]))
        i++;
    if (i < b->len && strchr("{[\"-0123456789tfn", b->p[i]) && b->len < (size_t)1 << 31 &&
        (tok = json_tokener_new_ex(64))) {
        /* with the terminating NUL, so a number at the end is complete */
        v = json_tokener_parse_ex(tok, b->p, (int)b->len + 1);
        if (json_tokener_get_error(tok) == json_tokener_success) {
            /* the whole body, not a prefix: only white space may follow */
            parsed = 1;
            for (i = (size_t)tok->char_offset; i < b->len && parsed; i++)
                parsed = b->p[i] && strchr(" \t\r\n", b->p[i]);
        }
        json_tokener_free(tok);
        if (parsed) return v; /* NULL for the JSON null */
        json_object_put(v);
    }
    return json_object_new_string_len(b->p, (int)b->len);
}

static json_object *response_json(req *q)
{
    json_object *out = json_object_new_object(), *resp = json_object_new_object();
    const char *reason = q->reason[0] ? q->reason : standard_reason(q->status);
    if (!out || !resp) {
        json_object_put(out);
        json_object_put(resp);
        return NULL;
    }
    json_object_object_add(resp, "statusCode", json_object_new_int((int)q->status));
    json_object_object_add(resp, "reasonPhrase", json_object_new_string(reason));
    json_object_object_add(resp, "headers", q->resp_headers);
    q->resp_headers = NULL;
    json_object_object_add(resp, "body", body_value(&q->body_in));
    json_object_object_add(out, "response", resp);
    return out;
}

/* The first bytes of the body for a failure reason: one line, printable. */
static void body_snippet(const buf *b, char *out, size_t size)
{
    size_t i, n = 0;
    for (i = 0; i < b->len && n + 4 < size && i < 160; i++) {
        unsigned char ch = (unsigned char)b->p[i];
        out[n++] = ch < 0x20 || ch == 0x7f ? ' ' : (char)ch;
    }
    if (i < b->len && n + 4 < size) {
        memcpy(out + n, "...", 3);
        n += 3;
    }
    out[n] = '\0';
}

/* After a 3xx reply with a Location: move q to the next hop. 0, or fills why. */
static int redirect(req *q, const char *location, char *why, size_t why_size)
{
    char *old_host = NULL, *old_scheme = NULL, *old_port = NULL;
    char *host = NULL, *scheme = NULL, *port = NULL;
    int rc;
    curl_url_get(q->url, CURLUPART_HOST, &old_host, 0);
    curl_url_get(q->url, CURLUPART_SCHEME, &old_scheme, 0);
    curl_url_get(q->url, CURLUPART_PORT, &old_port, CURLU_DEFAULT_PORT);
    if ((rc = set_url(q, location, why, why_size)) == 0) {
        curl_url_get(q->url, CURLUPART_HOST, &host, 0);
        curl_url_get(q->url, CURLUPART_SCHEME, &scheme, 0);
        curl_url_get(q->url, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT);
        /* what the task wrote goes to the origin it was written for */
        if (!old_host || !host || strcasecmp(old_host, host) || !old_scheme || !scheme ||
            strcasecmp(old_scheme, scheme) || !old_port || !port || strcmp(old_port, port))
            q->foreign = 1;
        /* 303, and 301/302 after a POST, continue as GET (as browsers and libcurl) */
        if (strcmp(q->method, "HEAD") &&
            (q->status == 303 ||
             ((q->status == 301 || q->status == 302) && !strcmp(q->method, "POST")))) {
            strcpy(q->method, "GET");
            q->has_body = 0;
        }
        if (q->foreign && q->has_body) {
            snprintf(why, why_size, "a %ld to %.200s would send the request body to another origin",
                     q->status, q->shown);
            rc = WEFT_EINVAL;
        } else {
            rc = build_headers(q, why, why_size);
        }
    }
    curl_free(old_host);
    curl_free(old_scheme);
    curl_free(old_port);
    curl_free(host);
    curl_free(scheme);
    curl_free(port);
    return rc;
}

static int is_redirect(long status)
{
    return status == 301 || status == 302 || status == 303 || status == 307 || status == 308;
}

/* Send the request, following redirects; fills r from the outcome. */
static int run(req *q, weft_result *r)
{
    char why[400], where[1100], snippet[200];
    int end, hops = 0, rc;
    CURLcode res;

    for (;;) {
        const char *loc = NULL;
        snprintf(where, sizeof where, "%s %s", q->method, q->shown);
        req_reset_reply(q);
        setup(q);
        end = perform(q, &res);
        if (end != DONE || res != CURLE_OK || q->nomem) break;
        curl_easy_getinfo(q->c->easy, CURLINFO_RESPONSE_CODE, &q->status);
        if (!is_redirect(q->status) ||
            curl_easy_getinfo(q->c->easy, CURLINFO_REDIRECT_URL, &loc) != CURLE_OK || !loc)
            break;
        if (++hops > MAX_REDIRECTS)
            return weft_fail_as(r, WEFT_TASK_FAILED, "HTTP: more than %d redirects from %s",
                                MAX_REDIRECTS, where);
        why[0] = '\0';
        if ((rc = redirect(q, loc, why, sizeof why)) == WEFT_ENOMEM)
            return weft_fail_as(r, WEFT_TASK_FAILED, "HTTP: out of memory"), rc;
        if (rc)
            return weft_fail_as(r, WEFT_TASK_FAILED_WITH_TERMINAL_ERROR,
                                "HTTP: redirect from %s refused: %s", where, why);
    }

    if (end == CANCELED)
        return weft_fail_as(r, WEFT_TASK_FAILED, "HTTP: canceled during %s", where);
    if (end == READ_TIMEOUT)
        return weft_fail_as(r, WEFT_TASK_FAILED,
                            "HTTP: read timeout: no data for %ld ms (readTimeOut) from %s",
                            q->read_ms, where);
    if (end == MULTI_ERROR)
        return weft_fail_as(r, WEFT_TASK_FAILED, "HTTP: libcurl multi interface error during %s",
                            where);
    if (q->nomem) return weft_fail_as(r, WEFT_TASK_FAILED, "HTTP: out of memory during %s", where);
    if (q->too_many)
        return weft_fail_as(
            r, WEFT_TASK_FAILED_WITH_TERMINAL_ERROR,
            "HTTP: response headers over the limit of %d lines or %zu bytes from %s",
            MAX_HEADER_LINES, MAX_HEADER_BYTES, where);
    if (q->too_big || res == CURLE_FILESIZE_EXCEEDED)
        return weft_fail_as(
            r, WEFT_TASK_FAILED_WITH_TERMINAL_ERROR,
            "HTTP: response body over the limit of %zu bytes (max_response_bytes) from %s",
            q->max_body, where);
    if (res == CURLE_OPERATION_TIMEDOUT && !q->connected)
        return weft_fail_as(r, WEFT_TASK_FAILED,
                            "HTTP: connect timeout after %ld ms (connectionTimeOut): %s from %s",
                            q->connect_ms, q->curl_err[0] ? q->curl_err : curl_easy_strerror(res),
                            where);
    if (res != CURLE_OK)
        return weft_fail_as(r, WEFT_TASK_FAILED, "HTTP: %s from %s",
                            q->curl_err[0] ? q->curl_err : curl_easy_strerror(res), where);

    if (!(r->output = response_json(q)))
        return weft_fail_as(r, WEFT_TASK_FAILED, "HTTP: out of memory"), WEFT_ENOMEM;
    if (q->status >= 200 && q->status <= 299) {
        r->status = WEFT_TASK_COMPLETED;
        return 0;
    }
    /* the reply stays in the output, for the failure workflow and optional tasks */
    body_snippet(&q->body_in, snippet, sizeof snippet);
    return weft_fail_as(r, WEFT_TASK_FAILED, "HTTP %ld%s%s from %s%s%s", q->status,
                        q->reason[0] || *standard_reason(q->status) ? " " : "",
                        q->reason[0] ? q->reason : standard_reason(q->status), where,
                        snippet[0] ? ": " : "", snippet);
}

static int http_execute(weft_ctx *ctx, weft_result *r)
{
    const weft_task_view *t = H->task(ctx);
    req q;
    char why[400];
    int rc;
    int64_t t0 = mono_ms();
    char *host = NULL;

    memset(&q, 0, sizeof q);
    why[0] = '\0';
    if ((rc = read_input(&q, t->input, why, sizeof why)) == 0)
        rc = build_headers(&q, why, sizeof why);
    if (rc == 0 && !(q.c = conn_get())) {
        snprintf(why, sizeof why, "cannot create a libcurl handle");
        rc = WEFT_ENOMEM;
    }
    if (rc) {
        req_free(&q);
        if (rc == WEFT_ENOMEM)
            return weft_fail_as(r, WEFT_TASK_FAILED, "HTTP: %s", why[0] ? why : "out of memory"),
                   rc;
        return weft_fail_as(r, WEFT_TASK_FAILED_WITH_TERMINAL_ERROR, "HTTP: %s", why);
    }
    pthread_mutex_lock(&S.lock);
    snprintf(q.c->task_id, sizeof q.c->task_id, "%s", t->task_id ? t->task_id : "");
    q.c->canceled = 0;
    q.max_body = S.max_body;
    pthread_mutex_unlock(&S.lock);

    rc = run(&q, r);

    pthread_mutex_lock(&S.lock);
    q.c->task_id[0] = '\0';
    pthread_mutex_unlock(&S.lock);
    /* only method and host: paths and queries may carry secrets */
    curl_url_get(q.url, CURLUPART_HOST, &host, 0);
    H->log(WEFT_LOG_DEBUG, "HTTP %s %s: %s, %ld, %lld ms", q.method, host ? host : "?",
           weft_task_status_name(r->status), q.status, (long long)(mono_ms() - t0));
    curl_free(host);
    req_free(&q);
    return rc;
}

static void http_cancel(weft_ctx *ctx)
{
    const weft_task_view *t = H->task(ctx);
    conn *c;
    if (!t || !t->task_id || !*t->task_id) return;
    pthread_mutex_lock(&S.lock);
    for (c = S.conns; c; c = c->next)
        if (!strcmp(c->task_id, t->task_id)) {
            c->canceled = 1;
            curl_multi_wakeup(c->multi);
        }
    pthread_mutex_unlock(&S.lock);
}

/* ---- definition load ---- */

static int http_validate(const weft_host *host, json_object *def, weft_error *err)
{
    json_object *in = NULL, *p, *v;
    const char *uri;
    char scheme[32], why[400];
    req q;
    int rc;

    if (!json_object_object_get_ex(def, "inputParameters", &in) ||
        !json_object_is_type(in, json_type_object))
        return host->error(err, WEFT_EINVAL, "HTTP needs inputParameters.uri");
    p = params_of(in);
    if (!json_object_object_get_ex(p, "uri", &v) || !json_object_is_type(v, json_type_string) ||
        !*json_object_get_string(v))
        return host->error(err, WEFT_EINVAL, "HTTP needs inputParameters.uri (a URL string)");
    uri = json_object_get_string(v);
    /* a scheme written before any expression is known now (url_scheme stops at "${") */
    if (url_scheme(uri, scheme, sizeof scheme) && !http_scheme(scheme))
        return host->error(err, WEFT_EINVAL,
                           "HTTP uri scheme '%s' is not allowed (only http and https): %.200s",
                           scheme, uri);
    if (!is_expr(uri)) {
        memset(&q, 0, sizeof q);
        rc = set_url(&q, uri, why, sizeof why);
        req_free(&q);
        if (rc) return host->error(err, rc == WEFT_ENOMEM ? rc : WEFT_EINVAL, "HTTP %s", why);
    }
    /* Conductor's asyncComplete waits for an external completion: not offered */
    if (json_object_object_get_ex(p, "asyncComplete", &v) &&
        json_object_is_type(v, json_type_boolean) && json_object_get_boolean(v))
        return host->error(err, WEFT_EINVAL,
                           "HTTP asyncComplete is not supported: the reply completes the task");
    if (json_object_object_get_ex(p, "method", &v) && !json_object_is_type(v, json_type_null)) {
        const char *m = json_object_get_string(v);
        if (!json_object_is_type(v, json_type_string) ||
            (!is_expr(m) && (!is_token(m) || strlen(m) > 31)))
            return host->error(err, WEFT_EINVAL, "HTTP method must be an HTTP method name (got %s)",
                               json_object_to_json_string(v));
    }
    if (json_object_object_get_ex(p, "headers", &v) && !json_object_is_type(v, json_type_null)) {
        if (json_object_is_type(v, json_type_string)) {
            if (!is_expr(json_object_get_string(v)))
                return host->error(err, WEFT_EINVAL, "HTTP headers must be an object of strings");
        } else if (!json_object_is_type(v, json_type_object)) {
            return host->error(err, WEFT_EINVAL,
                               "HTTP headers must be an object of strings (got %s)",
                               json_type_to_name(json_object_get_type(v)));
        } else {
            json_object_object_foreach(v, k, hv)
            {
                if (!is_token(k))
                    return host->error(err, WEFT_EINVAL,
                                       "HTTP header name '%.64s' is not a valid HTTP token", k);
                if (json_object_is_type(hv, json_type_object) ||
                    json_object_is_type(hv, json_type_array))
                    return host->error(err, WEFT_EINVAL, "HTTP header '%.64s' must be a string", k);
                if (json_object_is_type(hv, json_type_string) &&
                    strpbrk(json_object_get_string(hv), "\r\n"))
                    return host->error(err, WEFT_EINVAL,
                                       "HTTP header '%.64s' has a line break in its value", k);
            }
        }
    }
    if ((json_object_object_get_ex(p, "accept", &v) && !json_object_is_type(v, json_type_null) &&
         !json_object_is_type(v, json_type_string)) ||
        (json_object_object_get_ex(p, "contentType", &v) &&
         !json_object_is_type(v, json_type_null) && !json_object_is_type(v, json_type_string)))
        return host->error(err, WEFT_EINVAL, "HTTP accept and contentType must be strings");
    {
        static const char *const names[] = {"connectionTimeOut", "readTimeOut"};
        size_t i;
        for (i = 0; i < 2; i++) {
            long ms;
            if (json_object_object_get_ex(p, names[i], &v) &&
                json_object_is_type(v, json_type_string) && is_expr(json_object_get_string(v)))
                continue;
            if (timeout_of(p, names[i], 1, &ms, why, sizeof why) != 0)
                return host->error(err, WEFT_EINVAL, "HTTP %s", why);
        }
    }
    return 0;
}

/* ---- lifetime ---- */

static int http_init(const weft_host *host, json_object *config, weft_error *err)
{
    char **allow, **old_allow;
    size_t nallow, old_n, max_body;
    int rc;
    H = host;
    if ((rc = parse_config(config, &allow, &nallow, &max_body, err)) != 0) return rc;
    pthread_mutex_lock(&S.lock);
    if (!S.ready) {
        CURLcode cc = curl_global_init(CURL_GLOBAL_DEFAULT);
        if (cc != CURLE_OK || pthread_key_create(&S.key, conn_destroy) != 0) {
            if (cc == CURLE_OK) curl_global_cleanup();
            pthread_mutex_unlock(&S.lock);
            free_list(allow, nallow);
            return host->error(err, WEFT_EIO, "http: cannot initialise libcurl: %s",
                               curl_easy_strerror(cc));
        }
        S.ready = 1;
    }
    /* init may be called again with a new config: swap it in */
    old_allow = S.allow;
    old_n = S.nallow;
    S.allow = allow;
    S.nallow = nallow;
    S.max_body = max_body;
    pthread_mutex_unlock(&S.lock);
    free_list(old_allow, old_n);
    return 0;
}

/* Also called after a failed init. */
static void http_fini(void)
{
    conn *c, *next;
    pthread_mutex_lock(&S.lock);
    if (S.ready) {
        pthread_key_delete(S.key);
        for (c = S.conns; c; c = next) {
            next = c->next;
            conn_free(c);
        }
        S.conns = NULL;
        curl_global_cleanup();
        S.ready = 0;
    }
    free_list(S.allow, S.nallow);
    S.allow = NULL;
    S.nallow = 0;
    S.max_body = DEFAULT_MAX_BODY;
    pthread_mutex_unlock(&S.lock);
}

static const weft_task_type http_type =
    WEFT_TASK_TYPE(.name = "HTTP", .validate = http_validate, .execute = http_execute,
                   .cancel = http_cancel, .init = http_init, .fini = http_fini);

WEFT_PLUGIN(http, .types = &http_type, .ntypes = 1, .host = &H)
