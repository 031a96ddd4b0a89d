#include "core/defcache.h"

#include <pthread.h>
#include <stdlib.h>

#include "base/util.h"
#include "core/codec.h"

struct dc_cache {
    pthread_mutex_t mu;
    wu_map *defs; /* key -> def_workflow */
    wu_vec all;
};

dc_cache *dc_new(void)
{
    dc_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    pthread_mutex_init(&c->mu, NULL);
    if (!(c->defs = wu_map_new())) {
        free(c);
        return NULL;
    }
    return c;
}

void dc_free(dc_cache *c)
{
    size_t i;
    if (!c) return;
    for (i = 0; i < c->all.len; i++)
        def_unref(c->all.items[i]);
    wu_vec_free(&c->all);
    wu_map_free(c->defs);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

def_workflow *dc_get(dc_cache *c, const char *key)
{
    def_workflow *d;
    if (!c) return NULL;
    pthread_mutex_lock(&c->mu);
    d = def_ref(wu_map_get(c->defs, key));
    pthread_mutex_unlock(&c->mu);
    return d;
}

void dc_put(dc_cache *c, const char *key, def_workflow *d)
{
    if (!c) return;
    pthread_mutex_lock(&c->mu);
    if (!wu_map_get(c->defs, key) && wu_vec_push(&c->all, def_ref(d)) == 0) {
        if (wu_map_put(c->defs, key, d)) c->all.len--, def_unref(d);
    }
    pthread_mutex_unlock(&c->mu);
}

int dc_compile(dc_cache *c, const def_env *defs, const char *json, const char *source,
               def_workflow **out, weft_error *err)
{
    char key[17];
    json_object *j;
    int rc;
    cd_def_key(json, key);
    if ((*out = dc_get(c, key))) return 0;
    if ((rc = wu_parse_json_stored(source, json, &j, err))) return rc;
    rc = def_compile(defs, j, source, NULL, out, err);
    json_object_put(j);
    if (rc == 0) dc_put(c, key, *out);
    return rc;
}
