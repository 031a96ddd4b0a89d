/*
 * Expressions inside task inputs (DESIGN.md §4): ${workflow.input.x},
 * ${workflow.workflowId}, ${workflow.variables.v}, ${ref.output.a.b[0]},
 * ${ref.input.x}, ${secrets.NAME}. A template (any JSON value) is compiled
 * once per definition and evaluated per task. Prefix ex_.
 *
 * Rules: a string that is exactly one ${...} keeps the value's JSON type
 * (a missing path gives null); ${...} inside longer text is interpolated as
 * text (strings as-is, null as "null", other values as compact JSON);
 * "$${" is a literal "${". Paths: .name, [index], ['key'] / ["key"].
 */
#ifndef WEFT_EXPR_H
#define WEFT_EXPR_H

#include <json-c/json.h>
#include "weft/plugin.h"

typedef struct ex_tmpl ex_tmpl;

/*
 * Resolve the start of a path: root is "workflow", "secrets" or a task ref;
 * field is the first segment after it ("input", "output", "variables",
 * "workflowId", a secret's name ...). Returns a borrowed value, or NULL when
 * it does not exist (the expression then yields null).
 */
typedef json_object *(*ex_lookup_fn)(void *ud, const char *root, const char *field);

/*
 * Compile a template. tmpl is borrowed (the template may keep references to
 * constant parts). Malformed expressions (unclosed "${", empty path, bad
 * index) give WEFT_EINVAL naming the expression.
 */
int ex_compile(json_object *tmpl, ex_tmpl **out, weft_error *err);
void ex_free(ex_tmpl *t);

/*
 * Evaluate into a new JSON value (caller owns; NULL means JSON null).
 * Constant parts may be shared by reference count: treat the result as
 * read-only.
 */
json_object *ex_eval(const ex_tmpl *t, ex_lookup_fn lookup, void *ud);

/* The same, telling a value that could not be built (out of memory:
 * WEFT_ENOMEM, *out NULL) from JSON null (0, *out NULL). */
int ex_eval_checked(const ex_tmpl *t, ex_lookup_fn lookup, void *ud, json_object **out);

/*
 * Tests only (like Lua's ltests.c allocator that fails on demand): the n-th
 * allocation ex_eval makes from now on, in this thread, fails; 0 = none.
 */
void ex_test_fail_alloc(long n);

/* True if the template has no expressions at all. */
int ex_is_const(const ex_tmpl *t);

/*
 * Call fn for each (root, field) the template refers to, in order; stops at
 * the first non-zero return and returns it. Used to reject references to
 * unknown refs at definition load.
 */
int ex_foreach_ref(const ex_tmpl *t, int (*fn)(void *ud, const char *root, const char *field),
                   void *ud);

/* Walk a path like ".a.b[0]['c']" from v. Returns borrowed or NULL. */
json_object *ex_walk(json_object *v, const char *path);

#endif
