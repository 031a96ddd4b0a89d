#define _GNU_SOURCE /* strptime, timegm */
/*
 * How weft shows workflows to people: status's summary and task table,
 * watch's lines, durations and local times. Colour only when cli_color says
 * so; -o json prints Conductor's JSON instead (client.c, cli_event).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "base/util.h"
#include "cli/cli.h"
#include "core/exec.h"

#define RESET "\033[0m"
#define BOLD "\033[1m"
#define RED "\033[31m"
#define GREEN "\033[32m"
#define YELLOW "\033[33m"
#define CYAN "\033[36m"

/* A column wide enough for the longest task status (FAILED_WITH_TERMINAL_ERROR
 * is longer, and pushes its line). */
#define STATUS_COLS 11
/* The reason column is never narrower, however narrow the terminal. */
#define REASON_MIN 24

static const char *str(json_object *o, const char *key)
{
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_string))
        return NULL;
    return json_object_get_string(v);
}

static int64_t num(json_object *o, const char *key)
{
    json_object *v;
    return json_object_object_get_ex(o, key, &v) ? json_object_get_int64(v) : 0;
}

void cli_local_time(char *buf, size_t n, int64_t ms, int date)
{
    time_t t = (time_t)(ms / 1000);
    struct tm tm;
    char s[48], zone[16] = "";
    localtime_r(&t, &tm);
    strftime(s, sizeof s, date ? "%Y-%m-%d %H:%M:%S" : "%H:%M:%S", &tm);
    if (date) strftime(zone, sizeof zone, " %Z", &tm);
    snprintf(buf, n, "%s.%03d%s", s, (int)(ms % 1000), zone);
}

/* Columns text takes on a terminal: its UTF-8 characters. */
static int cols(const char *s)
{
    int n = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xC0) != 0x80) n++;
    return n;
}

/* text on one line (control characters as spaces) in at most max columns
 * and size bytes, cut with "..." when longer (never inside a UTF-8 character). */
static void fit(char *out, size_t size, const char *text, int max)
{
    size_t o = 0, room = size - 4; /* "..." and the NUL always fit */
    int used = 0;
    const char *p = text;
    if (cols(text) > max) max = max > 3 ? max - 3 : 0;
    for (; *p; p++) {
        unsigned char ch = (unsigned char)*p;
        /* every byte is bounded, a continuation byte too: text that is not
         * UTF-8 may hold any number of them in a row */
        if (((ch & 0xC0) != 0x80 && used++ == max) || o + 4 > room) break;
        out[o++] = ch < 0x20 || ch == 0x7f ? ' ' : (char)ch;
    }
    if (*p) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    out[o] = 0;
}

static const char *status_color(const char *s)
{
    if (!s) return NULL;
    if (!strcmp(s, "COMPLETED")) return GREEN;
    if (strstr(s, "FAILED") || !strcmp(s, "TIMED_OUT") || !strcmp(s, "TERMINATED") ||
        !strcmp(s, "CANCELED"))
        return RED;
    if (!strcmp(s, "COMPLETED_WITH_ERRORS") || !strcmp(s, "PAUSED")) return YELLOW;
    return CYAN;
}

/* text in color (NULL: none), then spaces up to width columns. */
static void cell(FILE *f, const char *text, int width, const char *color)
{
    int pad = width - cols(text);
    fprintf(f, "%s%s%s%*s", color ? color : "", text, color ? RESET : "", pad > 0 ? pad : 0, "");
}

/* The width lines should keep to: the terminal's, else $COLUMNS, else 120. */
static int line_width(FILE *f)
{
    struct winsize ws;
    const char *env = getenv("COLUMNS");
    if (isatty(fileno(f)) && ioctl(fileno(f), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
        return ws.ws_col;
    if (env && atoi(env) > 0) return atoi(env);
    return 120;
}

static void field(FILE *f, const char *label, const char *value, const char *color)
{
    fprintf(f, "%-13s", label);
    cell(f, value, 0, color);
    fputc('\n', f);
}

/* A task's run time: from its start to its end, or to now while it runs. */
static void task_duration(json_object *task, char *buf, size_t n)
{
    int64_t start = num(task, "startTime"), end = num(task, "endTime");
    if (start <= 0)
        snprintf(buf, n, "-");
    else
        wu_duration_text(buf, n, (end > 0 ? end : wu_now_ms()) - start);
}

static json_object *task_by_id(json_object *tasks, const char *id)
{
    size_t i;
    for (i = 0; id && tasks && i < json_object_array_length(tasks); i++) {
        json_object *t = json_object_array_get_idx(tasks, i);
        const char *tid = str(t, "taskId");
        if (tid && !strcmp(tid, id)) return t;
    }
    return NULL;
}

static void show_summary(FILE *f, json_object *wf, json_object *tasks, int color)
{
    char buf[4096], when[64];
    const char *s = str(wf, "status"), *v;
    int64_t start = num(wf, "startTime"), end = num(wf, "endTime");
    json_object *failed, *unserved;
    if (start <= 0) start = num(wf, "createTime");
    snprintf(buf, sizeof buf, "%s (version %lld)",
             str(wf, "workflowName") ? str(wf, "workflowName") : "?",
             (long long)num(wf, "workflowVersion"));
    field(f, "workflow", buf, color ? BOLD : NULL);
    field(f, "id", str(wf, "workflowId") ? str(wf, "workflowId") : "?", NULL);
    field(f, "status", s ? s : "?", color ? status_color(s) : NULL);
    if ((v = str(wf, "correlationId")) && *v) field(f, "correlation", v, NULL);
    if ((v = str(wf, "parentWorkflowId")) && *v) field(f, "parent", v, NULL);
    if (start > 0) {
        cli_local_time(when, sizeof when, start, 1);
        field(f, "started", when, NULL);
    }
    if (end > 0) {
        cli_local_time(when, sizeof when, end, 1);
        field(f, "ended", when, NULL);
    }
    if (start > 0) {
        wu_duration_text(when, sizeof when, (end > 0 ? end : wu_now_ms()) - start);
        if (end <= 0) strncat(when, " so far", sizeof when - strlen(when) - 1);
        field(f, "duration", when, NULL);
    }
    if ((v = str(wf, "reasonForIncompletion")) && *v) {
        fit(buf, sizeof buf, v, (int)sizeof buf);
        field(f, "reason", buf, NULL);
    }
    if ((failed = task_by_id(tasks, str(wf, "failedTaskId")))) {
        snprintf(buf, sizeof buf, "%s (%s), attempt %lld",
                 str(failed, "referenceTaskName") ? str(failed, "referenceTaskName") : "?",
                 str(failed, "taskType") ? str(failed, "taskType") : "?",
                 (long long)num(failed, "retryCount") + 1);
        field(f, "failed task", buf, color ? RED : NULL);
    }
    if (json_object_object_get_ex(wf, "unservedTaskTypes", &unserved) &&
        json_object_is_type(unserved, json_type_array)) {
        size_t i, o = 0;
        buf[0] = 0;
        for (i = 0; i < json_object_array_length(unserved) && o < sizeof buf - 1; i++)
            o += (size_t)snprintf(buf + o, sizeof buf - o, "%s%s", i ? ", " : "",
                                  json_object_get_string(json_object_array_get_idx(unserved, i)));
        field(f, "unserved", buf, color ? YELLOW : NULL);
    }
}

/* A table's header line: its n columns of widths w (each padded two more),
 * then its last one, the reason; returns the columns left for that one,
 * at least REASON_MIN. */
static int table_head(FILE *f, const char *const *head, const int *w, int n, int color)
{
    int room = line_width(f), c;
    for (c = 0; c < n; c++) {
        room -= w[c] + 2;
        cell(f, head[c], w[c] + 2, color ? BOLD : NULL);
    }
    cell(f, head[n], 0, color ? BOLD : NULL);
    fputc('\n', f);
    return room < REASON_MIN ? REASON_MIN : room;
}

/* The task table: widths from what the cells hold, the reason cut to fit. */
static void show_tasks(FILE *f, json_object *tasks, int color)
{
    static const char *const head[] = {"REF", "TYPE", "STATUS", "ATTEMPTS", "DURATION", "REASON"};
    int w[5] = {3, 4, STATUS_COLS, 8, 8}, room;
    size_t i, n = tasks ? json_object_array_length(tasks) : 0;
    char buf[64], why[4096];
    if (!n) {
        fputs("\n(no tasks yet)\n", f);
        return;
    }
    for (i = 0; i < n; i++) {
        json_object *t = json_object_array_get_idx(tasks, i);
        const char *ref = str(t, "referenceTaskName"), *type = str(t, "taskType");
        if (ref && cols(ref) > w[0]) w[0] = cols(ref);
        if (type && cols(type) > w[1]) w[1] = cols(type);
        task_duration(t, buf, sizeof buf);
        if (cols(buf) > w[4]) w[4] = cols(buf);
    }
    fputc('\n', f);
    room = table_head(f, head, w, 5, color);
    for (i = 0; i < n; i++) {
        json_object *t = json_object_array_get_idx(tasks, i);
        const char *s = str(t, "status"), *why_text = str(t, "reasonForIncompletion");
        cell(f, str(t, "referenceTaskName") ? str(t, "referenceTaskName") : "?", w[0] + 2, NULL);
        cell(f, str(t, "taskType") ? str(t, "taskType") : "?", w[1] + 2, NULL);
        cell(f, s ? s : "?", w[2] + 2, color ? status_color(s) : NULL);
        snprintf(buf, sizeof buf, "%lld", (long long)num(t, "retryCount") + 1);
        cell(f, buf, w[3] + 2, NULL);
        task_duration(t, buf, sizeof buf);
        fit(why, sizeof why, why_text ? why_text : "", room);
        /* no trailing blanks when there is no reason */
        cell(f, buf, *why ? w[4] + 2 : 0, NULL);
        fprintf(f, "%s\n", why);
    }
}

void cli_show_status(FILE *f, json_object *wf, int color)
{
    json_object *tasks = NULL;
    if (!json_object_object_get_ex(wf, "tasks", &tasks) ||
        !json_object_is_type(tasks, json_type_array))
        tasks = NULL;
    show_summary(f, wf, tasks, color);
    show_tasks(f, tasks, color);
}

void cli_watch_init(cli_watcher *w, const cli *c)
{
    memset(w, 0, sizeof *w);
    w->json = cli_json(c);
    w->color = !w->json && cli_color(c, stdout);
    w->started = json_object_new_object();
}

void cli_watch_clear(cli_watcher *w)
{
    json_object_put(w->started);
    w->started = NULL;
}

/* One event as a line: local time, what it is about, status, how long a task
 * that ended took (since its start, else since it was scheduled), reason. */
static void event_line(cli_watcher *w, json_object *ev)
{
    const char *task = str(ev, "taskId"), *s = str(ev, "status"), *why = str(ev, "reason");
    int64_t t = num(ev, "time");
    char when[64], what[256], took[32] = "";
    cli_local_time(when, sizeof when, t, 0);
    if (task) {
        json_object *seen;
        snprintf(what, sizeof what, "%s (%s)",
                 str(ev, "referenceTaskName") ? str(ev, "referenceTaskName") : "?",
                 str(ev, "taskType") ? str(ev, "taskType") : "?");
        if (s && (!strcmp(s, "SCHEDULED") || !strcmp(s, "IN_PROGRESS")))
            json_object_object_add(w->started, task, json_object_new_int64(t));
        else if (s && json_object_object_get_ex(w->started, task, &seen)) {
            /* any other status ends the task */
            wu_duration_text(took, sizeof took, t - json_object_get_int64(seen));
            json_object_object_del(w->started, task);
        }
    } else {
        snprintf(what, sizeof what, "workflow");
    }
    printf("%s  ", when);
    cell(stdout, what, 28, w->color && !task ? BOLD : NULL);
    putchar(' ');
    cell(stdout, s ? s : "?", (*took || (why && *why)) ? STATUS_COLS : 0,
         w->color ? status_color(s) : NULL);
    if (*took || (why && *why)) {
        putchar(' ');
        cell(stdout, took, why && *why ? 7 : 0, NULL);
    }
    if (why && *why) {
        char cut[4096];
        fit(cut, sizeof cut, why, (int)sizeof cut);
        printf(" %s", cut);
    }
    putchar('\n');
}

int cli_event(cli_watcher *w, const char *json)
{
    json_object *ev = json_tokener_parse(json), *v;
    weft_wf_status st;
    int end = 0;
    if (w->json || !ev)
        printf("%s\n", json);
    else
        event_line(w, ev);
    fflush(stdout);
    /* the workflow's own events have no taskId */
    if (ev && !json_object_object_get_ex(ev, "taskId", &v) &&
        json_object_object_get_ex(ev, "status", &v) &&
        xc_wf_status_parse(json_object_get_string(v), &st) == 0 && xc_wf_terminal(st)) {
        end = w->ended = 1;
        w->end = st;
    }
    json_object_put(ev);
    return end;
}

/* A summary's time ("2026-11-26T08:00:00.123Z", UTC) in ms; 0 when absent. */
static int64_t iso_ms(const char *s)
{
    struct tm tm;
    int ms = 0;
    const char *p;
    memset(&tm, 0, sizeof tm);
    if (!s || !(p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm))) return 0;
    if (*p == '.') ms = atoi(p + 1);
    return (int64_t)timegm(&tm) * 1000 + ms;
}

void cli_show_list(FILE *f, json_object *res, int color)
{
    static const char *const head[] = {"ID",   "WORKFLOW",    "STATUS", "STARTED",
                                       "TOOK", "CORRELATION", "REASON"};
    json_object *results = NULL;
    int w[6] = {2, 8, STATUS_COLS, 19, 8, 11}, room;
    size_t i, n;
    char buf[512], why[4096];
    if (!json_object_object_get_ex(res, "results", &results) ||
        !json_object_is_type(results, json_type_array))
        results = NULL;
    n = results ? json_object_array_length(results) : 0;
    if (!n) {
        fputs("(no runs)\n", f);
        return;
    }
    for (i = 0; i < n; i++) {
        json_object *r = json_object_array_get_idx(results, i);
        const char *id = str(r, "workflowId"), *corr = str(r, "correlationId");
        snprintf(buf, sizeof buf, "%s v%lld", str(r, "workflowType") ? str(r, "workflowType") : "?",
                 (long long)num(r, "version"));
        if (id && cols(id) > w[0]) w[0] = cols(id);
        if (cols(buf) > w[1]) w[1] = cols(buf) > 40 ? 40 : cols(buf);
        if (corr && cols(corr) > w[5]) w[5] = cols(corr) > 30 ? 30 : cols(corr);
    }
    room = table_head(f, head, w, 6, color);
    for (i = 0; i < n; i++) {
        json_object *r = json_object_array_get_idx(results, i);
        const char *s = str(r, "status"), *reason = str(r, "reasonForIncompletion");
        int64_t start = iso_ms(str(r, "startTime")), end = iso_ms(str(r, "endTime"));
        cell(f, str(r, "workflowId") ? str(r, "workflowId") : "?", w[0] + 2, NULL);
        snprintf(buf, sizeof buf, "%s v%lld", str(r, "workflowType") ? str(r, "workflowType") : "?",
                 (long long)num(r, "version"));
        fit(why, sizeof why, buf, w[1]);
        cell(f, why, w[1] + 2, NULL);
        cell(f, s ? s : "?", w[2] + 2, color ? status_color(s) : NULL);
        cli_local_time(buf, sizeof buf, start, 1);
        buf[19] = 0; /* to the second */
        cell(f, start ? buf : "-", w[3] + 2, NULL);
        wu_duration_text(buf, sizeof buf, (end ? end : wu_now_ms()) - start);
        cell(f, start ? buf : "-", w[4] + 2, NULL);
        fit(why, sizeof why, str(r, "correlationId") ? str(r, "correlationId") : "", w[5]);
        fit(buf, sizeof buf, reason ? reason : "", room);
        cell(f, why, *buf ? w[5] + 2 : 0, NULL);
        fprintf(f, "%s\n", buf);
    }
    {
        long long total = json_object_object_get_ex(res, "totalHits", &results)
                              ? (long long)json_object_get_int64(results)
                              : (long long)n;
        fprintf(f, "\n%zu of %lld run%s\n", n, total, total == 1 ? "" : "s");
    }
}
