/*
 * wfcheck: read a Workflow JSON (weft status) on stdin; exit 1 and name the
 * refs when a task reference completed more than once, 0 otherwise.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <json-c/json.h>

int main(void)
{
    char *buf = NULL;
    size_t len = 0, cap = 0, n, i, j;
    json_object *wf, *tasks;
    int dup = 0;
    do {
        if (len + 4096 > cap) {
            char *b = realloc(buf, cap = (cap + 4096) * 2);
            if (!b) return 2;
            buf = b;
        }
        n = fread(buf + len, 1, cap - len - 1, stdin);
        len += n;
    } while (n > 0);
    buf[len] = 0;
    wf = json_tokener_parse(buf);
    free(buf);
    if (!wf || !json_object_object_get_ex(wf, "tasks", &tasks)) {
        fprintf(stderr, "wfcheck: not a workflow\n");
        json_object_put(wf);
        return 2;
    }
    n = json_object_array_length(tasks);
    for (i = 0; i < n; i++) {
        json_object *a = json_object_array_get_idx(tasks, i), *ra, *sa;
        json_object_object_get_ex(a, "referenceTaskName", &ra);
        json_object_object_get_ex(a, "status", &sa);
        if (strcmp(json_object_get_string(sa), "COMPLETED")) continue;
        for (j = i + 1; j < n; j++) {
            json_object *b = json_object_array_get_idx(tasks, j), *rb, *sb;
            json_object_object_get_ex(b, "referenceTaskName", &rb);
            json_object_object_get_ex(b, "status", &sb);
            if (!strcmp(json_object_get_string(sb), "COMPLETED") &&
                !strcmp(json_object_get_string(ra), json_object_get_string(rb))) {
                printf("%s completed twice\n", json_object_get_string(ra));
                dup = 1;
            }
        }
    }
    json_object_put(wf);
    return dup;
}
