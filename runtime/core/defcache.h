/*
 * Compiled definitions by key (cd_def_key of their JSON text), so that a
 * decider loading an execution does not compile its definition again.
 * Shared by the threads of a process (a mutex guards it), but each
 * definition handed out is a reference the caller drops with def_unref.
 * Prefix dc_.
 */
#ifndef WEFT_DEFCACHE_H
#define WEFT_DEFCACHE_H

#include "core/def.h"

typedef struct dc_cache dc_cache;

/* NULL when out of memory. */
dc_cache *dc_new(void);
void dc_free(dc_cache *c);

/* A new reference to the definition cached under key, or NULL (c NULL: none). */
def_workflow *dc_get(dc_cache *c, const char *key);
/* Cache d under key (a reference is taken) unless one is there already. */
void dc_put(dc_cache *c, const char *key, def_workflow *d);

/* The definition of a JSON text: from the cache, else compiled (with defs)
 * and cached. source names it in messages. *out is a new reference. */
int dc_compile(dc_cache *c, const def_env *defs, const char *json, const char *source,
               def_workflow **out, weft_error *err);

#endif
