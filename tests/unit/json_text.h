/*
 * JSON written in a test with ' for " (so that definitions and expected
 * values read as JSON without escapes). Header-only; include it after
 * <cmocka.h>.
 */
#ifndef WEFT_TEST_JSON_TEXT_H
#define WEFT_TEST_JSON_TEXT_H

#include <stdlib.h>
#include <string.h>

#include <json-c/json.h>

/*
 * Parse text with every ' read as ". Returns a new object the caller owns;
 * text that does not parse fails the test.
 */
static __attribute__((unused)) json_object *jt_parse(const char *text)
{
    char *s = strdup(text), *p;
    json_object *j;
    assert_non_null(s);
    for (p = s; *p; p++)
        if (*p == '\'') *p = '"';
    j = json_tokener_parse(s);
    if (!j) fail_msg("test JSON does not parse: %s", s);
    free(s);
    return j;
}

#endif
