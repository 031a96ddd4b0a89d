/* Small shared helpers: errors, time, ids, durations, a string map. Prefix wu_. */
#ifndef WEFT_UTIL_H
#define WEFT_UTIL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>
#include "weft/plugin.h"

#define WEFT_HIDDEN __attribute__((visibility("hidden")))

/* Set err (may be NULL) to code and a printf-style message; returns code. */
int wu_err(weft_error *err, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
int wu_verr(weft_error *err, int code, const char *fmt, va_list ap);
/*
 * head then tail into buf (size bytes). When they do not fit, the end of
 * tail is kept, after "... ": reasons that nest one level per parent
 * workflow keep their innermost cause. tail may be NULL.
 */
void wu_join_tail(char *buf, size_t size, const char *head, const char *tail);

/* Prefix err->msg with a printf-style context ("order.lua: "); returns err->code. */
int wu_err_prefix(weft_error *err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* An empty err, without zeroing its message buffer (= {0} costs that on
 * paths taken for every task). */
static inline void wu_err_clear(weft_error *err)
{
    err->code = 0;
    err->msg[0] = 0;
}

/* The next element of the comma-separated list at *p (NULL: done), spaces
 * around it trimmed, into *item and *len (it may be empty); *p moves past
 * it. 0 when the list is done. */
int wu_list_next(const char **p, const char **item, size_t *len);

/* Wall-clock ms since the epoch; monotonic ms for intervals. */
int64_t wu_now_ms(void);
int64_t wu_mono_ms(void);

/* A random version-4 UUID string into buf (at least 37 bytes). */
void wu_uuid(char buf[37]);

/*
 * Task ids carry their workflow's: "<workflow id>.<16 random hex digits>",
 * so a task is found from its id alone (GET /api/tasks/{id}) with no map to
 * keep. WU_TASK_ID_MAX holds one with a workflow id of up to 36 bytes.
 */
#define WU_TASK_ID_MAX 64
void wu_task_id(char buf[WU_TASK_ID_MAX], const char *workflow_id);
/* The workflow id a task id carries into wf (a task id of another form:
 * WEFT_EINVAL naming it). */
int wu_task_workflow(const char *task_id, char wf[WU_TASK_ID_MAX], weft_error *err);

/*
 * Parse a duration: "250ms", "5s", "2m", "1h", "1d", or a plain number of
 * seconds (JSON number or numeric string). NULL/json null -> WEFT_EINVAL.
 */
int wu_parse_duration(json_object *v, int64_t *ms, weft_error *err);
int wu_parse_duration_str(const char *s, int64_t *ms, weft_error *err);
/* ms as people read it, into buf: 120ms, 1.4s, 2m03s, 1h05m, 2d03h. */
void wu_duration_text(char *buf, size_t n, int64_t ms);

/* Read a whole file (NUL-terminated; *len excludes the NUL). Caller frees. */
int wu_read_file(const char *path, char **buf, size_t *len, weft_error *err);

/* Parse JSON text with a clear error ("<what>: line 3: unexpected ..."),
 * nesting under 32 levels (json-c's default), its numbers finite (json-c
 * would take NaN and Infinity, which JSON has not): what clients and files
 * send. */
int wu_parse_json(const char *what, const char *text, json_object **out, weft_error *err);

/* wu_parse_json for what weft wrote itself (an execution's document, its
 * payloads), nesting up to WU_JSON_STORED_DEPTH levels: a value that comes
 * back from a LAMBDA may nest 200 (lua/json.c), more again inside the
 * document that holds it. */
#define WU_JSON_STORED_DEPTH 512
int wu_parse_json_stored(const char *what, const char *text, json_object **out, weft_error *err);

/* A string -> pointer hash map (open addressing). Keys are copied. */
typedef struct wu_map wu_map;
wu_map *wu_map_new(void);
/* A map that keeps the key pointers it is given instead of copies: each key
 * must stay valid and unchanged while the map lives (replacing a value keeps
 * the first key). Saves a copy per key where keys live in the values. */
wu_map *wu_map_new_borrowing(void);
void wu_map_free(wu_map *m);
/* Insert or replace; returns 0 or WEFT_ENOMEM. */
int wu_map_put(wu_map *m, const char *key, void *val);
/* Make room for n more keys: the next n puts cannot fail (in a borrowing
 * map). Returns 0 or WEFT_ENOMEM. */
int wu_map_reserve(wu_map *m, size_t n);
void *wu_map_get(const wu_map *m, const char *key);
size_t wu_map_count(const wu_map *m);

/* A growable byte buffer. */
typedef struct wu_buf {
    char *data;
    size_t len, cap;
} wu_buf;
int wu_buf_add(wu_buf *b, const char *s, size_t n);

/*
 * UTF-8. weft's one rule for text that is not valid UTF-8 (a Lua string, an
 * HTTP body, a plugin's output): each byte that is not part of a valid
 * sequence (no overlong forms, no surrogates, nothing past U+10FFFF) is
 * written as the four characters \xNN, so every string weft stores and
 * serves is valid UTF-8 and still shows what the bytes were.
 */
/* The length of the valid sequence at p (n > 0 bytes left), or 0. */
size_t wu_utf8_seq(const unsigned char *p, size_t n);
/* How long s (n bytes) is written by the rule: n when it is valid. */
size_t wu_utf8_len(const char *s, size_t n);
/* s (n bytes) by the rule into out (cap bytes, NUL-terminated, cut at a
 * whole sequence when it does not fit); returns the bytes written. */
size_t wu_utf8_copy(char *out, size_t cap, const char *s, size_t n);
/* s as a JSON string, as json-c writes it: \" \\ \/ \b \f \n \r \t, other
 * control characters as \u00xx. 0 or WEFT_ENOMEM. */
int wu_buf_add_json_str(wu_buf *b, const char *s);
/* The same for len bytes, which may hold NUL (written \u0000). */
int wu_buf_add_json_strn(wu_buf *b, const char *s, size_t len);
void wu_buf_free(wu_buf *b);

/* Room in a growable array for n more elements: *array (the address of a
 * pointer to *cap elements of size bytes, len of them in use) doubles
 * until they fit. 0, or WEFT_ENOMEM with nothing changed. */
int wu_grow_to(void *array, size_t *cap, size_t len, size_t n, size_t size);
static inline int wu_grow(void *array, size_t *cap, size_t len, size_t n, size_t size)
{
    return len + n <= *cap ? 0 : wu_grow_to(array, cap, len, n, size); /* most calls: room */
}

/* A growable pointer array. */
typedef struct wu_vec {
    void **items;
    size_t len, cap;
} wu_vec;
int wu_vec_push(wu_vec *v, void *item);
/* Room for n more items: the next n pushes cannot fail. 0 or WEFT_ENOMEM. */
int wu_vec_reserve(wu_vec *v, size_t n);
void wu_vec_free(wu_vec *v);

#endif
