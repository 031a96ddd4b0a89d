/*
 * The web UI (ui/index.html, ui/app.js, ui/app.css, compiled in by
 * build-aux/embed.sh: nothing is fetched at run time), and the daemons it
 * lists (/api/daemons).
 */
#include "api/internal.h"

#include <stdlib.h>
#include <string.h>

extern const char weft_ui_html[], weft_ui_js[], weft_ui_css[];
extern const unsigned long weft_ui_html_len, weft_ui_js_len, weft_ui_css_len;

/* Only this origin's files run: no inline script, nothing from elsewhere. */
#define UI_POLICY                                                                                  \
    "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "              \
    "frame-ancestors 'none'"

static mhd_result file(ctx *c, const char *type, const char *data, unsigned long len)
{
    return ap_send_raw(c, 200, type, data, (size_t)len, "Content-Security-Policy", UI_POLICY);
}

/* GET /: the UI's page. */
mhd_result ap_h_ui(ctx *c)
{
    return file(c, "text/html; charset=utf-8", weft_ui_html, weft_ui_html_len);
}

mhd_result ap_h_ui_js(ctx *c)
{
    return file(c, "text/javascript; charset=utf-8", weft_ui_js, weft_ui_js_len);
}

mhd_result ap_h_ui_css(ctx *c)
{
    return file(c, "text/css; charset=utf-8", weft_ui_css, weft_ui_css_len);
}

/* GET /api/daemons (weft's own): {"<daemon id>": {"types", "pid", "host",
 * "seen"}}, each daemon's last heartbeat. */
mhd_result ap_h_daemons(ctx *c)
{
    weft_error err = {0};
    char *json = NULL;
    mhd_result r;
    if (ST(c->t->st, daemons, &json, &err)) return ap_send_werr(c, &err);
    r = ap_send_json_text(c, 200, json);
    free(json);
    return r;
}
