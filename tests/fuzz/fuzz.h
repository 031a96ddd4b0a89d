/*
 * What the fuzz targets share: the entry point, the invariant check, the
 * input as a C string, and task types for the targets that compile
 * definitions. Header-only; each target defines FUZZ_NAME before including
 * it.
 */
#ifndef WEFT_TESTS_FUZZ_H
#define WEFT_TESTS_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "weft/plugin.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Bigger inputs add nothing but time. */
#define FUZZ_MAX_INPUT 65536

/* abort() with "<target>: invariant broken: what" when ok is false, so that
 * the fuzzer (and replay.sh) reports it. */
static __attribute__((unused)) void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "%s: invariant broken: %s\n", FUZZ_NAME, what);
        abort();
    }
}

/* WEFT_FUZZ_VERBOSE=1: print what each input did (handy when adding seeds). */
static __attribute__((unused)) int fuzz_verbose(void)
{
    static int on = -1;
    if (on < 0) on = getenv("WEFT_FUZZ_VERBOSE") != NULL;
    return on;
}

/* data (size bytes) and a NUL after them, malloc'd. */
static __attribute__((unused)) char *fuzz_text(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    check(text != NULL, "malloc");
    if (size) memcpy(text, data, size);
    text[size] = 0;
    return text;
}

static __attribute__((unused)) int fuzz_execute(weft_ctx *ctx, weft_result *r)
{
    r->status = WEFT_TASK_COMPLETED;
    return 0;
}

static __attribute__((unused)) int fuzz_map(weft_ctx *ctx, json_object *def, json_object *out,
                                            weft_result *r)
{
    r->status = WEFT_TASK_COMPLETED;
    return 0;
}

/* Like a plugin's validate: uses the host table on a field of the task. */
static __attribute__((unused)) int fuzz_validate(const weft_host *host, json_object *def,
                                                 weft_error *err)
{
    json_object *v;
    weft_error why;
    int64_t ms;
    if (json_object_object_get_ex(def, "duration", &v) && host->parse_duration(v, &ms, &why))
        return host->error(err, WEFT_EINVAL, "duration: %s", why.msg);
    if (json_object_object_get_ex(def, "forbidden", NULL))
        return host->error(err, WEFT_EINVAL, "field 'forbidden' is not allowed");
    return 0;
}

/* The task types of the plugins weft ships, as stubs, and CHECKED (a
 * validate that uses the host table). */
static const weft_task_type fuzz_types[] __attribute__((unused)) = {
    {.name = "SIMPLE", .execute = fuzz_execute},
    {.name = "LAMBDA", .execute = fuzz_execute},
    {.name = "DECISION", .map = fuzz_map},
    {.name = "SWITCH", .map = fuzz_map},
    {.name = "FORK_JOIN", .map = fuzz_map},
    {.name = "FORK_JOIN_DYNAMIC", .map = fuzz_map},
    {.name = "JOIN", .map = fuzz_map},
    {.name = "DO_WHILE", .map = fuzz_map},
    {.name = "SUB_WORKFLOW", .execute = fuzz_execute},
    {.name = "WAIT", .validate = fuzz_validate, .execute = fuzz_execute},
    {.name = "CHECKED", .validate = fuzz_validate, .execute = fuzz_execute},
};

/* A def_env resolver over fuzz_types. */
static __attribute__((unused)) const weft_task_type *fuzz_find_type(void *ud, const char *name)
{
    size_t i;
    for (i = 0; i < sizeof fuzz_types / sizeof fuzz_types[0]; i++)
        if (!strcmp(fuzz_types[i].name, name)) return &fuzz_types[i];
    return NULL;
}

#endif
