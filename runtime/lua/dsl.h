/*
 * Workflow definitions written in Lua (DESIGN.md §4): a file evaluated in a
 * sandbox with the `weft` module (lua/weft.lua, embedded) preloaded, returning
 * a workflow table, compiled to Conductor WorkflowDef JSON. Prefix dsl_.
 */
#ifndef WEFT_DSL_H
#define WEFT_DSL_H

#include <stddef.h>
#include <json-c/json.h>
#include "weft/plugin.h"

/*
 * Compile Lua source. chunkname names it in errors ("order.lua"). On success
 * *def is the WorkflowDef JSON and, if lines is not NULL, *lines an object
 * mapping each taskReferenceName to the source line of its builder (both
 * caller-owned). Errors (WEFT_EINVAL) read "order.lua:7: fork 'notify'
 * branch 2: duplicate ref 'email'"; a file that returns no workflow says so.
 */
int dsl_compile(const char *chunkname, const char *src, size_t len, json_object **def,
                json_object **lines, weft_error *err);

/* Same, reading a file; chunkname is the path's basename. */
int dsl_compile_file(const char *path, json_object **def, json_object **lines, weft_error *err);

/*
 * A definition file of either kind: FILE.lua through the DSL (lines as
 * above), anything else read as WorkflowDef JSON (*lines NULL). Messages
 * name the file by its basename.
 */
int dsl_load(const char *path, json_object **def, json_object **lines, weft_error *err);

#endif
