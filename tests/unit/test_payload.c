#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "store/payload.h"
#include "base/sha256.h"

#define OWNER "0b6f1a52-3c1e-4d7a-9f59-1c2d3e4f5a6b"
#define HEX64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

typedef struct fx {
    char root[256]; /* a temporary directory */
    char dir[300];  /* the payload store inside it */
    ps_store *s;
} fx;

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    weft_error err = {0};
    const char *tmp = getenv("TMPDIR");
    snprintf(f->root, sizeof f->root, "%s/weft-ps.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(f->root)) return -1;
    snprintf(f->dir, sizeof f->dir, "%s/payloads", f->root);
    /* soft limit 16 bytes: anything bigger goes outside */
    if (ps_dir_open(f->dir, 16, 1 << 20, &f->s, &err)) return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    char cmd[400];
    ps_close(f->s);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->root);
    if (system(cmd) != 0) return -1;
    free(f);
    return 0;
}

static void assert_has(const char *msg, const char *part)
{
    if (!strstr(msg, part)) fail_msg("\"%s\" does not contain \"%s\"", msg, part);
}

static size_t count_files(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    size_t n = 0;
    assert_non_null(d);
    while ((e = readdir(d)))
        if (e->d_name[0] != '.') n++;
    closedir(d);
    return n;
}

static int exists_in(const char *dir, const char *name)
{
    char path[700];
    struct stat st;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return lstat(path, &st) == 0;
}

/* A file in dir, last modified age_s seconds ago. */
static void plant(const char *dir, const char *name, const char *text, int age_s)
{
    char path[700];
    struct timespec t[2];
    FILE *fp;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    fp = fopen(path, "w");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
    clock_gettime(CLOCK_REALTIME, &t[0]);
    t[0].tv_sec -= age_s;
    t[1] = t[0];
    assert_int_equal(utimensat(AT_FDCWD, path, t, 0), 0);
}

static void test_sha256(void **state)
{
    char hex[65];
    (void)state;
    sh_sha256_hex("", 0, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    sh_sha256_hex("abc", 3, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    /* 56 bytes: the length needs a second padding block */
    sh_sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56, hex);
    assert_string_equal(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

/* Everything but the runtime's own names of this workflow is refused, by
 * the name alone: the message names the reference and the workflow, and
 * reads the same whether or not such a file exists. */
static void test_ref_check(void **state)
{
    static const char *const bad[] = {
        "/etc/hostname",
        "/etc/no-such-file",
        "../secret.json",
        "..",
        "",
        "payloads/" OWNER "." HEX64 ".json",
        OWNER "." HEX64 ".json/../../etc/hostname",
        "./" OWNER "." HEX64 ".json",
        OWNER ".json",
        OWNER "." HEX64 "0.json",
        OWNER ".0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef.json",
        OWNER "." HEX64 ".json.tmp",
        OWNER "." HEX64 ".jsonx",
        "1b6f1a52-3c1e-4d7a-9f59-1c2d3e4f5a6b." HEX64 ".json", /* another workflow's */
        OWNER "x." HEX64 ".json",
    };
    weft_error err = {0};
    size_t i;
    (void)state;
    assert_int_equal(ps_ref_check(OWNER, OWNER "." HEX64 ".json", &err), 0);
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&err, 0, sizeof err);
        if (ps_ref_check(OWNER, bad[i], &err) != WEFT_EINVAL)
            fail_msg("'%s' was taken as a reference", bad[i]);
        assert_has(err.msg, "payload reference '");
        assert_has(err.msg, OWNER);
        assert_has(err.msg, "is not one this runtime wrote");
    }
    assert_int_equal(ps_ref_check(OWNER, NULL, &err), WEFT_EINVAL);
    assert_int_equal(ps_ref_check("a/b", "a/b." HEX64 ".json", &err), WEFT_EINVAL);
}

static void test_load_refuses_paths(void **state)
{
    fx *f = *state;
    char secret[400], msg_a[WEFT_ERROR_MAX], msg_b[WEFT_ERROR_MAX], *p;
    weft_error err = {0};
    json_object *out = (json_object *)1;
    FILE *fp;
    snprintf(secret, sizeof secret, "%s/secret.json", f->root);
    fp = fopen(secret, "w");
    assert_non_null(fp);
    fputs("{\"stolen\":true}", fp);
    fclose(fp);

    assert_int_equal(ps_load(f->s, OWNER, secret, &out, &err), WEFT_EINVAL);
    assert_null(out);
    assert_has(err.msg, secret);
    assert_int_equal(ps_load(f->s, OWNER, "../secret.json", &out, &err), WEFT_EINVAL);
    assert_null(out);
    assert_has(err.msg, "'../secret.json'");

    /* an existing host file and a missing one: the same answer */
    assert_int_equal(ps_load(f->s, OWNER, "/etc/passwd", &out, &err), WEFT_EINVAL);
    snprintf(msg_a, sizeof msg_a, "%s", err.msg);
    assert_int_equal(ps_load(f->s, OWNER, "/etc/passwq", &out, &err), WEFT_EINVAL);
    snprintf(msg_b, sizeof msg_b, "%s", err.msg);
    assert_non_null(p = strstr(msg_b, "passwq"));
    p[5] = 'd';
    assert_string_equal(msg_a, msg_b);

    /* a link planted in the store is not followed out of it */
    {
        char link[700];
        snprintf(link, sizeof link, "%s/%s." HEX64 ".json", f->dir, OWNER);
        assert_int_equal(symlink(secret, link), 0);
        assert_int_not_equal(ps_load(f->s, OWNER, OWNER "." HEX64 ".json", &out, &err), 0);
        assert_null(out);
    }
    /* no store here: refused the same way before saying so */
    assert_int_equal(ps_load(NULL, OWNER, "/etc/passwd", &out, &err), WEFT_EINVAL);
}

/* The same bytes of one workflow are kept once, under a name that tells
 * them; other bytes get another name; only that workflow reads them. */
static void test_keep_content_addressed(void **state)
{
    fx *f = *state;
    weft_error err = {0};
    json_object *a = json_tokener_parse("{\"body\":\"a value well over sixteen bytes\"}");
    json_object *b = json_tokener_parse("{\"body\":\"another value over sixteen bytes\"}");
    json_object *small = json_tokener_parse("{\"x\":1}");
    json_object *out = NULL;
    char *r1 = NULL, *r2 = NULL, *r3 = NULL, *r4 = NULL;
    int i;
    (void)state;

    assert_int_equal(ps_keep(f->s, OWNER, "input", small, &r1, &err), 0);
    assert_null(r1); /* under the soft limit: inline */
    assert_int_equal(ps_keep(f->s, OWNER, "input", a, &r1, &err), 0);
    assert_non_null(r1);
    assert_int_equal(strncmp(r1, OWNER ".", strlen(OWNER) + 1), 0);
    assert_int_equal(ps_ref_check(OWNER, r1, &err), 0);
    assert_int_equal(count_files(f->dir), 1);
    for (i = 0; i < 5; i++) {
        /* kept again (each save, each sweep of a stuck workflow): no new file */
        assert_int_equal(ps_keep(f->s, OWNER, "input", a, &r2, &err), 0);
        assert_string_equal(r1, r2);
        free(r2);
        r2 = NULL;
    }
    assert_int_equal(count_files(f->dir), 1);
    assert_int_equal(ps_keep(f->s, OWNER, "output", b, &r3, &err), 0);
    assert_string_not_equal(r1, r3);
    assert_int_equal(count_files(f->dir), 2);

    assert_int_equal(ps_load(f->s, OWNER, r1, &out, &err), 0);
    assert_true(json_object_equal(out, a));
    json_object_put(out);
    /* another workflow cannot name this one's payload */
    assert_int_equal(ps_load(f->s, "1b6f1a52-3c1e-4d7a-9f59-1c2d3e4f5a6b", r1, &out, &err),
                     WEFT_EINVAL);
    assert_null(out);

    /* an id that cannot name a file is refused, not written */
    assert_int_equal(ps_keep(f->s, "../x", "input of task 't'", a, &r4, &err), WEFT_EINVAL);
    assert_has(err.msg, "input of task 't'");
    assert_null(r4);
    assert_int_equal(count_files(f->dir), 2);
    free(r1);
    free(r3);
    json_object_put(a);
    json_object_put(b);
    json_object_put(small);
}

/* A payload that is gone (removed by hand, or by a sweep) is named. */
static void test_load_missing(void **state)
{
    fx *f = *state;
    weft_error err = {0};
    json_object *out = NULL;
    assert_int_equal(ps_load(f->s, OWNER, OWNER "." HEX64 ".json", &out, &err), WEFT_ENOTFOUND);
    assert_has(err.msg, OWNER "." HEX64 ".json");
    assert_null(out);
}

typedef struct alive_calls {
    int calls;
    int fail;
    size_t asked;
} alive_calls;

/* Only workflow "alive-1" exists. */
static int alive_fn(void *ud, const char *const *ids, size_t n, int *alive, weft_error *err)
{
    alive_calls *c = ud;
    size_t i;
    c->calls++;
    if (c->fail) return (err->code = WEFT_EIO);
    for (i = 0; i < n; i++) {
        alive[i] = !strcmp(ids[i], "alive-1");
        c->asked++;
    }
    return 0;
}

static void test_sweep(void **state)
{
    fx *f = *state;
    weft_error err = {0};
    alive_calls c = {0};
    size_t removed = 0;
    int rc, steps = 0;

    plant(f->dir, "gone-1." HEX64 ".json", "{}", 7200); /* ended and expired */
    plant(f->dir, "gone-1.1123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.json",
          "{}", 7200);
    plant(f->dir, "gone-2." HEX64 ".json." OWNER ".tmp", "{", 7200); /* a write cut short */
    plant(f->dir, "alive-1." HEX64 ".json", "{}", 7200);             /* still running */
    plant(f->dir, "gone-3." HEX64 ".json", "{}", 10);                /* young: a start under way */
    plant(f->dir, "notes.txt", "mine", 7200);                        /* not the runtime's */
    plant(f->dir, "gone-4.json", "{}", 7200);                        /* not the runtime's naming */
    plant(f->dir, "gone-5." HEX64 ".json.tmp", "{}", 7200);          /* nor this */

    /* a failing existence check removes nothing */
    c.fail = 1;
    assert_int_equal(ps_sweep(f->s, 3600 * 1000, 100, alive_fn, &c, &removed, &err), WEFT_EIO);
    assert_int_equal(removed, 0);
    assert_int_equal(count_files(f->dir), 8);
    c.fail = 0;
    /* finish that pass, then a whole one two entries at a time */
    while ((rc = ps_sweep(f->s, 3600 * 1000, 100, alive_fn, &c, &removed, &err)) == 0)
        ;
    assert_int_equal(rc, 1);
    removed = 0;
    c.calls = 0;
    plant(f->dir, "gone-1." HEX64 ".json", "{}", 7200);
    plant(f->dir, "gone-2." HEX64 ".json." OWNER ".tmp", "{", 7200);
    while ((rc = ps_sweep(f->s, 3600 * 1000, 2, alive_fn, &c, &removed, &err)) == 0)
        steps++;
    assert_int_equal(rc, 1);
    assert_true(steps >= 3); /* 8 entries, 2 per step */
    assert_int_equal(removed, 3);
    assert_false(exists_in(f->dir, "gone-1." HEX64 ".json"));
    assert_false(exists_in(
        f->dir, "gone-1.1123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.json"));
    assert_false(exists_in(f->dir, "gone-2." HEX64 ".json." OWNER ".tmp"));
    assert_true(exists_in(f->dir, "alive-1." HEX64 ".json"));
    assert_true(exists_in(f->dir, "gone-3." HEX64 ".json"));
    assert_true(exists_in(f->dir, "notes.txt"));
    assert_true(exists_in(f->dir, "gone-4.json"));
    assert_true(exists_in(f->dir, "gone-5." HEX64 ".json.tmp"));
    assert_int_equal(count_files(f->dir), 5);

    /* after the grace, the young one of a workflow that never came goes too */
    removed = 0;
    while ((rc = ps_sweep(f->s, 5 * 1000, 100, alive_fn, &c, &removed, &err)) == 0)
        ;
    assert_int_equal(removed, 1);
    assert_false(exists_in(f->dir, "gone-3." HEX64 ".json"));
    assert_true(exists_in(f->dir, "alive-1." HEX64 ".json"));
}

/* A payload kept again is made young again: a sweep that started before
 * spares it. */
static void test_keep_again_refreshes(void **state)
{
    fx *f = *state;
    weft_error err = {0};
    json_object *a = json_tokener_parse("{\"body\":\"a value well over sixteen bytes\"}");
    alive_calls c = {0};
    char *ref = NULL, *again = NULL;
    char path[700];
    struct timespec t[2];
    size_t removed = 0;
    assert_int_equal(ps_keep(f->s, "gone-9", "input", a, &ref, &err), 0);
    snprintf(path, sizeof path, "%s/%s", f->dir, ref);
    clock_gettime(CLOCK_REALTIME, &t[0]);
    t[0].tv_sec -= 7200;
    t[1] = t[0];
    assert_int_equal(utimensat(AT_FDCWD, path, t, 0), 0);
    assert_int_equal(ps_keep(f->s, "gone-9", "input", a, &again, &err), 0);
    while (ps_sweep(f->s, 3600 * 1000, 100, alive_fn, &c, &removed, &err) == 0)
        ;
    assert_int_equal(removed, 0);
    assert_true(exists_in(f->dir, ref));
    free(ref);
    free(again);
    json_object_put(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256),
        cmocka_unit_test(test_ref_check),
        cmocka_unit_test_setup_teardown(test_load_refuses_paths, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keep_content_addressed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_missing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sweep, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keep_again_refreshes, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
