/*
 * An out-of-tree weft plugin: task type TEXT_CASE changes the case of
 * input.text (mode = "upper", "lower" or "title"); output { text = ... }.
 * Config (weftd: plugins = { textcase = { default_mode = "lower" } }):
 * default_mode, the mode when a task gives none ("upper").
 * Build: make (cc -shared -fPIC $(pkg-config --cflags weft-plugin) textcase.c -o textcase.so
 * $(pkg-config --libs weft-plugin))
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <weft/plugin.h>

static const weft_host *H;

typedef struct options {
    const char *default_mode; /* borrowed from the config, which the host keeps */
} options;
static options opts;

static const weft_config_field options_table[] = {
    WEFT_CONFIG_KEY(WEFT_CONFIG_STRING, options, default_mode, .dflt = "upper"),
    WEFT_CONFIG_END,
};

static int check_mode(const weft_host *host, const char *m, weft_error *err)
{
    if (m && strcmp(m, "upper") && strcmp(m, "lower") && strcmp(m, "title"))
        return host->error(err, WEFT_EINVAL, "mode '%s' (use upper, lower or title)", m);
    return 0;
}

static int textcase_init(const weft_host *host, json_object *config, weft_error *err)
{
    int rc = host->config_fill(options_table, config, &opts, "textcase", err);
    return rc ? rc : check_mode(host, opts.default_mode, err);
}

static int textcase_validate(const weft_host *host, json_object *def, weft_error *err)
{
    return check_mode(host, weft_json_str(json_object_object_get(def, "inputParameters"), "mode"),
                      err);
}

static int textcase_execute(weft_ctx *ctx, weft_result *r)
{
    const weft_task_view *t = H->task(ctx);
    const char *text = weft_json_str(t->input, "text"), *m = weft_json_str(t->input, "mode");
    char *s;
    size_t i;
    int start = 1;

    if (!text) {
        r->status = WEFT_TASK_FAILED_WITH_TERMINAL_ERROR;
        strcpy(r->reason, "input.text must be a string");
        return 0;
    }
    if (!m) m = opts.default_mode;
    if (!(s = strdup(text))) return WEFT_ENOMEM;
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

static const weft_task_type textcase_type =
    WEFT_TASK_TYPE(.name = "TEXT_CASE", .validate = textcase_validate, .execute = textcase_execute,
                   .init = textcase_init);

WEFT_PLUGIN(textcase, .types = &textcase_type, .ntypes = 1, .host = &H)
