#include "core/served.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

/* Whether the list ("a, b, c") has name (n bytes) as a whole entry. */
static int listed(const char *list, const char *name, size_t n)
{
    const char *p = list;
    while (*p) {
        size_t len = strcspn(p, ",");
        if (len == n && !memcmp(p, name, n)) return 1;
        p += len;
        while (*p == ',' || *p == ' ')
            p++;
    }
    return 0;
}

/* The types known: env's, then those live daemons serve that it lacks
 * ("<domain>:" dropped), ", "-separated into buf. */
static void known_types(const def_env *env, json_object *live, char *buf, size_t size)
{
    size_t i, used = (size_t)snprintf(buf, size, "%s", env->known ? env->known : "");
    for (i = 0; i < json_object_array_length(live) && used + 1 < size; i++) {
        const char *q = json_object_get_string(json_object_array_get_idx(live, i));
        const char *type = strrchr(q, ':') ? strrchr(q, ':') + 1 : q;
        size_t n = strlen(type);
        if (n && !listed(buf, type, n))
            used += (size_t)snprintf(buf + used, size - used, "%s%s", used ? ", " : "", type);
    }
    if (!*buf) snprintf(buf, size, "none");
}

/*
 * Whether a queue task t may land in is served. Registering (no start yet,
 * so no taskToDomain): its type in any domain. Starting: the queue the
 * decider will pick (decider.c, resolve_domain): with a taskToDomain entry
 * for its name, "d1,d2,...", one of those domains' queues (NO_DOMAIN: the
 * type's own); without one, the type's own queue.
 */
static int task_served(json_object *live, const def_task *t, json_object *task_to_domain,
                       int starting)
{
    json_object *v;
    const char *p, *d;
    size_t k;
    if (!starting) return sv_has(live, t->type_name, 1);
    if (!task_to_domain || !json_object_object_get_ex(task_to_domain, t->name, &v) ||
        !json_object_is_type(v, json_type_string))
        return sv_has(live, t->type_name, 0);
    p = json_object_get_string(v);
    while (wu_list_next(&p, &d, &k)) {
        char q[256];
        if (k == 9 && !strncasecmp(d, "NO_DOMAIN", 9)) {
            if (sv_has(live, t->type_name, 0)) return 1;
        } else if ((size_t)snprintf(q, sizeof q, "%.*s:%s", (int)k, d, t->type_name) < sizeof q &&
                   sv_has(live, q, 0)) {
            return 1;
        }
    }
    return 0;
}

int sv_check(st_store *st, const def_env *env, const def_workflow *def, json_object *task_to_domain,
             int starting, weft_error *err)
{
    const def_task **odd;
    const char **names;
    char **taskdefs;
    json_object *live = NULL;
    size_t i, n = 0;
    int rc = 0;
    if (!def->nremote) return 0;
    odd = calloc(def->nremote, sizeof *odd);
    names = calloc(def->nremote * 2, sizeof *names);
    taskdefs = calloc(def->nremote * 2, sizeof *taskdefs);
    if (!odd || !names || !taskdefs) {
        rc = wu_err(err, WEFT_ENOMEM, "out of memory");
        goto out;
    }
    for (i = 0; i < def->all.len; i++) {
        const def_task *t = def->all.items[i];
        /* SIMPLE is for external workers by definition (Conductor's default
         * type), whether or not its plugin is here to say so */
        if (t->type != &def_remote_type || !strcmp(t->type_name, "SIMPLE")) continue;
        odd[n] = t;
        /* a TaskDef of its name (Conductor's rule) or of its type's */
        names[2 * n] = t->name;
        names[2 * n + 1] = t->type_name;
        n++;
    }
    if (!n) goto out;
    if ((rc = sv_live(st, wu_now_ms(), &live, err)) ||
        (rc = ST(st, taskdefs_get, names, 2 * n, taskdefs, err)))
        goto out;
    for (i = 0; i < n; i++) {
        const def_task *t = odd[i];
        const char *src = def->source ? def->source : def->name;
        char known[WEFT_ERROR_MAX];
        if (taskdefs[2 * i] || taskdefs[2 * i + 1] ||
            task_served(live, t, task_to_domain, starting))
            continue;
        known_types(env, live, known, sizeof known);
        if (starting && task_to_domain && json_object_object_get_ex(task_to_domain, t->name, NULL))
            rc = wu_err(err, WEFT_EINVAL,
                        "task type %s: no live weftd serves the task domains taskToDomain names "
                        "for '%s' (%s), and no TaskDef has its name",
                        t->type_name, t->name,
                        json_object_get_string(json_object_object_get(task_to_domain, t->name)));
        else
            /* searched last: the message may be cut there */
            rc = wu_err(err, WEFT_EINVAL,
                        "unknown task type %s: no plugin here provides it, no live weftd serves "
                        "it%s and no TaskDef has its name (known types: %s; plugins searched: %s)",
                        t->type_name,
                        starting && sv_has(live, t->type_name, 1) ? " outside a task domain" : "",
                        known, env->searched ? env->searched : "nothing");
        if (t->line > 0)
            wu_err_prefix(err, "%s:%d: task '%s': ", src, t->line, t->ref);
        else
            wu_err_prefix(err, "%s: task '%s': ", src, t->ref);
        break;
    }
out:
    for (i = 0; taskdefs && i < 2 * n; i++)
        free(taskdefs[i]);
    free(taskdefs);
    free(names);
    free(odd);
    json_object_put(live);
    return rc;
}
