/*
 * What the fuzz targets share: the entry point, the invariant check, the
 * input as a C string, a strict JSON checker, and task types for the
 * targets that compile definitions. Header-only; each target defines FUZZ_NAME before including
 * it.
 */
#ifndef WEFT_TESTS_FUZZ_H
#define WEFT_TESTS_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft/plugin.h"
#include "base/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Bigger inputs add nothing but time. */
#define FUZZ_MAX_INPUT 65536

/* abort() with "<target>: invariant broken: what" when ok is false, so that
 * the fuzzer (and replay.sh) reports it. */
static __attribute__((unused)) void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "%s: invariant broken: %s\n", FUZZ_NAME, what);
        abort();
    }
}

/* WEFT_FUZZ_VERBOSE=1: print what each input did (handy when adding seeds). */
static __attribute__((unused)) int fuzz_verbose(void)
{
    static int on = -1;
    if (on < 0) on = getenv("WEFT_FUZZ_VERBOSE") != NULL;
    return on;
}

/* data (size bytes) and a NUL after them, malloc'd. */
static __attribute__((unused)) char *fuzz_text(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    check(text != NULL, "malloc");
    if (size) memcpy(text, data, size);
    text[size] = 0;
    return text;
}

/* The end of the JSON value at p (n bytes left), or NULL when it is none:
 * RFC 8259's grammar (no NaN, Infinity, comments, single quotes or trailing
 * commas), strings of valid UTF-8 and no control characters; depth levels
 * at most. */
static const char *fuzz_json_value(const char *p, const char *end, int depth);

static const char *fuzz_json_ws(const char *p, const char *end)
{
    while (p < end && (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r'))
        p++;
    return p;
}

static const char *fuzz_json_string(const char *p, const char *end)
{
    if (p >= end || *p++ != '"') return NULL;
    while (p < end && *p != '"') {
        unsigned char ch = (unsigned char)*p;
        size_t k;
        if (ch < 0x20) return NULL;
        if (ch == '\\') {
            int i;
            if (++p >= end) return NULL;
            if (*p == 'u') {
                for (i = 1; i <= 4; i++)
                    if (p + i >= end || !strchr("0123456789abcdefABCDEF", p[i]) || !p[i])
                        return NULL;
                p += 5;
            } else if (*p && strchr("\"\\/bfnrt", *p)) {
                p++;
            } else {
                return NULL;
            }
            continue;
        }
        if (!(k = wu_utf8_seq((const unsigned char *)p, (size_t)(end - p)))) return NULL;
        p += k;
    }
    return p < end ? p + 1 : NULL;
}

static const char *fuzz_json_number(const char *p, const char *end)
{
    const char *start;
    if (p < end && *p == '-') p++;
    if (p < end && *p == '0')
        p++;
    else if (p < end && *p >= '1' && *p <= '9')
        while (p < end && *p >= '0' && *p <= '9')
            p++;
    else
        return NULL;
    if (p < end && *p == '.') {
        start = ++p;
        while (p < end && *p >= '0' && *p <= '9')
            p++;
        if (p == start) return NULL;
    }
    if (p < end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < end && (*p == '+' || *p == '-')) p++;
        start = p;
        while (p < end && *p >= '0' && *p <= '9')
            p++;
        if (p == start) return NULL;
    }
    return p;
}

static const char *fuzz_json_value(const char *p, const char *end, int depth)
{
    char close;
    p = fuzz_json_ws(p, end);
    if (p >= end || depth < 0) return NULL;
    switch (*p) {
    case '"':
        return fuzz_json_string(p, end);
    case '{':
    case '[':
        close = *p == '{' ? '}' : ']';
        p = fuzz_json_ws(p + 1, end);
        if (p < end && *p == close) return p + 1;
        for (;;) {
            if (close == '}') {
                if (!(p = fuzz_json_string(fuzz_json_ws(p, end), end))) return NULL;
                p = fuzz_json_ws(p, end);
                if (p >= end || *p++ != ':') return NULL;
            }
            if (!(p = fuzz_json_value(p, end, depth - 1))) return NULL;
            p = fuzz_json_ws(p, end);
            if (p < end && *p == close) return p + 1;
            if (p >= end || *p++ != ',') return NULL;
        }
    case 't':
        return end - p >= 4 && !memcmp(p, "true", 4) ? p + 4 : NULL;
    case 'f':
        return end - p >= 5 && !memcmp(p, "false", 5) ? p + 5 : NULL;
    case 'n':
        return end - p >= 4 && !memcmp(p, "null", 4) ? p + 4 : NULL;
    default:
        return fuzz_json_number(p, end);
    }
}

/* Whether text (n bytes) is one JSON value (RFC 8259, UTF-8), white space
 * around it allowed. */
static __attribute__((unused)) int fuzz_json_valid(const char *text, size_t n)
{
    const char *end = text + n, *p = fuzz_json_value(text, end, 10000);
    return p && fuzz_json_ws(p, end) == end;
}

static __attribute__((unused)) int fuzz_execute(weft_ctx *task, weft_result *r)
{
    r->status = WEFT_TASK_COMPLETED;
    return 0;
}

static __attribute__((unused)) int fuzz_map(weft_ctx *task, json_object *def, json_object *out,
                                            weft_result *r)
{
    r->status = WEFT_TASK_COMPLETED;
    return 0;
}

/* Like a plugin's validate: uses the host table on a field of the task. */
static __attribute__((unused)) int fuzz_validate(const weft_host *host, json_object *def,
                                                 weft_error *err)
{
    json_object *v;
    weft_error why;
    int64_t ms;
    if (json_object_object_get_ex(def, "duration", &v) && host->parse_duration(v, &ms, &why))
        return host->error(err, WEFT_EINVAL, "duration: %s", why.msg);
    if (json_object_object_get_ex(def, "forbidden", NULL))
        return host->error(err, WEFT_EINVAL, "field 'forbidden' is not allowed");
    return 0;
}

/* The task types of the plugins weft ships, as stubs (SIMPLE external, as
 * plugins/simple's: queued by the task's name), and CHECKED (a validate
 * that uses the host table). */
static const weft_task_type fuzz_types[] __attribute__((unused)) = {
    WEFT_TASK_TYPE(.name = "SIMPLE", .flags = WEFT_TASK_EXTERNAL),
    WEFT_TASK_TYPE(.name = "LAMBDA", .execute = fuzz_execute),
    WEFT_TASK_TYPE(.name = "HTTP", .execute = fuzz_execute),
    WEFT_TASK_TYPE(.name = "DECISION", .map = fuzz_map),
    WEFT_TASK_TYPE(.name = "SWITCH", .map = fuzz_map),
    WEFT_TASK_TYPE(.name = "FORK_JOIN", .map = fuzz_map),
    WEFT_TASK_TYPE(.name = "FORK_JOIN_DYNAMIC", .map = fuzz_map),
    WEFT_TASK_TYPE(.name = "JOIN", .map = fuzz_map),
    WEFT_TASK_TYPE(.name = "DO_WHILE", .map = fuzz_map),
    WEFT_TASK_TYPE(.name = "SET_VARIABLE", .map = fuzz_map),
    WEFT_TASK_TYPE(.name = "TERMINATE", .map = fuzz_map),
    WEFT_TASK_TYPE(.name = "SUB_WORKFLOW", .execute = fuzz_execute),
    WEFT_TASK_TYPE(.name = "WAIT", .validate = fuzz_validate, .execute = fuzz_execute),
    WEFT_TASK_TYPE(.name = "CHECKED", .validate = fuzz_validate, .execute = fuzz_execute),
};

/* Their names, as def_env.known lists them. */
#define FUZZ_TYPE_NAMES                                                                            \
    "SIMPLE, LAMBDA, HTTP, DECISION, SWITCH, FORK_JOIN, FORK_JOIN_DYNAMIC, JOIN, DO_WHILE, "       \
    "SET_VARIABLE, TERMINATE, SUB_WORKFLOW, WAIT, CHECKED"

/* A def_env resolver over fuzz_types. */
static __attribute__((unused)) const weft_task_type *fuzz_find_type(void *ud, const char *name)
{
    size_t i;
    for (i = 0; i < sizeof fuzz_types / sizeof fuzz_types[0]; i++)
        if (!strcmp(fuzz_types[i].name, name)) return &fuzz_types[i];
    return NULL;
}

#endif
