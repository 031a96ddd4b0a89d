#include "base/util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

int wu_verr(weft_error *err, int code, const char *fmt, va_list ap)
{
    if (err) {
        /* through a copy: the arguments may include err->msg itself */
        char buf[WEFT_ERROR_MAX];
        vsnprintf(buf, sizeof buf, fmt, ap);
        err->code = code;
        memcpy(err->msg, buf, sizeof buf);
    }
    return code;
}

int wu_err(weft_error *err, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    wu_verr(err, code, fmt, ap);
    va_end(ap);
    return code;
}

void wu_join_tail(char *buf, size_t size, const char *head, const char *tail)
{
    size_t h, len, room;
    if (!size) return;
    h = (size_t)snprintf(buf, size, "%s", head);
    if (!tail || h + 8 >= size) return;
    len = strlen(tail);
    room = size - h - 1;
    if (len > room) {
        tail += len - (room - 4);
        while ((*tail & 0xC0) == 0x80) /* not in the middle of a UTF-8 character */
            tail++;
        snprintf(buf + h, size - h, "... %s", tail);
    } else {
        memcpy(buf + h, tail, len + 1);
    }
}

int wu_err_prefix(weft_error *err, const char *fmt, ...)
{
    char old[WEFT_ERROR_MAX];
    size_t n, m;
    va_list ap;
    if (!err) return WEFT_EINVAL;
    memcpy(old, err->msg, sizeof old);
    old[sizeof old - 1] = 0;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    n = strlen(err->msg);
    m = strlen(old);
    if (m > sizeof err->msg - 1 - n) m = sizeof err->msg - 1 - n;
    memcpy(err->msg + n, old, m);
    err->msg[n + m] = 0;
    return err->code;
}

int64_t wu_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t wu_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t random_u64(void)
{
    static __thread uint64_t state;
    if (state == 0) {
        int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            if (read(fd, &state, sizeof state) != (ssize_t)sizeof state) state = 0;
            close(fd);
        }
        state ^= (uint64_t)wu_mono_ms() * 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid();
        if (state == 0) state = 0x2545F4914F6CDD1Dull;
    }
    /* xorshift64*: ids need to be unique, not unpredictable */
    state ^= state >> 12;
    state ^= state << 25;
    state ^= state >> 27;
    return state * 0x2545F4914F6CDD1Dull;
}

/* The 16 hex digits of w, last digit first, to buf at the offsets in at[0..16). */
static void put_hex(char *buf, const unsigned char *at, uint64_t w)
{
    static const char hex[] = "0123456789abcdef";
    int i;
    for (i = 15; i >= 0; i--, w >>= 4)
        buf[at[i]] = hex[w & 0xf];
}

void wu_uuid(char buf[37])
{
    /* where each of the 32 digits goes, around the dashes */
    static const unsigned char at[32] = {0,  1,  2,  3,  4,  5,  6,  7,  9,  10, 11,
                                         12, 14, 15, 16, 17, 19, 20, 21, 22, 24, 25,
                                         26, 27, 28, 29, 30, 31, 32, 33, 34, 35};
    /* 8 random bytes per step, the digits straight from them: ids are made
     * per task, so this is a hot path */
    put_hex(buf, at, (random_u64() & ~0xf000ull) | 0x4000ull);                  /* version 4 */
    put_hex(buf, at + 16, (random_u64() & ~(0xc0ull << 56)) | (0x80ull << 56)); /* variant 10 */
    buf[8] = buf[13] = buf[18] = buf[23] = '-';
    buf[36] = 0;
}

void wu_task_id(char buf[WU_TASK_ID_MAX], const char *workflow_id)
{
    static const unsigned char at[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};
    size_t n = strlen(workflow_id);
    if (n > WU_TASK_ID_MAX - 18) n = WU_TASK_ID_MAX - 18;
    memcpy(buf, workflow_id, n);
    buf[n] = '.';
    put_hex(buf + n + 1, at, random_u64());
    buf[n + 17] = 0;
}

int wu_task_workflow(const char *task_id, char wf[WU_TASK_ID_MAX], weft_error *err)
{
    size_t n = strlen(task_id), i;
    if (n < 18 || n >= WU_TASK_ID_MAX || task_id[n - 17] != '.')
        return wu_err(err, WEFT_EINVAL, "task id '%.80s' does not name its workflow", task_id);
    for (i = n - 16; i < n; i++)
        if (!isxdigit((unsigned char)task_id[i]))
            return wu_err(err, WEFT_EINVAL, "task id '%.80s' does not name its workflow", task_id);
    memcpy(wf, task_id, n - 17);
    wf[n - 17] = 0;
    return 0;
}

int wu_list_next(const char **p, const char **item, size_t *len)
{
    const char *s = *p;
    size_t n;
    if (!s) return 0;
    n = strcspn(s, ",");
    *p = s[n] ? s + n + 1 : NULL;
    while (n && *s == ' ')
        s++, n--;
    while (n && s[n - 1] == ' ')
        n--;
    *item = s;
    *len = n;
    return 1;
}

/* A duration's units, short and spelled out (Conductor's WAIT form). */
static const struct {
    const char *name;
    double ms;
    int unit; /* which: each may come once */
} dur_units[] = {
    {"ms", 1, 0},           {"msec", 1, 0},       {"msecs", 1, 0},       {"millisecond", 1, 0},
    {"milliseconds", 1, 0}, {"s", 1000, 1},       {"sec", 1000, 1},      {"secs", 1000, 1},
    {"second", 1000, 1},    {"seconds", 1000, 1}, {"m", 60000, 2},       {"min", 60000, 2},
    {"mins", 60000, 2},     {"minute", 60000, 2}, {"minutes", 60000, 2}, {"h", 3600000, 3},
    {"hr", 3600000, 3},     {"hrs", 3600000, 3},  {"hour", 3600000, 3},  {"hours", 3600000, 3},
    {"d", 86400000, 4},     {"day", 86400000, 4}, {"days", 86400000, 4},
};

void wu_duration_text(char *buf, size_t n, int64_t ms)
{
    long long v = ms < 0 ? 0 : (long long)ms;
    if (v < 1000)
        snprintf(buf, n, "%lldms", v);
    else if (v < 60000)
        snprintf(buf, n, "%lld.%llds", v / 1000, v / 100 % 10);
    else if (v < 3600000)
        snprintf(buf, n, "%lldm%02llds", v / 60000, v / 1000 % 60);
    else if (v < 86400000)
        snprintf(buf, n, "%lldh%02lldm", v / 3600000, v / 60000 % 60);
    else
        snprintf(buf, n, "%lldd%02lldh", v / 86400000, v / 3600000 % 24);
}

/*
 * "250ms", "5s", "1.5h", a bare number of seconds, or parts with units in
 * any order, each unit once: "3 days 2 hours", "10m20s", "1 hr 2 mins".
 */
int wu_parse_duration_str(const char *s, int64_t *ms, weft_error *err)
{
    const char *p = s;
    double total = 0;
    int seen = 0, parts = 0, bare = 0;
    if (!s || !*s) return wu_err(err, WEFT_EINVAL, "empty duration");
    for (;;) {
        char *end;
        double v;
        size_t n, i;
        while (*p == ' ')
            p++;
        if (!*p) break;
        if (!isdigit((unsigned char)*p) && *p != '.') goto bad;
        errno = 0;
        v = strtod(p, &end);
        if (end == p || errno || !isfinite(v) || v < 0) goto bad;
        if ((p[0] == '0' && (p[1] == 'x' || p[1] == 'X'))) goto bad; /* no hex */
        p = end;
        while (*p == ' ')
            p++;
        for (n = 0; isalpha((unsigned char)p[n]); n++)
            ;
        parts++;
        if (n == 0) { /* a bare number: seconds, alone */
            bare = 1;
            total += v * 1000;
            continue;
        }
        for (i = 0; i < sizeof dur_units / sizeof dur_units[0]; i++)
            if (strlen(dur_units[i].name) == n && !strncasecmp(p, dur_units[i].name, n)) break;
        if (i == sizeof dur_units / sizeof dur_units[0] || (seen & (1 << dur_units[i].unit)))
            goto bad;
        seen |= 1 << dur_units[i].unit;
        total += v * dur_units[i].ms;
        p += n;
    }
    if (parts == 0 || (bare && parts > 1) || total > 9.0e15) goto bad;
    *ms = (int64_t)llround(total);
    return 0;
bad:
    return wu_err(err, WEFT_EINVAL,
                  "bad duration '%s' (use e.g. \"250ms\", \"5s\", \"2m\", \"1h\", \"3 days 2 "
                  "hours\" or seconds)",
                  s);
}

int wu_parse_duration(json_object *v, int64_t *ms, weft_error *err)
{
    double d;
    switch (json_object_get_type(v)) {
    case json_type_int:
    case json_type_double:
        d = json_object_get_double(v);
        if (!isfinite(d) || d < 0 || d > 9.0e12)
            return wu_err(err, WEFT_EINVAL, "bad duration %s (must be >= 0 seconds)",
                          json_object_to_json_string(v));
        *ms = (int64_t)llround(d * 1000.0);
        return 0;
    case json_type_string:
        return wu_parse_duration_str(json_object_get_string(v), ms, err);
    default:
        return wu_err(err, WEFT_EINVAL, "bad duration %s (use a string like \"5s\" or seconds)",
                      v ? json_object_to_json_string(v) : "null");
    }
}

int wu_read_file(const char *path, char **buf, size_t *len, weft_error *err)
{
    FILE *f = fopen(path, "rb");
    struct stat st;
    char *b;
    size_t n;
    if (!f)
        return wu_err(err, errno == ENOENT ? WEFT_ENOTFOUND : WEFT_EIO, "%s: %s", path,
                      strerror(errno));
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        fclose(f);
        return wu_err(err, WEFT_EIO, "%s: not a regular file", path);
    }
    b = malloc((size_t)st.st_size + 1);
    if (!b) {
        fclose(f);
        return wu_err(err, WEFT_ENOMEM, "%s: out of memory", path);
    }
    n = fread(b, 1, (size_t)st.st_size, f);
    if (ferror(f)) {
        free(b);
        fclose(f);
        return wu_err(err, WEFT_EIO, "%s: read error", path);
    }
    fclose(f);
    b[n] = 0;
    *buf = b;
    if (len) *len = n;
    return 0;
}

static int parse_json(const char *what, const char *text, int depth, json_object **out,
                      weft_error *err)
{
    struct json_tokener *tok = json_tokener_new_ex(depth);
    json_object *obj;
    enum json_tokener_error jerr;
    size_t len = strlen(text), off, line = 1, i;
    if (!tok) return wu_err(err, WEFT_ENOMEM, "%s: out of memory", what);
    /* strict: no trailing commas, single quotes or other leniencies */
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    /* len + 1: the NUL ends a bare top-level number ("42") */
    obj = json_tokener_parse_ex(tok, text, (int)len + 1);
    jerr = json_tokener_get_error(tok);
    off = json_tokener_get_parse_end(tok);
    if (jerr == json_tokener_success && !obj) {
        /* json-c (0.16) says nothing else of a value it could not make:
         * no value and success is out of memory, but for the text null */
        for (i = 0; i < len && strchr(" \t\r\n", text[i]); i++)
            ;
        if (strncmp(text + i, "null", 4)) {
            json_tokener_free(tok);
            return wu_err(err, WEFT_ENOMEM, "%s: out of memory", what);
        }
    }
    if (jerr == json_tokener_success && off < len) {
        /* trailing garbage after a complete value is an error too, unless blank */
        for (i = off; i < len; i++)
            if (text[i] != ' ' && text[i] != '\n' && text[i] != '\t' && text[i] != '\r') break;
        if (i < len) {
            json_object_put(obj);
            obj = NULL;
            off = i;
            jerr = json_tokener_error_parse_unexpected;
        }
    } else if (jerr == json_tokener_continue) {
        jerr = json_tokener_error_parse_eof;
    }
    json_tokener_free(tok);
    if (jerr != json_tokener_success) {
        for (i = 0; i < off && i < len; i++)
            if (text[i] == '\n') line++;
        return wu_err(err, WEFT_EINVAL, "%s: invalid JSON at line %zu: %s", what, line,
                      json_tokener_error_desc(jerr));
    }
    *out = obj;
    return 0;
}

/* Whether v holds a number that is not finite: json-c reads NaN and
 * Infinity even when strict, and 1e999 as infinity, none of which JSON
 * has. The first one's place goes to path ("input.n", "[2]"). */
static int not_finite(json_object *v, char *path, size_t size)
{
    size_t at = strlen(path), i, n;
    switch (json_object_get_type(v)) {
    case json_type_double:
        return !isfinite(json_object_get_double(v));
    case json_type_array:
        n = json_object_array_length(v);
        for (i = 0; i < n; i++) {
            snprintf(path + at, size - at, "[%zu]", i);
            if (not_finite(json_object_array_get_idx(v, i), path, size)) return 1;
        }
        break;
    case json_type_object: {
        json_object_object_foreach(v, key, val)
        {
            snprintf(path + at, size - at, "%s%s", at ? "." : "", key);
            if (not_finite(val, path, size)) return 1;
        }
        break;
    }
    default:
        break;
    }
    path[at] = 0;
    return 0;
}

int wu_parse_json(const char *what, const char *text, json_object **out, weft_error *err)
{
    char path[200] = "";
    json_object *j;
    int rc = parse_json(what, text, JSON_TOKENER_DEFAULT_DEPTH, &j, err);
    if (rc) return rc;
    if (not_finite(j, path, sizeof path)) {
        json_object_put(j);
        return wu_err(err, WEFT_EINVAL,
                      "%s: invalid JSON at %s: a number must be finite (not NaN, Infinity or out "
                      "of range)",
                      what, path[0] ? path : "the top");
    }
    *out = j;
    return 0;
}

int wu_parse_json_stored(const char *what, const char *text, json_object **out, weft_error *err)
{
    return parse_json(what, text, WU_JSON_STORED_DEPTH, out, err);
}

struct wu_map {
    struct {
        char *key;
        void *val;
        uint32_t hash;
    } * slots;
    size_t cap, count;
    int borrowing; /* keys are the caller's, not copies */
};

static uint32_t hash_str(const char *s)
{
    uint32_t h = 2166136261u;
    while (*s)
        h = (h ^ (unsigned char)*s++) * 16777619u;
    return h ? h : 1;
}

wu_map *wu_map_new(void)
{
    wu_map *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    m->cap = 8; /* small: every execution has two (exec.h) */
    m->slots = calloc(m->cap, sizeof *m->slots);
    if (!m->slots) {
        free(m);
        return NULL;
    }
    return m;
}

wu_map *wu_map_new_borrowing(void)
{
    wu_map *m = wu_map_new();
    if (m) m->borrowing = 1;
    return m;
}

void wu_map_free(wu_map *m)
{
    size_t i;
    if (!m) return;
    for (i = 0; i < m->cap && !m->borrowing; i++)
        free(m->slots[i].key);
    free(m->slots);
    free(m);
}

static size_t map_find(const wu_map *m, const char *key, uint32_t h)
{
    size_t i = h & (m->cap - 1);
    while (m->slots[i].key && (m->slots[i].hash != h || strcmp(m->slots[i].key, key)))
        i = (i + 1) & (m->cap - 1);
    return i;
}

int wu_map_reserve(wu_map *m, size_t n)
{
    wu_map grown = {0};
    size_t j;
    if ((m->count + n) * 4 <= m->cap * 3) return 0;
    grown.cap = m->cap * 2;
    while ((m->count + n) * 4 > grown.cap * 3)
        grown.cap *= 2;
    grown.slots = calloc(grown.cap, sizeof *grown.slots);
    if (!grown.slots) return WEFT_ENOMEM;
    for (j = 0; j < m->cap; j++)
        if (m->slots[j].key)
            grown.slots[map_find(&grown, m->slots[j].key, m->slots[j].hash)] = m->slots[j];
    free(m->slots);
    m->slots = grown.slots;
    m->cap = grown.cap;
    return 0;
}

int wu_map_put(wu_map *m, const char *key, void *val)
{
    uint32_t h = hash_str(key);
    size_t i;
    if (wu_map_reserve(m, 1)) return WEFT_ENOMEM;
    i = map_find(m, key, h);
    if (!m->slots[i].key) {
        m->slots[i].key = m->borrowing ? (char *)key : strdup(key);
        if (!m->slots[i].key) return WEFT_ENOMEM;
        m->slots[i].hash = h;
        m->count++;
    }
    m->slots[i].val = val;
    return 0;
}

void *wu_map_get(const wu_map *m, const char *key)
{
    size_t i;
    if (!m || !key) return NULL;
    i = map_find(m, key, hash_str(key));
    return m->slots[i].key ? m->slots[i].val : NULL;
}

size_t wu_map_count(const wu_map *m)
{
    return m ? m->count : 0;
}

int wu_grow_to(void *array, size_t *cap, size_t len, size_t n, size_t size)
{
    size_t c = *cap ? *cap : 8;
    void *items;
    if (len + n <= *cap) return 0;
    while (c < len + n)
        c *= 2;
    memcpy(&items, array, sizeof items);
    if (!(items = realloc(items, c * size))) return WEFT_ENOMEM;
    memcpy(array, &items, sizeof items);
    *cap = c;
    return 0;
}

int wu_vec_reserve(wu_vec *v, size_t n)
{
    return wu_grow(&v->items, &v->cap, v->len, n, sizeof *v->items);
}

int wu_vec_push(wu_vec *v, void *item)
{
    if (wu_vec_reserve(v, 1)) return WEFT_ENOMEM;
    v->items[v->len++] = item;
    return 0;
}

void wu_vec_free(wu_vec *v)
{
    free(v->items);
    v->items = NULL;
    v->len = v->cap = 0;
}

int wu_buf_add(wu_buf *b, const char *s, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = (b->len + n + 1) * 2;
        char *d = realloc(b->data, cap);
        if (!d) return WEFT_ENOMEM;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
    return 0;
}

size_t wu_utf8_seq(const unsigned char *p, size_t n)
{
    unsigned char lo = 0x80, hi = 0xbf;
    size_t len, i;
    if (p[0] < 0x80) return 1;
    if (p[0] >= 0xc2 && p[0] <= 0xdf)
        len = 2;
    else if (p[0] >= 0xe0 && p[0] <= 0xef)
        len = 3;
    else if (p[0] >= 0xf0 && p[0] <= 0xf4)
        len = 4;
    else
        return 0;
    if (p[0] == 0xe0) lo = 0xa0; /* overlong */
    if (p[0] == 0xed) hi = 0x9f; /* surrogates */
    if (p[0] == 0xf0) lo = 0x90; /* overlong */
    if (p[0] == 0xf4) hi = 0x8f; /* past U+10FFFF */
    if (n < len || p[1] < lo || p[1] > hi) return 0;
    for (i = 2; i < len; i++)
        if (p[i] < 0x80 || p[i] > 0xbf) return 0;
    return len;
}

size_t wu_utf8_len(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t out = 0, k;
    while (n) {
        /* ASCII runs without a call */
        if (*p < 0x80) {
            p++, n--, out++;
            continue;
        }
        k = wu_utf8_seq(p, n);
        out += k ? k : 4;
        k = k ? k : 1;
        p += k;
        n -= k;
    }
    return out;
}

size_t wu_utf8_copy(char *out, size_t cap, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t o = 0, k;
    if (!cap) return 0;
    while (n) {
        if ((k = wu_utf8_seq(p, n)) != 0) {
            if (o + k >= cap) break;
            memcpy(out + o, p, k);
            o += k;
        } else {
            if (o + 4 >= cap) break;
            snprintf(out + o, cap - o, "\\x%02x", *p);
            o += 4;
            k = 1;
        }
        p += k;
        n -= k;
    }
    out[o] = 0;
    return o;
}

int wu_buf_add_json_str(wu_buf *b, const char *s)
{
    return wu_buf_add_json_strn(b, s, strlen(s));
}

int wu_buf_add_json_strn(wu_buf *b, const char *s, size_t len)
{
    static const char hex[] = "0123456789abcdef";
    const char *run = s, *end = s + len;
    int rc = wu_buf_add(b, "\"", 1);
    for (; s < end && !rc; s++) {
        unsigned char c = (unsigned char)*s;
        char esc[7] = "\\";
        size_t n = 2;
        if (c >= 0x20 && c != '"' && c != '\\' && c != '/') continue;
        rc = wu_buf_add(b, run, (size_t)(s - run));
        run = s + 1;
        switch (c) {
        case '\b':
            esc[1] = 'b';
            break;
        case '\f':
            esc[1] = 'f';
            break;
        case '\n':
            esc[1] = 'n';
            break;
        case '\r':
            esc[1] = 'r';
            break;
        case '\t':
            esc[1] = 't';
            break;
        case '"':
        case '\\':
        case '/':
            esc[1] = (char)c;
            break;
        default:
            memcpy(esc + 1, "u00", 3);
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            n = 6;
        }
        if (!rc) rc = wu_buf_add(b, esc, n);
    }
    if (!rc) rc = wu_buf_add(b, run, (size_t)(s - run));
    if (!rc) rc = wu_buf_add(b, "\"", 1);
    return rc;
}

void wu_buf_free(wu_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}
