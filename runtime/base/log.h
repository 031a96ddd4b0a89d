/*
 * The process's one logger: a level threshold, one line per call on stderr.
 * A daemon (lg_set_node) writes
 *     ts=2026-01-02T03:04:05.678Z level=info node=<id> plugin=<name> msg="..."
 * (fields between node and msg, in order; quotes in msg become ', newlines
 * go); the weft command line, with no node, writes
 *     weft: <name>: info: ...
 * Plugins' lines (host->log), weftd and its REST API all log through it, so
 * one threshold filters them all. Thread-safe. Prefix lg_.
 */
#ifndef WEFT_LOG_H
#define WEFT_LOG_H

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>

#include "weft/plugin.h"

/* A named value of a line, typed where it is made: text (LG_STR("plugin",
 * name); a NULL text is left out) or a whole number (LG_INT("status", 200):
 * written bare, a JSON number with log_format = json). */
typedef struct lg_field {
    const char *key;
    const char *value; /* the text; unused when is_int */
    int is_int;        /* the value is num */
    int64_t num;
} lg_field;

#define LG_STR(k, v)                                                                               \
    {                                                                                              \
        .key = (k), .value = (v)                                                                   \
    }
#define LG_INT(k, n)                                                                               \
    {                                                                                              \
        .key = (k), .is_int = 1, .num = (n)                                                        \
    }

/* A field list for lg_log, ended for you: LG_FIELDS(LG_STR("plugin", name)). */
#define LG_FIELDS(...) ((const lg_field[]){__VA_ARGS__, {.key = NULL}})

/* Lines above level (WEFT_LOG_ERROR .. WEFT_LOG_DEBUG) are dropped; info by default. */
void lg_set_level(int level);
int lg_level(void);

/* Set the threshold by name ("error", "warn", "info" or "debug"; NULL: info).
 * WEFT_EINVAL naming the value otherwise, and the level is left as it was. */
int lg_set_level_name(const char *name, weft_error *err);

/* The name of a level; an out-of-range one is "error". Static storage. */
const char *lg_level_name(int level);

/* Lines are a daemon's, from node id (copied; NULL: back to the command
 * line's format). */
void lg_set_node(const char *id);

/* A daemon's lines as JSON objects, one a line ({"ts":...,"level":...,
 * "node":..., the fields ..., "msg":...}), or (0) as logfmt. */
void lg_set_json(int on);

/* Where lines go (borrowed; NULL: stderr). For tests. */
void lg_set_output(FILE *f);

/*
 * Format one line, without its newline, into buf (size bytes; cut to fit):
 * level (out of range: error), fields (ended by a NULL key; NULL: none), msg,
 * at wall-clock time ts_ms. Returns the length written.
 */
size_t lg_format(char *buf, size_t size, int level, const lg_field *fields, const char *msg,
                 int64_t ts_ms);

/* Log a printf-style message with fields (see lg_format), if level passes. */
void lg_log(int level, const lg_field *fields, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void lg_vlog(int level, const lg_field *fields, const char *fmt, va_list ap);

/* lg_log without fields. */
void lg_say(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* A ready message and its fields (NULL: none), for log hooks of the shape
 * (ud, level, fields, msg) such as the REST API's ap_config.log; ud is unused. */
void lg_hook(void *ud, int level, const lg_field *fields, const char *msg);

#endif
