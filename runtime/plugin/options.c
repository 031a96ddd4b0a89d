#include "plugin/options.h"
#include "base/util.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *type_name(weft_config_type t)
{
    switch (t) {
    case WEFT_CONFIG_STRING:
        return "a string";
    case WEFT_CONFIG_INT:
        return "an integer";
    case WEFT_CONFIG_BOOL:
        return "true or false";
    case WEFT_CONFIG_MS:
        return "milliseconds or a duration";
    default:
        return "a JSON value";
    }
}

/* "a, b, c" of the table's keys into buf; "" for none. */
static void known_keys(const weft_config_field *table, char *buf, size_t size)
{
    size_t n = 0;
    buf[0] = 0;
    for (; table->key && n < size; table++)
        n += (size_t)snprintf(buf + n, size - n, "%s%s", n ? ", " : "", table->key);
}

/* The JSON value a default's text stands for (caller owns), or NULL. */
static json_object *default_value(const weft_config_field *f)
{
    char *end;
    long long v;
    switch (f->type) {
    case WEFT_CONFIG_INT:
    case WEFT_CONFIG_MS:
        errno = 0;
        v = strtoll(f->dflt, &end, 10);
        if (!*end && end != f->dflt && !errno) return json_object_new_int64(v);
        return f->type == WEFT_CONFIG_MS ? json_object_new_string(f->dflt) : NULL;
    case WEFT_CONFIG_BOOL:
        return json_object_new_boolean(!strcmp(f->dflt, "true"));
    case WEFT_CONFIG_STRING:
        return json_object_new_string(f->dflt);
    default:
        return json_tokener_parse(f->dflt);
    }
}

/* Check one value of field f and store it at out + f->offset. */
static int store(const weft_config_field *f, json_object *v, char *out, const char *what,
                 weft_error *err)
{
    int64_t n = 0;
    weft_error why = {0};
    switch (f->type) {
    case WEFT_CONFIG_STRING:
        if (!json_object_is_type(v, json_type_string)) break;
        *(const char **)(out + f->offset) = json_object_get_string(v);
        return 0;
    case WEFT_CONFIG_BOOL:
        if (!json_object_is_type(v, json_type_boolean)) break;
        *(int *)(out + f->offset) = json_object_get_boolean(v);
        return 0;
    case WEFT_CONFIG_INT:
    case WEFT_CONFIG_MS:
        if (json_object_is_type(v, json_type_int))
            n = json_object_get_int64(v);
        else if (f->type == WEFT_CONFIG_INT || !json_object_is_type(v, json_type_string) ||
                 wu_parse_duration_str(json_object_get_string(v), &n, &why) != 0)
            break;
        if (f->max > f->min && (n < f->min || n > f->max))
            return wu_err(err, WEFT_EINVAL, "%s: %s must be %s from %lld to %lld (got %s)", what,
                          f->key, type_name(f->type), (long long)f->min, (long long)f->max,
                          json_object_to_json_string(v));
        *(int64_t *)(out + f->offset) = n;
        return 0;
    default:
        *(json_object **)(out + f->offset) = v;
        return 0;
    }
    return wu_err(err, WEFT_EINVAL, "%s: %s must be %s (got %s)%s%s", what, f->key,
                  type_name(f->type), v ? json_object_to_json_string(v) : "null",
                  why.msg[0] ? ": " : "", why.msg);
}

int po_fill(const weft_config_field *table, json_object *config, void *out, const char *what,
            weft_error *err)
{
    const weft_config_field *f;
    size_t size = 0;
    char known[512], *tmp;
    int rc = 0;

    if (config && !json_object_is_type(config, json_type_null) &&
        !json_object_is_type(config, json_type_object))
        return wu_err(err, WEFT_EINVAL, "%s: config must be an object (got %s)", what,
                      json_type_to_name(json_object_get_type(config)));
    if (json_object_is_type(config, json_type_object)) {
        json_object_object_foreach(config, k, v)
        {
            (void)v;
            for (f = table; f->key && strcmp(f->key, k); f++)
                ;
            if (f->key) continue;
            known_keys(table, known, sizeof known);
            return wu_err(err, WEFT_EINVAL, "%s: unknown key '%s' (%s%s)", what, k,
                          known[0] ? "known: " : "it takes none", known);
        }
    }
    /* filled into a scratch copy: out is untouched on error */
    for (f = table; f->key; f++) {
        size_t end = f->offset + (f->type == WEFT_CONFIG_STRING ? sizeof(char *)
                                  : f->type == WEFT_CONFIG_BOOL ? sizeof(int)
                                  : f->type == WEFT_CONFIG_JSON ? sizeof(json_object *)
                                                                : sizeof(int64_t));
        if (end > size) size = end;
    }
    if (!(tmp = malloc(size ? size : 1))) return wu_err(err, WEFT_ENOMEM, "out of memory");
    if (size) memcpy(tmp, out, size);
    for (f = table; f->key && rc == 0; f++) {
        json_object *v = NULL;
        if (json_object_is_type(config, json_type_object) &&
            json_object_object_get_ex(config, f->key, &v)) {
            rc = store(f, v, tmp, what, err);
        } else if (f->required) {
            rc = wu_err(err, WEFT_EINVAL, "%s: %s is required (%s)", what, f->key,
                        type_name(f->type));
        } else if (f->dflt) {
            json_object *d = default_value(f);
            /* a default that does not fit its own field is the plugin's bug */
            rc = d ? store(f, d, tmp, what, err)
                   : wu_err(err, WEFT_EINVAL, "%s: %s: bad default '%s'", what, f->key, f->dflt);
            /* strings of a default live in the table itself, not in d */
            if (rc == 0 && f->type == WEFT_CONFIG_STRING)
                *(const char **)(tmp + f->offset) = f->dflt;
            else if (rc == 0 && f->type == WEFT_CONFIG_JSON)
                rc = wu_err(err, WEFT_EINVAL, "%s: %s: JSON keys take no default", what, f->key);
            json_object_put(d);
        }
    }
    if (rc == 0 && size) memcpy(out, tmp, size);
    free(tmp);
    return rc;
}
