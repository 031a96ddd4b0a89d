/*
 * Executions as stored documents (the Redis store's "doc"), and the events
 * of the status lane. Prefix cd_.
 *
 * The document holds everything an execution is except its definition,
 * which is stored beside it once and compiled once per process (keyed by
 * cd_def_key): a decider that loads an execution never re-parses its
 * definition unless it has not seen it before.
 */
#ifndef WEFT_CODEC_H
#define WEFT_CODEC_H

#include <json-c/json.h>
#include "core/def.h"
#include "core/exec.h"
#include "base/util.h"

/* The stored document of x, as JSON text appended to b. 0 or WEFT_ENOMEM. */
int cd_doc_text(const xc_exec *x, wu_buf *b);

/*
 * Rebuild an execution from its document and compiled definition (a
 * reference is taken). Payloads kept outside come back as input_ref /
 * output_ref with the value NULL: the caller loads them (ops.c). Dynamic tasks are compiled again
 * with env. A document that does not fit its definition (unknown refs, bad fields) gives
 * WEFT_EINVAL naming the workflow id and what is wrong.
 */
int cd_from_doc(json_object *doc, def_workflow *def, const def_env *env, xc_exec **out,
                weft_error *err);

/* A short stable key for a definition's JSON text (hex, 16 chars + NUL). */
void cd_def_key(const char *def_json, char out[17]);

/*
 * The status-lane event for a task's (t) or the workflow's (t NULL) current
 * status, as JSON text appended to b. 0 or WEFT_ENOMEM. As stored it has no
 * workflowId and no time: the stream's key and entry id tell them, and
 * rs_events puts them back in front.
 */
int cd_event_text(const xc_exec *x, const xc_task *t, wu_buf *b);

#endif
