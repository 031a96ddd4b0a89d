#include "store/memory_meta.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NAME_MAX_ 257 /* definition names, idempotency keys, daemon ids, secrets (as redis) */

/* A name -> text table (secrets, task definitions, idempotency keys,
 * definition versions). */
typedef struct mem_pair {
    char *name, *value; /* value NULL: deleted */
} mem_pair;

typedef struct mem_kv {
    wu_map *map; /* borrowing: name -> mem_pair */
    wu_vec all;  /* mem_pair * */
} mem_kv;

struct mm {
    mem_kv secrets, taskdefs, idem, defnames;
    wu_map *defs; /* name -> mem_kv * (version text -> JSON) */
    wu_vec all_defs;
    json_object *daemons;
};

/* ---- checks ---- */

static int oom(weft_error *err)
{
    return wu_err(err, WEFT_ENOMEM, "memory store: out of memory");
}

/* ---- name -> text tables ---- */

static int kv_init(mem_kv *kv)
{
    return (kv->map = wu_map_new_borrowing()) ? 0 : WEFT_ENOMEM;
}

static void kv_free(mem_kv *kv)
{
    size_t i;
    for (i = 0; i < kv->all.len; i++) {
        mem_pair *p = kv->all.items[i];
        free(p->name);
        free(p->value);
        free(p);
    }
    wu_vec_free(&kv->all);
    wu_map_free(kv->map);
}

static const char *kv_get(const mem_kv *kv, const char *name)
{
    const mem_pair *p = wu_map_get(kv->map, name);
    return p ? p->value : NULL;
}

/* Set name to a copy of value (NULL deletes). 0 or WEFT_ENOMEM. */
static int kv_put(mem_kv *kv, const char *name, const char *value)
{
    mem_pair *p = wu_map_get(kv->map, name);
    char *v = NULL;
    if (value && !(v = strdup(value))) return WEFT_ENOMEM;
    if (!p) {
        if (!value) return 0;
        if (!(p = calloc(1, sizeof *p)) || !(p->name = strdup(name)) || wu_vec_push(&kv->all, p)) {
            if (p) free(p->name);
            free(p);
            free(v);
            return WEFT_ENOMEM;
        }
        if (wu_map_put(kv->map, p->name, p)) {
            kv->all.len--;
            free(p->name);
            free(p);
            free(v);
            return WEFT_ENOMEM;
        }
    }
    free(p->value);
    p->value = v;
    return 0;
}

static int by_name(const void *a, const void *b)
{
    return strcmp((*(mem_pair *const *)a)->name, (*(mem_pair *const *)b)->name);
}

/* The pairs that hold a value, sorted by name (a malloc'd array). */
static mem_pair **kv_sorted(const mem_kv *kv, size_t *n)
{
    mem_pair **v = malloc((kv->all.len + 1) * sizeof *v);
    size_t i;
    *n = 0;
    if (!v) return NULL;
    for (i = 0; i < kv->all.len; i++)
        if (((mem_pair *)kv->all.items[i])->value) v[(*n)++] = kv->all.items[i];
    qsort(v, *n, sizeof *v, by_name);
    return v;
}

/* A JSON array of the values parsed (by name; what does not parse is left
 * out, as redis does) into *json. */
static int kv_json_array(const mem_kv *kv, char **json, weft_error *err)
{
    size_t i, n;
    mem_pair **v = kv_sorted(kv, &n);
    json_object *all = json_object_new_array();
    *json = NULL;
    if (v && all)
        for (i = 0; i < n; i++) {
            json_object *d = NULL;
            if (!wu_parse_json_stored("definition", v[i]->value, &d, NULL))
                json_object_array_add(all, d);
        }
    if (v && all) *json = strdup(json_object_to_json_string_ext(all, JSON_C_TO_STRING_PLAIN));
    free(v);
    json_object_put(all);
    return *json ? 0 : oom(err);
}

/* ---- definitions, task definitions, idempotency, daemons, secrets ---- */

int mm_def_register(st_store *s, const char *name, int version, const char *json, weft_error *err)
{
    mm *t = st_memory_meta(s);
    mem_kv *kv;
    const char *key;
    char v[16];
    int rc;
    if ((rc = st_check_name("definition name", name, NAME_MAX_, 1, err)) != 0) return rc;
    if (version <= 0 || !json)
        return wu_err(err, WEFT_EINVAL, "definition %s: version must be >= 1 and JSON given", name);
    if (!kv_get(&t->defnames, name) && kv_put(&t->defnames, name, name)) return oom(err);
    key = ((mem_pair *)wu_map_get(t->defnames.map, name))->name;
    if (!(kv = wu_map_get(t->defs, key))) {
        if (!(kv = calloc(1, sizeof *kv)) || kv_init(kv) || wu_vec_push(&t->all_defs, kv)) {
            if (kv) wu_map_free(kv->map);
            free(kv);
            return oom(err);
        }
        /* keyed by the name's copy in defnames, which lives as long */
        if (wu_map_put(t->defs, key, kv)) return oom(err);
    }
    snprintf(v, sizeof v, "%d", version);
    return kv_put(kv, v, json) ? oom(err) : 0;
}

/* The highest version in kv, 0 when none. */
static int def_latest(const mem_kv *kv)
{
    size_t i;
    int best = 0;
    for (i = 0; i < kv->all.len; i++) {
        const mem_pair *p = kv->all.items[i];
        int v = atoi(p->name);
        if (p->value && v > best) best = v;
    }
    return best;
}

int mm_def_get(st_store *s, const char *name, int version, char **json, int *version_out,
               weft_error *err)
{
    mm *t = st_memory_meta(s);
    const mem_kv *kv;
    const char *j;
    char v[16];
    int rc;
    *json = NULL;
    if ((rc = st_check_name("definition name", name, NAME_MAX_, 1, err)) != 0) return rc;
    kv = wu_map_get(t->defs, name);
    if (version <= 0 && (!kv || !(version = def_latest(kv))))
        return wu_err(err, WEFT_ENOTFOUND, "no definition %s", name);
    snprintf(v, sizeof v, "%d", version);
    if (!kv || !(j = kv_get(kv, v)))
        return wu_err(err, WEFT_ENOTFOUND, "no definition %s version %d", name, version);
    if (!(*json = strdup(j))) return oom(err);
    if (version_out) *version_out = version;
    return 0;
}

static int by_version(const void *a, const void *b)
{
    int x = atoi((*(mem_pair *const *)a)->name), y = atoi((*(mem_pair *const *)b)->name);
    return (x > y) - (x < y);
}

/* rs_def_list's format: a JSON array of every version of every registered
 * definition, by name then version. */
int mm_def_list(st_store *s, char **json, weft_error *err)
{
    mm *t = st_memory_meta(s);
    json_object *all = json_object_new_array();
    mem_pair **names = NULL;
    size_t i, j, n = 0;
    int rc = 0;
    *json = NULL;
    if (!all || !(names = kv_sorted(&t->defnames, &n))) rc = oom(err);
    for (i = 0; !rc && i < n; i++) {
        const mem_kv *kv = wu_map_get(t->defs, names[i]->name);
        mem_pair **vs;
        size_t nv;
        if (!kv) continue;
        if (!(vs = kv_sorted(kv, &nv))) {
            rc = oom(err);
            break;
        }
        qsort(vs, nv, sizeof *vs, by_version);
        for (j = 0; j < nv; j++) {
            json_object *d = NULL;
            if (!wu_parse_json_stored("definition", vs[j]->value, &d, NULL))
                json_object_array_add(all, d);
        }
        free(vs);
    }
    if (!rc && !(*json = strdup(json_object_to_json_string_ext(all, JSON_C_TO_STRING_PLAIN))))
        rc = oom(err);
    free(names);
    json_object_put(all);
    return rc;
}

/* kv_put of a checked name (what) and a value. */
static int put_named(mem_kv *kv, const char *what, const char *name, const char *value,
                     weft_error *err)
{
    int rc;
    if ((rc = st_check_name(what, name, NAME_MAX_, 1, err)) != 0) return rc;
    if (!value) return wu_err(err, WEFT_EINVAL, "%s %s: no value", what, name);
    return kv_put(kv, name, value) ? oom(err) : 0;
}

/* A copy of name's value into *value, or WEFT_ENOTFOUND with `missing`. */
static int get_named(const mem_kv *kv, const char *what, const char *name, char **value,
                     const char *missing, weft_error *err)
{
    const char *v;
    int rc;
    *value = NULL;
    if ((rc = st_check_name(what, name, NAME_MAX_, 1, err)) != 0) return rc;
    if (!(v = kv_get(kv, name))) return wu_err(err, WEFT_ENOTFOUND, "%s", missing);
    return (*value = strdup(v)) ? 0 : oom(err);
}

int mm_taskdef_put(st_store *s, const char *name, const char *json, weft_error *err)
{
    return put_named(&st_memory_meta(s)->taskdefs, "task name", name, json, err);
}

int mm_taskdef_get(st_store *s, const char *name, char **json, weft_error *err)
{
    char missing[200];
    snprintf(missing, sizeof missing, "no task definition %.150s", name ? name : "");
    return get_named(&st_memory_meta(s)->taskdefs, "task name", name, json, missing, err);
}

int mm_taskdef_list(st_store *s, char **json, weft_error *err)
{
    return kv_json_array(&st_memory_meta(s)->taskdefs, json, err);
}

int mm_taskdefs_get(st_store *s, const char *const *names, size_t n, char **jsons, weft_error *err)
{
    size_t i;
    for (i = 0; i < n; i++) {
        const char *v = names[i] ? kv_get(&st_memory_meta(s)->taskdefs, names[i]) : NULL;
        jsons[i] = NULL;
        if (v && !(jsons[i] = strdup(v))) {
            while (i > 0)
                free(jsons[--i]), jsons[i] = NULL;
            return oom(err);
        }
    }
    return 0;
}

int mm_idem_claim(st_store *s, const char *key, const char *id, char existing[64], weft_error *err)
{
    mem_kv *kv = &st_memory_meta(s)->idem;
    const char *was;
    int rc;
    if (existing) existing[0] = 0;
    if ((rc = st_check_name("idempotency key", key, NAME_MAX_, 1, err)) != 0 ||
        (rc = st_check_name("workflow id", id, 64, 0, err)) != 0)
        return rc;
    if (!(was = kv_get(kv, key))) return kv_put(kv, key, id) ? oom(err) : 0;
    if (existing) snprintf(existing, 64, "%s", was);
    /* the same id asking again (a retried start) is not a conflict */
    return strcmp(was, id) ? wu_err(err, WEFT_EEXIST, "idempotency key %s was used by %s", key, was)
                           : 0;
}

int mm_daemon_beat(st_store *s, const char *daemon_id, const char *info_json, weft_error *err)
{
    mm *t = st_memory_meta(s);
    json_object *j;
    int rc;
    if ((rc = st_check_name("daemon id", daemon_id, NAME_MAX_, 1, err)) != 0) return rc;
    if ((rc = st_daemon_info(daemon_id, info_json, &j, err)) != 0) return rc;
    if (json_object_object_add(t->daemons, daemon_id, j)) {
        json_object_put(j); /* not taken */
        return oom(err);
    }
    return 0;
}

int mm_daemons(st_store *s, char **json, weft_error *err)
{
    *json =
        strdup(json_object_to_json_string_ext(st_memory_meta(s)->daemons, JSON_C_TO_STRING_PLAIN));
    return *json ? 0 : oom(err);
}

int mm_daemons_forget(st_store *s, int64_t seen_before, size_t *n, weft_error *err)
{
    json_object *all = st_memory_meta(s)->daemons;
    wu_vec gone = {0};
    size_t i;
    json_object_object_foreach(all, id, info)
    {
        if (st_daemon_stale(info, seen_before) && wu_vec_push(&gone, id)) {
            wu_vec_free(&gone);
            return oom(err);
        }
    }
    /* deleted after the walk: deleting during it is not safe */
    for (i = 0; i < gone.len; i++)
        json_object_object_del(all, gone.items[i]);
    if (n) *n = gone.len;
    wu_vec_free(&gone);
    return 0;
}

int mm_secret_set(st_store *s, const char *name, const char *value, weft_error *err)
{
    return put_named(&st_memory_meta(s)->secrets, "secret name", name, value, err);
}

int mm_secret_get(st_store *s, const char *name, char **value, weft_error *err)
{
    char missing[300];
    snprintf(missing, sizeof missing, "secret '%.100s' is not set (weft secret set %.100s)",
             name ? name : "", name ? name : "");
    return get_named(&st_memory_meta(s)->secrets, "secret name", name, value, missing, err);
}

int mm_secret_delete(st_store *s, const char *name, weft_error *err)
{
    mem_kv *kv = &st_memory_meta(s)->secrets;
    int rc;
    if ((rc = st_check_name("secret name", name, NAME_MAX_, 1, err)) != 0) return rc;
    if (!kv_get(kv, name)) return wu_err(err, WEFT_ENOTFOUND, "secret '%s' is not set", name);
    return kv_put(kv, name, NULL);
}

int mm_secret_names(st_store *s, char ***names, size_t *n, weft_error *err)
{
    size_t i, k;
    mem_pair **v = kv_sorted(&st_memory_meta(s)->secrets, &k);
    *names = NULL;
    *n = 0;
    if (!v || !(*names = calloc(k + 1, sizeof **names))) {
        free(v);
        return oom(err);
    }
    for (i = 0; i < k; i++)
        if (((*names)[*n] = strdup(v[i]->name))) (*n)++;
    free(v);
    return 0;
}

/* ---- the table's life ---- */

mm *mm_new(void)
{
    mm *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->defs = wu_map_new_borrowing();
    t->daemons = json_object_new_object();
    if (!t->defs || !t->daemons || kv_init(&t->secrets) || kv_init(&t->taskdefs) ||
        kv_init(&t->idem) || kv_init(&t->defnames)) {
        mm_free(t);
        return NULL;
    }
    return t;
}

void mm_free(mm *t)
{
    size_t i;
    if (!t) return;
    for (i = 0; i < t->all_defs.len; i++) {
        kv_free(t->all_defs.items[i]);
        free(t->all_defs.items[i]);
    }
    wu_vec_free(&t->all_defs);
    wu_map_free(t->defs);
    kv_free(&t->secrets);
    kv_free(&t->taskdefs);
    kv_free(&t->idem);
    kv_free(&t->defnames);
    json_object_put(t->daemons);
    free(t);
}
