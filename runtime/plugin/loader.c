#define _GNU_SOURCE /* strndup, readlink and dlfcn also under a strict -std */
#include "plugin/loader.h"
#include "base/util.h"

#include <assert.h>
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <ltdl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

/* Set by the build (runtime/Makefile.am); fallbacks keep a bare compile working. */
#ifndef WEFT_PLUGIN_DIR
#define WEFT_PLUGIN_DIR "/usr/local/lib/weft"
#endif
#ifndef WEFT_BUILD_DIR
#define WEFT_BUILD_DIR ""
#endif

typedef struct reg_entry {
    const void *item; /* weft_task_type or weft_lock_provider */
    pl_plugin *owner;
} reg_entry;

struct pl_registry {
    const weft_host *host;
    int ltdl_ok;
    wu_vec plugins;  /* pl_plugin *, load order */
    wu_map *types;   /* name -> reg_entry * */
    wu_map *locks;   /* name -> reg_entry * */
    wu_vec entries;  /* reg_entry *, owned */
    wu_vec failures; /* char * */
    char *searched;
    char *type_names;    /* every registered type, sorted, ", "-separated */
    json_object *config; /* { <plugin name>: { ... } }, or NULL */
    int override;        /* plugins elsewhere may replace built-ins' types */
    wu_vec builtin_dirs; /* real paths of the default directories, once asked */
    int builtin_known;
};

/*
 * The plugin whose weft_plugin_init is running. Registrations are staged on
 * it and only enter the registry once init has succeeded, so undoing a failed
 * plugin is dropping the staging. Plugins are loaded on the main thread only.
 */
struct loading {
    pl_registry *r;
    pl_plugin *p;
    int declared;
    uint32_t major;
    int reg_code; /* first failed registration */
    char reg_msg[WEFT_ERROR_MAX];
    char note[WEFT_ERROR_MAX]; /* last error logged by init */
};
static struct loading *loading;

static void free_strings(wu_vec *v);
static int in_builtin_dir(pl_registry *r, const char *path);

static const char *code_name(int code)
{
    switch (code) {
    case WEFT_EINVAL:
        return "WEFT_EINVAL";
    case WEFT_ENOMEM:
        return "WEFT_ENOMEM";
    case WEFT_ENOTFOUND:
        return "WEFT_ENOTFOUND";
    case WEFT_EEXIST:
        return "WEFT_EEXIST";
    case WEFT_EABI:
        return "WEFT_EABI";
    case WEFT_ELIMIT:
        return "WEFT_ELIMIT";
    case WEFT_ESCRIPT:
        return "WEFT_ESCRIPT";
    case WEFT_EIO:
        return "WEFT_EIO";
    case WEFT_ESTATE:
        return "WEFT_ESTATE";
    case WEFT_ETIMEOUT:
        return "WEFT_ETIMEOUT";
    default:
        return "unknown code";
    }
}

static void plugin_free(pl_plugin *p)
{
    size_t i;
    if (!p) return;
    free(p->name);
    free(p->file);
    for (i = 0; i < p->ntypes; i++)
        free((void *)p->types[i]);
    for (i = 0; i < p->nlocks; i++)
        free((void *)p->locks[i]);
    free(p->types);
    free(p->locks);
    free(p);
}

/* An environment switch: 1, true, yes or on. */
static int env_on(const char *name)
{
    const char *v = getenv(name);
    return v && (!strcmp(v, "1") || !strcasecmp(v, "true") || !strcasecmp(v, "yes") ||
                 !strcasecmp(v, "on"));
}

pl_registry *pl_new(const weft_host *host)
{
    pl_registry *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    r->host = host;
    r->types = wu_map_new();
    r->locks = wu_map_new();
    r->searched = strdup("");
    r->type_names = strdup("");
    if (!r->types || !r->locks || !r->searched || !r->type_names) {
        pl_free(r);
        return NULL;
    }
    /* lt_dlinit/lt_dlexit are reference counted by libltdl itself */
    r->ltdl_ok = lt_dlinit() == 0;
    r->override = env_on("WEFT_PLUGIN_OVERRIDE");
    return r;
}

/* The configuration of the plugin named name (borrowed), or NULL. */
static json_object *pl_config_of(const pl_registry *r, const char *name)
{
    json_object *c = NULL;
    if (r->config) json_object_object_get_ex(r->config, name, &c);
    return c;
}

/* Call each distinct init of p's types once, with the plugin's config. */
static int types_init(pl_registry *r, pl_plugin *p, weft_error *err)
{
    size_t i, j;
    for (i = 0; i < p->ntypes; i++) {
        int (*init)(const weft_host *, json_object *, weft_error *) = p->types[i]->init;
        weft_error e = {0};
        int rc;
        if (!init) continue;
        for (j = 0; j < i && p->types[j]->init != init; j++)
            ;
        if (j < i) continue;
        if ((rc = init(r->host, pl_config_of(r, p->name), &e)) != 0)
            return wu_err(err, rc < 0 ? rc : WEFT_EINVAL,
                          "plugin %s: task type %s: init failed: %s", p->file, p->types[i]->name,
                          e.msg[0] ? e.msg : "no reason given");
    }
    return 0;
}

/* Call each distinct fini of p's types once (types may share one). */
static void plugin_fini(pl_plugin *p)
{
    size_t i, j;
    for (i = 0; i < p->ntypes; i++) {
        void (*fini)(void) = p->types[i]->fini;
        if (!fini) continue;
        for (j = 0; j < i && p->types[j]->fini != fini; j++)
            ;
        if (j == i) fini();
    }
}

void pl_set_override(pl_registry *r, int on)
{
    r->override = on != 0;
}

void pl_set_config(pl_registry *r, json_object *config)
{
    json_object_put(r->config);
    r->config = config ? json_object_get(config) : NULL;
}

void pl_free(pl_registry *r)
{
    size_t i;
    if (!r) return;
    /* unload in reverse load order */
    for (i = r->plugins.len; i-- > 0;) {
        pl_plugin *p = r->plugins.items[i];
        plugin_fini(p);
        if (p->handle) lt_dlclose(p->handle);
        plugin_free(p);
    }
    wu_vec_free(&r->plugins);
    for (i = 0; i < r->entries.len; i++)
        free(r->entries.items[i]);
    wu_vec_free(&r->entries);
    for (i = 0; i < r->failures.len; i++)
        free(r->failures.items[i]);
    wu_vec_free(&r->failures);
    wu_map_free(r->types);
    wu_map_free(r->locks);
    free(r->searched);
    free(r->type_names);
    free_strings(&r->builtin_dirs);
    json_object_put(r->config);
    if (r->ltdl_ok) lt_dlexit();
    free(r);
}

/* ---- host-table functions ---- */

/* The oldest plugin ABI this host still reads (ABI 1: structs without a size). */
#define ABI_OLDEST 1

static int abi_ok(uint32_t major, uint32_t host_major)
{
    return major >= ABI_OLDEST && major <= host_major;
}

int pl_host_declare(uint32_t plugin_abi_major, uint32_t plugin_host_size)
{
    if (!loading) return WEFT_ESTATE;
    loading->declared = 1;
    loading->major = plugin_abi_major;
    loading->p->abi_major = plugin_abi_major;
    /* a larger plugin_host_size is fine: the plugin tests WEFT_HOST_HAS */
    return abi_ok(plugin_abi_major, loading->r->host->abi_major) ? 0 : WEFT_EABI;
}

/* Refuse a registration; the first refusal is kept for the loader's report. */
static int reg_fail(weft_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int reg_fail(weft_error *err, int code, const char *fmt, ...)
{
    weft_error local;
    va_list ap;
    va_start(ap, fmt);
    wu_verr(&local, code, fmt, ap);
    va_end(ap);
    if (loading && loading->reg_code == 0) {
        loading->reg_code = code;
        memcpy(loading->reg_msg, local.msg, sizeof local.msg);
    }
    if (err) *err = local;
    return code;
}

static int reg_allowed(const char *what, weft_error *err)
{
    if (!loading)
        return wu_err(err, WEFT_ESTATE, "registration is only allowed during weft_plugin_init");
    if (!loading->declared)
        return reg_fail(err, WEFT_ESTATE,
                        "plugin %s: %s registered before declaring the ABI "
                        "(start weft_plugin_init with WEFT_PLUGIN_BEGIN)",
                        loading->p->file, what);
    if (!abi_ok(loading->major, loading->r->host->abi_major))
        return reg_fail(
            err, WEFT_EABI, "plugin %s: built for weft plugin ABI %u, this weft has ABI %u",
            loading->p->file, (unsigned)loading->major, (unsigned)loading->r->host->abi_major);
    return 0;
}

/* Grow an array of const pointers by one. */
static int push_ptr(const void ***arr, size_t *n, const void *item)
{
    const void **a = realloc(*arr, (*n + 1) * sizeof *a);
    if (!a) return WEFT_ENOMEM;
    a[(*n)++] = item;
    *arr = a;
    return 0;
}

/*
 * What the registry needs to know of a task type or lock provider struct:
 * its full size in this ABI, the end of the ABI 2.0 layout (the smallest
 * size readable), where its name is, and what else a valid one has.
 */
typedef struct kind {
    const char *what; /* "task type" */
    size_t full, min, name_off;
    /* why a struct with a name is unusable (a message after "<what> <name> "), or NULL */
    const char *(*invalid)(const void *item);
} kind;

static const char *type_invalid(const void *item)
{
    const weft_task_type *t = item;
    return t->execute || t->map || (t->flags & WEFT_TASK_EXTERNAL) ? NULL
                                                                   : "has neither execute nor map";
}

static const char *lock_invalid(const void *item)
{
    const weft_lock_provider *l = item;
    return l->acquire && l->release ? NULL : "needs acquire and release";
}

#define END_OF(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))
static const kind type_kind = {"task type", sizeof(weft_task_type), END_OF(weft_task_type, fini),
                               offsetof(weft_task_type, name), type_invalid};
static const kind lock_kind = {"lock provider", sizeof(weft_lock_provider),
                               END_OF(weft_lock_provider, close),
                               offsetof(weft_lock_provider, name), lock_invalid};

/*
 * A copy (caller owns) of the struct a plugin registers, read by its size:
 * fields past a shorter (older) struct stay NULL. An ABI 1 struct had the
 * same fields without the leading size. Refused when the size is below
 * the ABI 2 layout.
 */
static int copy_struct(const kind *k, const void *given, void **out, weft_error *err)
{
    size_t size = k->min - k->name_off;
    const char *name = NULL;
    char *copy;
    if (loading->major >= 2) {
        size = *(const uint32_t *)given;
        /* the name is there unless the size says otherwise (0: .size not set) */
        if (size == 0 || size >= k->name_off + sizeof name)
            memcpy(&name, (const char *)given + k->name_off, sizeof name);
        if (size < k->min)
            return reg_fail(err, WEFT_EINVAL,
                            "plugin %s: %s %s: struct size %zu is too small for weft plugin ABI "
                            "%u (at least %zu; set .size = sizeof the struct)",
                            loading->p->file, k->what, name ? name : "(unnamed)", size,
                            (unsigned)loading->major, k->min);
    }
    if (!(copy = calloc(1, k->full)))
        return reg_fail(err, WEFT_ENOMEM, "plugin %s: out of memory", loading->p->file);
    if (loading->major >= 2)
        memcpy(copy, given, size < k->full ? size : k->full);
    else
        memcpy(copy + k->name_off, given, size);
    *(uint32_t *)copy = (uint32_t)k->full;
    *out = copy;
    return 0;
}

/*
 * The checks every registration shares: the name is free (or, overriding,
 * a built-in's name that a plugin earlier on the path took: *skip set),
 * not taken twice by the same plugin.
 */
static int name_free(const kind *k, wu_map *taken, const void **mine, size_t nmine,
                     const char *name, int *skip, weft_error *err)
{
    pl_plugin *p = loading->p;
    reg_entry *e = wu_map_get(taken, name);
    size_t i;
    *skip = 0;
    if (e && loading->r->override && p->builtin && !e->owner->builtin) {
        loading->r->host->log(WEFT_LOG_INFO, "%s %s of built-in plugin %s is overridden by %s",
                              k->what, name, p->file, e->owner->file);
        *skip = 1;
        return 0;
    }
    if (e && e->owner->builtin && !p->builtin)
        return reg_fail(err, WEFT_EEXIST,
                        "plugin %s: %s %s is already registered by plugin %s, a built-in (set "
                        "WEFT_PLUGIN_OVERRIDE=1 to replace it)",
                        p->file, k->what, name, e->owner->file);
    if (e)
        return reg_fail(err, WEFT_EEXIST, "plugin %s: %s %s is already registered by plugin %s",
                        p->file, k->what, name, e->owner->file);
    for (i = 0; i < nmine; i++)
        if (!strcmp(*(const char *const *)((const char *)mine[i] + k->name_off), name))
            return reg_fail(err, WEFT_EEXIST, "plugin %s: %s %s is already registered by plugin %s",
                            p->file, k->what, name, p->file);
    return 0;
}

/*
 * Stage one registration of the loading plugin: a copy of given, checked,
 * appended to *mine (p->types or p->locks, *n entries) unless overriding
 * skips it.
 */
static int stage(const kind *k, const void *given, const void ***mine, size_t *n, weft_error *err)
{
    wu_map *taken = k == &type_kind ? loading->r->types : loading->r->locks;
    const char *file = loading->p->file, *name, *why;
    void *copy = NULL;
    int rc, skip = 0;

    if (!given) return reg_fail(err, WEFT_EINVAL, "plugin %s: %s without a name", file, k->what);
    if ((rc = copy_struct(k, given, &copy, err)) != 0) return rc;
    name = *(const char **)((char *)copy + k->name_off);
    if (!name || !*name)
        rc = reg_fail(err, WEFT_EINVAL, "plugin %s: %s without a name", file, k->what);
    else if ((why = k->invalid(copy)) != NULL)
        rc = reg_fail(err, WEFT_EINVAL, "plugin %s: %s %s %s", file, k->what, name, why);
    else if ((rc = name_free(k, taken, *mine, *n, name, &skip, err)) == 0 && !skip &&
             push_ptr(mine, n, copy) != 0)
        rc = reg_fail(err, WEFT_ENOMEM, "plugin %s: out of memory", file);
    else if (rc == 0 && !skip)
        return 0;
    free(copy);
    return rc;
}

int pl_host_register_task_type(const weft_task_type *type, weft_error *err)
{
    int rc = reg_allowed("a task type", err);
    return rc ? rc
              : stage(&type_kind, type, (const void ***)&loading->p->types, &loading->p->ntypes,
                      err);
}

int pl_host_register_lock_provider(const weft_lock_provider *lock, weft_error *err)
{
    int rc = reg_allowed("a lock provider", err);
    return rc ? rc
              : stage(&lock_kind, lock, (const void ***)&loading->p->locks, &loading->p->nlocks,
                      err);
}

/*
 * The host's log function passes each formatted line here: during a plugin's
 * init the last WEFT_LOG_ERROR line becomes its init-failure message (init
 * has no weft_error of its own to fill).
 */
void pl_host_note(int level, const char *msg);
void pl_host_note(int level, const char *msg)
{
    if (loading && level == WEFT_LOG_ERROR && msg)
        snprintf(loading->note, sizeof loading->note, "%s", msg);
}

const char *pl_host_loading_name(void)
{
    return loading ? loading->p->name : NULL;
}

/* ---- loading one file ---- */

static int has_suffix(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

static int exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && !S_ISDIR(st.st_mode);
}

/* The file to open for `file` (as given, or with .la / .so added), or NULL. */
static char *resolve_file(const char *file)
{
    static const char *const exts[] = {".la", ".so"};
    size_t i, n = strlen(file);
    char *cand;
    if (has_suffix(file, ".la") || has_suffix(file, ".so"))
        return exists(file) ? strdup(file) : NULL;
    for (i = 0; i < 2; i++) {
        cand = malloc(n + 4);
        if (!cand) return NULL;
        memcpy(cand, file, n);
        memcpy(cand + n, exts[i], 4);
        if (exists(cand)) return cand;
        free(cand);
    }
    return exists(file) ? strdup(file) : NULL;
}

/* basename without .la / .so */
static char *plugin_name(const char *path)
{
    const char *base = strrchr(path, '/');
    size_t n;
    base = base ? base + 1 : path;
    n = strlen(base);
    if (has_suffix(base, ".la") || has_suffix(base, ".so")) n -= 3;
    return strndup(base, n);
}

static lt_dlhandle open_module(const char *path)
{
    lt_dladvise adv;
    lt_dlhandle h = NULL;
    int ok;
    if (lt_dladvise_init(&adv) != 0) return NULL;
    ok = lt_dladvise_local(&adv) == 0;
    /*
     * With ext, a .la / .so name is opened as it is; only a file that exists
     * without an extension must not get one appended.
     */
    if (ok && (has_suffix(path, ".la") || has_suffix(path, ".so"))) ok = lt_dladvise_ext(&adv) == 0;
    if (ok) h = lt_dlopenadvise(path, adv);
    lt_dladvise_destroy(&adv);
    return h;
}

/* The value of `key='value'` (or key=value) in .la text, into out. */
static int la_field(const char *text, const char *key, char *out, size_t size)
{
    size_t klen = strlen(key), n;
    const char *line, *v, *end;
    for (line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, key, klen) || line[klen] != '=') continue;
        v = line + klen + 1;
        if (*v == '\'') v++;
        for (end = v; *end && *end != '\n' && *end != '\''; end++)
            ;
        n = (size_t)(end - v) < size - 1 ? (size_t)(end - v) : size - 1;
        memcpy(out, v, n);
        out[n] = 0;
        return n > 0;
    }
    return 0;
}

/*
 * Why `path` cannot be loaded, into buf. libltdl's own message is often
 * just "file not found" (its preload loader runs last and overwrites the
 * dlopen error), so the shared object - for a .la the one it names - is
 * tried with dlopen directly to get the real reason (missing dependency,
 * bad ELF file ...). Diagnostics only: the handle, if any, is closed.
 */
static void load_error(const char *path, const char *lt_msg, weft_error *why)
{
    char obj[PATH_MAX], dlname[256], libdir[PATH_MAX] = "", dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    void *h;

    wu_err(why, WEFT_EIO, "%s", lt_msg ? lt_msg : "unknown error");
    snprintf(obj, sizeof obj, "%s", path);
    if (has_suffix(path, ".la")) {
        char *text = NULL;
        int i, found = 0;
        snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
        if (wu_read_file(path, &text, NULL, NULL) != 0) return;
        if (!la_field(text, "dlname", dlname, sizeof dlname)) {
            free(text);
            wu_err(why, WEFT_EIO, "not a libtool module (no dlname in it)");
            return;
        }
        la_field(text, "libdir", libdir, sizeof libdir);
        free(text);
        /* where libltdl looks, in its order */
        for (i = 0; i < 3 && !found; i++) {
            const char *d = i == 0 ? dir : i == 1 ? dir : libdir;
            if (i == 2 && !*d) break;
            found = (size_t)snprintf(obj, sizeof obj, "%s%s/%s", d, i == 0 ? "/.libs" : "",
                                     dlname) < sizeof obj &&
                    exists(obj);
        }
        if (!found) {
            wu_err(why, WEFT_EIO, "%s not found (in %s/.libs, %s%s%s)", dlname, dir, dir,
                   libdir[0] ? " or " : "", libdir);
            return;
        }
    }
    dlerror();
    h = dlopen(obj, RTLD_LAZY | RTLD_LOCAL);
    if (h)
        dlclose(h);
    else
        wu_err(why, WEFT_EIO, "%s", dlerror());
}

static int cmp_str(const void *a, const void *b);

/* r->type_names anew from the types registered; on no memory the old list stays. */
static void name_types(pl_registry *r)
{
    wu_vec names = {0};
    wu_buf b = {0};
    size_t i, j;
    for (i = 0; i < r->plugins.len; i++) {
        const pl_plugin *p = r->plugins.items[i];
        for (j = 0; j < p->ntypes; j++)
            if (wu_vec_push(&names, (void *)p->types[j]->name)) goto out;
    }
    if (names.len) qsort(names.items, names.len, sizeof *names.items, cmp_str);
    for (i = 0; i < names.len; i++)
        if ((i && wu_buf_add(&b, ", ", 2)) ||
            wu_buf_add(&b, names.items[i], strlen(names.items[i])))
            goto out;
    free(r->type_names);
    r->type_names = b.data ? b.data : strdup("");
    b.data = NULL;
out:
    wu_buf_free(&b);
    wu_vec_free(&names);
}

/* Move the staged registrations of p into the registry. */
static int commit(pl_registry *r, pl_plugin *p, weft_error *err)
{
    size_t i, nent = r->entries.len;
    for (i = 0; i < p->ntypes + p->nlocks; i++) {
        reg_entry *e = malloc(sizeof *e);
        int is_type = i < p->ntypes;
        if (!e || wu_vec_push(&r->entries, e) != 0) {
            free(e);
            return wu_err(err, WEFT_ENOMEM, "plugin %s: out of memory", p->file);
        }
        e->item = is_type ? (const void *)p->types[i] : (const void *)p->locks[i - p->ntypes];
        e->owner = p;
    }
    if (wu_vec_push(&r->plugins, p) != 0)
        return wu_err(err, WEFT_ENOMEM, "plugin %s: out of memory", p->file);
    /* wu_map_put can only fail while growing, before anything is replaced */
    for (i = 0; i < p->ntypes + p->nlocks; i++) {
        reg_entry *e = r->entries.items[nent + i];
        int rc = i < p->ntypes ? wu_map_put(r->types, p->types[i]->name, e)
                               : wu_map_put(r->locks, p->locks[i - p->ntypes]->name, e);
        if (rc != 0) {
            /* cannot take half of it back out of the maps: keep it loaded */
            return wu_err(err, WEFT_ENOMEM, "plugin %s: out of memory", p->file);
        }
    }
    name_types(r);
    return 0;
}

int pl_load_file(pl_registry *r, const char *file, weft_error *err)
{
    struct loading st;
    pl_plugin *p;
    char *path;
    int (*init)(const weft_host *);
    int rc;

    assert(loading == NULL && "pl_load_file called from inside a plugin's init");
    if (!r->ltdl_ok)
        return wu_err(err, WEFT_EIO, "plugin %s: libltdl could not be initialised", file);
    path = resolve_file(file);
    if (!path) return wu_err(err, WEFT_ENOTFOUND, "plugin %s: not found", file);
    p = calloc(1, sizeof *p);
    if (!p || !(p->name = plugin_name(path))) {
        free(path);
        plugin_free(p);
        return wu_err(err, WEFT_ENOMEM, "plugin %s: out of memory", file);
    }
    p->file = path;
    p->builtin = in_builtin_dir(r, path);

    /*
     * lt_dlerror() also clears the last error: without that a failure that
     * sets none would report an older one (whose text glibc may have freed).
     */
    lt_dlerror();
    p->handle = open_module(path);
    if (!p->handle) {
        weft_error why;
        load_error(path, lt_dlerror(), &why);
        rc = wu_err(err, WEFT_EIO, "plugin %s: cannot load: %s", path, why.msg);
        plugin_free(p);
        return rc;
    }
    /* lt_dlsym tries <name>_LTX_weft_plugin_init first */
    lt_dlerror();
    init = (int (*)(const weft_host *))lt_dlsym(p->handle, "weft_plugin_init");
    if (!init) {
        rc = wu_err(err, WEFT_ENOTFOUND,
                    "plugin %s: no weft_plugin_init symbol (is it a weft plugin?)", path);
        goto fail;
    }

    memset(&st, 0, sizeof st);
    st.r = r;
    st.p = p;
    loading = &st;
    rc = init(r->host);
    loading = NULL;

    if (st.declared && !abi_ok(st.major, r->host->abi_major)) {
        rc = wu_err(err, WEFT_EABI, "plugin %s: built for weft plugin ABI %u, this weft has ABI %u",
                    path, (unsigned)st.major, (unsigned)r->host->abi_major);
    } else if (st.reg_code != 0) {
        if (rc == 0) plugin_fini(p); /* its init succeeded: let it clean up */
        rc = wu_err(err, st.reg_code, "%s", st.reg_msg);
    } else if (rc != 0) {
        if (rc > 0) rc = WEFT_EINVAL;
        rc = st.note[0] ? wu_err(err, rc, "plugin %s: init failed: %s", path, st.note)
                        : wu_err(err, rc, "plugin %s: init failed: error %d (%s)", path, rc,
                                 code_name(rc));
    } else if (!st.declared) {
        rc = wu_err(err, WEFT_ESTATE,
                    "plugin %s: did not declare its ABI (start weft_plugin_init with "
                    "WEFT_PLUGIN_BEGIN)",
                    path);
    } else if ((rc = types_init(r, p, err)) != 0) {
        plugin_fini(p);
    } else if ((rc = commit(r, p, err)) == 0) {
        return 0;
    } else if (r->plugins.len && r->plugins.items[r->plugins.len - 1] == p) {
        return rc; /* partly committed: it stays (see commit) */
    } else {
        plugin_fini(p);
    }
fail:
    lt_dlclose(p->handle);
    plugin_free(p);
    return rc;
}

/* ---- directories and paths ---- */

static int add_failure(pl_registry *r, const char *msg)
{
    char *m = strdup(msg);
    if (!m || wu_vec_push(&r->failures, m) != 0) {
        free(m);
        return WEFT_ENOMEM;
    }
    return 0;
}

static int add_searched(pl_registry *r, const char *dir)
{
    size_t n = strlen(r->searched), m = strlen(dir);
    char *s = realloc(r->searched, n + m + 2);
    if (!s) return WEFT_ENOMEM;
    if (n) s[n++] = ':';
    memcpy(s + n, dir, m + 1);
    r->searched = s;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * The plugin files of dir: basenames with .la or .so, .la preferred when
 * both exist, sorted by name. *files gets file names (not paths).
 */
static int list_plugins(const char *dir, wu_vec *files, int *errnum)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    size_t i, j;
    if (!d) {
        *errnum = errno;
        return errno == ENOENT || errno == ENOTDIR ? WEFT_ENOTFOUND : WEFT_EIO;
    }
    while ((de = readdir(d)) != NULL) {
        char *name;
        if (de->d_name[0] == '.' || strlen(de->d_name) <= 3 ||
            !(has_suffix(de->d_name, ".la") || has_suffix(de->d_name, ".so")))
            continue;
        if (!(name = strdup(de->d_name)) || wu_vec_push(files, name) != 0) {
            free(name);
            closedir(d);
            return WEFT_ENOMEM;
        }
    }
    closedir(d);
    /* "x.la" < "x.so" in strcmp order, so the .la comes first of a pair */
    if (files->len > 1) qsort(files->items, files->len, sizeof *files->items, cmp_str);
    for (i = j = 0; i < files->len; i++) {
        char *f = files->items[i];
        if (j > 0) {
            const char *prev = files->items[j - 1];
            size_t n = strlen(f) - 3;
            if (strlen(prev) - 3 == n && !strncmp(prev, f, n)) {
                free(f);
                continue;
            }
        }
        files->items[j++] = f;
    }
    files->len = j;
    return 0;
}

static void free_strings(wu_vec *v)
{
    size_t i;
    for (i = 0; i < v->len; i++)
        free(v->items[i]);
    wu_vec_free(v);
}

/* The loaded plugin of this name, or NULL (first found of a name wins). */
static const pl_plugin *loaded_named(const pl_registry *r, const char *name)
{
    size_t i;
    for (i = 0; i < r->plugins.len; i++)
        if (!strcmp(((pl_plugin *)r->plugins.items[i])->name, name)) return r->plugins.items[i];
    return NULL;
}

/* Whether dir is one of the default directories (compared as real paths). */
static int is_builtin_dir(pl_registry *r, const char *dir)
{
    char real[PATH_MAX], *def, *d, *save = NULL, *copy;
    size_t i;
    if (!r->builtin_known && (def = pl_default_path()) != NULL) {
        for (d = strtok_r(def, ":", &save); d; d = strtok_r(NULL, ":", &save))
            if (realpath(d, real) && (copy = strdup(real)) &&
                wu_vec_push(&r->builtin_dirs, copy) != 0)
                free(copy);
        free(def);
        r->builtin_known = 1;
    }
    if (!realpath(dir, real)) return 0;
    for (i = 0; i < r->builtin_dirs.len; i++)
        if (!strcmp(r->builtin_dirs.items[i], real)) return 1;
    return 0;
}

/* Whether the plugin file path lies in a default directory. */
static int in_builtin_dir(pl_registry *r, const char *path)
{
    const char *slash = strrchr(path, '/');
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - path) : 1, slash ? path : ".");
    return is_builtin_dir(r, dir);
}

/*
 * Load the plugins of dir (rank: its place on the path, for the order of
 * pl_get). A name already loaded is skipped; a built-in's name is refused
 * in another directory unless overriding.
 */
static int load_dir(pl_registry *r, const char *dir, size_t rank, int builtin, wu_map *seen)
{
    wu_vec files = {0};
    weft_error err;
    size_t i, dlen = strlen(dir);
    int rc, errnum = 0, failures = 0;

    rc = list_plugins(dir, &files, &errnum);
    if (rc != 0) {
        wu_err(&err, rc, "plugin directory %s: %s", dir,
               errnum == ENOENT    ? "not found"
               : errnum == ENOTDIR ? "not a directory"
               : rc == WEFT_ENOMEM ? "out of memory"
                                   : strerror(errnum));
        add_failure(r, err.msg);
        free_strings(&files);
        return 1;
    }
    for (i = 0; i < files.len; i++) {
        const char *f = files.items[i];
        char *name = strndup(f, strlen(f) - 3), *path;
        const pl_plugin *other;
        if (!name) break;
        path = malloc(dlen + strlen(f) + 2);
        if (!path) {
            free(name);
            break;
        }
        sprintf(path, "%s%s%s", dir, dlen && dir[dlen - 1] == '/' ? "" : "/", f);
        other = loaded_named(r, name);
        if (other && other->builtin && !builtin && !r->override) {
            wu_err(&err, WEFT_EEXIST,
                   "plugin %s: not loaded: built-in plugin %s has that name (set "
                   "WEFT_PLUGIN_OVERRIDE=1 to load this one instead)",
                   path, other->file);
            add_failure(r, err.msg);
            failures++;
        } else if (!other && !wu_map_get(seen, name)) {
            wu_map_put(seen, name, (void *)1);
            if (pl_load_file(r, path, &err) != 0) {
                add_failure(r, err.msg);
                failures++;
            } else {
                ((pl_plugin *)r->plugins.items[r->plugins.len - 1])->rank = rank + i;
            }
        }
        free(name);
        free(path);
    }
    if (i < files.len) {
        wu_err(&err, WEFT_ENOMEM, "plugin directory %s: out of memory", dir);
        add_failure(r, err.msg);
        failures++;
    }
    free_strings(&files);
    return failures;
}

static int by_rank(const void *a, const void *b)
{
    const pl_plugin *x = *(pl_plugin *const *)a, *y = *(pl_plugin *const *)b;
    return x->rank < y->rank ? -1 : x->rank > y->rank;
}

/* The directories of path in order, empty elements replaced by the defaults. */
static int path_dirs(const char *path, wu_vec *dirs)
{
    char *own = strdup(path), *def, *p, *elem, *d, *save, *copy;
    if (!own) return WEFT_ENOMEM;
    /* strtok would merge empty elements; walk by hand */
    for (p = own;; p = elem + 1) {
        int last;
        elem = strchr(p, ':');
        last = elem == NULL;
        if (!last) *elem = 0;
        def = *p ? NULL : pl_default_path();
        save = NULL;
        for (d = *p    ? p
                 : def ? strtok_r(def, ":", &save)
                       : NULL;
             d; d = *p ? NULL : strtok_r(NULL, ":", &save))
            if (!(copy = strdup(d)) || wu_vec_push(dirs, copy) != 0) {
                free(copy);
                free(def);
                free(own);
                return WEFT_ENOMEM;
            }
        if (!*p && !def) {
            free(own);
            return WEFT_ENOMEM;
        }
        free(def);
        if (last) break;
    }
    free(own);
    return 0;
}

int pl_load_path(pl_registry *r, const char *path)
{
    wu_vec dirs = {0};
    wu_map *seen = wu_map_new();
    size_t i, start = r->plugins.len;
    int failures = 0, pass, *builtin = NULL;

    if (!seen || path_dirs(path ? path : "", &dirs) != 0 ||
        !(builtin = calloc(dirs.len + 1, sizeof *builtin))) {
        add_failure(r, "plugin path: out of memory");
        wu_map_free(seen);
        free_strings(&dirs);
        return 1;
    }
    for (i = 0; i < dirs.len; i++) {
        builtin[i] = is_builtin_dir(r, dirs.items[i]);
        if (add_searched(r, dirs.items[i]) != 0) failures++;
    }
    /* built-ins first, so that nothing else takes their names; overriding,
     * the path's order decides */
    for (pass = 0; pass < 2; pass++)
        for (i = 0; i < dirs.len; i++)
            if (r->override ? pass == 0 : builtin[i] == !pass)
                failures += load_dir(r, dirs.items[i], i << 20, builtin[i], seen);
    if (r->plugins.len - start > 1)
        qsort(r->plugins.items + start, r->plugins.len - start, sizeof *r->plugins.items, by_rank);
    free(builtin);
    free_strings(&dirs);
    wu_map_free(seen);
    return failures;
}

/* ---- the default path ---- */

static int dir_has_la(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int found = 0;
    if (!d) return 0;
    while (!found && (de = readdir(d)) != NULL)
        found = de->d_name[0] != '.' && has_suffix(de->d_name, ".la");
    closedir(d);
    return found;
}

/* Length of WEFT_BUILD_DIR without trailing slashes. */
static size_t build_dir_len(void)
{
    size_t n = strlen(WEFT_BUILD_DIR);
    while (n > 0 && WEFT_BUILD_DIR[n - 1] == '/')
        n--;
    return n;
}

/* True when this program runs from under WEFT_BUILD_DIR. */
static int in_build_tree(void)
{
    char exe[PATH_MAX];
    ssize_t n;
    size_t blen = build_dir_len();
    if (blen == 0) return 0;
    n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return 0;
    exe[n] = 0;
    /* compare with a trailing '/' so /build does not match /build2 */
    return (size_t)n > blen && !strncmp(exe, WEFT_BUILD_DIR, blen) && exe[blen] == '/';
}

char *pl_default_path(void)
{
    char root[PATH_MAX];
    wu_vec subs = {0};
    DIR *d;
    struct dirent *de;
    char *out;
    size_t i, len = 0;

    if (!in_build_tree()) return strdup(WEFT_PLUGIN_DIR);
    snprintf(root, sizeof root, "%.*s/plugins", (int)build_dir_len(), WEFT_BUILD_DIR);
    d = opendir(root);
    while (d && (de = readdir(d)) != NULL) {
        char sub[PATH_MAX];
        char *s;
        if (de->d_name[0] == '.') continue;
        if ((size_t)snprintf(sub, sizeof sub, "%s/%s", root, de->d_name) >= sizeof sub ||
            !dir_has_la(sub))
            continue;
        if (!(s = strdup(sub)) || wu_vec_push(&subs, s) != 0) {
            free(s);
            break;
        }
        len += strlen(s) + 1;
    }
    if (d) closedir(d);
    if (subs.len == 0) {
        wu_vec_free(&subs);
        return strdup(root);
    }
    qsort(subs.items, subs.len, sizeof *subs.items, cmp_str);
    out = malloc(len);
    if (out) {
        out[0] = 0;
        for (i = 0; i < subs.len; i++) {
            if (i) strcat(out, ":");
            strcat(out, subs.items[i]);
        }
    }
    free_strings(&subs);
    return out;
}

/* ---- queries ---- */

const weft_task_type *pl_find_type(const pl_registry *r, const char *name, const pl_plugin **owner)
{
    reg_entry *e = name ? wu_map_get(r->types, name) : NULL;
    if (owner) *owner = e ? e->owner : NULL;
    return e ? e->item : NULL;
}

const weft_lock_provider *pl_find_lock(const pl_registry *r, const char *name)
{
    reg_entry *e = name ? wu_map_get(r->locks, name) : NULL;
    return e ? e->item : NULL;
}

size_t pl_count(const pl_registry *r)
{
    return r->plugins.len;
}

const pl_plugin *pl_get(const pl_registry *r, size_t i)
{
    return i < r->plugins.len ? r->plugins.items[i] : NULL;
}

size_t pl_failure_count(const pl_registry *r)
{
    return r->failures.len;
}

const char *pl_failure(const pl_registry *r, size_t i)
{
    return i < r->failures.len ? r->failures.items[i] : NULL;
}

const char *pl_searched(const pl_registry *r)
{
    return r->searched;
}

const char *pl_type_names(const pl_registry *r)
{
    return r->type_names;
}
