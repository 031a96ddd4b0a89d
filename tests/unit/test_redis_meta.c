/*
 * The Redis store's metadata and status lane (store/redis/meta.c,
 * events.c): workflow definitions, idempotency keys, daemons, and the
 * events a save publishes. Runs against a real redis-server the test starts
 * itself (redis_store_fixture.h); exits 77 when redis-server is not
 * installed.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>

#include "redis_store_fixture.h"

/* ---- the status lane ---- */

typedef struct seen {
    int n, stop_after;
    char last_id[64];
    char json[4][128];
    char ids[4][64];
} seen;

/* Events come with the workflow's id and their entry's time in front:
 * what is after them is recorded, as "{...}". */
static int on_event(void *ud, const char *id, const char *json)
{
    seen *s = ud;
    const char *head = "{\"workflowId\":\"wf1\",\"time\":", *p = json + strlen(head);
    if (strncmp(json, head, strlen(head))) fail_msg("event without its head: %s", json);
    /* 7: the older entry below brings its own */
    if (strtoll(p, NULL, 10) != strtoll(id, NULL, 10) && strtoll(p, NULL, 10) != 7)
        fail_msg("event time is not its entry's: %s", json);
    while (*p >= '0' && *p <= '9')
        p++;
    if (*p == ',') p++;
    if (s->n < 4) snprintf(s->json[s->n], sizeof s->json[0], "{%s", p);
    if (s->n < 4) snprintf(s->ids[s->n], sizeof s->ids[0], "%s", id);
    snprintf(s->last_id, sizeof s->last_id, "%s", id);
    s->n++;
    return s->stop_after && s->n >= s->stop_after;
}

static void *late_saver(void *arg)
{
    rs *x = open_rs(NULL, 0);
    const char *ev[] = {"{\"live\":true}"};
    weft_error err = {0};
    rs_exec e;
    rf_sleep_ms(300);
    if (rs_exec_load(x, "wf1", 0, &e, &err) != 0 ||
        rs_exec_save(x, "wf1", e.fence, DOC, "RUNNING", 0, NULL, 0, ev, 1, NULL, &err) != 0)
        fprintf(stderr, "late save: %s\n", err.msg);
    rs_exec_clear(&e);
    rs_free(x);
    return arg;
}

/* Every event has its own id, the events of one save (one stream entry)
 * too: a reader that resumes after any of them gets exactly the rest. */
static void test_event_ids(void **state)
{
    weft_error err = {0};
    const char *ev[] = {"{\"n\":1}", "{\"n\":2}", "{\"n\":3}", "{\"n\":4}"};
    char after[64];
    seen all, s;
    int i, j;
    int64_t t0;

    create("wf1", 0);
    assert_int_equal(rs_exec_save(r, "wf1", 1, DOC, "RUNNING", 0, NULL, 0, ev, 3, NULL, &err), 0);
    assert_int_equal(rs_exec_save(r, "wf1", 2, DOC, "RUNNING", 0, NULL, 0, ev + 3, 1, NULL, &err),
                     0);
    memset(&all, 0, sizeof all);
    assert_int_equal(rs_events(r, "wf1", "0", NULL, 0, on_event, &all, &err), 4);
    for (i = 0; i < 4; i++)
        for (j = 0; j < i; j++)
            if (!strcmp(all.ids[i], all.ids[j]))
                fail_msg("events %d and %d share the id %s", j + 1, i + 1, all.ids[i]);
    for (i = 0; i < 4; i++) {
        memset(&s, 0, sizeof s);
        snprintf(after, sizeof after, "%s", all.ids[i]);
        if (rs_events(r, "wf1", after, NULL, 0, on_event, &s, &err) != 3 - i)
            fail_msg("after event %d (%s): %d events, wanted %d", i + 1, all.ids[i], s.n, 3 - i);
        for (j = 0; j < 3 - i; j++) {
            assert_string_equal(s.json[j], all.json[i + 1 + j]);
            assert_string_equal(s.ids[j], all.ids[i + 1 + j]);
        }
    }
    /* where a reader resumes next (its own buffer will do): the entry read last */
    memset(&s, 0, sizeof s);
    snprintf(after, sizeof after, "%s", all.ids[0]);
    assert_int_equal(rs_events(r, "wf1", after, after, 0, on_event, &s, &err), 3);
    assert_int_equal(strncmp(after, all.ids[3], strlen(after)), 0);
    assert_string_equal(all.ids[3] + strlen(after), "-0");
    /* resumed after the last event: a wait waits (it does not return at
     * once with the entry that event came from) */
    memset(&s, 0, sizeof s);
    snprintf(after, sizeof after, "%s", all.ids[3]);
    t0 = wu_mono_ms();
    assert_int_equal(rs_events(r, "wf1", after, NULL, 300, on_event, &s, &err), 0);
    assert_true(wu_mono_ms() - t0 >= 250);
    /* a plain stream id (what older servers sent) is after its whole entry */
    memset(&s, 0, sizeof s);
    snprintf(after, sizeof after, "%.*s", (int)(strrchr(all.ids[0], '-') - all.ids[0]), all.ids[0]);
    if (strchr(after, '-') == strrchr(after, '-')) {
        /* all.ids[0] had the entry-index form: "<ms>-<seq>" is its entry */
        assert_int_equal(rs_events(r, "wf1", after, NULL, 0, on_event, &s, &err), 1);
        assert_string_equal(s.json[0], "{\"n\":4}");
    }
    /* malformed ids are refused, naming the id */
    memset(&s, 0, sizeof s);
    assert_true(rs_events(r, "wf1", "12-x-3", NULL, 0, on_event, &s, &err) < 0);
    assert_non_null(strstr(err.msg, "12-x-3"));
}

static void test_events(void **state)
{
    weft_error err = {0};
    const char *ev[] = {"{\"n\":1}", "{\"n\":2}", "{\"n\":3}"};
    seen s;
    pthread_t t;
    redisReply *sub, *msg;
    redisContext *watcher;
    struct timeval tv = {5, 0};
    int64_t t0;

    create("wf1", 0);
    /* a Pub/Sub watcher sees them live */
    watcher = redisConnectWithTimeout("127.0.0.1", srv.port, tv);
    assert_non_null(watcher);
    sub = redisCommand(watcher, "SUBSCRIBE weft:{wf1}:ev");
    assert_non_null(sub);
    freeReplyObject(sub);

    assert_int_equal(save("wf1", 0 + 1, NULL, 0), 2); /* no events: nothing appended */
    assert_int_equal(qint("EXISTS weft:{wf1}:ev"), 0);
    /* one entry and one message per save, however many events it has */
    assert_int_equal(rs_exec_save(r, "wf1", 2, DOC, "RUNNING", 0, NULL, 0, ev, 2, NULL, &err), 0);
    assert_int_equal(rs_exec_save(r, "wf1", 3, DOC, "RUNNING", 0, NULL, 0, ev + 2, 1, NULL, &err),
                     0);
    assert_int_equal(qint("XLEN weft:{wf1}:ev"), 2);
    assert_int_equal(redisGetReply(watcher, (void **)&msg), REDIS_OK);
    assert_int_equal(msg->type, REDIS_REPLY_ARRAY);
    assert_string_equal(msg->element[2]->str, "{\"n\":1}\n{\"n\":2}");
    freeReplyObject(msg);
    assert_int_equal(redisGetReply(watcher, (void **)&msg), REDIS_OK);
    assert_string_equal(msg->element[2]->str, "{\"n\":3}");
    freeReplyObject(msg);
    redisFree(watcher);

    /* history */
    memset(&s, 0, sizeof s);
    assert_int_equal(rs_events(r, "wf1", "0", NULL, 0, on_event, &s, &err), 3);
    assert_int_equal(s.n, 3);
    assert_string_equal(s.json[0], "{\"n\":1}");
    assert_string_equal(s.json[2], "{\"n\":3}");
    /* stop early */
    memset(&s, 0, sizeof s);
    s.stop_after = 2;
    assert_int_equal(rs_events(r, "wf1", NULL, NULL, 0, on_event, &s, &err), 2);
    assert_string_equal(s.json[1], "{\"n\":2}");
    /* after the second: only the third */
    {
        char after[64];
        snprintf(after, sizeof after, "%s", s.last_id);
        memset(&s, 0, sizeof s);
        assert_int_equal(rs_events(r, "wf1", after, NULL, 0, on_event, &s, &err), 1);
        assert_string_equal(s.json[0], "{\"n\":3}");
    }
    /* nothing new, no wait */
    {
        char after[64];
        snprintf(after, sizeof after, "%s", s.last_id);
        memset(&s, 0, sizeof s);
        assert_int_equal(rs_events(r, "wf1", after, NULL, 0, on_event, &s, &err), 0);
        /* a short wait that times out is not an error */
        t0 = wu_mono_ms();
        assert_int_equal(rs_events(r, "wf1", after, NULL, 200, on_event, &s, &err), 0);
        assert_true(wu_mono_ms() - t0 >= 150);
        assert_int_equal(rs_broken(r), 0);

        /* live: another connection saves while we wait (longer than the command timeout) */
        rs_free(r);
        r = open_rs(NULL, 200);
        assert_int_equal(pthread_create(&t, NULL, late_saver, NULL), 0);
        memset(&s, 0, sizeof s);
        t0 = wu_mono_ms();
        assert_int_equal(rs_events(r, "wf1", after, NULL, 5000, on_event, &s, &err), 1);
        assert_true(wu_mono_ms() - t0 < 4000);
        assert_string_equal(s.json[0], "{\"live\":true}");
        pthread_join(t, NULL);
    }
    /* an empty event, and one that carries its head already (older entries) */
    freeReplyObject(qc("XADD weft:{wf1}:ev 9999999999999-0 json %s",
                       "{}\n{\"workflowId\":\"wf1\",\"time\":7,\"x\":1}"));
    {
        char after[64];
        snprintf(after, sizeof after, "%s", s.last_id);
        memset(&s, 0, sizeof s);
        assert_int_equal(rs_events(r, "wf1", after, NULL, 0, on_event, &s, &err), 2);
        assert_string_equal(s.json[0], "{}");
        assert_string_equal(s.json[1], "{\"x\":1}");
    }
    /* unknown execution: no events */
    memset(&s, 0, sizeof s);
    assert_int_equal(rs_events(r, "nope", "0", NULL, 0, on_event, &s, &err), 0);
}

/* ---- definitions, idempotency, daemons ---- */

static void test_defs(void **state)
{
    weft_error err = {0};
    char *json = NULL;
    int v = 0;
    assert_int_equal(rs_def_get(r, "order", 0, &json, &v, &err), WEFT_ENOTFOUND);
    assert_string_equal(err.msg, "no definition order");
    assert_int_equal(rs_def_put(r, "order", 2, "{\"v\":2}", &err), 0);
    assert_int_equal(rs_def_put(r, "order", 10, "{\"v\":10}", &err), 0);
    assert_int_equal(rs_def_put(r, "order", 9, "{\"v\":9}", &err), 0);
    assert_int_equal(rs_def_get(r, "order", 0, &json, &v, &err), 0);
    assert_int_equal(v, 10); /* numerically highest, not the last written */
    assert_string_equal(json, "{\"v\":10}");
    free(json);
    assert_int_equal(rs_def_get(r, "order", 2, &json, &v, &err), 0);
    assert_int_equal(v, 2);
    assert_string_equal(json, "{\"v\":2}");
    free(json);
    assert_int_equal(rs_def_put(r, "order", 2, "{\"v\":22}", &err), 0);
    assert_int_equal(rs_def_get(r, "order", 2, &json, NULL, &err), 0);
    assert_string_equal(json, "{\"v\":22}");
    free(json);
    json = (char *)1;
    assert_int_equal(rs_def_get(r, "order", 3, &json, &v, &err), WEFT_ENOTFOUND);
    assert_string_equal(err.msg, "no definition order version 3");
    assert_null(json);
    assert_int_equal(rs_def_put(r, "order", 0, "{}", &err), WEFT_EINVAL);
    assert_int_equal(rs_def_put(r, "", 1, "{}", &err), WEFT_EINVAL);
}

static void test_idempotency(void **state)
{
    weft_error err = {0};
    char existing[64] = "junk";
    long long ttl;
    assert_int_equal(rs_idem_claim(r, "order-77", "wf1", existing, &err), 0);
    assert_string_equal(existing, "");
    ttl = qint("PTTL weft:idem:order-77");
    assert_true(ttl > 0);
    assert_int_equal(rs_idem_claim(r, "order-77", "wf2", existing, &err), WEFT_EEXIST);
    assert_string_equal(existing, "wf1");
    assert_has(err.msg, "wf1");
    /* the same id again is not a conflict */
    assert_int_equal(rs_idem_claim(r, "order-77", "wf1", existing, &err), 0);
    assert_int_equal(rs_idem_claim(r, "order-78", "wf2", NULL, &err), 0);
}

static void test_daemons(void **state)
{
    weft_error err = {0};
    char *json = NULL;
    json_object *all, *d, *v;
    int64_t now = wu_now_ms();
    assert_int_equal(rs_daemons(r, &json, &err), 0);
    assert_string_equal(json, "{}");
    free(json);
    assert_int_equal(rs_daemon_beat(r, "d1", "{\"types\":[\"HTTP\"],\"pid\":42}", &err), 0);
    assert_int_equal(rs_daemon_beat(r, "d2", NULL, &err), 0);
    assert_int_equal(rs_daemon_beat(r, "d3", "[1]", &err), WEFT_EINVAL);
    assert_int_equal(rs_daemons(r, &json, &err), 0);
    all = json_tokener_parse(json);
    free(json);
    assert_non_null(all);
    assert_true(json_object_object_get_ex(all, "d1", &d));
    assert_true(json_object_object_get_ex(d, "pid", &v));
    assert_int_equal(json_object_get_int(v), 42);
    assert_true(json_object_object_get_ex(d, "seen", &v));
    assert_true(json_object_get_int64(v) >= now);
    assert_true(json_object_object_get_ex(all, "d2", &d));
    assert_false(json_object_object_get_ex(all, "d3", &d));
    json_object_put(all);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_events, setup, teardown),
        cmocka_unit_test_setup_teardown(test_event_ids, setup, teardown),
        cmocka_unit_test_setup_teardown(test_defs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_idempotency, setup, teardown),
        cmocka_unit_test_setup_teardown(test_daemons, setup, teardown),
    };
    int rc = rsf_start();
    if (rc != 0) return rc;
    rc = cmocka_run_group_tests(tests, NULL, NULL);
    rsf_stop();
    return rc;
}
