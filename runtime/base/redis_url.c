/*
 * The Redis URL parser (redis_url.h). It takes what the store's and the
 * lock_redis plugin's own parsers took (the store's was the looser: a port
 * or db strtol reads, "?db=" with no number, a socket path of "/"), and
 * names the URL, password masked, in every message.
 */
#include "base/redis_url.h"

#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define USAGE "expected redis://[:password@]host[:port][/db] or unix:///path"

/* This file is compiled into plugins too: no wu_err. */
static int fail(weft_error *err, int code, const char *fmt, ...)
{
    va_list ap;
    if (err) {
        err->code = code;
        va_start(ap, fmt);
        vsnprintf(err->msg, sizeof err->msg, fmt, ap);
        va_end(ap);
    }
    return code;
}

static int oom(weft_error *err)
{
    return fail(err, WEFT_ENOMEM, "Redis URL: out of memory");
}

/* Percent-decode a URL part (passwords may hold reserved characters). */
static char *decode(const char *s, size_t n)
{
    char *d = malloc(n + 1);
    size_t i, j = 0;
    if (!d) return NULL;
    for (i = 0; i < n; i++) {
        if (s[i] == '%' && i + 2 < n && isxdigit((unsigned char)s[i + 1]) &&
            isxdigit((unsigned char)s[i + 2])) {
            char hex[3] = {s[i + 1], s[i + 2], 0};
            d[j++] = (char)strtol(hex, NULL, 16);
            i += 2;
        } else {
            d[j++] = s[i];
        }
    }
    d[j] = 0;
    return d;
}

/* "" leaves *db as it is. */
static int parse_db(const char *s, int *db)
{
    char *end;
    long v;
    if (!*s) return 0;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno || *end || end == s || v < 0 || v > 1000000) return -1;
    *db = (int)v;
    return 0;
}

/* The host (a [v6] one unbracketed) and port of rest[0..end). */
static int parse_host(ru_url *u, const char *rest, const char *end, weft_error *err)
{
    const char *host = rest, *host_end, *port = NULL;

    u->port = 6379;
    if (*host == '[') {
        host_end = memchr(host, ']', (size_t)(end - host));
        if (!host_end)
            return fail(err, WEFT_EINVAL, "Redis URL %s: unclosed [ in the host", u->shown);
        host++;
        if (host_end + 1 < end) {
            if (host_end[1] != ':')
                return fail(err, WEFT_EINVAL, "Redis URL %s: bad port", u->shown);
            port = host_end + 2;
        }
    } else {
        host_end = memchr(host, ':', (size_t)(end - host));
        if (host_end)
            port = host_end + 1;
        else
            host_end = end;
    }
    if (host_end == host) return fail(err, WEFT_EINVAL, "Redis URL %s: no host", u->shown);
    if (!(u->host = strndup(host, (size_t)(host_end - host)))) return oom(err);
    if (port) {
        char buf[16], *e;
        long v;
        size_t pn = (size_t)(end - port);
        if (pn == 0 || pn >= sizeof buf)
            return fail(err, WEFT_EINVAL, "Redis URL %s: bad port", u->shown);
        memcpy(buf, port, pn);
        buf[pn] = 0;
        v = strtol(buf, &e, 10);
        if (*e || v <= 0 || v > 65535)
            return fail(err, WEFT_EINVAL, "Redis URL %s: bad port \"%s\"", u->shown, buf);
        u->port = (int)v;
    }
    return 0;
}

int ru_parse(const char *url, ru_url *u, weft_error *err)
{
    const char *rest, *auth_end, *at = NULL, *p, *colon;
    int is_unix, rc;
    size_t n;

    memset(u, 0, sizeof *u);
    if (!strncmp(url, "redis://", 8))
        is_unix = 0;
    else if (!strncmp(url, "unix://", 7))
        is_unix = 1;
    else
        return fail(err, WEFT_EINVAL, "Redis URL \"%.100s\": " USAGE "%s",
                    strchr(url, '@') ? "(hidden: it may hold a password)" : url,
                    strncmp(url, "rediss://", 9) ? "" : " (TLS is not supported)");
    rest = url + (is_unix ? 7 : 8);
    auth_end = is_unix ? strchr(rest, '/') : rest + strcspn(rest, "/");
    if (!auth_end) auth_end = rest + strlen(rest);
    for (p = rest; p < auth_end; p++)
        if (*p == '@') at = p;

    /* the shown form: userinfo becomes [user]:*** */
    n = strlen(url) + 8;
    if (!(u->shown = malloc(n))) return oom(err);
    if (at) {
        colon = memchr(rest, ':', (size_t)(at - rest));
        snprintf(u->shown, n, "%.*s%.*s:***%s", (int)(rest - url), url,
                 colon ? (int)(colon - rest) : 0, rest, at);
        if (colon) {
            if (colon > rest && !(u->user = decode(rest, (size_t)(colon - rest)))) return oom(err);
            if (!(u->password = decode(colon + 1, (size_t)(at - colon - 1)))) return oom(err);
        } else if (!(u->password = decode(rest, (size_t)(at - rest)))) {
            return oom(err);
        }
        rest = at + 1;
    } else {
        snprintf(u->shown, n, "%s", url);
    }

    if (is_unix) {
        const char *q = strchr(rest, '?');
        if (*rest != '/' || rest[1] == 0)
            return fail(err, WEFT_EINVAL, "Redis URL %s: expected unix:///path/to/socket",
                        u->shown);
        if (!(u->path = strndup(rest, q ? (size_t)(q - rest) : strlen(rest)))) return oom(err);
        if (q && (strncmp(q, "?db=", 4) || parse_db(q + 4, &u->db)))
            return fail(err, WEFT_EINVAL, "Redis URL %s: only ?db=N may follow the path", u->shown);
        return 0;
    }
    if ((rc = parse_host(u, rest, auth_end, err)) != 0) return rc;
    if (*auth_end == '/' && parse_db(auth_end + 1, &u->db))
        return fail(err, WEFT_EINVAL, "Redis URL %s: the database must be a number", u->shown);
    return 0;
}

void ru_clear(ru_url *u)
{
    if (!u) return;
    free(u->host);
    free(u->path);
    free(u->user);
    if (u->password) {
        memset(u->password, 0, strlen(u->password));
        free(u->password);
    }
    free(u->shown);
    memset(u, 0, sizeof *u);
}

int ru_parse_list(const char *urls, ru_url *out, size_t max, size_t *n, weft_error *err)
{
    const char *p = urls;
    *n = 0;
    for (;;) {
        size_t len = strcspn(p, ",");
        char *one;
        int rc;
        if (len == 0) return fail(err, WEFT_EINVAL, "Redis URL list: an empty entry (%s)", USAGE);
        if (*n == max)
            return fail(err, WEFT_EINVAL, "Redis URL list: more than %zu seed nodes", max);
        if (!(one = malloc(len + 1))) return fail(err, WEFT_ENOMEM, "out of memory");
        memcpy(one, p, len);
        one[len] = 0;
        rc = ru_parse(one, &out[*n], err);
        memset(one, 0, len); /* it may hold a password */
        free(one);
        (*n)++;
        if (rc) return rc;
        if (!p[len]) return 0;
        p += len + 1;
    }
}
