/* weftd: the daemon. Configuration: defaults < --config file < environment < flags. */
#include "autoconf.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "node.h"

static nd_node *node;

static void on_signal(int sig)
{
    if (node)
        nd_stop(node);
}

/*
 * SIGHUP, which by default would end weftd without a word (init systems and
 * terminals send it): every thread blocks it, and this one takes it with
 * sigwait, where logging is safe, and says that nothing is reloaded.
 */
static void *hup_watch(void *set)
{
    int sig;
    for (;;)
        if (sigwait(set, &sig) == 0 && node)
            nd_log(node, WEFT_LOG_INFO,
                   "SIGHUP received: nothing is reloaded (configuration is read at start: "
                   "restart weftd to change it); running on");
    return NULL;
}

static const char usage[] =
    "usage: weftd [--config FILE] [--redis URL] [--prefix P] [--plugin-path DIRS]\n"
    "             [--workers N] [--lock none|local|redis] [--api HOST:PORT | --no-api]\n"
    "             [--set KEY=VALUE]...\n"
    "       weftd --help-config     every configuration key, its type and default\n"
    "\n"
    "Runs workflows kept in Redis: claims tasks of the types its plugins provide,\n"
    "runs them and decides what comes next. SIGTERM or SIGINT: stop claiming, let\n"
    "running tasks finish within the grace period, then exit. SIGHUP is logged and\n"
    "otherwise ignored (nothing is reloaded).\n"
    "The REST API listens on 127.0.0.1:8080 unless told otherwise (port 0: any free\n"
    "port, logged in the \"started\" line); see docs/rest-api.md.\n"
    "Environment: WEFT_REDIS_URL, WEFT_KEY_PREFIX, WEFT_PLUGIN_PATH, WEFT_API_LISTEN,\n"
    "WEFT_API_TOKEN.\n";

int main(int argc, char **argv)
{
    cf_config cfg;
    weft_error err = {0};
    const char *config = NULL;
    struct sigaction sa;
    int i, rc;
    static const struct {
        const char *flag, *key;
    } flags[] = {{"--redis", "redis_url"},     {"--prefix", "key_prefix"},
                 {"--plugin-path", "plugin_path"}, {"--workers", "workers"},
                 {"--lock", "lock"},           {"--id", "daemon_id"},
                 {"--api", "api_listen"}};

    for (i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            fputs(usage, stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--help-config")) {
            cf_describe(stdout);
            return 0;
        }
        if (!strcmp(argv[i], "--version")) {
            printf("weftd %s\n", PACKAGE_VERSION);
            return 0;
        }
        if (!strcmp(argv[i], "--config") && i + 1 < argc)
            config = argv[++i];
    }
    cf_defaults(&cfg);
    if ((config && cf_load_file(&cfg, config, &err)) || cf_apply_env(&cfg, &err)) {
        fprintf(stderr, "weftd: %s\n", err.msg);
        cf_free(&cfg);
        return 2;
    }
    for (i = 1; i < argc; i++) {
        size_t f;
        const char *a = argv[i];
        if (!strcmp(a, "--config")) {
            i++;
            continue;
        }
        for (f = 0; f < sizeof flags / sizeof flags[0]; f++)
            if (!strcmp(a, flags[f].flag))
                break;
        if (f < sizeof flags / sizeof flags[0] && i + 1 < argc) {
            rc = cf_set(&cfg, flags[f].key, argv[++i], &err);
            if (rc == 0 && !strcmp(flags[f].key, "api_listen"))
                rc = cf_set(&cfg, "api", "true", &err);
        } else if (!strcmp(a, "--no-api")) {
            rc = cf_set(&cfg, "api", "false", &err);
        } else if (!strcmp(a, "--set") && i + 1 < argc && strchr(argv[i + 1], '=')) {
            char *kv = strdup(argv[++i]), *eq = strchr(kv, '=');
            *eq = 0;
            rc = cf_set(&cfg, kv, eq + 1, &err);
            free(kv);
        } else {
            fprintf(stderr, "weftd: unknown or incomplete option %s (see weftd --help)\n", a);
            cf_free(&cfg);
            return 2;
        }
        if (rc) {
            fprintf(stderr, "weftd: %s: %s\n", a, err.msg);
            cf_free(&cfg);
            return 2;
        }
    }
    if ((rc = nd_new(&cfg, &node, &err))) {
        fprintf(stderr, "weftd: %s\n", err.msg);
        cf_free(&cfg);
        return 2;
    }
    {
        static sigset_t hup;
        pthread_t th;
        pthread_attr_t at;
        sigemptyset(&hup);
        sigaddset(&hup, SIGHUP);
        /* blocked before any thread starts, so every thread inherits it */
        pthread_sigmask(SIG_BLOCK, &hup, NULL);
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&th, &at, hup_watch, &hup))
            signal(SIGHUP, SIG_IGN); /* no thread to say so: at least live on */
        pthread_attr_destroy(&at);
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    rc = nd_run(node);
    if (rc == 0)
        nd_free(node);
    cf_free(&cfg);
    /* after a grace period that ran out, threads still run: exit without freeing under them */
    return rc == 0 ? 0 : 1;
}
