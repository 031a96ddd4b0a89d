/*
 * An out-of-tree weft plugin: task type TEXT_CASE changes the case of
 * input.text (mode = "upper", "lower" or "title"); output { text = ... }.
 * Build: cc -shared -fPIC $(pkg-config --cflags weft-plugin) textcase.c -o textcase.so
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <weft/plugin.h>

static const weft_host *H;

static int textcase_validate(const weft_host *host, json_object *def, weft_error *err)
{
    json_object *in, *mode;
    const char *m;
    if (json_object_object_get_ex(def, "inputParameters", &in) &&
        json_object_object_get_ex(in, "mode", &mode)) {
        m = json_object_get_string(mode);
        if (strcmp(m, "upper") && strcmp(m, "lower") && strcmp(m, "title"))
            return host->error(err, WEFT_EINVAL, "mode '%s' (use upper, lower or title)", m);
    }
    return 0;
}

static int textcase_execute(weft_ctx *ctx, weft_result *r)
{
    const weft_task_view *t = H->task(ctx);
    json_object *text, *mode;
    const char *m = "upper";
    char *s;
    size_t i;
    int start = 1;

    if (!json_object_object_get_ex(t->input, "text", &text) ||
        !json_object_is_type(text, json_type_string)) {
        r->status = WEFT_TASK_FAILED_WITH_TERMINAL_ERROR;
        strcpy(r->reason, "input.text must be a string");
        return 0;
    }
    if (json_object_object_get_ex(t->input, "mode", &mode))
        m = json_object_get_string(mode);
    s = strdup(json_object_get_string(text));
    if (!s)
        return WEFT_ENOMEM;
    for (i = 0; s[i]; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!strcmp(m, "lower") || (!strcmp(m, "title") && !start))
            s[i] = (char)tolower(c);
        else
            s[i] = (char)toupper(c);
        start = isspace(c);
    }
    r->output = json_object_new_object();
    json_object_object_add(r->output, "text", json_object_new_string(s));
    free(s);
    r->status = WEFT_TASK_COMPLETED;
    return 0;
}

static const weft_task_type textcase_type = {
    .name = "TEXT_CASE",
    .validate = textcase_validate,
    .execute = textcase_execute,
};

int weft_plugin_init(const weft_host *host)
{
    weft_error err = {0};
    WEFT_PLUGIN_BEGIN(host);
    H = host;
    return host->register_task_type(&textcase_type, &err);
}
WEFT_PLUGIN_ENTRY(textcase)
