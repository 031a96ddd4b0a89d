/*
 * The memory store's metadata (memory.c): definitions, task definitions,
 * idempotency keys, daemons' heartbeats and secrets, with the redis
 * backend's checks and formats (rs_def_list's array by name then version,
 * rs_daemons' object). Prefix mm_. No retention: idempotency keys stay.
 */
#ifndef WEFT_STORE_MEMORY_META_H
#define WEFT_STORE_MEMORY_META_H

#include "store/store.h"

typedef struct mm mm;

/* Empty tables; NULL when out of memory. */
mm *mm_new(void);
void mm_free(mm *t);
/* The tables of memory store s (memory.c; borrowed, live as long as s). */
mm *st_memory_meta(st_store *s);

/* The st_ops entries of the same names (store.h, and their rs_* twins in
 * store/redis/redis.h for the details); s is a memory store. */
int mm_def_register(st_store *s, const char *name, int version, const char *json, weft_error *err);
int mm_def_get(st_store *s, const char *name, int version, char **json, int *version_out,
               weft_error *err);
int mm_def_list(st_store *s, char **json, weft_error *err);
int mm_taskdef_put(st_store *s, const char *name, const char *json, weft_error *err);
int mm_taskdef_get(st_store *s, const char *name, char **json, weft_error *err);
int mm_taskdef_list(st_store *s, char **json, weft_error *err);
int mm_taskdefs_get(st_store *s, const char *const *names, size_t n, char **jsons, weft_error *err);
int mm_idem_claim(st_store *s, const char *key, const char *id, char existing[64], weft_error *err);
int mm_daemon_beat(st_store *s, const char *daemon_id, const char *info_json, weft_error *err);
int mm_daemons(st_store *s, char **json, weft_error *err);
int mm_daemons_forget(st_store *s, int64_t seen_before, size_t *n, weft_error *err);
int mm_secret_set(st_store *s, const char *name, const char *value, weft_error *err);
int mm_secret_get(st_store *s, const char *name, char **value, weft_error *err);
int mm_secret_delete(st_store *s, const char *name, weft_error *err);
int mm_secret_names(st_store *s, char ***names, size_t *n, weft_error *err);

#endif
