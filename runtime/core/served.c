#include "core/served.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int sv_live(st_store *st, int64_t now_ms, json_object **out, weft_error *err)
{
    json_object *all = NULL, *live;
    char *text = NULL;
    int rc;
    *out = NULL;
    if ((rc = ST(st, daemons, &text, err)) || (rc = wu_parse_json("daemons", text, &all, err))) {
        free(text);
        return rc;
    }
    free(text);
    if (!(live = json_object_new_array())) {
        json_object_put(all);
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    }
    json_object_object_foreach(all, id, info)
    {
        json_object *parsed = NULL, *types, *seen;
        size_t i;
        (void)id;
        /* a heartbeat stored as text (an older daemon's): read it */
        if (json_object_is_type(info, json_type_string))
            info = parsed = json_tokener_parse(json_object_get_string(info));
        if (json_object_object_get_ex(info, "seen", &seen) &&
            now_ms - json_object_get_int64(seen) <= SV_LIVE_MS &&
            json_object_object_get_ex(info, "types", &types) &&
            json_object_is_type(types, json_type_array))
            for (i = 0; i < json_object_array_length(types); i++) {
                json_object *t = json_object_array_get_idx(types, i);
                if (json_object_is_type(t, json_type_string))
                    json_object_array_add(live, json_object_get(t));
            }
        json_object_put(parsed);
    }
    json_object_put(all);
    *out = live;
    return 0;
}

int sv_has(json_object *live, const char *queue, int any_domain)
{
    size_t i, n = strlen(queue);
    for (i = 0; i < json_object_array_length(live); i++) {
        const char *s = json_object_get_string(json_object_array_get_idx(live, i));
        const char *colon = any_domain && s ? strrchr(s, ':') : NULL;
        size_t len = s ? strlen(s) : 0;
        if (s && (!strcmp(s, queue) ||
                  (colon && len - (size_t)(colon + 1 - s) == n && !strcmp(colon + 1, queue))))
            return 1;
    }
    return 0;
}

/* The types known: env's, then those live daemons serve that it lacks
 * ("<domain>:" dropped), ", "-separated into buf. */
static void known_types(const def_env *env, json_object *live, char *buf, size_t size)
{
    size_t i, used = (size_t)snprintf(buf, size, "%s", env->known ? env->known : "");
    for (i = 0; i < json_object_array_length(live) && used < size; i++) {
        const char *q = json_object_get_string(json_object_array_get_idx(live, i));
        const char *type = strrchr(q, ':') ? strrchr(q, ':') + 1 : q;
        char *at = strstr(buf, type);
        size_t n = strlen(type);
        /* a whole entry of the list already there */
        while (at && !((at == buf || at[-1] == ' ') && (at[n] == ',' || !at[n])))
            at = strstr(at + 1, type);
        if (!at) used += (size_t)snprintf(buf + used, size - used, "%s%s", used ? ", " : "", type);
    }
    if (!*buf) snprintf(buf, size, "none");
}

int sv_check(st_store *st, const def_env *env, const def_workflow *def, weft_error *err)
{
    const def_task **odd;
    const char **names;
    char **taskdefs;
    json_object *live = NULL;
    size_t i, n = def->nremote;
    int rc = 0;
    if (!n) return 0;
    odd = calloc(n, sizeof *odd);
    names = calloc(n, sizeof *names);
    taskdefs = calloc(n, sizeof *taskdefs);
    if (!odd || !names || !taskdefs) {
        rc = wu_err(err, WEFT_ENOMEM, "out of memory");
        goto out;
    }
    for (i = 0, n = 0; i < def->all.len; i++)
        if (((const def_task *)def->all.items[i])->type == &def_remote_type) {
            odd[n] = def->all.items[i];
            names[n] = odd[n]->type_name;
            n++;
        }
    if ((rc = sv_live(st, wu_now_ms(), &live, err)) ||
        (rc = ST(st, taskdefs_get, names, n, taskdefs, err)))
        goto out;
    for (i = 0; i < n; i++) {
        const def_task *t = odd[i];
        const char *src = def->source ? def->source : def->name;
        char known[WEFT_ERROR_MAX];
        if (taskdefs[i] || sv_has(live, t->type_name, 1)) continue;
        known_types(env, live, known, sizeof known);
        /* searched last: the message may be cut there */
        rc = wu_err(err, WEFT_EINVAL,
                    "unknown task type %s: no plugin here provides it, no live weftd serves it "
                    "and no TaskDef has its name (known types: %s; plugins searched: %s)",
                    t->type_name, known, env->searched ? env->searched : "nothing");
        if (t->line > 0)
            wu_err_prefix(err, "%s:%d: task '%s': ", src, t->line, t->ref);
        else
            wu_err_prefix(err, "%s: task '%s': ", src, t->ref);
        break;
    }
out:
    for (i = 0; taskdefs && i < n; i++)
        free(taskdefs[i]);
    free(taskdefs);
    free(names);
    free(odd);
    json_object_put(live);
    return rc;
}
