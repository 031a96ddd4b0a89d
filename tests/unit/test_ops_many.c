/*
 * Tests of ops.c against a real redis-server (skipped when redis-server is
 * not installed): several updates at once (op_update_many) with eager
 * dispatch, the room a batch has, the fence race and unfenced saves of a
 * batch, a change that changes nothing, errors per item, a child that ends
 * before its parent's save, and batched loads (op_load_many), also with the
 * store unreachable. The fixture is in ops_fixture.h.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ops_fixture.h"

/* ---- several updates at once (op_update_many), eager dispatch ---- */

/* Eager dispatch says yes to type Q while *ud (an int) is non-zero. */
static int eager_q(void *ud, const xc_task *t)
{
    const int *accept = ud;
    return *accept && !strcmp(t->def->queue, "Q");
}

static int accept_eager = 1;

static void eager_on(void)
{
    accept_eager = 1;
    F.env.eager = eager_q;
    F.env.eager_ud = &accept_eager;
    F.env.lease_ms = 30000;
}

/* The lease token stored for member id|task of queue Q, into buf. */
static const char *lease_of(const char *id, const char *task, char *buf, size_t n)
{
    return qstr(buf, n, "HGET " PREFIX "{q:Q}:lease %s|%s", id, task);
}

static void item_init(op_item *it, const char *id, xc_exec *x, op_fn fn, void *ud)
{
    memset(it, 0, sizeof *it);
    it->id = id;
    it->x = x;
    it->fn = fn;
    it->ud = ud;
}

static void item_clear(op_item *it)
{
    free(it->eager);
    it->eager = NULL;
    xc_free(it->x);
    it->x = NULL;
}

/* Push id's first task to the Q queue (no eager) and claim it: the claim. */
static rs_lease claimed_first_task(const char *id)
{
    const char *types[] = {"Q"};
    weft_error err = {0};
    rs_lease c;
    op_item it;
    item_init(&it, id, NULL, fn_decide, NULL);
    op_update_many(&F.env, &it, 1, NULL);
    if (it.rc) fail_msg("%s", it.err.msg);
    item_clear(&it);
    if (rs_claim(RC, types, 1, 1, 60000, &c, &err) != 1) fail_msg("claim: %s", err.msg);
    return c;
}

/*
 * Eager dispatch over a chain of two queued tasks: each save leases the next
 * task to the caller (not ready for anyone else) and hands back the
 * execution; the next round's save drops the previous lease (acks).
 */
static void test_update_many_eager(void **state)
{
    char id[64], buf[64], member[128];
    op_item it;
    size_t room = 4;
    int calls = 0;
    int64_t t0, t1;
    xc_task *a, *b;
    weft_error err = {0};
    rs_lease la;
    uint64_t fence = 0;

    start(NULL, NULL, id);
    eager_on();
    item_init(&it, id, NULL, fn_decide, &calls); /* not loaded: op_update_many loads it */
    t0 = wu_now_ms();
    op_update_many(&F.env, &it, 1, &room);
    t1 = wu_now_ms();
    assert_int_equal(it.rc, 0);
    assert_int_equal(it.saved, 1);
    assert_int_equal(calls, 1);
    assert_int_equal(room, 3);
    assert_int_equal(it.neager, 1);
    assert_non_null(it.eager);
    /* the execution comes back (its eager task runs on it), fence advanced */
    assert_non_null(it.x);
    assert_int_equal(it.x->fence, 2);
    assert_string_equal(hget(id, "fence", buf, sizeof buf), "2");
    a = xc_find_ref(it.x, "a");
    assert_non_null(a);
    assert_string_equal(it.eager[0].workflow_id, id);
    assert_string_equal(it.eager[0].task_id, a->id);
    assert_string_equal(it.eager[0].type, "Q");
    assert_true(strlen(it.eager[0].lease) > 3);
    /* leased to us: in the leases zset with our token, not ready */
    snprintf(member, sizeof member, "%s|%s", id, a->id);
    assert_int_equal(qint("ZCARD " PREFIX "{q:Q}:ready"), 0);
    assert_int_equal(qint("ZCARD " PREFIX "{q:Q}:leases"), 1);
    assert_true(qint("ZSCORE " PREFIX "{q:Q}:leases %s", member) >= t0 + 30000);
    assert_true(qint("ZSCORE " PREFIX "{q:Q}:leases %s", member) <= t1 + 30000);
    assert_string_equal(lease_of(id, a->id, buf, sizeof buf), it.eager[0].lease);
    assert_int_equal(rs_check_lease(RC, &it.eager[0], &err), 0);
    assert_int_equal(qint("EXISTS " PREFIX "{%s}:out", id), 0);

    /* next round: a ran on the execution we hold; b is leased to us, a's lease dropped */
    la = it.eager[0];
    free(it.eager);
    item_init(&it, id, it.x, fn_done, "a");
    it.acks = &la;
    it.nacks = 1;
    it.keep = 1;
    op_update_many(&F.env, &it, 1, &room);
    assert_int_equal(it.rc, 0);
    assert_int_equal(it.saved, 1);
    assert_int_equal(room, 2);
    assert_int_equal(it.neager, 1);
    assert_non_null(it.x);
    assert_int_equal(it.x->fence, 3);
    b = xc_find_ref(it.x, "b");
    assert_non_null(b);
    assert_string_equal(it.eager[0].task_id, b->id);
    assert_int_equal(xc_find_ref(it.x, "a")->status, WEFT_TASK_COMPLETED);
    assert_int_equal(qint("ZSCORE " PREFIX "{q:Q}:leases %s", member), -999);
    assert_int_equal(qint("HEXISTS " PREFIX "{q:Q}:lease %s", member), 0);
    assert_int_equal(rs_check_lease(RC, &la, &err), WEFT_ESTATE);
    assert_int_equal(qint("ZCARD " PREFIX "{q:Q}:ready"), 0);
    assert_int_equal(qint("ZCARD " PREFIX "{q:Q}:leases"), 1);
    assert_string_equal(lease_of(id, b->id, buf, sizeof buf), it.eager[0].lease);

    /* the last one: the workflow completes, nothing more to lease */
    la = it.eager[0];
    free(it.eager);
    item_init(&it, id, it.x, fn_done, "b");
    it.acks = &la;
    it.nacks = 1;
    op_update_many(&F.env, &it, 1, &room);
    assert_int_equal(it.rc, 0);
    assert_int_equal(it.neager, 0); /* it.eager may be an empty array: freed all the same */
    assert_null(it.x);              /* not kept */
    assert_int_equal(room, 2);
    assert_int_equal(qint("ZCARD " PREFIX "{q:Q}:leases"), 0);
    assert_int_equal(qint("HLEN " PREFIX "{q:Q}:lease"), 0);
    item_clear(&it);
    xc_free(load(id, &fence));
    assert_int_equal(fence, 4);
    assert_string_equal(hget(id, "status", buf, sizeof buf), "COMPLETED");
}

/* Room limits how many tasks are leased eagerly; the rest are queued as usual. */
static void test_update_many_room(void **state)
{
    char id[3][64], member[128];
    op_item it[3];
    size_t room = 1, i;
    xc_task *t;

    for (i = 0; i < 3; i++)
        start(NULL, NULL, id[i]);
    eager_on();
    for (i = 0; i < 3; i++)
        item_init(&it[i], id[i], load(id[i], NULL), fn_decide, NULL);
    op_update_many(&F.env, it, 3, &room);
    assert_int_equal(room, 0);
    /* the first gets the one lease, the others are ready for anyone */
    assert_int_equal(it[0].rc, 0);
    assert_int_equal(it[0].neager, 1);
    for (i = 1; i < 3; i++) {
        assert_int_equal(it[i].rc, 0);
        assert_int_equal(it[i].saved, 1);
        assert_int_equal(it[i].neager, 0);
        assert_null(it[i].eager);
        assert_null(it[i].x);
    }
    assert_int_equal(qint("ZCARD " PREFIX "{q:Q}:leases"), 1);
    assert_int_equal(qint("ZCARD " PREFIX "{q:Q}:ready"), 2);
    snprintf(member, sizeof member, "%s|%s", id[0], it[0].eager[0].task_id);
    assert_true(qint("ZSCORE " PREFIX "{q:Q}:leases %s", member) > 0);
    for (i = 1; i < 3; i++) {
        xc_exec *x = load(id[i], NULL);
        t = xc_find_ref(x, "a");
        assert_non_null(t);
        snprintf(member, sizeof member, "%s|%s", id[i], t->id);
        assert_true(qint("ZSCORE " PREFIX "{q:Q}:ready %s", member) >= 0);
        xc_free(x);
    }
    for (i = 0; i < 3; i++)
        item_clear(&it[i]);

    /* room 0, no room at all, or eager saying no: queued as usual */
    {
        char id2[64];
        size_t zero = 0;
        int k;
        for (k = 0; k < 3; k++) {
            start(NULL, NULL, id2);
            item_init(&it[0], id2, NULL, fn_decide, NULL);
            accept_eager = k != 2;
            op_update_many(&F.env, it, 1, k == 1 ? NULL : &zero);
            if (k == 2) assert_int_equal(zero, 0);
            assert_int_equal(it[0].rc, 0);
            assert_int_equal(it[0].saved, 1);
            assert_int_equal(it[0].neager, 0);
            assert_null(it[0].eager);
            assert_null(it[0].x);
            item_clear(&it[0]);
            assert_int_equal(qint("ZCARD " PREFIX "{q:Q}:ready"), 3 + k);
            assert_int_equal(qint("ZCARD " PREFIX "{q:Q}:leases"), 1);
        }
        /* eager saying no leaves the room untouched */
        zero = 5;
        start(NULL, NULL, id2);
        item_init(&it[0], id2, NULL, fn_decide, NULL);
        op_update_many(&F.env, it, 1, &zero);
        assert_int_equal(zero, 5);
        assert_int_equal(it[0].neager, 0);
        item_clear(&it[0]);
    }
}

/*
 * Someone saved since the caller loaded: the batched save loses the fence
 * race, and the item is redone alone on fresh state: saved, no eager
 * lease (the task is queued for anyone), the room given back, its acks
 * dropped, and the other change kept.
 */
static void test_update_many_fence_race(void **state)
{
    char id[64], other[64], buf[64], member[128];
    change c = {0, 0, "x"};
    weft_error err = {0};
    xc_exec *stale, *x;
    op_item it;
    size_t room = 4;
    int calls = 0;
    uint64_t fence = 0;
    rs_lease claim;
    xc_task *a;

    start(NULL, NULL, other);
    claim = claimed_first_task(other); /* a claim this change consumes */
    start(NULL, NULL, id);
    eager_on();
    stale = load(id, NULL);
    assert_int_equal(stale->fence, 1);
    assert_int_equal(op_update(&F.env, id, set_var, &c, &err), 0); /* fence 2 */

    item_init(&it, id, stale, fn_decide, &calls);
    it.acks = &claim;
    it.nacks = 1;
    op_update_many(&F.env, &it, 1, &room);
    assert_int_equal(it.rc, 0);
    assert_int_equal(it.saved, 1);
    assert_int_equal(calls, 2); /* once on the stale copy, once on fresh state */
    assert_int_equal(it.neager, 0);
    assert_null(it.eager);
    assert_int_equal(room, 4);
    xc_free(it.x);

    x = load(id, &fence);
    assert_int_equal(fence, 3);
    assert_int_equal(json_object_get_int(json_object_object_get(x->variables, "x")), 1);
    a = xc_find_ref(x, "a");
    assert_non_null(a);
    snprintf(member, sizeof member, "%s|%s", id, a->id);
    assert_true(qint("ZSCORE " PREFIX "{q:Q}:ready %s", member) >= 0);
    assert_int_equal(qint("ZSCORE " PREFIX "{q:Q}:leases %s", member), -999);
    assert_string_equal(lease_of(id, a->id, buf, sizeof buf), "(nil)");
    xc_free(x);
    /* the claim it consumed is gone */
    assert_int_equal(rs_check_lease(RC, &claim, &err), WEFT_ESTATE);
    assert_int_equal(qint("ZCARD " PREFIX "{q:Q}:leases"), 0);
}

/* A change that changes nothing: no save, its claims dropped; keep hands the execution back. */
/* Fencing off, and a decider saving a copy it held from before an
 * operator's pause (eager dispatch keeps one): the pause is not undone. */
static void test_command_unfenced(void **state)
{
    op_env unfenced = F.env;
    change c = {0, 0, "x"};
    weft_error err = {0};
    op_item it;
    char id[64], buf[256];
    uint64_t fence;
    xc_exec *x;

    start(NULL, NULL, id);
    x = load(id, &fence);
    assert_int_equal(op_command(&F.env, id, OP_PAUSE, NULL, &err), 0);
    unfenced.unfenced = 1;
    item_init(&it, id, x, set_var, &c);
    op_update_many(&unfenced, &it, 1, NULL);
    assert_int_equal(it.rc, 0);
    item_clear(&it);
    assert_string_equal(hget(id, "status", buf, sizeof buf), "PAUSED");
    x = load(id, &fence);
    assert_int_equal(json_object_get_int(json_object_object_get(x->variables, "x")), c.calls);
    xc_free(x);
}

static void test_update_many_nochange(void **state)
{
    char id[64];
    change c = {0, OP_NOCHANGE, "x"};
    weft_error err = {0};
    op_item it;
    size_t room = 4;
    uint64_t fence = 0;
    rs_lease claim;

    start(NULL, NULL, id);
    claim = claimed_first_task(id); /* fence 2 */
    eager_on();
    item_init(&it, id, NULL, set_var, &c);
    it.acks = &claim;
    it.nacks = 1;
    it.keep = 1;
    op_update_many(&F.env, &it, 1, &room);
    assert_int_equal(it.rc, 0);
    assert_int_equal(it.saved, 0);
    assert_int_equal(c.calls, 1);
    assert_int_equal(it.neager, 0);
    assert_int_equal(room, 4);
    assert_non_null(it.x);
    assert_int_equal(it.x->fence, 2);
    item_clear(&it);
    xc_free(load(id, &fence));
    assert_int_equal(fence, 2);
    assert_int_equal(rs_check_lease(RC, &claim, &err), WEFT_ESTATE);
    assert_int_equal(qint("ZCARD " PREFIX "{q:Q}:leases"), 0);
    assert_int_equal(qint("HLEN " PREFIX "{q:Q}:lease"), 0);
}

/*
 * Items of one batch fail alone: a change's error (nothing saved, its claim
 * kept), an unknown id, next to one that saves.
 */
static void test_update_many_errors(void **state)
{
    char id[64], id2[64], buf[64];
    change refuse = {0, WEFT_EINVAL, "x"};
    weft_error err = {0};
    op_item it[3];
    size_t room = 4;
    uint64_t fence = 0;
    rs_lease claim;
    size_t i;

    start(NULL, NULL, id);
    claim = claimed_first_task(id); /* fence 2 */
    start(NULL, NULL, id2);
    eager_on();
    item_init(&it[0], id, load(id, NULL), set_var, &refuse);
    it[0].acks = &claim;
    it[0].nacks = 1;
    it[0].keep = 1;
    item_init(&it[1], "no-such-wf", NULL, fn_decide, NULL);
    it[1].acks = &claim;
    it[1].nacks = 1;
    item_init(&it[2], id2, NULL, fn_decide, NULL);
    op_update_many(&F.env, it, 3, &room);

    assert_int_equal(it[0].rc, WEFT_EINVAL);
    assert_has(it[0].err.msg, "change refused");
    assert_int_equal(it[0].saved, 0);
    assert_int_equal(it[0].neager, 0);
    assert_null(it[0].x);
    assert_int_equal(refuse.calls, 1);
    xc_free(load(id, &fence));
    assert_int_equal(fence, 2);
    assert_string_equal(hget(id, "fence", buf, sizeof buf), "2");

    assert_int_equal(it[1].rc, WEFT_ENOTFOUND);
    assert_has(it[1].err.msg, "no-such-wf");
    assert_int_equal(it[1].saved, 0);
    assert_int_equal(count_keys(PREFIX "{no-such-wf}*"), 0);

    /* neither dropped the claim */
    assert_int_equal(rs_check_lease(RC, &claim, &err), 0);

    assert_int_equal(it[2].rc, 0);
    assert_int_equal(it[2].saved, 1);
    assert_int_equal(it[2].neager, 1);
    assert_int_equal(room, 3);
    for (i = 0; i < 3; i++)
        item_clear(&it[i]);
}

/* A store whose batched save fails as a whole, touching no item. */
static int save_fails_whole(st_store *s, st_save *sv, size_t n, weft_error *err)
{
    (void)s;
    (void)sv;
    (void)n;
    return wu_err(err, WEFT_ENOMEM, "out of memory (the whole batch)");
}

/*
 * A batched save that fails as a whole fails every item of it: none is
 * said saved, no eager lease is handed out, the room is given back, and no
 * cascade follows (parents hear nothing of state never written).
 */
static void test_update_many_whole_failure(void **state)
{
    char id[64], id2[64], buf[64];
    const st_ops *real = F.env.st->ops;
    st_ops failing = *real;
    op_item it[2];
    size_t room = 4, i;
    int calls = 0;

    start(NULL, NULL, id);
    start(NULL, NULL, id2);
    eager_on();
    item_init(&it[0], id, NULL, fn_decide, &calls);
    item_init(&it[1], id2, load(id2, NULL), fn_decide, &calls);
    failing.exec_save_many = save_fails_whole;
    F.env.st->ops = &failing;
    op_update_many(&F.env, it, 2, &room);
    F.env.st->ops = real;
    assert_int_equal(calls, 2);
    for (i = 0; i < 2; i++) {
        assert_int_equal(it[i].rc, WEFT_ENOMEM);
        assert_has(it[i].err.msg, "the whole batch");
        assert_int_equal(it[i].saved, 0);
        assert_int_equal(it[i].neager, 0);
        assert_null(it[i].eager);
        item_clear(&it[i]);
    }
    assert_int_equal(room, 4);
    assert_string_equal(hget(id, "fence", buf, sizeof buf), "1");
    assert_string_equal(hget(id2, "fence", buf, sizeof buf), "1");
}

/*
 * A child can end before the worker that started it saves its parent (the
 * parent's task does not know its child yet): the child's notice completes
 * the task, and the starter's late save loses the fence race. A notice from
 * another child of a task that knows its own is still dropped.
 */
static void test_complete_before_child_known(void **state)
{
    char id[64];
    rs_lease c;
    op_complete done = {0};
    weft_error err = {0};
    json_object *out = json_object_new_object();
    xc_exec *x;
    xc_task *a;
    uint64_t fence = 0;

    start(NULL, NULL, id);
    c = claimed_first_task(id);
    json_object_object_add(out, "v", json_object_new_int(7));
    done.task_id = c.task_id;
    done.child_id = "child-1";
    done.status = WEFT_TASK_COMPLETED;
    done.output = out;
    assert_int_equal(op_update(&F.env, id, op_fn_complete, &done, &err), 0);
    x = load(id, &fence);
    a = xc_find_id(x, c.task_id);
    assert_non_null(a);
    assert_int_equal(a->status, WEFT_TASK_COMPLETED);
    assert_string_equal(a->child_id, "child-1");
    assert_int_equal(json_object_get_int(json_object_object_get(a->output, "v")), 7);
    xc_free(x);

    /* another child of a task that knows its own: dropped, nothing saved */
    done.child_id = "child-2";
    assert_int_equal(op_update(&F.env, id, op_fn_complete, &done, &err), 0);
    xc_free(load(id, &fence));
    assert_int_equal(fence, 3);
    json_object_put(out);
}

static void test_load_many(void **state)
{
    char id[64], id2[64];
    const char *ids[3];
    xc_exec *out[3];
    int rcs[3];
    weft_error err = {0};
    change c = {0, 0, "x"};

    start(NULL, NULL, id);
    start(NULL, NULL, id2);
    assert_int_equal(op_update(&F.env, id2, set_var, &c, &err), 0);
    ids[0] = id;
    ids[1] = "no-such-wf";
    ids[2] = id2;
    assert_int_equal(op_load_many(&F.env, ids, 3, out, rcs, &err), 0);
    assert_int_equal(rcs[0], 0);
    assert_non_null(out[0]);
    assert_string_equal(out[0]->id, id);
    assert_int_equal(out[0]->fence, 1);
    assert_int_equal(rcs[1], WEFT_ENOTFOUND);
    assert_null(out[1]);
    assert_int_equal(rcs[2], 0);
    assert_int_equal(out[2]->fence, 2);
    assert_int_equal(json_object_get_int(json_object_object_get(out[2]->variables, "x")), 1);
    xc_free(out[0]);
    xc_free(out[2]);
}

/* Redis not there: every load and every item fails with WEFT_EIO. */
static void test_many_unreachable(void **state)
{
    char id[64], url[64];
    st_redis_opts o = {0};
    st_store *r = NULL;
    op_env e;
    weft_error err = {0};
    const char *ids[2];
    xc_exec *out[2];
    int rcs[2] = {12345, 12345};
    op_item it[2];
    size_t room = 4;
    int port = srv.port == 65000 ? 65001 : 65000;

    start(NULL, NULL, id);
    snprintf(url, sizeof url, "redis://127.0.0.1:%d", port);
    o.rs.url = url;
    o.rs.prefix = PREFIX;
    o.rs.timeout_ms = 500;
    o.defs = &DEFS;
    o.cache = F.cache;
    assert_int_equal(st_redis_open(&o, &r, &err), WEFT_EIO);
    assert_non_null(r);
    env_init(&e, r);
    e.eager = eager_q;
    e.eager_ud = &accept_eager;
    e.lease_ms = 30000;
    ids[0] = id;
    ids[1] = "other";
    assert_int_equal(op_load_many(&e, ids, 2, out, rcs, &err), WEFT_EIO);
    assert_int_equal(rcs[0], WEFT_EIO);
    assert_int_equal(rcs[1], WEFT_EIO);
    assert_null(out[0]);
    assert_null(out[1]);

    /* one to load, one given loaded (from the live server) */
    item_init(&it[0], id, NULL, fn_decide, NULL);
    item_init(&it[1], id, load(id, NULL), fn_decide, NULL);
    op_update_many(&e, it, 2, &room);
    assert_int_equal(it[0].rc, WEFT_EIO);
    assert_has(it[0].err.msg, "refused");
    assert_int_equal(it[1].rc, WEFT_EIO);
    assert_has(it[1].err.msg, "refused");
    assert_int_equal(it[0].saved + it[1].saved, 0);
    assert_int_equal(it[1].neager, 0);
    assert_null(it[1].eager);
    assert_int_equal(room, 4); /* the lease it would have taken is given back */
    item_clear(&it[0]);
    item_clear(&it[1]);
    st_free(r);
    assert_int_equal(qint("ZCARD " PREFIX "{q:Q}:leases"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_command_unfenced, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_many_eager, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_many_room, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_many_fence_race, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_many_nochange, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_many_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_update_many_whole_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_complete_before_child_known, setup, teardown),
        cmocka_unit_test_setup_teardown(test_load_many, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_unreachable, setup, teardown),
    };
    int rc = opf_start();
    if (rc) return rc;
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    opf_stop();
    return rc;
}
