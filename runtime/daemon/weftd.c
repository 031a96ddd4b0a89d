/* weftd: the daemon. Configuration: defaults < --config file < environment < flags. */
#include "autoconf.h"

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/config.h"
#include "base/log.h"
#include "daemon/node.h"
#include "base/util.h"

static nd_node *node;
static pthread_mutex_t node_mu = PTHREAD_MUTEX_INITIALIZER; /* node for hup_watch */
static int main_argc;
static char **main_argv;

static void on_signal(int sig)
{
    if (node)
        nd_stop(node);
}

static int read_config(cf_config *cfg, int argc, char **argv, weft_error *err);

/*
 * SIGHUP, which by default would end weftd without a word (init systems and
 * terminals send it): every thread blocks it, and this one takes it with
 * sigwait, where logging is safe. It reads the configuration again (file,
 * environment, flags) and applies what a running daemon can change: the
 * log level; the rest needs a restart.
 */
static void *hup_watch(void *set)
{
    int sig;
    for (;;) {
        cf_config cfg;
        weft_error err = {0};
        char was[16];
        if (sigwait(set, &sig))
            continue;
        pthread_mutex_lock(&node_mu);
        if (node) {
            snprintf(was, sizeof was, "%s", lg_level_name(lg_level()));
            if (read_config(&cfg, main_argc, main_argv, &err) ||
                lg_set_level_name(cfg.log_level, &err))
                lg_say(WEFT_LOG_WARN, "SIGHUP received: configuration not reloaded: %s",
                       err.msg);
            else
                lg_say(WEFT_LOG_INFO,
                       "SIGHUP received: log_level %s (was %s); other settings take a restart",
                       lg_level_name(lg_level()), was);
            cf_free(&cfg);
        }
        pthread_mutex_unlock(&node_mu);
    }
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
    "running tasks finish within the grace period, then exit. SIGHUP: read the\n"
    "configuration again and apply log_level (the rest takes a restart).\n"
    "The REST API listens on 127.0.0.1:8080 unless told otherwise (port 0: any free\n"
    "port, logged in the \"started\" line); see docs/rest-api.md.\n"
    "Environment: WEFT_REDIS_URL, WEFT_KEY_PREFIX, WEFT_PLUGIN_PATH, WEFT_API_LISTEN,\n"
    "WEFT_API_TOKEN.\n";

/* Defaults < the --config file < environment < flags, into cfg (cf_free it,
 * also on failure). err names the flag or key that is wrong. */
static int read_config(cf_config *cfg, int argc, char **argv, weft_error *err)
{
    static const struct {
        const char *flag, *key;
    } flags[] = {{"--redis", "redis_url"},     {"--prefix", "key_prefix"},
                 {"--plugin-path", "plugin_path"}, {"--workers", "workers"},
                 {"--lock", "lock"},           {"--id", "daemon_id"},
                 {"--api", "api_listen"}};
    const char *config = NULL;
    int i, rc = 0;
    for (i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--config") && i + 1 < argc)
            config = argv[++i];
    cf_defaults(cfg);
    if ((config && (rc = cf_load_file(cfg, config, err))) || (rc = cf_apply_env(cfg, err)))
        return rc;
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
            rc = cf_set(cfg, flags[f].key, argv[++i], err);
            if (rc == 0 && !strcmp(flags[f].key, "api_listen"))
                rc = cf_set(cfg, "api", "true", err);
        } else if (!strcmp(a, "--no-api")) {
            rc = cf_set(cfg, "api", "false", err);
        } else if (!strcmp(a, "--set") && i + 1 < argc && strchr(argv[i + 1], '=')) {
            char *kv = strdup(argv[++i]), *eq = strchr(kv, '=');
            *eq = 0;
            rc = cf_set(cfg, kv, eq + 1, err);
            free(kv);
        } else {
            return wu_err(err, WEFT_EINVAL, "unknown or incomplete option %s (see weftd --help)",
                          a);
        }
        if (rc) {
            wu_err_prefix(err, "%s: ", a);
            return rc;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    cf_config cfg;
    weft_error err = {0};
    struct sigaction sa;
    int i, rc;
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
    }
    main_argc = argc;
    main_argv = argv;
    if (read_config(&cfg, argc, argv, &err)) {
        fprintf(stderr, "weftd: %s\n", err.msg);
        cf_free(&cfg);
        return 2;
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
    if (rc == 0) {
        nd_node *n = node;
        pthread_mutex_lock(&node_mu); /* a SIGHUP being handled ends first */
        node = NULL;
        pthread_mutex_unlock(&node_mu);
        nd_free(n);
    }
    cf_free(&cfg);
    /* after a grace period that ran out, threads still run: exit without freeing under them */
    return rc == 0 ? 0 : 1;
}
