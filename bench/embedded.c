/*
 * weft-bench --embedded: the engine and the memory store in this process
 * (docs/performance.md). The driver's options and results are in weft-bench.c.
 */
#include "autoconf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <json-c/json.h>

#include "core/engine.h"
#include "base/util.h"

#include "bench.h"

typedef struct emb_end {
    run *R;
    wu_map *index; /* execution id -> index + 1 */
} emb_end;

static void emb_ended(void *ud, const xc_exec *x)
{
    emb_end *e = ud;
    uintptr_t k = (uintptr_t)wu_map_get(e->index, x->id);
    if (k) bn_record_end(e->R, (long)k - 1, x->status == WEFT_WF_COMPLETED, x->output);
}

int bn_run_embedded(const opts *o)
{
    eng_opts eo = {0};
    eng *e = NULL;
    weft_error err = {0};
    def_workflow *def = NULL;
    json_object *dj, *j;
    xc_exec **xs = NULL;
    emb_end ee = {0};
    run R;
    double cpu0, cpu1, tps;
    long i, bad;
    int rc = 1;

    if (bn_run_init(&R, o) || !(xs = calloc((size_t)o->n, sizeof *xs)) ||
        !(ee.index = wu_map_new())) {
        fprintf(stderr, "weft-bench: out of memory\n");
        goto out;
    }
    eo.plugin_path = o->plugin_path;
    if (eng_new(&eo, &e, &err)) {
        fprintf(stderr, "weft-bench: %s\n", err.msg);
        goto out;
    }
    dj = o->wl->def();
    rc = eng_load_json(e, dj, o->wl->name, &def, &err);
    json_object_put(dj);
    if (rc) {
        fprintf(stderr, "weft-bench: workload %s: %s\n", o->wl->name, err.msg);
        rc = 1;
        goto out;
    }
    rc = 1;
    ee.R = &R;
    fprintf(stderr, "weft-bench: embedded %s, %s, n=%ld\n", o->wl->name,
            o->serial ? "serial" : "burst", o->n);
    cpu0 = bn_cpu_self_s();
    for (i = 0; i < o->n && !bn_interrupted; i++) {
        json_object *in = bn_input_of(i);
        R.t_sub[i] = bn_now_us();
        if (eng_start(e, def, in, &xs[i], &err) ||
            wu_map_put(ee.index, xs[i]->id, (void *)(uintptr_t)(i + 1))) {
            fprintf(stderr, "weft-bench: start: %s\n", err.msg);
            json_object_put(in);
            goto out;
        }
        json_object_put(in);
        if (o->serial && eng_run_all(e, &xs[i], 1, emb_ended, &ee, &err)) {
            fprintf(stderr, "weft-bench: %s\n", err.msg);
            goto out;
        }
    }
    if (!o->serial && !bn_interrupted && eng_run_all(e, xs, (size_t)o->n, emb_ended, &ee, &err)) {
        fprintf(stderr, "weft-bench: %s\n", err.msg);
        goto out;
    }
    cpu1 = bn_cpu_self_s();
    j = bn_result_head(o, "memory");
    bad = bn_report(&R, j, &tps);
    bn_put_num(j, "cpu_us_per_task",
               R.done ? (cpu1 - cpu0) * 1e6 / ((double)R.done * o->wl->tasks_per_wf) : 0, 2);
    printf("%s\n", json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN));
    fflush(stdout);
    json_object_put(j);
    rc = bad || bn_interrupted ? 1 : 0;
out:
    def_unref(def);
    eng_free(e);
    free(xs);
    wu_map_free(ee.index);
    bn_run_free(&R);
    return rc;
}
