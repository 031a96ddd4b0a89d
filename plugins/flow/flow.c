/*
 * Flow control: SUB_WORKFLOW, DO_WHILE, SET_VARIABLE, TERMINATE, WAIT.
 *
 * SUB_WORKFLOW starts a child workflow (subWorkflowParam: name + version,
 * or workflowDefinition inline) with the task's input and completes with
 * the child's output plus subWorkflowId.
 * DO_WHILE runs loopOver, then evaluates loopCondition (a Lua body; `input`
 * holds the loop's own input, iteration = n and <ref> = the output of each
 * body task) and runs the body again while it returns true, up to
 * maxIterations. Body task refs get "__<n>" per iteration, as in Conductor.
 * Output: { iteration = n, <ref> = last output ... }.
 * SET_VARIABLE merges its input into workflow.variables.
 * TERMINATE ends the workflow (terminationStatus COMPLETED or FAILED,
 * terminationReason, workflowOutput).
 * WAIT completes after inputParameters.duration ("5s", "3 days 2 hours"),
 * at inputParameters.until (Conductor's "yyyy-MM-dd HH:mm z", "yyyy-MM-dd
 * HH:mm", "yyyy-MM-dd"; one in the past ends at once), or on a signal.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <weft/plugin.h>

static const weft_host *H;

/* ---- SUB_WORKFLOW ---- */

static int sub_validate(const weft_host *host, json_object *def, weft_error *err)
{
    json_object *p, *v;
    if (!json_object_object_get_ex(def, "subWorkflowParam", &p) ||
        !json_object_is_type(p, json_type_object))
        return host->error(err, WEFT_EINVAL, "SUB_WORKFLOW needs subWorkflowParam");
    if (json_object_object_get_ex(p, "priority", &v) &&
        (!json_object_is_type(v, json_type_int) || json_object_get_int64(v) < 0 ||
         json_object_get_int64(v) > 99))
        return host->error(err, WEFT_EINVAL,
                           "subWorkflowParam.priority must be a whole number from 0 to 99");
    if (json_object_object_get_ex(p, "workflowDefinition", &v)) {
        if (!json_object_is_type(v, json_type_object))
            return host->error(err, WEFT_EINVAL,
                               "subWorkflowParam.workflowDefinition must be a workflow object");
        return 0;
    }
    if (!weft_json_str(p, "name"))
        return host->error(err, WEFT_EINVAL,
                           "subWorkflowParam needs a name or a workflowDefinition");
    if (json_object_object_get_ex(p, "version", &v) && !json_object_is_type(v, json_type_int))
        return host->error(err, WEFT_EINVAL, "subWorkflowParam.version must be a number");
    return 0;
}

/* How soon a child that could not be started for a store error is tried again. */
#define SUB_RETRY_MS 1000

static int sub_execute(weft_ctx *ctx, weft_result *r)
{
    const weft_task_view *t = H->task(ctx);
    json_object *p = json_object_object_get(t->def, "subWorkflowParam"), *inl = NULL, *v;
    char id[64];
    weft_error err = {0};
    int version = 0;

    if (t->output && json_object_object_get_ex(t->output, "subWorkflowId", NULL)) {
        /* started already (we are being re-run): keep waiting for that child */
        r->status = WEFT_TASK_IN_PROGRESS;
        r->callback_after_ms = -1;
        return 0;
    }
    json_object_object_get_ex(p, "workflowDefinition", &inl);
    if (json_object_object_get_ex(p, "version", &v)) version = json_object_get_int(v);
    if (H->start_child(ctx, inl, weft_json_str(p, "name"), version, t->input, id, sizeof id,
                       &err)) {
        if (err.code == WEFT_EIO) {
            /* the store did not answer (a failover, a lost connection): the
             * child may exist or not; try again soon, its idempotency key
             * (the task's id) keeps it to one child */
            H->log(WEFT_LOG_WARN, "task %s: cannot start its sub-workflow yet, trying again: %s",
                   t->ref, err.msg);
            r->status = WEFT_TASK_IN_PROGRESS;
            r->callback_after_ms = SUB_RETRY_MS;
            return 0;
        }
        return weft_fail(r, "cannot start sub-workflow: %s", err.msg);
    }
    r->output = json_object_new_object();
    json_object_object_add(r->output, "subWorkflowId", json_object_new_string(id));
    r->status = WEFT_TASK_IN_PROGRESS;
    r->callback_after_ms = -1;
    return 0;
}

/* ---- DO_WHILE ---- */

static int loop_validate(const weft_host *host, json_object *def, weft_error *err)
{
    json_object *body, *max;
    if (!json_object_object_get_ex(def, "loopOver", &body) ||
        !json_object_is_type(body, json_type_array) || !json_object_array_length(body))
        return host->error(err, WEFT_EINVAL, "DO_WHILE needs loopOver: a non-empty list of tasks");
    if (!weft_json_str(def, "loopCondition"))
        return host->error(err, WEFT_EINVAL, "DO_WHILE needs loopCondition (a Lua body)");
    if (json_object_object_get_ex(def, "maxIterations", &max) &&
        (!json_object_is_type(max, json_type_int) || json_object_get_int(max) < 1))
        return host->error(err, WEFT_EINVAL, "maxIterations must be a whole number >= 1");
    return 0;
}

/* { iteration = n, <ref> = output of each body task } */
static json_object *loop_state(weft_ctx *ctx, json_object *body, int n)
{
    json_object *o = json_object_new_object();
    size_t i;
    for (i = 0; i < json_object_array_length(body); i++) {
        const char *ref = weft_json_str(json_object_array_get_idx(body, i), "taskReferenceName");
        const weft_task_view *v = ref ? H->lookup(ctx, ref) : NULL;
        if (v)
            json_object_object_add(
                o, ref, v->output ? json_object_get(v->output) : json_object_new_object());
    }
    json_object_object_add(o, "iteration", json_object_new_int(n));
    return o;
}

static int loop_map(weft_ctx *ctx, json_object *def, json_object *out, weft_result *r)
{
    const weft_task_view *t = H->task(ctx);
    json_object *body = json_object_object_get(def, "loopOver"), *state, *input, *go = NULL, *max;
    char chunk[160];
    weft_error err = {0};
    int n = t->iteration, again;

    if (t->status == WEFT_TASK_SCHEDULED) {
        json_object_array_add(out, json_object_get(json_object_array_get_idx(body, 0)));
        r->iteration = 1;
        r->output = json_object_new_object();
        json_object_object_add(r->output, "iteration", json_object_new_int(1));
        r->status = WEFT_TASK_IN_PROGRESS;
        r->callback_after_ms = -1;
        return 0;
    }
    /* the body ended: loop again? */
    state = loop_state(ctx, body, n);
    input = json_object_new_object();
    json_object_object_foreach(t->input, k, v) json_object_object_add(input, k, json_object_get(v));
    json_object_object_foreach(state, k2, v2)
        json_object_object_add(input, k2, json_object_get(v2));
    snprintf(chunk, sizeof chunk, "do_while '%s' condition", t->def_ref);
    if (H->lua_eval(ctx, chunk, weft_json_str(def, "loopCondition"), input, &go, &err)) {
        json_object_put(input);
        json_object_put(state);
        return weft_fail(r, "%s", err.msg);
    }
    json_object_put(input);
    again = go && !(json_object_is_type(go, json_type_boolean) && !json_object_get_boolean(go));
    json_object_put(go);
    if (again && json_object_object_get_ex(def, "maxIterations", &max) &&
        n >= json_object_get_int(max))
        again = 0;
    r->output = state;
    if (again) {
        json_object_array_add(out, json_object_get(json_object_array_get_idx(body, 0)));
        r->iteration = n + 1;
        json_object_object_add(r->output, "iteration", json_object_new_int(n + 1));
        r->status = WEFT_TASK_IN_PROGRESS;
        r->callback_after_ms = -1;
    } else {
        r->status = WEFT_TASK_COMPLETED;
    }
    return 0;
}

/* ---- SET_VARIABLE ---- */

static int setvar_map(weft_ctx *ctx, json_object *def, json_object *out, weft_result *r)
{
    weft_error err = {0};
    if (H->set_variables(ctx, H->task(ctx)->input, &err)) return weft_fail(r, "%s", err.msg);
    r->output = json_object_new_object();
    r->status = WEFT_TASK_COMPLETED;
    return 0;
}

/* ---- TERMINATE ---- */

static int term_status(const char *s, weft_wf_status *out)
{
    if (!s || !strcmp(s, "COMPLETED"))
        *out = WEFT_WF_COMPLETED;
    else if (!strcmp(s, "FAILED"))
        *out = WEFT_WF_FAILED;
    else if (!strcmp(s, "TERMINATED"))
        *out = WEFT_WF_TERMINATED;
    else
        return -1;
    return 0;
}

static int term_validate(const weft_host *host, json_object *def, weft_error *err)
{
    json_object *in = json_object_object_get(def, "inputParameters");
    const char *s = in ? weft_json_str(in, "terminationStatus") : NULL;
    weft_wf_status st;
    if (s && !strstr(s, "${") && term_status(s, &st))
        return host->error(err, WEFT_EINVAL,
                           "terminationStatus '%s' (use COMPLETED, FAILED or TERMINATED)", s);
    return 0;
}

static int term_map(weft_ctx *ctx, json_object *def, json_object *out, weft_result *r)
{
    const weft_task_view *t = H->task(ctx);
    const char *s = weft_json_str(t->input, "terminationStatus");
    const char *reason = weft_json_str(t->input, "terminationReason");
    json_object *output = NULL;
    weft_wf_status st;
    if (term_status(s, &st))
        return weft_fail(r, "terminationStatus '%s' (use COMPLETED, FAILED or TERMINATED)", s);
    json_object_object_get_ex(t->input, "workflowOutput", &output);
    r->output = json_object_new_object();
    r->status = WEFT_TASK_COMPLETED;
    r->end_workflow = st;
    r->end_output = output && json_object_is_type(output, json_type_object)
                        ? json_object_get(output)
                        : json_object_new_object();
    if (reason) snprintf(r->reason, sizeof r->reason, "%s", reason);
    return 0;
}

/* ---- WAIT ---- */

/* Exactly n digits at *p into *v; *p moved past them. */
static int digits(const char **p, int n, int *v)
{
    int i;
    *v = 0;
    for (i = 0; i < n; i++) {
        if ((*p)[i] < '0' || (*p)[i] > '9') return -1;
        *v = *v * 10 + ((*p)[i] - '0');
    }
    *p += n;
    return 0;
}

/* A zone after the time: "Z", "UTC", "GMT", an offset "+04:00", "+0400",
 * "-05", or UTC/GMT with an offset ("GMT+04:00"): its seconds east of UTC. */
static int zone_offset(const char *p, long *off)
{
    int h = 0, m = 0, sign;
    if (!strcmp(p, "Z"))
        p += 1;
    else if (!strncmp(p, "UTC", 3) || !strncmp(p, "GMT", 3))
        p += 3;
    *off = 0;
    if (!*p) return 0;
    if (*p != '+' && *p != '-') return -1;
    sign = *p++ == '-' ? -1 : 1;
    if (digits(&p, 2, &h)) return -1;
    if (*p == ':') p++;
    if (*p && digits(&p, 2, &m)) return -1;
    if (*p || h > 18 || m > 59) return -1;
    *off = sign * (h * 3600L + m * 60L);
    return 0;
}

/* "yyyy-MM-dd", "yyyy-MM-dd HH:mm[:ss]" or that and a zone, into ms since
 * the epoch. Without a zone it is the local time of the process (TZ), as
 * Conductor reads it in its server's zone. */
static int parse_until(const char *s, int64_t *ms, weft_error *err)
{
    static const int mdays[12] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    const char *p = s;
    int y, mo, d, h = 0, mi = 0, sec = 0, zoned = 0;
    long off = 0;
    struct tm tm;
    time_t t;
    if (digits(&p, 4, &y) || *p++ != '-' || digits(&p, 2, &mo) || *p++ != '-' || digits(&p, 2, &d))
        goto bad;
    if (*p == ' ' || *p == 'T') {
        p++;
        if (digits(&p, 2, &h) || *p++ != ':' || digits(&p, 2, &mi)) goto bad;
        if (*p == ':' && (p++, digits(&p, 2, &sec))) goto bad;
        while (*p == ' ')
            p++;
        if (*p) {
            if (zone_offset(p, &off)) goto bad;
            zoned = 1;
        }
    } else if (*p) {
        goto bad;
    }
    if (y < 1970 || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] ||
        (mo == 2 && d == 29 && !(y % 4 == 0 && (y % 100 != 0 || y % 400 == 0))) || h > 23 ||
        mi > 59 || sec > 59)
        goto bad;
    memset(&tm, 0, sizeof tm);
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = sec;
    tm.tm_isdst = -1;
    t = zoned ? timegm(&tm) - off : mktime(&tm);
    if (t == (time_t)-1) goto bad;
    *ms = (int64_t)t * 1000;
    return 0;
bad:
    return H->error(err, WEFT_EINVAL,
                    "until: bad time '%s' (use \"yyyy-MM-dd HH:mm z\", \"yyyy-MM-dd HH:mm\" "
                    "or \"yyyy-MM-dd\"; z is UTC, GMT, Z or an offset such as GMT+04:00)",
                    s);
}

/* A literal (not an expression) in the definition: checked when it is loaded. */
static int literal(json_object *v)
{
    return v &&
           !(json_object_is_type(v, json_type_string) && strstr(json_object_get_string(v), "${"));
}

static int wait_validate(const weft_host *host, json_object *def, weft_error *err)
{
    json_object *in, *d = NULL, *u = NULL;
    int64_t ms;
    if (!json_object_object_get_ex(def, "inputParameters", &in)) return 0;
    json_object_object_get_ex(in, "duration", &d);
    json_object_object_get_ex(in, "until", &u);
    if (d && u) return host->error(err, WEFT_EINVAL, "WAIT takes duration or until, not both");
    if (literal(d) && host->parse_duration(d, &ms, err)) return WEFT_EINVAL;
    if (literal(u) && !json_object_is_type(u, json_type_string))
        return host->error(err, WEFT_EINVAL,
                           "until must be a string such as \"2030-04-30 15:20 "
                           "UTC\"");
    if (literal(u) && parse_until(json_object_get_string(u), &ms, err)) return WEFT_EINVAL;
    return 0;
}

static int wait_execute(weft_ctx *ctx, weft_result *r)
{
    const weft_task_view *t = H->task(ctx);
    json_object *d = NULL, *u = NULL;
    weft_error err = {0};
    int64_t ms, left;
    json_object_object_get_ex(t->input, "duration", &d);
    json_object_object_get_ex(t->input, "until", &u);
    if (json_object_is_type(d, json_type_null)) d = NULL;
    if (json_object_is_type(u, json_type_null)) u = NULL;
    if (!d && !u) {
        r->status = WEFT_TASK_IN_PROGRESS; /* until a signal */
        r->callback_after_ms = -1;
        return 0;
    }
    if (d && u) return weft_fail(r, "WAIT takes duration or until, not both");
    if (d) {
        if (H->parse_duration(d, &ms, &err)) return weft_fail(r, "duration: %s", err.msg);
        left = ms - (H->now_ms() - t->started_ms);
    } else {
        if (!json_object_is_type(u, json_type_string))
            return weft_fail(r, "until must be a string (got %s)", json_object_to_json_string(u));
        if (parse_until(json_object_get_string(u), &ms, &err)) return weft_fail(r, "%s", err.msg);
        left = ms - H->now_ms();
    }
    if (left <= 0) {
        r->output = json_object_new_object();
        r->status = WEFT_TASK_COMPLETED;
    } else {
        r->status = WEFT_TASK_IN_PROGRESS;
        r->callback_after_ms = left;
    }
    return 0;
}

static const weft_task_type types[] = {
    WEFT_TASK_TYPE(.name = "SUB_WORKFLOW", .validate = sub_validate, .execute = sub_execute),
    WEFT_TASK_TYPE(.name = "DO_WHILE", .validate = loop_validate, .map = loop_map),
    WEFT_TASK_TYPE(.name = "SET_VARIABLE", .map = setvar_map),
    WEFT_TASK_TYPE(.name = "TERMINATE", .validate = term_validate, .map = term_map),
    WEFT_TASK_TYPE(.name = "WAIT", .validate = wait_validate, .execute = wait_execute),
};

WEFT_PLUGIN(flow, .types = types, .ntypes = WEFT_COUNT(types), .host = &H)
