/*
 * External payload storage: task inputs/outputs and workflow inputs/outputs
 * above a soft limit are kept outside the execution and referenced from it;
 * above a hard limit they are refused with both sizes named. Prefix ps_.
 *
 * A reference is a name this module makes, never a path:
 * "<workflow id>.<sha256 of the bytes>.json". The execution document keeps
 * it in a field of its own (codec.c: inputRef/outputRef next to
 * input/output), where client JSON cannot put it, and ps_load resolves only
 * such names, of the workflow that loads them, inside the store. The name
 * tells the content, so keeping the same payload again writes nothing; it
 * tells the workflow, so a sweep can remove the files of executions that no
 * longer exist (ps_sweep).
 *
 * The store is a small interface; the one shipped keeps each payload as a
 * file in a directory (shared between hosts when daemons run on several).
 */
#ifndef WEFT_PAYLOAD_H
#define WEFT_PAYLOAD_H

#include <stddef.h>
#include <stdint.h>
#include <json-c/json.h>
#include "weft/plugin.h"

/*
 * Which of ids[0..n) name executions that still exist: alive[i] = 1 or 0.
 * Returns 0, or a WEFT_E* code (then the sweep removes nothing).
 */
typedef int (*ps_alive_fn)(void *ud, const char *const *ids, size_t n, int *alive, weft_error *err);

typedef struct ps_ops {
    /* Keep data under name (checked by the caller: a name ps_keep made).
     * When that name is kept already, the bytes are the same: nothing to
     * write. */
    int (*put)(void *ud, const char *name, const char *data, size_t len, weft_error *err);
    /* The data behind a name (*data malloc'd, NUL-terminated). */
    int (*get)(void *ud, const char *name, char **data, size_t *len, weft_error *err);
    /* One step of ps_sweep (same contract); NULL: this store keeps everything. */
    int (*sweep)(void *ud, int64_t grace_ms, size_t max, ps_alive_fn alive, void *alive_ud,
                 size_t *removed, weft_error *err);
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

/* Longest workflow id a payload name can carry. */
#define PS_OWNER_MAX 63

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
 * Check a payload of workflow `owner` (what names it in messages: "output
 * of task 'fetch'"). Returns 0 with *ref NULL when it stays inline, 0 with
 * *ref (malloc'd) when it was stored outside, or WEFT_ELIMIT: "output of
 * task 'fetch' is 20 MiB, over the hard limit of 16 MiB"; WEFT_EINVAL when
 * owner cannot name a payload (over PS_OWNER_MAX, or not [A-Za-z0-9_-]).
 */
int ps_keep(ps_store *s, const char *owner, const char *what, json_object *v, char **ref,
            weft_error *err);

/* Only the hard limit (before a result is accepted); s may be NULL. */
int ps_guard(const ps_store *s, const char *what, json_object *v, weft_error *err);

/*
 * 0 when ref is a name ps_keep makes for workflow `owner`; else WEFT_EINVAL
 * with a message naming the reference and the workflow (never a path
 * looked at: nothing is read to decide).
 */
int ps_ref_check(const char *owner, const char *ref, weft_error *err);

/* The payload behind a reference of workflow `owner`, parsed (caller
 * owns). Anything ps_ref_check refuses is refused before the store is
 * asked. */
int ps_load(ps_store *s, const char *owner, const char *ref, json_object **out, weft_error *err);

/*
 * One step of a sweep: look at up to max entries of the store (going on
 * from where the previous step stopped) and remove the payloads, and the
 * leftovers of interrupted writes, that are older than grace_ms and whose
 * workflow `alive` says no longer exists. Nothing else is ever removed.
 * *removed (optional) += what was removed. Returns 1 when this step ended a
 * pass over the whole store (the next one starts a new pass), 0 when more
 * is left, or a WEFT_E* code. Any number of processes may sweep one store
 * at once; a process killed mid-sweep leaves nothing to repair.
 */
int ps_sweep(ps_store *s, int64_t grace_ms, size_t max, ps_alive_fn alive, void *alive_ud,
             size_t *removed, weft_error *err);

#endif
