/*
 * Fuzz target for dsl.c (and the weft.lua module it runs): the bytes are the
 * Lua source of a definition. The DSL runs in the sandbox with its
 * instruction, memory and time limits, so no input can hang or exhaust the
 * process. A definition that compiles then goes through def_compile with a
 * resolver that accepts every type name (which may still reject it: an
 * expression naming an unknown ref, say, but only with a message).
 *
 * Invariants checked (abort() when broken): errors are WEFT_EINVAL,
 * WEFT_ELIMIT or WEFT_ENOMEM with a message naming the file and no output;
 * success gives a JSON object and a lines object mapping refs to numbers.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <json-c/json.h>

#include "core/def.h"
#include "lua/dsl.h"
#include "plugin/host.h"

#define FUZZ_NAME "fuzz_dsl"
#include "fuzz.h"

/* Every name is a type: only the structure of the JSON is under test. */
static const weft_task_type any_type = {.name = "ANY", .execute = fuzz_execute};

static const weft_task_type *find_any(void *ud, const char *name)
{
    return &any_type;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static def_env env = {.find_type = find_any, .searched = "/fuzz/plugins"};
    json_object *def = (json_object *)1, *lines = (json_object *)1;
    weft_error err = {0};
    def_workflow *wf;
    int rc;

    if (size > FUZZ_MAX_INPUT) return 0;
    rc = dsl_compile("fuzz.lua", (const char *)data, size, &def, &lines, &err);
    if (fuzz_verbose()) printf("dsl_compile: %d %s\n", rc, rc ? err.msg : "ok");
    if (rc) {
        check(rc == WEFT_EINVAL || rc == WEFT_ELIMIT || rc == WEFT_ENOMEM,
              "a DSL error is WEFT_EINVAL, WEFT_ELIMIT or WEFT_ENOMEM");
        check(err.code == rc && err.msg[0] != 0, "a DSL error has a message");
        check(strstr(err.msg, "fuzz.lua") != NULL, "a DSL error names the file");
        check(def == NULL && lines == NULL, "a failed compile gives nothing");
        return 0;
    }
    check(json_object_is_type(def, json_type_object), "the definition is an object");
    check(lines == NULL || json_object_is_type(lines, json_type_object), "lines is an object");
    if (lines) {
        json_object_object_foreach(lines, ref, line)
        {
            (void)ref;
            check(json_object_is_type(line, json_type_int), "a line is a number");
        }
    }
    check(json_object_to_json_string(def) != NULL, "the definition serialises");

    env.host = host_table();
    memset(&err, 0, sizeof err);
    wf = NULL;
    rc = def_compile(&env, def, "fuzz.lua", lines, &wf, &err);
    if (fuzz_verbose()) printf("def_compile: %d %s\n", rc, rc ? err.msg : "ok");
    if (rc == 0)
        def_unref(wf);
    else
        check(rc == WEFT_EINVAL && err.msg[0] != 0, "def_compile fails with a message");
    json_object_put(def);
    json_object_put(lines);
    return 0;
}
