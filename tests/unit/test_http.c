/*
 * Tests of plugins/http/http.c, loaded through the real loader from the build
 * tree, against tests/httpd started here: the type's init (config), validate
 * (definitions) and execute (requests), with each failure path.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/def.h"
#include "core/exec.h"
#include "plugin/host.h"
#include "plugin/loader.h"

static struct {
    pl_registry *reg;
    const weft_task_type *type;
    pid_t httpd;
    char dir[64];
    int port;   /* the test server */
    int hole;   /* a port whose connects hang */
    int closed; /* a port nobody listens on */
    def_workflow *wf;
} F;

/* Per test: what a test allocates, freed by the teardown even after a failed assertion. */
static struct {
    xc_exec *x;
    weft_ctx ctx;
    int ctx_live;
    weft_result r;
    json_object *js[32];
    size_t njs;
} G;

static const weft_task_type *find_type(void *ud, const char *name)
{
    return pl_find_type(ud, name, NULL);
}

static json_object *track(json_object *j)
{
    assert_true(G.njs < sizeof G.js / sizeof G.js[0]);
    G.js[G.njs++] = j;
    return j;
}

/* JSON from text with ' for " and PORT, HOLE, CLOSED replaced by the ports; tracked. */
static json_object *J(const char *text)
{
    char s[4096], num[16];
    const char *p = text;
    size_t n = 0;
    json_object *j;
    while (*p) {
        int v = -1;
        size_t skip = 0;
        if (!strncmp(p, "PORT", 4)) v = F.port, skip = 4;
        if (!strncmp(p, "HOLE", 4)) v = F.hole, skip = 4;
        if (!strncmp(p, "CLOSED", 6)) v = F.closed, skip = 6;
        if (v >= 0) {
            int k = snprintf(num, sizeof num, "%d", v);
            assert_true(n + (size_t)k < sizeof s);
            memcpy(s + n, num, (size_t)k);
            n += (size_t)k;
            p += skip;
            continue;
        }
        assert_true(n + 1 < sizeof s);
        s[n++] = *p == '\'' ? '"' : *p;
        p++;
    }
    s[n] = '\0';
    j = json_tokener_parse(s);
    if (!j) fail_msg("test JSON does not parse: %s", s);
    return track(j);
}

static void assert_has(const char *msg, const char *part)
{
    if (!msg) fail_msg("NULL does not contain \"%s\"", part);
    if (!strstr(msg, part)) fail_msg("\"%s\" does not contain \"%s\"", msg, part);
}

static void assert_lacks(const char *msg, const char *part)
{
    if (msg && strstr(msg, part)) fail_msg("\"%s\" contains \"%s\"", msg, part);
}

static void assert_json(json_object *got, const char *want_text)
{
    json_object *want = J(want_text);
    if (!json_object_equal(got, want))
        fail_msg("got %s, want %s", got ? json_object_to_json_string(got) : "NULL",
                 json_object_to_json_string(want));
}

/* got at a dotted path ("response.body.qty"), or NULL. */
static json_object *at(json_object *o, const char *path)
{
    char buf[256], *save = NULL, *k;
    snprintf(buf, sizeof buf, "%s", path);
    for (k = strtok_r(buf, ".", &save); k && o; k = strtok_r(NULL, ".", &save))
        if (!json_object_object_get_ex(o, k, &o)) return NULL;
    return o;
}

static const char *str_at(json_object *o, const char *path)
{
    json_object *v = at(o, path);
    return v && json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int read_port(const char *path)
{
    FILE *f = fopen(path, "r");
    int port = 0;
    if (!f) return 0;
    if (fscanf(f, "%d", &port) != 1) port = 0;
    fclose(f);
    return port;
}

/* A port that was free a moment ago: bound, then closed. */
static int closed_port(void)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM, 0), port = 0;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(fd, (struct sockaddr *)&a, &len) == 0)
        port = ntohs(a.sin_port);
    if (fd >= 0) close(fd);
    return port;
}

/* ---- fixture: the plugin and the server, once for the whole group ---- */

static int group_setup(void **state)
{
    const char *build = getenv("WEFT_TOP_BUILDDIR");
    char plugin[1024], httpd[1024], portfile[128], holefile[128];
    weft_error err = {0};
    def_env env = {0};
    json_object *def;
    int i, rc;

    snprintf(plugin, sizeof plugin, "%s/plugins/http/http", build);
    snprintf(httpd, sizeof httpd, "%s/tests/httpd", build);
    F.reg = pl_new(host_table());
    if (!F.reg) return -1;
    if (pl_load_file(F.reg, plugin, &err) != 0) {
        fprintf(stderr, "cannot load %s: %s\n", plugin, err.msg);
        return -1;
    }
    F.type = pl_find_type(F.reg, "HTTP", NULL);
    if (!F.type || !F.type->execute || !F.type->validate || !F.type->init || !F.type->fini) {
        fprintf(stderr, "the http plugin lacks its HTTP type or callbacks\n");
        return -1;
    }

    snprintf(F.dir, sizeof F.dir, "/tmp/weft-http.XXXXXX");
    if (!mkdtemp(F.dir)) return -1;
    snprintf(portfile, sizeof portfile, "%s/port", F.dir);
    snprintf(holefile, sizeof holefile, "%s/hole", F.dir);
    F.httpd = fork();
    if (F.httpd < 0) return -1;
    if (F.httpd == 0) {
        execl(httpd, httpd, portfile, holefile, (char *)NULL);
        fprintf(stderr, "cannot run %s\n", httpd);
        _exit(127);
    }
    for (i = 0; i < 1000 && !(F.port && F.hole); i++) {
        F.port = read_port(portfile);
        F.hole = read_port(holefile);
        if (waitpid(F.httpd, &rc, WNOHANG) == F.httpd) {
            F.httpd = 0;
            fprintf(stderr, "%s exited early\n", httpd);
            return -1;
        }
        usleep(10000);
    }
    F.closed = closed_port();
    if (!F.port || !F.hole || !F.closed) return -1;

    /* one HTTP task; the tests give it their own resolved input */
    env.find_type = find_type;
    env.ud = F.reg;
    env.host = host_table();
    env.searched = build;
    def = json_tokener_parse("{\"name\":\"h\",\"version\":1,\"tasks\":[{\"name\":\"fetch\","
                             "\"taskReferenceName\":\"fetch\",\"type\":\"HTTP\","
                             "\"inputParameters\":{\"uri\":\"${workflow.input.uri}\"}}]}");
    rc = def_compile(&env, def, "h.json", NULL, &F.wf, &err);
    json_object_put(def);
    if (rc) {
        fprintf(stderr, "compile: %s\n", err.msg);
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    char path[160];
    if (F.httpd > 0) {
        int st;
        kill(F.httpd, SIGTERM);
        waitpid(F.httpd, &st, 0);
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            fprintf(stderr, "httpd did not exit cleanly (status %d)\n", st);
    }
    if (F.dir[0]) {
        snprintf(path, sizeof path, "%s/port", F.dir);
        unlink(path);
        snprintf(path, sizeof path, "%s/hole", F.dir);
        unlink(path);
        rmdir(F.dir);
    }
    def_unref(F.wf);
    pl_free(F.reg); /* calls the type's fini */
    return 0;
}

static int setup(void **state)
{
    memset(&G, 0, sizeof G);
    host_result_init(&G.r);
    return 0;
}

static int teardown(void **state)
{
    size_t i;
    weft_error err = {0};
    if (G.ctx_live) host_ctx_done(&G.ctx);
    host_result_clear(&G.r);
    xc_free(G.x);
    for (i = 0; i < G.njs; i++)
        json_object_put(G.js[i]);
    memset(&G, 0, sizeof G);
    /* back to no config */
    return F.type->init(host_table(), NULL, &err);
}

/* A fresh execution whose HTTP task has the given resolved input; returns its context. */
static weft_ctx *task_with(const char *input)
{
    weft_error err = {0};
    xc_task *t;
    if (G.ctx_live) host_ctx_done(&G.ctx);
    G.ctx_live = 0;
    xc_free(G.x);
    G.x = NULL;
    if (xc_new(F.wf, NULL, NULL, &G.x, &err)) fail_msg("xc_new: %s", err.msg);
    t = xc_add_task(G.x, wu_map_get(F.wf->by_ref, "fetch"), 0, 0);
    assert_non_null(t);
    json_object_put(t->input);
    t->input = json_object_get(J(input));
    host_ctx_init(&G.ctx, NULL, G.x, t);
    G.ctx_live = 1;
    return &G.ctx;
}

/* Execute with input; returns the status (the result is in G.r). */
static weft_task_status run(const char *input)
{
    weft_ctx *c = task_with(input);
    int rc;
    host_result_clear(&G.r);
    rc = F.type->execute(c, &G.r);
    if (rc != 0 && rc != WEFT_ENOMEM) fail_msg("execute returned %d (%s)", rc, G.r.reason);
    return G.r.status;
}

static void expect_status(weft_task_status want)
{
    if (G.r.status != want)
        fail_msg("status %s, want %s (reason: %s; output: %s)", weft_task_status_name(G.r.status),
                 weft_task_status_name(want), G.r.reason,
                 G.r.output ? json_object_to_json_string(G.r.output) : "NULL");
}

static int init_with(const char *config, weft_error *err)
{
    memset(err, 0, sizeof *err);
    return F.type->init(host_table(), config ? J(config) : NULL, err);
}

/* validate() on a WorkflowTask whose inputParameters are given. */
static int validate(const char *params, weft_error *err)
{
    char text[2048];
    memset(err, 0, sizeof *err);
    if (params)
        snprintf(text, sizeof text,
                 "{'name':'x','taskReferenceName':'x','type':'HTTP','inputParameters':%s}", params);
    else
        snprintf(text, sizeof text, "{'name':'x','taskReferenceName':'x','type':'HTTP'}");
    return F.type->validate(host_table(), J(text), err);
}

/* ---- init: the plugin's config ---- */

static void test_init_configs(void **state)
{
    weft_error err;
    assert_int_equal(init_with(NULL, &err), 0);
    assert_int_equal(init_with("{}", &err), 0);
    assert_int_equal(
        init_with("{'allow':['127.0.0.1','*.example.org','[::1]','Api.Example.COM.']}", &err), 0);
    assert_int_equal(init_with("{'allow':[],'max_response_bytes':1048576}", &err), 0);
}

static void test_init_bad_configs(void **state)
{
    static const struct {
        const char *config, *says;
    } bad[] = {
        {"{'allowed':['x']}", "unknown key 'allowed' (known: allow, max_response_bytes)"},
        {"[]", "config must be an object"},
        {"'127.0.0.1'", "config must be an object"},
        {"{'allow':'127.0.0.1'}", "allow must be a list of host names"},
        {"{'allow':[7]}", "allow[0] must be a host name string"},
        {"{'allow':['ok.example',null]}", "allow[1] must be a host name string"},
        {"{'allow':['']}", "allow entry '' must be a non-empty host name"},
        {"{'allow':['127.0.0.1:8080']}",
         "allow entry '127.0.0.1:8080' must be a host name without a port"},
        {"{'allow':['http://x.org']}",
         "allow entry 'http://x.org' must be a host name without scheme"},
        {"{'allow':['x.org/api']}", "allow entry 'x.org/api'"},
        {"{'allow':['a*.x.org']}", "allow entry 'a*.x.org'"},
        {"{'allow':['*']}", "allow entry '*'"},
        {"{'allow':['*.']}", "must be a non-empty host name"},
        {"{'allow':['"
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
         "aaaaaaaaaaa"
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
         "aaaaaaaaaaa"
         "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.org']}",
         "allow[0] is too long"},
        {"{'max_response_bytes':0}", "max_response_bytes must be an integer from 1"},
        {"{'max_response_bytes':'1MB'}", "max_response_bytes must be an integer"},
        {"{'max_response_bytes':1.5}", "max_response_bytes must be an integer"},
        {"{'max_response_bytes':2000000000}", "max_response_bytes must be an integer"},
    };
    size_t i;
    weft_error err;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = init_with(bad[i].config, &err);
        if (rc != WEFT_EINVAL) fail_msg("config %s: rc %d, want WEFT_EINVAL", bad[i].config, rc);
        assert_int_equal(err.code, WEFT_EINVAL);
        assert_has(err.msg, bad[i].says);
    }
}

/* A rejected config leaves the one before it in force. */
static void test_init_bad_config_keeps_old(void **state)
{
    weft_error err;
    assert_int_equal(init_with("{'allow':['localhost']}", &err), 0);
    assert_int_equal(init_with("{'allow':['127.0.0.1'],'oops':1}", &err), WEFT_EINVAL);
    run("{'uri':'http://127.0.0.1:PORT/json'}");
    expect_status(WEFT_TASK_FAILED_WITH_TERMINAL_ERROR);
    assert_has(G.r.reason, "host '127.0.0.1' is not in the http plugin's allow-list");
}

/* ---- validate: definitions ---- */

static void test_validate_good(void **state)
{
    static const char *const good[] = {
        "{'uri':'http://127.0.0.1:8080/x'}",
        "{'uri':'HTTPS://example.org/x?q=1','method':'post','body':{'a':1}}",
        "{'uri':'${workflow.input.url}'}",
        "{'uri':'http://${workflow.input.host}/orders/${workflow.input.id}'}",
        "{'uri':'${workflow.input.base}/x','method':'${workflow.input.m}'}",
        "{'uri':'http://h/','headers':{'X-A':'1','X-N':5,'X-E':'${secrets.T}'}}",
        "{'uri':'http://h/','headers':'${workflow.input.headers}'}",
        "{'uri':'http://h/','connectionTimeOut':250,'readTimeOut':'5s'}",
        "{'uri':'http://h/','readTimeOut':'${workflow.input.t}','connectionTimeOut':null}",
        "{'http_request':{'uri':'http://h/','method':'GET'}}",
        "{'uri':'http://h/','asyncComplete':false,'vipAddress':'x'}", /* Conductor's others */
        "{'uri':'http://h/','method':null,'headers':null,'accept':null,'body':null}",
    };
    size_t i;
    weft_error err;
    for (i = 0; i < sizeof good / sizeof good[0]; i++)
        if (validate(good[i], &err) != 0) fail_msg("%s rejected: %s", good[i], err.msg);
}

static void test_validate_bad(void **state)
{
    static const struct {
        const char *params, *says;
    } bad[] = {
        {NULL, "HTTP needs inputParameters.uri"},
        {"{}", "HTTP needs inputParameters.uri"},
        {"{'uri':''}", "HTTP needs inputParameters.uri"},
        {"{'uri':42}", "HTTP needs inputParameters.uri"},
        {"{'http_request':{'method':'GET'}}", "HTTP needs inputParameters.uri"},
        {"{'uri':'ftp://example.org/file'}", "scheme 'ftp' is not allowed (only http and https)"},
        {"{'uri':'file:///etc/passwd'}", "scheme 'file' is not allowed"},
        {"{'uri':'gopher://${workflow.input.h}/'}", "scheme 'gopher' is not allowed"},
        {"{'http_request':{'uri':'dict://x/'}}", "scheme 'dict' is not allowed"},
        {"{'uri':'/relative/path'}", "is not a valid absolute URL"},
        {"{'uri':'example.org/x'}", "is not a valid absolute URL"},
        {"{'uri':'http://h/','method':'GE T'}", "method must be an HTTP method name"},
        {"{'uri':'http://h/','method':7}", "method must be an HTTP method name"},
        {"{'uri':'http://h/','headers':['a']}", "headers must be an object of strings"},
        {"{'uri':'http://h/','headers':'X-A: 1'}", "headers must be an object of strings"},
        {"{'uri':'http://h/','headers':{'X A':'1'}}",
         "header name 'X A' is not a valid HTTP token"},
        {"{'uri':'http://h/','headers':{'X-A':{'b':1}}}", "header 'X-A' must be a string"},
        {"{'uri':'http://h/','headers':{'X-A':'1\\r\\nX-B: 2'}}", "header 'X-A' has a line break"},
        {"{'uri':'http://h/','accept':['a']}", "accept and contentType must be strings"},
        {"{'uri':'http://h/','contentType':1}", "accept and contentType must be strings"},
        {"{'uri':'http://h/','connectionTimeOut':-5}", "connectionTimeOut must be a positive"},
        {"{'uri':'http://h/','asyncComplete':true}", "asyncComplete is not supported"},
        {"{'uri':'http://h/','readTimeOut':'soon'}", "readTimeOut must be a positive"},
        {"{'uri':'http://h/','readTimeOut':0}", "readTimeOut must be a positive"},
        {"{'uri':'http://h/','readTimeOut':true}", "readTimeOut must be a positive"},
    };
    size_t i;
    weft_error err;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = validate(bad[i].params, &err);
        if (rc != WEFT_EINVAL)
            fail_msg("%s: rc %d (%s), want WEFT_EINVAL", bad[i].params ? bad[i].params : "(none)",
                     rc, err.msg);
        assert_has(err.msg, bad[i].says);
    }
}

/* A constant uri is checked against the allow-list at definition load too. */
static void test_validate_allow_list(void **state)
{
    weft_error err;
    assert_int_equal(init_with("{'allow':['api.example.com','*.example.org']}", &err), 0);
    assert_int_equal(validate("{'uri':'https://api.example.com/v1'}", &err), 0);
    assert_int_equal(validate("{'uri':'https://a.b.example.org/v1'}", &err), 0);
    assert_int_equal(validate("{'uri':'${workflow.input.url}'}", &err), 0); /* known at run time */
    assert_int_equal(validate("{'uri':'https://evil.example.net/'}", &err), WEFT_EINVAL);
    assert_has(err.msg, "host 'evil.example.net' is not in the http plugin's allow-list");
    assert_int_equal(validate("{'uri':'https://example.org/'}", &err), WEFT_EINVAL);
    assert_has(err.msg, "host 'example.org'");
}

/* ---- execute: replies ---- */

static void test_get_json(void **state)
{
    run("{'uri':'http://127.0.0.1:PORT/json'}");
    expect_status(WEFT_TASK_COMPLETED);
    assert_json(at(G.r.output, "response.statusCode"), "200");
    assert_json(at(G.r.output, "response.reasonPhrase"), "'OK'");
    assert_json(at(G.r.output, "response.body"), "{'qty':3,'unit':4}");
    assert_json(at(G.r.output, "response.headers.content-type"), "'application/json'");
    assert_json(at(G.r.output, "response.headers.x-test-server"), "'weft-httpd'"); /* lower-case */
    assert_null(at(G.r.output, "response.headers.X-Test-Server"));
    assert_string_equal(G.r.reason, "");
}

static void test_text_body(void **state)
{
    run("{'uri':'http://127.0.0.1:PORT/text'}");
    expect_status(WEFT_TASK_COMPLETED);
    assert_json(at(G.r.output, "response.body"), "'hello'");
    assert_has(str_at(G.r.output, "response.headers.content-type"), "text/plain");
}

/* JSON when the body parses as JSON, whatever the content type; a string otherwise. */
static void test_body_parsing(void **state)
{
    static const struct {
        const char *query, *want;
    } cases[] = {
        {"type=text/plain&body=%5B1%2C2%5D", "[1,2]"},
        {"type=application/json&body=42", "42"},
        {"type=application/json&body=%20%7B%7D%0A", "{}"},
        {"type=application/problem%2Bjson&body=%7B%22a%22%3A1%7D", "{'a':1}"},
        {"type=application/json&body=oops", "'oops'"},
        {"type=application/json&body=%7B%7D%20x", "'{} x'"},
        {"type=application/json&body=tru", "'tru'"},
        {"type=text/plain&body=12abc", "'12abc'"},
        {"type=application/json&body=%22s%22", "'s'"},
    };
    char input[512];
    size_t i;
    for (i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(input, sizeof input, "{'uri':'http://127.0.0.1:PORT/as?%s'}", cases[i].query);
        run(input);
        expect_status(WEFT_TASK_COMPLETED);
        assert_json(at(G.r.output, "response.body"), cases[i].want);
    }
    /* JSON null and an empty body are both null */
    run("{'uri':'http://127.0.0.1:PORT/as?type=application/json&body=null'}");
    expect_status(WEFT_TASK_COMPLETED);
    assert_non_null(at(G.r.output, "response"));
    assert_null(at(G.r.output, "response.body"));
    run("{'uri':'http://127.0.0.1:PORT/as?type=text/plain'}");
    expect_status(WEFT_TASK_COMPLETED);
    assert_null(at(G.r.output, "response.body"));
}

static void test_status_fails(void **state)
{
    run("{'uri':'http://127.0.0.1:PORT/status/503'}");
    expect_status(WEFT_TASK_FAILED); /* FAILED, not terminal: the retry policy applies */
    assert_has(G.r.reason, "HTTP 503 Service Unavailable from GET http://127.0.0.1:");
    assert_has(G.r.reason, "/status/503");
    assert_has(G.r.reason, "{\"status\":503}"); /* the start of the body */
    /* the reply is kept in the output */
    assert_json(at(G.r.output, "response.statusCode"), "503");
    assert_json(at(G.r.output, "response.body"), "{'status':503}");

    run("{'uri':'http://127.0.0.1:PORT/status/404','method':'delete'}");
    expect_status(WEFT_TASK_FAILED);
    assert_has(G.r.reason, "HTTP 404 Not Found from DELETE http://127.0.0.1:");

    run("{'uri':'http://127.0.0.1:PORT/nowhere'}");
    expect_status(WEFT_TASK_FAILED);
    assert_has(G.r.reason, "HTTP 404");

    run("{'uri':'http://127.0.0.1:PORT/status/204'}");
    expect_status(WEFT_TASK_COMPLETED);
    assert_json(at(G.r.output, "response.statusCode"), "204");
    run("{'uri':'http://127.0.0.1:PORT/status/304'}");
    expect_status(WEFT_TASK_FAILED);
    assert_has(G.r.reason, "HTTP 304");
}

/* Neither a password in the uri nor header values show in reasons. */
static void test_reason_hides_credentials(void **state)
{
    run("{'uri':'http://user:hunter2@127.0.0.1:PORT/status/500','headers':{'X-Token':'s3cret'}}");
    expect_status(WEFT_TASK_FAILED);
    assert_has(G.r.reason, "HTTP 500 Internal Server Error from GET http://127.0.0.1:");
    assert_lacks(G.r.reason, "hunter2");
    assert_lacks(G.r.reason, "user");
    assert_lacks(G.r.reason, "s3cret");
    assert_lacks(json_object_to_json_string(G.r.output), "s3cret");
}

/* ---- execute: what is sent ---- */

static void test_post_json_body_and_headers(void **state)
{
    json_object *h;
    run("{'uri':'http://127.0.0.1:PORT/echo','method':'POST','body':{'a':1,'b':[true,null],"
        "'s':'x/y'},'headers':{'X-Token':'s3cret','X-Num':5,'X-Flag':false,'X-Empty':'',"
        "'X-Gone':null}}");
    expect_status(WEFT_TASK_COMPLETED);
    assert_json(at(G.r.output, "response.body.method"), "'POST'");
    assert_string_equal(str_at(G.r.output, "response.body.body"),
                        "{\"a\":1,\"b\":[true,null],\"s\":\"x/y\"}");
    h = at(G.r.output, "response.body.headers");
    assert_json(at(h, "content-type"), "'application/json'");
    assert_json(at(h, "accept"), "'application/json'");
    assert_json(at(h, "x-token"), "'s3cret'");
    assert_json(at(h, "x-num"), "'5'");
    assert_json(at(h, "x-flag"), "'false'");
    assert_json(at(h, "x-empty"), "''");
    assert_null(at(h, "x-gone"));
    assert_null(at(h, "expect"));
    assert_has(str_at(h, "user-agent"), "weft/");
}

static void test_string_body_and_types(void **state)
{
    json_object *h;
    run("{'uri':'http://127.0.0.1:PORT/echo','method':'put','body':'a=1&b=2',"
        "'contentType':'application/x-www-form-urlencoded','accept':'text/plain'}");
    expect_status(WEFT_TASK_COMPLETED);
    assert_json(at(G.r.output, "response.body.method"), "'PUT'");
    assert_json(at(G.r.output, "response.body.body"), "'a=1&b=2'");
    h = at(G.r.output, "response.body.headers");
    assert_json(at(h, "content-type"), "'application/x-www-form-urlencoded'");
    assert_json(at(h, "accept"), "'text/plain'");

    /* the caller's own headers win over accept / contentType */
    run("{'uri':'http://127.0.0.1:PORT/echo','method':'POST','body':7,"
        "'headers':{'content-type':'text/x-number','Accept':'*/*'}}");
    expect_status(WEFT_TASK_COMPLETED);
    h = at(G.r.output, "response.body.headers");
    assert_json(at(h, "content-type"), "'text/x-number'");
    assert_json(at(h, "accept"), "'*/*'");
    assert_json(at(G.r.output, "response.body.body"), "'7'");
}

static void test_empty_bodies(void **state)
{
    json_object *h;
    run("{'uri':'http://127.0.0.1:PORT/echo','method':'POST'}");
    expect_status(WEFT_TASK_COMPLETED);
    h = at(G.r.output, "response.body.headers");
    assert_json(at(h, "content-length"), "'0'");
    assert_null(at(h, "content-type")); /* no form type made up for an empty POST */
    assert_json(at(G.r.output, "response.body.body"), "''");

    run("{'uri':'http://127.0.0.1:PORT/echo','method':'GET','body':null}");
    expect_status(WEFT_TASK_COMPLETED);
    assert_json(at(G.r.output, "response.body.method"), "'GET'");
    assert_null(at(G.r.output, "response.body.headers.content-length"));

    run("{'uri':'http://127.0.0.1:PORT/json','method':'HEAD'}");
    expect_status(WEFT_TASK_COMPLETED);
    assert_json(at(G.r.output, "response.statusCode"), "200");
    assert_null(at(G.r.output, "response.body"));
    assert_json(at(G.r.output, "response.headers.content-length"), "'18'");
}

/* Repeated reply headers are joined; too many fail the task. */
static void test_reply_headers(void **state)
{
    const char *v;
    run("{'uri':'http://127.0.0.1:PORT/headers?n=50'}");
    expect_status(WEFT_TASK_COMPLETED);
    v = str_at(G.r.output, "response.headers.x-h");
    assert_non_null(v);
    assert_true(!strncmp(v, "v0, v1, v2, ", 12));
    assert_has(v, ", v48, v49");
    run("{'uri':'http://127.0.0.1:PORT/headers?n=900&distinct=1'}");
    expect_status(WEFT_TASK_COMPLETED);
    assert_json(at(G.r.output, "response.headers.x-h-899"), "'v899'");
    run("{'uri':'http://127.0.0.1:PORT/headers?n=1200&distinct=1'}");
    expect_status(WEFT_TASK_FAILED_WITH_TERMINAL_ERROR);
    assert_has(G.r.reason, "HTTP: response headers over the limit of 1000 lines");
}

/* Spaces and non-ASCII bytes (interpolated values) are %-encoded, not refused. */
static void test_uri_encoding(void **state)
{
    run("{'uri':'http://127.0.0.1:PORT/as?type=text/plain&body=caf\u00e9 au lait'}");
    expect_status(WEFT_TASK_COMPLETED);
    assert_string_equal(str_at(G.r.output, "response.body"), "caf\xc3\xa9 au lait");
    run("{'uri':'http://127.0.0.1:PORT/as?type=text/plain&body=a%20b'}");
    expect_status(WEFT_TASK_COMPLETED);
    assert_string_equal(str_at(G.r.output, "response.body"), "a b");
}

/* Conductor's legacy wrapper: inputParameters.http_request. */
static void test_legacy_wrapper(void **state)
{
    run("{'http_request':{'uri':'http://127.0.0.1:PORT/echo','method':'POST','body':{'k':'v'},"
        "'headers':{'X-Legacy':'yes'}}}");
    expect_status(WEFT_TASK_COMPLETED);
    assert_json(at(G.r.output, "response.body.method"), "'POST'");
    assert_string_equal(str_at(G.r.output, "response.body.body"), "{\"k\":\"v\"}");
    assert_json(at(G.r.output, "response.body.headers.x-legacy"), "'yes'");
}

/* One easy handle per thread: the second request rides the first one's connection. */
static void test_keep_alive(void **state)
{
    json_object *peer;
    run("{'uri':'http://127.0.0.1:PORT/echo'}");
    expect_status(WEFT_TASK_COMPLETED);
    peer = json_object_get(at(G.r.output, "response.body.peer"));
    track(peer);
    assert_true(json_object_get_int(peer) > 0);
    run("{'uri':'http://127.0.0.1:PORT/echo','method':'POST','body':'x'}");
    expect_status(WEFT_TASK_COMPLETED);
    assert_json(at(G.r.output, "response.body.peer"), json_object_to_json_string(peer));
}

/* ---- execute: redirects ---- */

static void test_redirects(void **state)
{
    run("{'uri':'http://127.0.0.1:PORT/redirect'}");
    expect_status(WEFT_TASK_COMPLETED);
    assert_json(at(G.r.output, "response.body"), "{'qty':3,'unit':4}");

    /* 307 keeps the method and body; 303 continues as GET without one */
    run("{'uri':'http://127.0.0.1:PORT/redirect?code=307&to=/echo','method':'POST','body':'b'}");
    expect_status(WEFT_TASK_COMPLETED);
    assert_json(at(G.r.output, "response.body.method"), "'POST'");
    assert_json(at(G.r.output, "response.body.body"), "'b'");
    run("{'uri':'http://127.0.0.1:PORT/redirect?code=303&to=/echo','method':'POST','body':'b'}");
    expect_status(WEFT_TASK_COMPLETED);
    assert_json(at(G.r.output, "response.body.method"), "'GET'");
    assert_json(at(G.r.output, "response.body.body"), "''");

    /* credentials stay with their origin: kept on the same host, dropped for another */
    run("{'uri':'http://127.0.0.1:PORT/redirect?to=/echo','headers':{'Authorization':'Bearer t',"
        "'Cookie':'c=1','X-Other':'o'}}");
    expect_status(WEFT_TASK_COMPLETED);
    assert_json(at(G.r.output, "response.body.headers.authorization"), "'Bearer t'");
    /* another origin gets none of the task's headers (any may hold a
     * ${secrets.X}), on this hop and every later one */
    run("{'uri':'http://127.0.0.1:PORT/redirect?to=http://localhost:PORT/echo',"
        "'headers':{'Authorization':'Bearer t','Cookie':'c=1','X-Api-Key':'k-secret'}}");
    expect_status(WEFT_TASK_COMPLETED);
    assert_null(at(G.r.output, "response.body.headers.authorization"));
    assert_null(at(G.r.output, "response.body.headers.cookie"));
    assert_null(at(G.r.output, "response.body.headers.x-api-key"));
    run("{'uri':'http://127.0.0.1:PORT/redirect?to=http://localhost:PORT/redirect%3Fto%3D"
        "http://127.0.0.1:PORT/echo','headers':{'X-Api-Key':'k-secret'}}");
    expect_status(WEFT_TASK_COMPLETED);
    assert_null(at(G.r.output, "response.body.headers.x-api-key"));
    /* nor its body: a 307 or 308 to another origin is refused, not resent */
    run("{'uri':'http://127.0.0.1:PORT/redirect?code=307&to=http://localhost:PORT/echo',"
        "'method':'POST','body':'k-secret'}");
    expect_status(WEFT_TASK_FAILED_WITH_TERMINAL_ERROR);
    assert_has(G.r.reason, "would send the request body to another origin");
    run("{'uri':'http://127.0.0.1:PORT/redirect?code=308&to=http://localhost:PORT/echo',"
        "'method':'PUT','body':{'key':'k-secret'}}");
    expect_status(WEFT_TASK_FAILED_WITH_TERMINAL_ERROR);
    assert_has(G.r.reason, "would send the request body to another origin");
    /* a 303 there continues as GET without it */
    run("{'uri':'http://127.0.0.1:PORT/redirect?code=303&to=http://localhost:PORT/echo',"
        "'method':'POST','body':'k-secret'}");
    expect_status(WEFT_TASK_COMPLETED);
    assert_json(at(G.r.output, "response.body.body"), "''");

    /* a 3xx without a Location is a reply like any other */
    run("{'uri':'http://127.0.0.1:PORT/status/302'}");
    expect_status(WEFT_TASK_FAILED);
    assert_has(G.r.reason, "HTTP 302 Found");
}

static void test_redirect_failures(void **state)
{
    run("{'uri':'http://127.0.0.1:PORT/loop'}");
    expect_status(WEFT_TASK_FAILED);
    assert_has(G.r.reason, "more than 10 redirects from GET http://127.0.0.1:");

    run("{'uri':'http://127.0.0.1:PORT/redirect?to=ftp://127.0.0.1/x'}");
    expect_status(WEFT_TASK_FAILED_WITH_TERMINAL_ERROR);
    assert_has(G.r.reason, "redirect from GET http://127.0.0.1:");
    assert_has(G.r.reason, "refused: uri scheme 'ftp' is not allowed (only http and https)");

    run("{'uri':'http://127.0.0.1:PORT/redirect?to=file:///etc/passwd'}");
    expect_status(WEFT_TASK_FAILED_WITH_TERMINAL_ERROR);
    assert_has(G.r.reason, "uri scheme 'file' is not allowed");
}

/* ---- execute: bad input ---- */

static void test_bad_input(void **state)
{
    static const struct {
        const char *input, *says;
    } bad[] = {
        {"{}", "HTTP: uri is missing or empty"},
        {"{'uri':null}", "HTTP: uri is missing or empty"},
        {"{'uri':''}", "HTTP: uri is missing or empty"},
        {"{'uri':5}", "HTTP: uri must be a string (got int)"},
        {"{'uri':'ftp://127.0.0.1:PORT/x'}",
         "uri scheme 'ftp' is not allowed (only http and https)"},
        {"{'uri':'file:///etc/passwd'}", "uri scheme 'file' is not allowed"},
        {"{'uri':'gopher://127.0.0.1:PORT/'}", "uri scheme 'gopher' is not allowed"},
        {"{'uri':'not a url'}", "is not a valid absolute URL"},
        {"{'uri':'http://127.0.0.1:PORT/','method':'G E T'}", "method 'G E T' is not a valid"},
        {"{'uri':'http://127.0.0.1:PORT/','method':['GET']}", "method must be a string"},
        {"{'uri':'http://127.0.0.1:PORT/','headers':['x']}", "headers must be an object"},
        {"{'uri':'http://127.0.0.1:PORT/','headers':{'X-A':'1\\r\\nX-Injected: 1'}}",
         "header 'X-A' has a line break"},
        {"{'uri':'http://127.0.0.1:PORT/','headers':{'X-A':{'b':1}}}",
         "header 'X-A' must be a string (got object)"},
        {"{'uri':'http://127.0.0.1:PORT/','headers':{'Bad Name':'1'}}",
         "header name 'Bad Name' is not a valid HTTP token"},
        {"{'uri':'http://127.0.0.1:PORT/','accept':1}", "accept must be a string"},
        {"{'uri':'http://127.0.0.1:PORT/','contentType':'a\\nb'}", "must not contain line breaks"},
        {"{'uri':'http://127.0.0.1:PORT/','readTimeOut':'later'}",
         "readTimeOut must be a positive number of milliseconds"},
        {"{'uri':'http://127.0.0.1:PORT/','connectionTimeOut':-1}",
         "connectionTimeOut must be a positive"},
        {"{'uri':'http://127.0.0.1:PORT/','connectionTimeOut':{}}", "(got object)"},
        {"{'uri':'http://127.0.0.1:PORT/','readTimeOut':'later'}", "(got \"later\")"},
        {"{'uri':'http://127.0.0.1:PORT/','readTimeOut':86400000}", "below a day"},
        {"{'uri':'http://127.0.0.1:PORT/','asyncComplete':true}", "asyncComplete is not supported"},
    };
    size_t i;
    for (i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        run(bad[i].input);
        if (G.r.status != WEFT_TASK_FAILED_WITH_TERMINAL_ERROR)
            fail_msg("%s: status %s (%s)", bad[i].input, weft_task_status_name(G.r.status),
                     G.r.reason);
        assert_has(G.r.reason, bad[i].says);
        assert_null(G.r.output);
    }
}

/* ---- execute: transport failures and timeouts ---- */

static void test_connection_refused(void **state)
{
    run("{'uri':'http://127.0.0.1:CLOSED/x'}");
    expect_status(WEFT_TASK_FAILED);
    assert_has(G.r.reason, "HTTP: Failed to connect to 127.0.0.1 port");
    assert_has(G.r.reason, "from GET http://127.0.0.1:");
    assert_null(G.r.output);
}

static void test_connect_timeout(void **state)
{
    int64_t t0 = now_ms(), took;
    run("{'uri':'http://127.0.0.1:HOLE/x','connectionTimeOut':300}");
    took = now_ms() - t0;
    expect_status(WEFT_TASK_FAILED);
    assert_has(G.r.reason, "HTTP: connect timeout after 300 ms (connectionTimeOut)");
    assert_has(G.r.reason, "from GET http://127.0.0.1:");
    if (took < 250 || took > 3000) fail_msg("the connect timeout took %lld ms", (long long)took);
}

static void test_read_timeout(void **state)
{
    int64_t t0 = now_ms(), took;
    run("{'uri':'http://127.0.0.1:PORT/slow?ms=5000','readTimeOut':'300ms'}");
    took = now_ms() - t0;
    expect_status(WEFT_TASK_FAILED);
    assert_has(G.r.reason, "HTTP: read timeout: no data for 300 ms (readTimeOut) from GET");
    if (took < 250 || took > 2000) fail_msg("the read timeout took %lld ms", (long long)took);

    /* a reply inside the timeout; digits in a string are ms, like numbers */
    run("{'uri':'http://127.0.0.1:PORT/slow?ms=100','readTimeOut':'2000'}");
    expect_status(WEFT_TASK_COMPLETED);
    assert_json(at(G.r.output, "response.body"), "{'slept':100}");
}

static void test_body_limit(void **state)
{
    weft_error err;
    assert_int_equal(init_with("{'max_response_bytes':1000}", &err), 0);
    run("{'uri':'http://127.0.0.1:PORT/big?bytes=1000'}");
    expect_status(WEFT_TASK_COMPLETED);
    assert_int_equal(json_object_get_string_len(at(G.r.output, "response.body")), 1000);

    /* told by Content-Length, and found while streaming a chunked reply */
    run("{'uri':'http://127.0.0.1:PORT/big?bytes=1001'}");
    expect_status(WEFT_TASK_FAILED_WITH_TERMINAL_ERROR);
    assert_has(G.r.reason,
               "HTTP: response body over the limit of 1000 bytes (max_response_bytes) from GET");
    assert_null(G.r.output);
    run("{'uri':'http://127.0.0.1:PORT/big?bytes=200000&chunked=1'}");
    expect_status(WEFT_TASK_FAILED_WITH_TERMINAL_ERROR);
    assert_has(G.r.reason, "over the limit of 1000 bytes");
}

static void test_default_body_limit(void **state)
{
    run("{'uri':'http://127.0.0.1:PORT/big?bytes=16777216&chunked=1'}");
    expect_status(WEFT_TASK_COMPLETED);
    assert_int_equal(json_object_get_string_len(at(G.r.output, "response.body")), 16777216);
    run("{'uri':'http://127.0.0.1:PORT/big?bytes=16777217&chunked=1'}");
    expect_status(WEFT_TASK_FAILED_WITH_TERMINAL_ERROR);
    assert_has(G.r.reason, "over the limit of 16777216 bytes");
}

/* ---- execute: the allow-list ---- */

static void test_allow_list(void **state)
{
    weft_error err;
    assert_int_equal(init_with("{'allow':['127.0.0.1']}", &err), 0);
    run("{'uri':'http://127.0.0.1:PORT/json'}");
    expect_status(WEFT_TASK_COMPLETED);

    run("{'uri':'http://localhost:PORT/json'}");
    expect_status(WEFT_TASK_FAILED_WITH_TERMINAL_ERROR);
    assert_has(G.r.reason, "HTTP: host 'localhost' is not in the http plugin's allow-list");

    /* every redirect hop is checked */
    run("{'uri':'http://127.0.0.1:PORT/redirect?to=http://localhost:PORT/json'}");
    expect_status(WEFT_TASK_FAILED_WITH_TERMINAL_ERROR);
    assert_has(G.r.reason, "refused: host 'localhost' is not in the http plugin's allow-list");

    /* user info is not the host */
    run("{'uri':'http://127.0.0.1:PORT@localhost:PORT/json'}");
    expect_status(WEFT_TASK_FAILED_WITH_TERMINAL_ERROR);
    assert_has(G.r.reason, "host 'localhost'");

    /* names compare without case; an empty list allows nothing */
    assert_int_equal(init_with("{'allow':['LocalHost']}", &err), 0);
    run("{'uri':'http://LOCALHOST:PORT/json'}");
    expect_status(WEFT_TASK_COMPLETED);
    assert_int_equal(init_with("{'allow':[]}", &err), 0);
    run("{'uri':'http://127.0.0.1:PORT/json'}");
    expect_status(WEFT_TASK_FAILED_WITH_TERMINAL_ERROR);
    assert_has(G.r.reason, "host '127.0.0.1' is not in the http plugin's allow-list");
}

static void test_allow_list_wildcard(void **state)
{
    weft_error err;
    assert_int_equal(init_with("{'allow':['*.example.org']}", &err), 0);
    /* the apex and look-alikes are refused before any lookup */
    run("{'uri':'http://example.org/'}");
    expect_status(WEFT_TASK_FAILED_WITH_TERMINAL_ERROR);
    assert_has(G.r.reason, "host 'example.org' is not in the http plugin's allow-list");
    run("{'uri':'http://evilexample.org/'}");
    expect_status(WEFT_TASK_FAILED_WITH_TERMINAL_ERROR);
    assert_has(G.r.reason, "host 'evilexample.org'");
    run("{'uri':'http://example.org.evil.net/'}");
    expect_status(WEFT_TASK_FAILED_WITH_TERMINAL_ERROR);
    /* a name too long to compare is refused, never compared cut short */
    {
        char input[512];
        snprintf(input, sizeof input, "{'uri':'http://%0300d.example.org/'}", 0);
        run(input);
        expect_status(WEFT_TASK_FAILED_WITH_TERMINAL_ERROR);
        assert_has(G.r.reason, "is not in the http plugin's allow-list");
    }
    /* a name below it passes the list (and then meets whatever the network says) */
    run("{'uri':'http://api.example.org.invalid-weft-test/','connectionTimeOut':500}");
    expect_status(WEFT_TASK_FAILED_WITH_TERMINAL_ERROR);
    run("{'uri':'http://no-such-host.example.org/','connectionTimeOut':1000}");
    assert_lacks(G.r.reason, "allow-list");
}

/* ---- cancel ---- */

typedef struct runner {
    weft_ctx *ctx;
    weft_result r;
    int rc;
} runner;

static void *run_thread(void *p)
{
    runner *a = p;
    a->rc = F.type->execute(a->ctx, &a->r);
    return NULL;
}

static void test_cancel(void **state)
{
    weft_ctx *c = task_with("{'uri':'http://127.0.0.1:PORT/slow?ms=10000'}"), other;
    runner a = {c, {0}, 0};
    pthread_t th;
    int64_t t0 = now_ms(), took;
    host_result_init(&a.r);
    assert_int_equal(pthread_create(&th, NULL, run_thread, &a), 0);
    usleep(300000);
    /* cancel comes through another context for the same task */
    host_ctx_init(&other, NULL, G.x, G.ctx.t);
    F.type->cancel(&other);
    host_ctx_done(&other);
    pthread_join(th, NULL);
    took = now_ms() - t0;
    assert_int_equal(a.rc, 0);
    if (a.r.status != WEFT_TASK_FAILED)
        fail_msg("status %s (%s)", weft_task_status_name(a.r.status), a.r.reason);
    assert_has(a.r.reason, "HTTP: canceled during GET http://127.0.0.1:");
    host_result_clear(&a.r);
    if (took > 3000) fail_msg("cancel took %lld ms", (long long)took);
    /* canceling a task that is not running is harmless */
    F.type->cancel(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_init_configs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_init_bad_configs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_init_bad_config_keeps_old, setup, teardown),
        cmocka_unit_test_setup_teardown(test_validate_good, setup, teardown),
        cmocka_unit_test_setup_teardown(test_validate_bad, setup, teardown),
        cmocka_unit_test_setup_teardown(test_validate_allow_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_get_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_text_body, setup, teardown),
        cmocka_unit_test_setup_teardown(test_body_parsing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_status_fails, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reason_hides_credentials, setup, teardown),
        cmocka_unit_test_setup_teardown(test_post_json_body_and_headers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_string_body_and_types, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_bodies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reply_headers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_uri_encoding, setup, teardown),
        cmocka_unit_test_setup_teardown(test_legacy_wrapper, setup, teardown),
        cmocka_unit_test_setup_teardown(test_keep_alive, setup, teardown),
        cmocka_unit_test_setup_teardown(test_redirects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_redirect_failures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_input, setup, teardown),
        cmocka_unit_test_setup_teardown(test_connection_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_connect_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_read_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_body_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_default_body_limit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_allow_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_allow_list_wildcard, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel, setup, teardown),
    };
    if (!getenv("WEFT_TOP_BUILDDIR")) {
        fprintf(stderr, "test_http: WEFT_TOP_BUILDDIR is not set (run it through make check)\n");
        return 77;
    }
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
