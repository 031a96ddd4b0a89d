/* Redis Cluster slots (store/redis/slots.c): CRC16 and hash tags, checked
 * against what redis-server's CLUSTER KEYSLOT answers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "store/redis/slots.h"

static int slot(const char *key)
{
    return rc_key_slot(key, strlen(key));
}

static void test_crc16(void **state)
{
    (void)state;
    assert_int_equal(rc_crc16("123456789", 9), 0x31C3); /* XMODEM's check value */
    assert_int_equal(rc_crc16("", 0), 0);
}

/* The answers of CLUSTER KEYSLOT (redis-server 7) for these keys. */
static void test_key_slots(void **state)
{
    (void)state;
    assert_int_equal(slot("foo"), 12182);
    assert_int_equal(slot("somekey"), 11058);
    assert_int_equal(slot("{user1000}.following"), 3443);
    assert_int_equal(slot("{user1000}.followers"), 3443);
    assert_int_equal(slot("foo{}{bar}"), 8363);    /* an empty tag: the whole key */
    assert_int_equal(slot("foo{{bar}}zap"), 4015); /* the tag is "{bar" */
    assert_int_equal(slot("foo{bar}{zap}"), 5061); /* the first tag: "bar" */
    assert_int_equal(slot("weft:{q:LAMBDA}:ready"), 15084);
    assert_int_equal(slot("{q:LAMBDA}"), 15084);
    assert_int_equal(slot("foo{"), rc_crc16("foo{", 4) & 16383); /* no closing brace */
    assert_int_equal(slot(""), 0);
}

static void test_map_bad_replies(void **state)
{
    rc_map m;
    weft_error err = {0};
    redisReply not_list = {.type = REDIS_REPLY_STRING};
    (void)state;
    memset(&m, 0, sizeof m);
    assert_int_equal(rc_map_read(&m, NULL, &err), WEFT_EIO);
    assert_int_equal(rc_map_read(&m, &not_list, &err), WEFT_EIO);
    assert_null(rc_map_node(&m, 0));
    assert_null(rc_map_node(&m, -1));
    assert_null(rc_map_node(&m, 16384));
    rc_map_free(&m);
}

/* Partitions: each tag's slot in its own range, ids spread over them. */
static void test_partitions(void **state)
{
    char tag[RC_TAG_MAX], id[32];
    int parts[] = {1, 2, 3, 8, 16, 1024}, k, i, count[8] = {0};
    (void)state;
    rc_part_tag("dq", 0, 1, tag);
    assert_string_equal(tag, "dq");
    assert_int_equal(rc_part_of("anything", 1), 0);
    for (k = 0; k < 6; k++)
        for (i = 0; i < parts[k]; i++) {
            int s;
            rc_part_tag("dq", i, parts[k], tag);
            s = slot(tag);
            assert_true(parts[k] == 1 || (long)s * parts[k] / 16384 == i);
        }
    rc_part_tag("dq", 3, 8, tag);
    assert_string_equal(tag, "dq:3:3"); /* the names in Redis stay these */
    for (i = 0; i < 8000; i++) {
        snprintf(id, sizeof id, "%08x-wf", i * 2654435761u);
        count[rc_part_of(id, 8)]++;
    }
    for (i = 0; i < 8; i++)
        assert_true(count[i] > 800 && count[i] < 1200);
}

/* MOVED/ASK texts, as a cluster (or something posing as one) sends them */
static void test_redirects(void **state)
{
    static const char *const bad[] = {NULL,
                                      "",
                                      "MOVED",
                                      "MOVED ",
                                      "MOVED x 1.2.3.4:1",
                                      "MOVED -1 1.2.3.4:1",
                                      "MOVED 16384 1.2.3.4:1",
                                      "MOVED 99999999999999999999 h:1",
                                      "MOVED 12 1.2.3.4",
                                      "MOVED 12 :6379",
                                      "MOVED 12 h:",
                                      "MOVED 12 h:0",
                                      "MOVED 12 h:65536",
                                      "MOVED 12 h:-5",
                                      "MOVED 12 h:80 extra",
                                      "MOVED 12 h:80x",
                                      "MOVED 12  h:80x",
                                      "MOVED 12\th:80",
                                      "ASK 12 h:+80"};
    const char *host;
    size_t hlen, i;
    int slot, port;
    (void)state;
    assert_int_equal(rc_redirect_parse("MOVED 3999 127.0.0.1:6381", &slot, &host, &hlen, &port), 0);
    assert_int_equal(slot, 3999);
    assert_int_equal(hlen, 9);
    assert_memory_equal(host, "127.0.0.1", 9);
    assert_int_equal(port, 6381);
    assert_int_equal(rc_redirect_parse("ASK 16383 ::1:7000", &slot, &host, &hlen, &port), 0);
    assert_int_equal(slot, 16383);
    assert_int_equal(hlen, 3);
    assert_int_equal(port, 7000);
    for (i = 0; i < sizeof bad / sizeof *bad; i++)
        if (rc_redirect_parse(bad[i], &slot, &host, &hlen, &port) != -1)
            fail_msg("taken: \"%s\"", bad[i] ? bad[i] : "(null)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc16),           cmocka_unit_test(test_key_slots),
        cmocka_unit_test(test_map_bad_replies), cmocka_unit_test(test_partitions),
        cmocka_unit_test(test_redirects),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
