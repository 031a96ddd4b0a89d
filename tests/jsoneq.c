/* jsoneq A B: exit 0 when the two JSON texts are equal (object member order ignored). */
#include <stdio.h>
#include <json-c/json.h>

int main(int argc, char **argv)
{
    json_object *a, *b;
    int eq;
    if (argc != 3) {
        fprintf(stderr, "usage: jsoneq JSON JSON\n");
        return 2;
    }
    a = json_tokener_parse(argv[1]);
    b = json_tokener_parse(argv[2]);
    if (!a || !b) {
        fprintf(stderr, "jsoneq: not JSON: %s\n", a ? argv[2] : argv[1]);
        json_object_put(a);
        json_object_put(b);
        return 2;
    }
    eq = json_object_equal(a, b);
    json_object_put(a);
    json_object_put(b);
    return eq ? 0 : 1;
}
