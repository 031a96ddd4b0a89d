#include "base/log.h"

#include <pthread.h>
#include <string.h>
#include <time.h>

#include "base/util.h"

#define LG_MSG_MAX 2048  /* a message longer than this is cut */
#define LG_LINE_MAX 4096 /* a whole line, with its time, node and fields */

static const char *const level_names[] = {"error", "warn", "info", "debug"};

static int threshold = WEFT_LOG_INFO;
static char node[128]; /* empty: the command line's format */
static int json;       /* a daemon's lines as JSON */
static FILE *output;   /* NULL: stderr */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

void lg_set_level(int level)
{
    __atomic_store_n(&threshold, level, __ATOMIC_RELAXED);
}

int lg_level(void)
{
    return __atomic_load_n(&threshold, __ATOMIC_RELAXED);
}

int lg_set_level_name(const char *name, weft_error *err)
{
    int i;
    for (i = 0; i <= WEFT_LOG_DEBUG; i++)
        if (!strcmp(name ? name : "info", level_names[i])) {
            lg_set_level(i);
            return 0;
        }
    return wu_err(err, WEFT_EINVAL, "log_level '%s' (use error, warn, info or debug)", name);
}

const char *lg_level_name(int level)
{
    return level_names[level < 0 || level > WEFT_LOG_DEBUG ? WEFT_LOG_ERROR : level];
}

void lg_set_node(const char *id)
{
    pthread_mutex_lock(&mu);
    snprintf(node, sizeof node, "%s", id ? id : "");
    pthread_mutex_unlock(&mu);
}

void lg_set_json(int on)
{
    pthread_mutex_lock(&mu);
    json = on;
    pthread_mutex_unlock(&mu);
}

void lg_set_output(FILE *f)
{
    pthread_mutex_lock(&mu);
    output = f;
    pthread_mutex_unlock(&mu);
}

/* Append printf-style to buf at *used, never past size. */
__attribute__((format(printf, 4, 5))) static void add(char *buf, size_t size, size_t *used,
                                                      const char *fmt, ...)
{
    va_list ap;
    int n;
    if (*used >= size - 1) return;
    va_start(ap, fmt);
    n = vsnprintf(buf + *used, size - *used, fmt, ap);
    va_end(ap);
    *used = n < 0 ? *used : *used + (size_t)n >= size ? size - 1 : *used + (size_t)n;
}

/* Append s to buf at *used, never past size (add without a format: a log
 * line is made of these, one per field and quote). */
static void put(char *buf, size_t size, size_t *used, const char *s)
{
    size_t n = strlen(s);
    if (*used >= size - 1) return;
    if (n > size - 1 - *used) n = size - 1 - *used;
    memcpy(buf + *used, s, n);
    *used += n;
    buf[*used] = 0;
}

/* msg with quotes as ' and no newlines: either would break the line format. */
static void add_quoted(char *buf, size_t size, size_t *used, const char *msg)
{
    put(buf, size, used, "\"");
    for (; *msg && *used < size - 1; msg++)
        if (*msg != '\n') buf[(*used)++] = *msg == '"' ? '\'' : *msg;
    buf[*used] = 0;
    put(buf, size, used, "\"");
}

/* f is written: a number, or a text that is not NULL. */
static int present(const lg_field *f)
{
    return f->is_int || f->value;
}

/* key=value, a text quoted when it holds a space, a quote or '=' (a number
 * never does). */
static void add_field(char *buf, size_t size, size_t *used, const lg_field *f)
{
    put(buf, size, used, " ");
    put(buf, size, used, f->key);
    put(buf, size, used, "=");
    if (f->is_int)
        add(buf, size, used, "%lld", (long long)f->num);
    else if (f->value[strcspn(f->value, " \"=\n")] || !*f->value)
        add_quoted(buf, size, used, f->value);
    else
        put(buf, size, used, f->value);
}

/* The length of the well-formed UTF-8 character at s (1-4), or 0. */
static size_t utf8_len(const unsigned char *s)
{
    size_t i, n = s[0] < 0x80                    ? 1
                  : s[0] >= 0xC2 && s[0] <= 0xDF ? 2
                  : s[0] >= 0xE0 && s[0] <= 0xEF ? 3
                  : s[0] >= 0xF0 && s[0] <= 0xF4 ? 4
                                                 : 0;
    /* no overlong forms, no surrogates, nothing past U+10FFFF */
    unsigned char lo = s[0] == 0xE0 ? 0xA0 : s[0] == 0xF0 ? 0x90 : 0x80;
    unsigned char hi = s[0] == 0xED ? 0x9F : s[0] == 0xF4 ? 0x8F : 0xBF;
    for (i = 1; i < n; i++)
        if (s[i] < (i == 1 ? lo : 0x80) || s[i] > (i == 1 ? hi : 0xBF)) return 0;
    return n;
}

/* s as a JSON string, quotes included; cut where the buffer ends (closed).
 * Bytes that are not UTF-8 (a worker's result may hold any) become U+FFFD. */
static void add_json(char *buf, size_t size, size_t *used, const char *s)
{
    add(buf, size, used, "\"");
    while (*s && *used + 8 < size) {
        unsigned char c = (unsigned char)*s;
        size_t n = utf8_len((const unsigned char *)s);
        if (c == '"' || c == '\\')
            add(buf, size, used, "\\%c", c);
        else if (c == '\n')
            add(buf, size, used, "\\n");
        else if (c < 0x20)
            add(buf, size, used, "\\u%04x", c);
        else if (!n)
            add(buf, size, used, "\\ufffd");
        else {
            memcpy(buf + *used, s, n);
            *used += n;
            s += n;
            continue;
        }
        s++;
    }
    buf[*used] = 0;
    add(buf, size, used, "\"");
}

size_t lg_format(char *buf, size_t size, int level, const lg_field *fields, const char *msg,
                 int64_t ts_ms)
{
    const lg_field *f;
    size_t used = 0;
    char ts[32];
    time_t sec;
    struct tm tm;
    if (!size) return 0;
    buf[0] = 0;
    if (!node[0]) {
        /* the command line's: "weft: <plugin>: <level>: msg" */
        add(buf, size, &used, "weft: ");
        for (f = fields; f && f->key; f++)
            if (f->is_int)
                add(buf, size, &used, "%lld: ", (long long)f->num);
            else if (f->value)
                add(buf, size, &used, "%s: ", f->value);
        add(buf, size, &used, "%s: %s", lg_level_name(level), msg);
        return used;
    }
    sec = (time_t)(ts_ms / 1000);
    gmtime_r(&sec, &tm);
    strftime(ts, sizeof ts, "%Y-%m-%dT%H:%M:%S", &tm);
    if (json) {
        /* (the message last: what a cut takes; the line stays an object) */
        if (size < 64) return used;
        size -= 2;
        add(buf, size, &used, "{\"ts\":\"%s.%03dZ\",\"level\":\"%s\",\"node\":", ts,
            (int)(ts_ms % 1000), lg_level_name(level));
        add_json(buf, size, &used, node);
        for (f = fields; f && f->key; f++)
            if (present(f)) {
                add(buf, size, &used, ",");
                add_json(buf, size, &used, f->key);
                add(buf, size, &used, ":");
                if (f->is_int)
                    add(buf, size, &used, "%lld", (long long)f->num);
                else
                    add_json(buf, size, &used, f->value);
            }
        add(buf, size, &used, ",\"msg\":");
        add_json(buf, size, &used, msg);
        size += 2;
        add(buf, size, &used, "}");
        return used;
    }
    add(buf, size, &used, "ts=%s.%03dZ level=%s node=%s", ts, (int)(ts_ms % 1000),
        lg_level_name(level), node);
    for (f = fields; f && f->key; f++)
        if (present(f)) add_field(buf, size, &used, f);
    put(buf, size, &used, " msg=");
    add_quoted(buf, size, &used, msg);
    return used;
}

void lg_vlog(int level, const lg_field *fields, const char *fmt, va_list ap)
{
    char msg[LG_MSG_MAX], line[LG_LINE_MAX];
    FILE *out;
    if (level > lg_level()) return;
    vsnprintf(msg, sizeof msg, fmt, ap);
    pthread_mutex_lock(&mu);
    lg_format(line, sizeof line, level, fields, msg, wu_now_ms());
    out = output ? output : stderr;
    fprintf(out, "%s\n", line);
    fflush(out);
    pthread_mutex_unlock(&mu);
}

void lg_log(int level, const lg_field *fields, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    lg_vlog(level, fields, fmt, ap);
    va_end(ap);
}

void lg_say(int level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    lg_vlog(level, NULL, fmt, ap);
    va_end(ap);
}

void lg_hook(void *ud, int level, const lg_field *fields, const char *msg)
{
    (void)ud;
    lg_log(level, fields, "%s", msg);
}
