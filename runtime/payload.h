/*
 * External payload storage: task inputs/outputs and workflow inputs/outputs
 * above a soft limit are kept outside the execution and referenced from it;
 * above a hard limit they are refused with both sizes named. Prefix ps_.
 *
 * The store is a small interface; the one shipped keeps each payload as a
 * file in a directory (shared between hosts when daemons run on several).
 */
#ifndef WEFT_PAYLOAD_H
#define WEFT_PAYLOAD_H

#include <stddef.h>
#include <json-c/json.h>
#include "weft/plugin.h"

typedef struct ps_ops {
    /* Keep data under a new reference (copied to ref, NUL-terminated). */
    int (*put)(void *ud, const char *name, const char *data, size_t len, char *ref,
               size_t ref_size, weft_error *err);
    /* The data behind a reference (*data malloc'd, NUL-terminated). */
    int (*get)(void *ud, const char *ref, char **data, size_t *len, weft_error *err);
    void (*close)(void *ud);
} ps_ops;

typedef struct ps_store {
    const ps_ops *ops;
    void *ud;
    size_t soft; /* bytes: above this, a payload is stored outside */
    size_t hard; /* bytes: above this, it is refused */
} ps_store;

/* Defaults: payloads over 128 KiB go outside, over 16 MiB are refused. */
#define PS_DEFAULT_SOFT (128u * 1024u)
#define PS_DEFAULT_HARD (16u * 1024u * 1024u)

/*
 * The store every weft process of one deployment must agree on: the
 * directory $WEFT_PAYLOAD_DIR (default "$TMPDIR/weft-payloads"; shared
 * storage when daemons run on several hosts), limits from
 * $WEFT_PAYLOAD_SOFT / $WEFT_PAYLOAD_HARD (bytes) or the defaults.
 */
int ps_open_env(ps_store **out, weft_error *err);

/* A store keeping payloads as files under dir (created if missing). */
int ps_dir_open(const char *dir, size_t soft, size_t hard, ps_store **out, weft_error *err);
void ps_close(ps_store *s);

/*
 * Check a payload (what names it in messages: "output of task 'fetch'").
 * Returns 0 with *ref NULL when it stays inline, 0 with *ref (malloc'd) when
 * it was stored outside, or WEFT_ELIMIT: "output of task 'fetch' is 20 MiB,
 * over the hard limit of 16 MiB".
 */
int ps_keep(ps_store *s, const char *name, const char *what, json_object *v, char **ref,
            weft_error *err);

/* Only the hard limit (before a result is accepted); s may be NULL. */
int ps_guard(const ps_store *s, const char *what, json_object *v, weft_error *err);

/* The payload behind a reference, parsed (caller owns). */
int ps_load(ps_store *s, const char *ref, json_object **out, weft_error *err);

/* A reference object as stored in a document: { "$payload": ref }. */
json_object *ps_ref_object(const char *ref);
/* The reference in such an object, or NULL when v is not one. */
const char *ps_ref_of(json_object *v);

#endif
