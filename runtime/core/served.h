/*
 * Whether something can run a definition's tasks: one rule for every way a
 * definition comes in (REST start and register, weft start and register, a
 * child started at run time). A task's type is fine when a plugin here
 * provides it, when it is SIMPLE-like (external workers by definition: its
 * plugin says so and provides it), when a live weftd serves it (in any task
 * domain), or when a TaskDef of its name is registered (Conductor's rule for
 * user-defined types, which it queues for external workers). Anything else
 * would wait forever for a worker that cannot exist. Prefix sv_.
 */
#ifndef WEFT_SERVED_H
#define WEFT_SERVED_H

#include <stdint.h>
#include <json-c/json.h>
#include "core/def.h"
#include "store/store.h"

/* A daemon whose heartbeat is older than this is not live. */
#define SV_LIVE_MS 15000

/*
 * The queues live daemons serve (each daemon's "types": a type, or a
 * domain's queue "<domain>:<type>"), as a new JSON array of strings in
 * *out. WEFT_EIO (and the like) when the store does not answer.
 */
int sv_live(st_store *st, int64_t now_ms, json_object **out, weft_error *err);

/* Whether live (sv_live's) holds queue; with any_domain, also a domain's
 * queue of it ("<domain>:<queue>"). */
int sv_has(json_object *live, const char *queue, int any_domain);

/*
 * 0 when every task of def (compiled with allow_unknown) can run; else
 * WEFT_EINVAL naming the source, line, task ref and type, and the types
 * known (here and on live daemons). Registering (starting 0): a live
 * daemon serving its type in any task domain will do. Starting: the queue
 * task_to_domain (borrowed, may be NULL) sends it to must be served. No
 * round trip unless def has tasks of types no plugin here provides (SIMPLE
 * aside); then two (daemons, TaskDefs).
 */
int sv_check(st_store *st, const def_env *env, const def_workflow *def, json_object *task_to_domain,
             int starting, weft_error *err);

#endif
