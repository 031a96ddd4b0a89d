#define _GNU_SOURCE /* nftw */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "plugin/loader.h"
#include "plugin/options.h"
#include "base/util.h"

/* Not in plugin_loader.h (yet): the host's log hands each line to the loader. */
void pl_host_note(int level, const char *msg);

/*
 * The fixtures come from $WEFT_FIXTURE_DIR (tests/plugins of the build tree:
 * fx_*.la with the objects in .libs/, or plain fx_*.so).
 */
static char fixture_dir[1024];
static char so_dir[1024];     /* where the real fx_*.so files are */
static char abi_so_dir[1024]; /* and those of plugins/abi */
static char tmp_root[64];

/* ---- the test host ---- */

enum {
    DECLARE_FORWARD,
    DECLARE_SWALLOW,
    DECLARE_THEN_NONAME,
    DECLARE_THEN_NOFN,
    DECLARE_THEN_BADLOCK
};
static int declare_mode;
static int fini_count;
static int hook_rc;

static int nofn_execute(weft_ctx *ctx, weft_result *result)
{
    return 0;
}

static int test_declare(uint32_t major, uint32_t size)
{
    static const weft_task_type noname = WEFT_TASK_TYPE(.name = NULL, .execute = nofn_execute);
    static const weft_task_type nofn = WEFT_TASK_TYPE(.name = "FX_NOFN");
    static const weft_lock_provider badlock = WEFT_LOCK_PROVIDER(.name = "fx_badlock");
    weft_error err = {0};
    int rc;
    if (declare_mode == DECLARE_SWALLOW) return 0; /* the loader never hears of the declaration */
    rc = pl_host_declare(major, size);
    if (rc == 0 && declare_mode == DECLARE_THEN_NONAME)
        hook_rc = pl_host_register_task_type(&noname, &err);
    else if (rc == 0 && declare_mode == DECLARE_THEN_NOFN)
        hook_rc = pl_host_register_task_type(&nofn, &err);
    else if (rc == 0 && declare_mode == DECLARE_THEN_BADLOCK)
        hook_rc = pl_host_register_lock_provider(&badlock, &err);
    return rc;
}

static void test_log(int level, const char *fmt, ...)
{
    char line[WEFT_ERROR_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (!strcmp(line, "fx_ok: fini")) fini_count++;
    pl_host_note(level, line);
}

static int test_error(weft_error *err, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    wu_verr(err, code, fmt, ap);
    va_end(ap);
    return code;
}

static const weft_host host = {
    .abi_major = WEFT_ABI_MAJOR,
    .size = sizeof(weft_host),
    .version = "test",
    .declare = test_declare,
    .register_task_type = pl_host_register_task_type,
    .register_lock_provider = pl_host_register_lock_provider,
    .log = test_log,
    .error = test_error,
    .config_fill = po_fill,
};

/* ---- helpers ---- */

static const char *fx(const char *name)
{
    static char buf[4][1200];
    static int n;
    char *b = buf[n++ % 4];
    snprintf(b, sizeof buf[0], "%s/%s", fixture_dir, name);
    return b;
}

static const char *tmp(const char *name)
{
    static char buf[4][200];
    static int n;
    char *b = buf[n++ % 4];
    snprintf(b, sizeof buf[0], "%s/%s", tmp_root, name);
    return b;
}

static void assert_has(const char *msg, const char *part)
{
    if (!msg || !strstr(msg, part))
        fail_msg("\"%s\" does not contain \"%s\"", msg ? msg : "(null)", part);
}

static int ends_with(const char *s, const char *suf)
{
    size_t n = strlen(s), m = strlen(suf);
    return n >= m && !strcmp(s + n - m, suf);
}

/* Link dir/<name>.so to the fixture's real shared object. */
static void link_so(const char *dir, const char *name)
{
    char from[1200], to[300];
    snprintf(from, sizeof from, "%s/%s.so", so_dir, name);
    snprintf(to, sizeof to, "%s/%s.so", dir, name);
    if (symlink(from, to) != 0) fail_msg("symlink %s -> %s failed", to, from);
}

/* Link dir/<as>.so to the real shared object of fixture abi/<name>. */
static void link_abi(const char *dir, const char *as, const char *name)
{
    char from[1200], to[300];
    snprintf(from, sizeof from, "%s/%s.so", abi_so_dir, name);
    snprintf(to, sizeof to, "%s/%s.so", dir, as);
    if (symlink(from, to) != 0) fail_msg("symlink %s -> %s failed", to, from);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int reset(void **state)
{
    declare_mode = DECLARE_FORWARD;
    fini_count = 0;
    hook_rc = 0;
    *state = pl_new(&host);
    assert_non_null(*state);
    return 0;
}

static int done(void **state)
{
    pl_free(*state);
    return 0;
}

/* ---- loading single files ---- */

static void test_load_ok(void **state)
{
    pl_registry *r = *state;
    weft_error err = {0};
    const pl_plugin *p, *owner = NULL;
    const weft_task_type *t;
    const weft_lock_provider *lk;
    weft_result res = {0};
    char token[32];

    assert_int_equal(pl_load_file(r, fx("fx_ok"), &err), 0);
    assert_int_equal(pl_count(r), 1);
    p = pl_get(r, 0);
    assert_non_null(p);
    assert_null(pl_get(r, 1));
    assert_string_equal(p->name, "fx_ok");
    assert_true(!strncmp(p->file, fx("fx_ok."), strlen(fx("fx_ok."))));
    assert_true(ends_with(p->file, ".la") || ends_with(p->file, ".so"));
    assert_int_equal(p->abi_major, WEFT_ABI_MAJOR);
    assert_int_equal(p->ntypes, 2);
    assert_int_equal(p->nlocks, 1);
    assert_non_null(p->handle);

    t = pl_find_type(r, "FX_OK", &owner);
    assert_non_null(t);
    assert_ptr_equal(owner, p);
    assert_ptr_equal(t, p->types[0]);
    assert_string_equal(t->name, "FX_OK");
    assert_int_equal(t->execute(NULL, &res), 0);
    assert_int_equal(res.status, WEFT_TASK_COMPLETED);
    assert_string_equal(json_object_get_string(res.output), "fx ok");
    json_object_put(res.output);

    t = pl_find_type(r, "FX_OK_MAP", &owner);
    assert_non_null(t);
    assert_non_null(t->map);
    assert_null(t->execute);
    assert_ptr_equal(owner, p);

    assert_null(pl_find_type(r, "NOPE", &owner));
    assert_null(owner);
    assert_null(pl_find_type(r, "fx_ok", NULL)); /* names are case-sensitive */

    lk = pl_find_lock(r, "fx_lock");
    assert_non_null(lk);
    assert_ptr_equal(lk, p->locks[0]);
    assert_int_equal(lk->acquire(NULL, "k", 1000, 0, token, sizeof token, &err), 0);
    assert_string_equal(token, "fx-token");
    assert_null(pl_find_lock(r, "FX_OK"));
    assert_int_equal(pl_failure_count(r), 0);

    /* both types share one fini: it runs exactly once, at pl_free */
    assert_int_equal(fini_count, 0);
    pl_free(r);
    *state = NULL;
    assert_int_equal(fini_count, 1);
}

static void test_load_with_extension(void **state)
{
    pl_registry *r = *state;
    weft_error err = {0};
    char path[1200];
    struct stat st;
    snprintf(path, sizeof path, "%s", fx("fx_ok.la"));
    if (stat(path, &st) != 0) snprintf(path, sizeof path, "%s", fx("fx_ok.so"));
    assert_int_equal(pl_load_file(r, path, &err), 0);
    assert_string_equal(pl_get(r, 0)->file, path);
    assert_string_equal(pl_get(r, 0)->name, "fx_ok");
    pl_free(r);

    /* a shared object without any extension loads under its own name */
    *state = r = pl_new(&host);
    assert_int_equal(pl_load_file(r, tmp("plain/fx_ok"), &err), 0);
    assert_string_equal(pl_get(r, 0)->file, tmp("plain/fx_ok"));
    assert_string_equal(pl_get(r, 0)->name, "fx_ok");
}

static void test_not_found(void **state)
{
    pl_registry *r = *state;
    weft_error err = {0};
    assert_int_equal(pl_load_file(r, "/nonexistent/dir/fx_nope", &err), WEFT_ENOTFOUND);
    assert_int_equal(err.code, WEFT_ENOTFOUND);
    assert_string_equal(err.msg, "plugin /nonexistent/dir/fx_nope: not found");
    assert_int_equal(pl_load_file(r, fx("fx_nope.so"), &err), WEFT_ENOTFOUND);
    assert_has(err.msg, fx("fx_nope.so"));
    assert_has(err.msg, "not found");
    assert_int_equal(pl_count(r), 0);
}

static void test_not_loadable(void **state)
{
    pl_registry *r = *state;
    weft_error err = {0};
    const char *junk = tmp("junk/junk.so");
    const char *colon;
    char want[300];
    assert_int_equal(pl_load_file(r, junk, &err), WEFT_EIO);
    /* the dlopen reason itself (it names the file again), not just "file not found" */
    snprintf(want, sizeof want, "plugin %s: cannot load: %s: ", junk, junk);
    assert_has(err.msg, want);
    colon = strrchr(err.msg, ':');
    assert_true(strlen(colon) > 2);
    assert_null(strchr(err.msg, '\n'));
    assert_int_equal(pl_count(r), 0);

    /* .la files that lead nowhere */
    assert_int_equal(pl_load_file(r, tmp("junk/nodlname.la"), &err), WEFT_EIO);
    assert_has(err.msg, tmp("junk/nodlname.la"));
    assert_has(err.msg, "cannot load: not a libtool module");
    assert_int_equal(pl_load_file(r, tmp("junk/lost"), &err), WEFT_EIO);
    assert_has(err.msg, tmp("junk/lost.la"));
    assert_has(err.msg, "cannot load: lost.so not found");
    assert_int_equal(pl_count(r), 0);
}

static void test_no_entry(void **state)
{
    pl_registry *r = *state;
    weft_error err = {0};
    assert_int_equal(pl_load_file(r, fx("fx_no_entry"), &err), WEFT_ENOTFOUND);
    assert_has(err.msg, fx("fx_no_entry."));
    assert_has(err.msg, "no weft_plugin_init symbol (is it a weft plugin?)");
    assert_int_equal(pl_count(r), 0);
}

static void test_bad_abi(void **state)
{
    pl_registry *r = *state;
    weft_error err = {0};
    char want[128];
    assert_int_equal(pl_load_file(r, fx("fx_bad_abi"), &err), WEFT_EABI);
    assert_int_equal(err.code, WEFT_EABI);
    assert_has(err.msg, fx("fx_bad_abi."));
    snprintf(want, sizeof want, ": built for weft plugin ABI %d, this weft has ABI %d",
             WEFT_ABI_MAJOR + 1, WEFT_ABI_MAJOR);
    assert_has(err.msg, want);
    assert_null(pl_find_type(r, "FX_BAD_ABI", NULL));
    assert_int_equal(pl_count(r), 0);
}

static void test_init_fails(void **state)
{
    pl_registry *r = *state;
    weft_error err = {0};
    assert_int_equal(pl_load_file(r, fx("fx_init_fails"), &err), WEFT_EIO);
    assert_has(err.msg, fx("fx_init_fails."));
    assert_has(err.msg, ": init failed: fx_init_fails: cannot reach the frobnicator");
    /* its registration was undone */
    assert_null(pl_find_type(r, "FX_PARTIAL", NULL));
    assert_int_equal(pl_count(r), 0);
    /* and the registry is still usable */
    assert_int_equal(pl_load_file(r, fx("fx_ok"), &err), 0);
    assert_non_null(pl_find_type(r, "FX_OK", NULL));
    assert_null(pl_find_type(r, "FX_PARTIAL", NULL));
}

static void test_dup_type(void **state)
{
    pl_registry *r = *state;
    weft_error err = {0};
    const pl_plugin *owner = NULL;
    char first[1200];
    const weft_task_type *t;

    assert_int_equal(pl_load_file(r, fx("fx_ok"), &err), 0);
    snprintf(first, sizeof first, "%s", pl_get(r, 0)->file);
    t = pl_find_type(r, "FX_OK", NULL);
    assert_int_equal(pl_load_file(r, fx("fx_dup_type"), &err), WEFT_EEXIST);
    assert_has(err.msg, fx("fx_dup_type."));
    assert_has(err.msg, ": task type FX_OK is already registered by plugin ");
    assert_has(err.msg, first);
    assert_int_equal(pl_count(r), 1);
    assert_ptr_equal(pl_find_type(r, "FX_OK", &owner), t);
    assert_string_equal(owner->name, "fx_ok");

    /* loading fx_ok a second time clashes with itself */
    assert_int_equal(pl_load_file(r, fx("fx_ok"), &err), WEFT_EEXIST);
    assert_has(err.msg, "already registered by plugin");
    assert_int_equal(pl_count(r), 1);
    assert_ptr_equal(pl_find_type(r, "FX_OK", NULL), t);
}

static void test_register_outside_init(void **state)
{
    pl_registry *r = *state;
    static const weft_task_type t = WEFT_TASK_TYPE(.name = "FX_LATE", .execute = nofn_execute);
    static const weft_lock_provider lk = WEFT_LOCK_PROVIDER(.name = "fx_late");
    weft_error err = {0};
    assert_int_equal(pl_host_register_task_type(&t, &err), WEFT_ESTATE);
    assert_string_equal(err.msg, "registration is only allowed during weft_plugin_init");
    memset(&err, 0, sizeof err);
    assert_int_equal(pl_host_register_lock_provider(&lk, &err), WEFT_ESTATE);
    assert_has(err.msg, "only allowed during weft_plugin_init");
    assert_int_equal(pl_host_register_task_type(&t, NULL), WEFT_ESTATE);
    assert_int_equal(pl_host_declare(WEFT_ABI_MAJOR, sizeof(weft_host)), WEFT_ESTATE);
    /* also after a plugin has loaded */
    assert_int_equal(pl_load_file(r, fx("fx_ok"), &err), 0);
    assert_int_equal(pl_host_register_task_type(&t, &err), WEFT_ESTATE);
    assert_null(pl_find_type(r, "FX_LATE", NULL));
}

static void test_register_before_declare(void **state)
{
    pl_registry *r = *state;
    weft_error err = {0};
    declare_mode = DECLARE_SWALLOW;
    assert_int_equal(pl_load_file(r, fx("fx_ok"), &err), WEFT_ESTATE);
    assert_has(err.msg, fx("fx_ok."));
    assert_has(err.msg, "before declaring the ABI");
    assert_null(pl_find_type(r, "FX_OK", NULL));
    assert_null(pl_find_lock(r, "fx_lock"));
    assert_int_equal(pl_count(r), 0);
    assert_int_equal(fini_count, 0);
}

static void test_bad_type_structs(void **state)
{
    pl_registry *r = *state;
    weft_error err = {0};

    declare_mode = DECLARE_THEN_NONAME;
    assert_int_equal(pl_load_file(r, fx("fx_ok"), &err), WEFT_EINVAL);
    assert_int_equal(hook_rc, WEFT_EINVAL);
    assert_has(err.msg, fx("fx_ok."));
    assert_has(err.msg, "task type without a name");
    assert_null(pl_find_type(r, "FX_OK", NULL));
    /* fx_ok's own init succeeded, so it gets its fini before the unload */
    assert_int_equal(fini_count, 1);

    declare_mode = DECLARE_THEN_NOFN;
    assert_int_equal(pl_load_file(r, fx("fx_ok"), &err), WEFT_EINVAL);
    assert_has(err.msg, fx("fx_ok."));
    assert_has(err.msg, "task type FX_NOFN has neither execute nor map");
    assert_null(pl_find_type(r, "FX_NOFN", NULL));

    declare_mode = DECLARE_THEN_BADLOCK;
    assert_int_equal(pl_load_file(r, fx("fx_ok"), &err), WEFT_EINVAL);
    assert_has(err.msg, "lock provider fx_badlock");
    assert_null(pl_find_lock(r, "fx_badlock"));
    assert_int_equal(pl_count(r), 0);

    declare_mode = DECLARE_FORWARD;
    assert_int_equal(pl_load_file(r, fx("fx_ok"), &err), 0);
    assert_int_equal(pl_count(r), 1);
}

/* ---- struct sizes and ABI versions ---- */

static void test_struct_too_small(void **state)
{
    pl_registry *r = *state;
    weft_error err = {0};
    char want[128];
    assert_int_equal(pl_load_file(r, fx("abi/fx_small"), &err), WEFT_EINVAL);
    assert_has(err.msg, fx("abi/fx_small."));
    snprintf(want, sizeof want, ": task type FX_SMALL: struct size %zu is too small",
             offsetof(weft_task_type, execute));
    assert_has(err.msg, want);
    assert_null(pl_find_type(r, "FX_SMALL", NULL));
    assert_int_equal(pl_count(r), 0);
}

static void test_struct_grown(void **state)
{
    pl_registry *r = *state;
    weft_error err = {0};
    const weft_task_type *t;
    weft_result res = {0};
    assert_int_equal(pl_load_file(r, fx("abi/fx_grown"), &err), 0);
    t = pl_find_type(r, "FX_GROWN", NULL);
    assert_non_null(t);
    /* the host's own copy, of the host's size */
    assert_int_equal(t->size, sizeof(weft_task_type));
    assert_int_equal(t->execute(NULL, &res), 0);
    assert_int_equal(res.status, WEFT_TASK_COMPLETED);
}

static void test_abi1_plugin(void **state)
{
    pl_registry *r = *state;
    weft_error err = {0};
    const weft_task_type *t;
    const weft_lock_provider *lk;
    weft_result res = {0};
    char token[32];

    assert_int_equal(pl_load_file(r, fx("abi/fx_abi1"), &err), 0);
    assert_int_equal(pl_get(r, 0)->abi_major, 1);
    t = pl_find_type(r, "FX_ABI1", NULL);
    assert_non_null(t);
    assert_int_equal(*(int *)t->data, 42);
    assert_null(t->validate);
    assert_null(t->map);
    assert_null(t->fini);
    assert_int_equal(t->execute(NULL, &res), 0);
    assert_string_equal(json_object_get_string(res.output), "fx abi 1");
    json_object_put(res.output);
    lk = pl_find_lock(r, "fx_abi1_lock");
    assert_non_null(lk);
    assert_null(lk->open);
    assert_int_equal(lk->acquire(NULL, "k", 1000, 0, token, sizeof token, &err), 0);
    assert_string_equal(token, "abi1-token");
    assert_int_equal(lk->release(NULL, "k", token, &err), 0);
}

/* ---- built-in plugins and the override ---- */

/* Whether the default directories hold the lambda plugin (they do in the build tree). */
static int have_builtin_lambda(void)
{
    pl_registry *r = pl_new(&host);
    const pl_plugin *owner = NULL;
    int found;
    pl_load_path(r, "");
    found = pl_find_type(r, "LAMBDA", &owner) && !strcmp(owner->name, "lambda") && owner->builtin;
    pl_free(r);
    return found;
}

static void test_builtin_type_kept(void **state)
{
    pl_registry *r = *state;
    const pl_plugin *owner = NULL;
    char path[256];
    size_t i, refused = 0;

    if (!have_builtin_lambda()) skip();
    /* e (fx_lambda registers LAMBDA) comes first on the path: still refused */
    snprintf(path, sizeof path, "%s:", tmp("e"));
    assert_true(pl_load_path(r, path) >= 1);
    assert_non_null(pl_find_type(r, "LAMBDA", &owner));
    assert_string_equal(owner->name, "lambda");
    assert_true(owner->builtin);
    for (i = 0; i < pl_failure_count(r); i++) {
        const char *f = pl_failure(r, i);
        if (!strstr(f, tmp("e/fx_lambda.so"))) continue;
        refused++;
        assert_has(f, ": task type LAMBDA is already registered by plugin ");
        assert_has(f, owner->file);
        assert_has(f, "a built-in (set WEFT_PLUGIN_OVERRIDE=1 to replace it)");
    }
    assert_int_equal(refused, 1);
    /* the path's order is kept in the list: e's plugins would come first */
    assert_true(pl_get(r, 0)->builtin);
    assert_true(!strncmp(pl_searched(r), path, strlen(path)));
}

static void test_builtin_type_overridden(void **state)
{
    pl_registry *r = *state;
    const pl_plugin *owner = NULL, *lambda = NULL;
    char path[256];
    size_t i;
    weft_result res = {0};

    if (!have_builtin_lambda()) skip();
    snprintf(path, sizeof path, "%s:", tmp("e"));
    for (i = 0; i < 2; i++) {
        if (i == 0) {
            pl_set_override(r, 1);
        } else {
            /* the same through the environment */
            pl_free(r);
            setenv("WEFT_PLUGIN_OVERRIDE", "1", 1);
            *state = r = pl_new(&host);
            unsetenv("WEFT_PLUGIN_OVERRIDE");
        }
        assert_int_equal(pl_load_path(r, path), 0);
        assert_non_null(pl_find_type(r, "LAMBDA", &owner));
        assert_string_equal(owner->name, "fx_lambda");
        assert_false(owner->builtin);
        assert_ptr_equal(pl_get(r, 0), owner);
        assert_int_equal(owner->types[0]->execute(NULL, &res), 0);
        assert_string_equal(json_object_get_string(json_object_object_get(res.output, "result")),
                            "fx lambda");
        json_object_put(res.output);
        memset(&res, 0, sizeof res);
        /* the built-in is still loaded, without the type it lost */
        for (size_t j = 0; j < pl_count(r); j++)
            if (!strcmp(pl_get(r, j)->name, "lambda")) lambda = pl_get(r, j);
        assert_non_null(lambda);
        assert_int_equal(lambda->ntypes, 0);
        lambda = NULL;
    }
}

static void test_builtin_name(void **state)
{
    pl_registry *r = *state;
    const pl_plugin *owner = NULL;
    char path[256];

    if (!have_builtin_lambda()) skip();
    /* f/lambda.so is fx_lambda under the built-in's name */
    snprintf(path, sizeof path, "%s:", tmp("f"));
    assert_int_equal(pl_load_path(r, path), 1);
    assert_has(pl_failure(r, 0), tmp("f/lambda.so"));
    assert_has(pl_failure(r, 0), ": not loaded: built-in plugin ");
    assert_has(pl_failure(r, 0), "has that name (set WEFT_PLUGIN_OVERRIDE=1");
    assert_non_null(pl_find_type(r, "LAMBDA", &owner));
    assert_true(owner->builtin);
    pl_free(r);

    *state = r = pl_new(&host);
    pl_set_override(r, 1);
    assert_int_equal(pl_load_path(r, path), 0);
    assert_non_null(pl_find_type(r, "LAMBDA", &owner));
    assert_string_equal(owner->file, tmp("f/lambda.so"));
    assert_false(owner->builtin);
}

/* ---- search paths ---- */

static void test_load_dir_sorted(void **state)
{
    pl_registry *r = *state;
    const pl_plugin *owner = NULL;
    /* fx_bad_abi, fx_dup_type, fx_init_fails, fx_no_entry, fx_ok: in name order,
     * so fx_dup_type takes FX_OK and the real fx_ok is the one refused */
    assert_int_equal(pl_load_path(r, fixture_dir), 4);
    assert_string_equal(pl_searched(r), fixture_dir);
    assert_int_equal(pl_count(r), 1);
    assert_string_equal(pl_get(r, 0)->name, "fx_dup_type");
    assert_non_null(pl_find_type(r, "FX_OK", &owner));
    assert_string_equal(owner->name, "fx_dup_type");
    assert_int_equal(pl_failure_count(r), 4);
    assert_has(pl_failure(r, 0), "fx_bad_abi");
    assert_has(pl_failure(r, 0), "ABI");
    assert_has(pl_failure(r, 1), "fx_init_fails");
    assert_has(pl_failure(r, 1), "init failed");
    assert_has(pl_failure(r, 2), "fx_no_entry");
    assert_has(pl_failure(r, 2), "no weft_plugin_init symbol");
    assert_has(pl_failure(r, 3), "fx_ok");
    assert_has(pl_failure(r, 3), "already registered by plugin");
    assert_has(pl_failure(r, 3), "fx_dup_type");
    assert_null(pl_failure(r, 4));
    assert_null(pl_find_type(r, "FX_PARTIAL", NULL));
}

static void test_first_dir_wins(void **state)
{
    pl_registry *r = *state;
    char path[256];

    /* a: fx_dup_type fx_init_fails fx_ok   b: fx_bad_abi fx_ok notes.txt */
    snprintf(path, sizeof path, "%s:%s", tmp("b"), tmp("a"));
    assert_int_equal(pl_load_path(r, path), 3);
    assert_string_equal(pl_searched(r), path);
    assert_int_equal(pl_count(r), 1);
    assert_string_equal(pl_get(r, 0)->file, tmp("b/fx_ok.so"));
    assert_int_equal(pl_failure_count(r), 3);
    assert_has(pl_failure(r, 0), tmp("b/fx_bad_abi.so"));
    assert_has(pl_failure(r, 1), tmp("a/fx_dup_type.so"));
    assert_has(pl_failure(r, 1), tmp("b/fx_ok.so"));
    assert_has(pl_failure(r, 2), tmp("a/fx_init_fails.so"));
    pl_free(r);

    /* the other way round: a's fx_dup_type comes first and b's fx_ok is never tried */
    *state = r = pl_new(&host);
    snprintf(path, sizeof path, "%s:%s", tmp("a"), tmp("b"));
    assert_int_equal(pl_load_path(r, path), 3);
    assert_int_equal(pl_count(r), 1);
    assert_string_equal(pl_get(r, 0)->file, tmp("a/fx_dup_type.so"));
    assert_has(pl_failure(r, 0), tmp("a/fx_init_fails.so"));
    assert_has(pl_failure(r, 1), tmp("a/fx_ok.so"));
    assert_has(pl_failure(r, 2), tmp("b/fx_bad_abi.so"));
    for (size_t i = 0; i < pl_failure_count(r); i++)
        assert_null(strstr(pl_failure(r, i), tmp("b/fx_ok")));
    pl_free(r);

    /* a later pl_load_path skips the names already loaded */
    *state = r = pl_new(&host);
    assert_int_equal(pl_load_path(r, tmp("c")), 0);
    assert_int_equal(pl_load_path(r, tmp("c")), 0);
    assert_int_equal(pl_load_path(r, tmp("d")), 0);
    assert_int_equal(pl_count(r), 1);
    assert_string_equal(pl_get(r, 0)->file, tmp("c/fx_ok.so"));
    assert_int_equal(pl_failure_count(r), 0);
}

static void test_la_preferred(void **state)
{
    pl_registry *r = *state;
    /* d holds fx_ok.so and fx_ok.la (pointing at it): only the .la is loaded */
    assert_int_equal(pl_load_path(r, tmp("d")), 0);
    assert_int_equal(pl_count(r), 1);
    assert_string_equal(pl_get(r, 0)->file, tmp("d/fx_ok.la"));
    assert_non_null(pl_find_type(r, "FX_OK", NULL));
}

static void test_missing_dir(void **state)
{
    pl_registry *r = *state;
    char path[256];
    assert_int_equal(pl_load_path(r, "/nonexistent/weft-plugins"), 1);
    assert_int_equal(pl_failure_count(r), 1);
    assert_string_equal(pl_failure(r, 0), "plugin directory /nonexistent/weft-plugins: not found");
    assert_string_equal(pl_searched(r), "/nonexistent/weft-plugins");

    /* the other directories are still searched; pl_searched accumulates */
    snprintf(path, sizeof path, "/nonexistent/x:%s", tmp("c"));
    assert_int_equal(pl_load_path(r, path), 1);
    assert_int_equal(pl_count(r), 1);
    assert_has(pl_failure(r, 1), "/nonexistent/x");
    snprintf(path, sizeof path, "/nonexistent/weft-plugins:/nonexistent/x:%s", tmp("c"));
    assert_string_equal(pl_searched(r), path);

    /* a file is not a directory */
    assert_int_equal(pl_load_path(r, tmp("junk/junk.so")), 1);
    assert_has(pl_failure(r, 2), tmp("junk/junk.so"));
    assert_has(pl_failure(r, 2), "not a directory");
}

static void test_empty_element(void **state)
{
    pl_registry *r = *state;
    char *def = pl_default_path(), want[4096];
    const char *root = getenv("WEFT_TOP_BUILDDIR");
    char *copy, *d, *save = NULL;
    char exe[1024];
    ssize_t n;

    assert_non_null(def);
    assert_true(def[0] != 0);
    assert_null(strstr(def, "::"));
    assert_true(def[strlen(def) - 1] != ':');

    /* running from the build tree: the build's plugins/<name> directories */
    n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[n > 0 ? n : 0] = 0;
    if (root && !strncmp(exe, root, strlen(root)) && exe[strlen(root)] == '/') {
        char prefix[1100];
        snprintf(prefix, sizeof prefix, "%s/plugins/", root);
        copy = strdup(def);
        for (d = strtok_r(copy, ":", &save); d; d = strtok_r(NULL, ":", &save))
            assert_has(d, prefix);
        free(copy);
    }

    /* a trailing empty element stands for the default directories */
    snprintf(want, sizeof want, "%s:%s", tmp("c"), def);
    {
        char path[256];
        snprintf(path, sizeof path, "%s:", tmp("c"));
        pl_load_path(r, path);
    }
    assert_string_equal(pl_searched(r), want);
    assert_string_equal(pl_get(r, 0)->file, tmp("c/fx_ok.so"));
    pl_free(r);

    /* a leading one, and the empty path */
    *state = r = pl_new(&host);
    {
        char path[256];
        snprintf(path, sizeof path, ":%s", tmp("c"));
        pl_load_path(r, path);
    }
    snprintf(want, sizeof want, "%s:%s", def, tmp("c"));
    assert_string_equal(pl_searched(r), want);
    pl_free(r);
    *state = r = pl_new(&host);
    pl_load_path(r, "");
    assert_string_equal(pl_searched(r), def);
    pl_free(r);
    *state = r = pl_new(&host);
    pl_load_path(r, NULL);
    assert_string_equal(pl_searched(r), def);
    free(def);
}

/* ---- set-up ---- */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

static int make_dirs(void **state)
{
    static const char *const la_fmt =
        "# fx_ok.la - a libtool library file (hand-written for the tests)\n"
        "dlname='fx_ok.so'\n"
        "library_names='fx_ok.so'\n"
        "old_library=''\n"
        "dependency_libs=''\n"
        "installed=yes\n"
        "libdir='%s'\n";
    char la[1200];

    snprintf(tmp_root, sizeof tmp_root, "/tmp/weft-pl-XXXXXX");
    if (!mkdtemp(tmp_root)) return -1;
    mkdir(tmp("a"), 0755);
    mkdir(tmp("b"), 0755);
    mkdir(tmp("c"), 0755);
    mkdir(tmp("d"), 0755);
    mkdir(tmp("junk"), 0755);
    link_so(tmp("a"), "fx_ok");
    link_so(tmp("a"), "fx_dup_type");
    link_so(tmp("a"), "fx_init_fails");
    link_so(tmp("b"), "fx_ok");
    link_so(tmp("b"), "fx_bad_abi");
    write_file(tmp("b/notes.txt"), "not a plugin\n");
    link_so(tmp("c"), "fx_ok");
    mkdir(tmp("plain"), 0755);
    snprintf(la, sizeof la, "%s/fx_ok.so", so_dir);
    if (symlink(la, tmp("plain/fx_ok")) != 0) return -1;
    link_so(tmp("d"), "fx_ok");
    mkdir(tmp("e"), 0755);
    link_abi(tmp("e"), "fx_lambda", "fx_lambda");
    mkdir(tmp("f"), 0755);
    link_abi(tmp("f"), "lambda", "fx_lambda");
    snprintf(la, sizeof la, la_fmt, tmp("d"));
    write_file(tmp("d/fx_ok.la"), la);
    write_file(tmp("junk/junk.so"), "this is not an ELF object\n");
    write_file(tmp("junk/nodlname.la"), "# not really a libtool file\n");
    write_file(tmp("junk/lost.la"), "dlname='lost.so'\ninstalled=no\nlibdir='/nonexistent'\n");
    return 0;
}

static int remove_dirs(void **state)
{
    if (tmp_root[0]) nftw(tmp_root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return 0;
}

int main(void)
{
    const char *dir = getenv("WEFT_FIXTURE_DIR");
    char probe[1200];
    struct stat st;
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_load_ok, reset, done),
        cmocka_unit_test_setup_teardown(test_load_with_extension, reset, done),
        cmocka_unit_test_setup_teardown(test_not_found, reset, done),
        cmocka_unit_test_setup_teardown(test_not_loadable, reset, done),
        cmocka_unit_test_setup_teardown(test_no_entry, reset, done),
        cmocka_unit_test_setup_teardown(test_bad_abi, reset, done),
        cmocka_unit_test_setup_teardown(test_init_fails, reset, done),
        cmocka_unit_test_setup_teardown(test_dup_type, reset, done),
        cmocka_unit_test_setup_teardown(test_register_outside_init, reset, done),
        cmocka_unit_test_setup_teardown(test_register_before_declare, reset, done),
        cmocka_unit_test_setup_teardown(test_bad_type_structs, reset, done),
        cmocka_unit_test_setup_teardown(test_struct_too_small, reset, done),
        cmocka_unit_test_setup_teardown(test_struct_grown, reset, done),
        cmocka_unit_test_setup_teardown(test_abi1_plugin, reset, done),
        cmocka_unit_test_setup_teardown(test_builtin_type_kept, reset, done),
        cmocka_unit_test_setup_teardown(test_builtin_type_overridden, reset, done),
        cmocka_unit_test_setup_teardown(test_builtin_name, reset, done),
        cmocka_unit_test_setup_teardown(test_load_dir_sorted, reset, done),
        cmocka_unit_test_setup_teardown(test_first_dir_wins, reset, done),
        cmocka_unit_test_setup_teardown(test_la_preferred, reset, done),
        cmocka_unit_test_setup_teardown(test_missing_dir, reset, done),
        cmocka_unit_test_setup_teardown(test_empty_element, reset, done),
    };

    if (!dir || !*dir) {
        fprintf(stderr, "WEFT_FIXTURE_DIR is not set: skipping the plugin loader tests\n");
        return 77;
    }
    snprintf(fixture_dir, sizeof fixture_dir, "%s", dir);
    snprintf(so_dir, sizeof so_dir, "%s/.libs", dir);
    snprintf(probe, sizeof probe, "%s/fx_ok.so", so_dir);
    if (stat(probe, &st) != 0) snprintf(so_dir, sizeof so_dir, "%s", dir);
    snprintf(abi_so_dir, sizeof abi_so_dir, "%s/abi/.libs", dir);
    snprintf(probe, sizeof probe, "%s/fx_lambda.so", abi_so_dir);
    if (stat(probe, &st) != 0) snprintf(abi_so_dir, sizeof abi_so_dir, "%s/abi", dir);
    return cmocka_run_group_tests(tests, make_dirs, remove_dirs);
}
