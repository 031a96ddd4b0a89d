/* weftd: the daemon. Configuration: defaults < --config file < environment < flags. */
#include "autoconf.h"

#include <getopt.h>
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
    if (node) nd_stop(node);
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
        if (sigwait(set, &sig)) continue;
        pthread_mutex_lock(&node_mu);
        if (node) {
            snprintf(was, sizeof was, "%s", lg_level_name(lg_level()));
            if (read_config(&cfg, main_argc, main_argv, &err) ||
                lg_set_level_name(cfg.log_level, &err))
                lg_say(WEFT_LOG_WARN, "SIGHUP received: configuration not reloaded: %s", err.msg);
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
    "             [--id NAME] [--domain D[,D...]] [--set KEY=VALUE]...\n"
    "       weftd --version\n"
    "       weftd --help-config     every configuration key, its type and default\n"
    "\n"
    "Runs workflows kept in Redis: claims tasks of the types its plugins provide,\n"
    "runs them and decides what comes next. SIGTERM or SIGINT: stop claiming, let\n"
    "running tasks finish within the grace period, then exit. SIGHUP: read the\n"
    "configuration again and apply log_level (the rest takes a restart).\n"
    "The REST API listens on 127.0.0.1:8080 unless told otherwise (port 0: any free\n"
    "port, logged in the \"started\" line); see docs/rest-api.md.\n"
    "Environment: WEFT_REDIS_URL, WEFT_KEY_PREFIX, WEFT_PLUGIN_PATH, WEFT_API_LISTEN,\n"
    "WEFT_API_TOKEN, WEFT_API_HOSTS.\n";

enum {
    OPT_HELP = 'h',
    OPT_CONFIG = 256,
    OPT_NO_API,
    OPT_SET,
    OPT_HELP_CONFIG,
    OPT_VERSION,
    OPT_KEY
};

/* The flags that set one configuration key each: longopts[i] is key_flags[i]. */
static const struct {
    const char *flag, *key;
} key_flags[] = {{"redis", "redis_url"}, {"prefix", "key_prefix"}, {"plugin-path", "plugin_path"},
                 {"workers", "workers"}, {"lock", "lock"},         {"id", "daemon_id"},
                 {"api", "api_listen"},  {"domain", "domains"}};

static const struct option longopts[] = {
    {"redis", required_argument, NULL, OPT_KEY + 0},
    {"prefix", required_argument, NULL, OPT_KEY + 1},
    {"plugin-path", required_argument, NULL, OPT_KEY + 2},
    {"workers", required_argument, NULL, OPT_KEY + 3},
    {"lock", required_argument, NULL, OPT_KEY + 4},
    {"id", required_argument, NULL, OPT_KEY + 5},
    {"api", required_argument, NULL, OPT_KEY + 6},
    {"domain", required_argument, NULL, OPT_KEY + 7},
    {"config", required_argument, NULL, OPT_CONFIG},
    {"no-api", no_argument, NULL, OPT_NO_API},
    {"set", required_argument, NULL, OPT_SET},
    {"help", no_argument, NULL, OPT_HELP},
    {"help-config", no_argument, NULL, OPT_HELP_CONFIG},
    {"version", no_argument, NULL, OPT_VERSION},
    {NULL, 0, NULL, 0},
};

/* The next option of argv (getopt_long, quiet: '?' or ':' on a bad one), or -1. */
static int next_flag(int argc, char **argv)
{
    opterr = 0;
    /* ':' first: a missing value is told apart from an unknown option */
    return getopt_long(argc, argv, ":h", longopts, NULL);
}

/* Defaults < the --config file < environment < flags, into cfg (cf_free it,
 * also on failure). err names the flag or key that is wrong. Runs again on
 * SIGHUP, so it parses argv afresh each time. */
static int read_config(cf_config *cfg, int argc, char **argv, weft_error *err)
{
    const char *config = NULL;
    int o, rc = 0;
    for (optind = 0; (o = next_flag(argc, argv)) != -1;)
        if (o == OPT_CONFIG) config = optarg;
    cf_defaults(cfg);
    if ((config && (rc = cf_load_file(cfg, config, err))) || (rc = cf_apply_env(cfg, err)))
        return rc;
    for (optind = 0; (o = next_flag(argc, argv)) != -1;) {
        const char *flag;
        if (o >= OPT_KEY) {
            flag = key_flags[o - OPT_KEY].flag;
            rc = cf_set(cfg, key_flags[o - OPT_KEY].key, optarg, err);
            if (rc == 0 && o == OPT_KEY + 6) rc = cf_set(cfg, "api", "true", err);
        } else if (o == OPT_NO_API) {
            flag = "no-api";
            rc = cf_set(cfg, "api", "false", err);
        } else if (o == OPT_SET && strchr(optarg, '=')) {
            char *kv = strdup(optarg), *eq = kv ? strchr(kv, '=') : NULL;
            flag = "set";
            if (!eq) {
                free(kv);
                return wu_err(err, WEFT_ENOMEM, "--set: out of memory");
            }
            *eq = 0;
            rc = cf_set(cfg, kv, eq + 1, err);
            free(kv);
        } else if (o == OPT_CONFIG) {
            continue;
        } else {
            /* unknown, without its value, or --set without '=' */
            return wu_err(err, WEFT_EINVAL, "unknown or incomplete option %s (see weftd --help)",
                          o == OPT_SET ? "--set" : argv[optind - 1]);
        }
        if (rc) {
            wu_err_prefix(err, "--%s: ", flag);
            return rc;
        }
    }
    if (optind < argc)
        return wu_err(err, WEFT_EINVAL, "unknown or incomplete option %s (see weftd --help)",
                      argv[optind]);
    return 0;
}

int main(int argc, char **argv)
{
    cf_config cfg;
    weft_error err = {0};
    struct sigaction sa;
    int o, rc;
    /* these win wherever they stand, even next to a bad option */
    for (optind = 0; (o = next_flag(argc, argv)) != -1;) {
        if (o == OPT_HELP) {
            fputs(usage, stdout);
            return 0;
        }
        if (o == OPT_HELP_CONFIG) {
            cf_describe(stdout);
            return 0;
        }
        if (o == OPT_VERSION) {
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
