/*
 * Plugin config as a declared table (weft_config_field): the host checks a
 * config object against it and fills the plugin's struct. Prefix po_.
 */
#ifndef WEFT_PLUGIN_OPTIONS_H
#define WEFT_PLUGIN_OPTIONS_H

#include "weft/plugin.h"

/*
 * weft_host.config_fill: validate config (borrowed; NULL or null = empty)
 * against table and fill out (see plugin.h). Returns 0 or WEFT_EINVAL with
 * a message "<what>: ..." naming the key; out is only written on success.
 */
int po_fill(const weft_config_field *table, json_object *config, void *out, const char *what,
            weft_error *err);

#endif
