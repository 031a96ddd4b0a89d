/*
 * Finding and loading plugins with libltdl, and the registry of the task
 * types and lock providers they register. Prefix pl_.
 *
 * Search path: WEFT_PLUGIN_PATH / --plugin-path (colon-separated) when set,
 * where an empty element stands for the default directories; otherwise the
 * defaults: the build tree's plugins/<name>/ directories when the program
 * runs from the build tree, else the installed plugin directory.
 * Every *.la / *.so in a directory is a plugin (first found of a name wins).
 *
 * Built-in plugins (those in the default directories) are loaded before the
 * other directories of the path, and a plugin elsewhere that has a built-in's
 * name or registers a built-in's type or lock name is refused, unless the
 * operator overrides (WEFT_PLUGIN_OVERRIDE=1 or pl_set_override): then the
 * path order decides, and a built-in's type that an earlier plugin has is
 * skipped (the rest of the built-in still loads).
 *
 * Registered structs are copied: the host reads a plugin's shorter (older)
 * struct by its size, and ABI 1 structs (without a size) in their layout.
 */
#ifndef WEFT_PLUGIN_LOADER_H
#define WEFT_PLUGIN_LOADER_H

#include <stddef.h>
#include "weft/plugin.h"

typedef struct pl_registry pl_registry;

typedef struct pl_plugin {
    char *name; /* basename without extension */
    char *file; /* path as opened */
    uint32_t abi_major;
    const weft_task_type **types; /* the host's copies, owned */
    size_t ntypes;
    const weft_lock_provider **locks; /* the host's copies, owned */
    size_t nlocks;
    void *handle; /* lt_dlhandle */
    int builtin;  /* found in one of the default directories */
    size_t rank;  /* place on the search path (pl_load_path keeps that order) */
} pl_plugin;

/* host is borrowed and must outlive the registry; its register_* and
 * declare functions must forward to pl_host_* below. */
pl_registry *pl_new(const weft_host *host);
/* Calls each type's fini, unloads everything. */
void pl_free(pl_registry *r);

/* Configuration for the plugins loaded after this: { <plugin name>: { ... } }
 * (a reference is taken; NULL = none). Each task type's init gets its
 * plugin's object, or NULL. */
void pl_set_config(pl_registry *r, json_object *config);

/* Whether a plugin elsewhere may replace a built-in's types (see above);
 * pl_new starts with WEFT_PLUGIN_OVERRIDE (1/true/yes/on). */
void pl_set_override(pl_registry *r, int on);

/* The default search path (malloc'd), e.g. "/build/plugins/lambda:..." */
char *pl_default_path(void);

/*
 * Load every plugin in each directory of path (see above for empty
 * elements). A plugin that fails is skipped and its one-line error kept
 * (pl_failures); a directory that does not exist is an error of its own.
 * Returns the number of failures (0 = all fine).
 */
int pl_load_path(pl_registry *r, const char *path);

/*
 * Load one plugin file (with or without extension). Errors, each naming the
 * file: WEFT_ENOTFOUND not found; WEFT_EIO not loadable (with the dlerror
 * text); WEFT_ENOTFOUND missing entry symbol weft_plugin_init; WEFT_EABI
 * (plugin's and host's ABI); WEFT_EINVAL a struct too small for its ABI
 * (naming the type); the init's own code for init failure (its message);
 * WEFT_EEXIST a type registered twice (naming both plugins, and saying how
 * to override when the other is built in).
 * On failure everything the plugin registered is undone.
 */
int pl_load_file(pl_registry *r, const char *file, weft_error *err);

/* The task type registered under name, or NULL; *owner (optional) gets its plugin. */
const weft_task_type *pl_find_type(const pl_registry *r, const char *name, const pl_plugin **owner);
const weft_lock_provider *pl_find_lock(const pl_registry *r, const char *name);

/* Loaded plugins, in search-path order (pl_load_file: load order). */
size_t pl_count(const pl_registry *r);
const pl_plugin *pl_get(const pl_registry *r, size_t i);

/* One-line messages of plugins that failed to load. */
size_t pl_failure_count(const pl_registry *r);
const char *pl_failure(const pl_registry *r, size_t i);

/* The directories searched, colon-separated (for "unknown task type" errors). */
const char *pl_searched(const pl_registry *r);

/* Every task type registered, sorted, ", "-separated ("" for none). */
const char *pl_type_names(const pl_registry *r);

/* Host-table functions: the host's declare/register_* call these. */
int pl_host_declare(uint32_t plugin_abi_major, uint32_t plugin_host_size);
int pl_host_register_task_type(const weft_task_type *type, weft_error *err);
int pl_host_register_lock_provider(const weft_lock_provider *lock, weft_error *err);
/* The host's log calls this with each formatted line: during a plugin's
 * init, the last error line becomes its "init failed: ..." message. */
void pl_host_note(int level, const char *msg);
/* The name of the plugin whose init runs now (its log lines carry it), or NULL. */
const char *pl_host_loading_name(void);

#endif
