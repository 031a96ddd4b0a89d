/*
 * A throwaway redis-server for tests: started on a free loopback port (and a
 * unix socket beside it), no persistence, killed by pid at the end. Prefix
 * rf_. Header-only (static functions) so any test can include it.
 *
 *     rf_server s;
 *     if (rf_start(&s) == RF_SKIP) return 77;   // redis-server not installed
 *     ... connect to s.url / s.unix_url ...
 *     rf_stop(&s);
 */
#ifndef WEFT_TEST_REDIS_FIXTURE_H
#define WEFT_TEST_REDIS_FIXTURE_H

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#define RF_SKIP 77
/* a test may use only some of these */
#define RF_FN static __attribute__((unused))

typedef struct rf_server {
    pid_t pid;
    int port;
    char sock[108];     /* unix socket path */
    char url[64];       /* redis://127.0.0.1:<port> */
    char unix_url[128]; /* unix://<sock> */
} rf_server;

RF_FN void rf_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

/* The redis-server on $PATH (or $REDIS_SERVER), or NULL. */
RF_FN const char *rf_binary(void)
{
    static char path[4096];
    const char *env = getenv("REDIS_SERVER"), *p, *colon;
    if (env && *env) return access(env, X_OK) == 0 ? env : NULL;
    p = getenv("PATH");
    if (!p) p = "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin";
    for (; *p; p = *colon ? colon + 1 : colon) {
        colon = strchr(p, ':');
        if (!colon) colon = p + strlen(p);
        snprintf(path, sizeof path, "%.*s/redis-server", (int)(colon - p), p);
        if (colon > p && access(path, X_OK) == 0) return path;
    }
    return NULL;
}

/* 1 when "PING" on 127.0.0.1:port answers "+PONG". */
RF_FN int rf_ping(int port)
{
    struct sockaddr_in a;
    char buf[16];
    int fd = socket(AF_INET, SOCK_STREAM, 0), ok = 0;
    ssize_t n;
    if (fd < 0) return 0;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_port = htons((unsigned short)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        send(fd, "PING\r\n", 6, MSG_NOSIGNAL) == 6) {
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, 500) == 1 && (n = recv(fd, buf, sizeof buf - 1, 0)) > 0) {
            buf[n] = 0;
            ok = strncmp(buf, "+PONG", 5) == 0;
        }
    }
    close(fd);
    return ok;
}

/* Start redis-server on s->port; 0 when it answers PING, -1 when it died. */
RF_FN int rf_spawn(rf_server *s, const char *bin)
{
    char port[16];
    int i, status;
    snprintf(port, sizeof port, "%d", s->port);
    s->pid = fork();
    if (s->pid < 0) return -1;
    if (s->pid == 0) {
        int devnull = open("/dev/null", O_RDWR);
#ifdef __linux__
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a crashed test */
#endif
        if (devnull >= 0) {
            dup2(devnull, 0);
            dup2(devnull, 1);
            dup2(devnull, 2);
        }
        execl(bin, bin, "--port", port, "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
              "--daemonize", "no", "--unixsocket", s->sock, "--unixsocketperm", "700", "--dir",
              "/tmp", "--logfile", "", (char *)NULL);
        _exit(127);
    }
    for (i = 0; i < 200; i++) { /* up to 10 s */
        if (waitpid(s->pid, &status, WNOHANG) == s->pid) {
            s->pid = 0;
            return -1; /* port taken, or cannot start */
        }
        if (rf_ping(s->port)) return 0;
        rf_sleep_ms(50);
    }
    kill(s->pid, SIGKILL);
    waitpid(s->pid, &status, 0);
    s->pid = 0;
    return -1;
}

/* Start a server on a random free high port: 0, RF_SKIP (not installed) or -1. */
RF_FN int rf_start(rf_server *s)
{
    const char *bin = rf_binary();
    int attempt;
    memset(s, 0, sizeof *s);
    if (!bin) return RF_SKIP;
    srand((unsigned)(time(NULL) ^ getpid()));
    for (attempt = 0; attempt < 20; attempt++) {
        /* below the ephemeral range (32768+), above the test cluster's ports and
         * bus ports (integration/cluster_lib.sh: 12000-13999, 22000-23999) */
        s->port = 24000 + rand() % 8000;
        if (rf_ping(s->port)) continue; /* someone is there already */
        snprintf(s->sock, sizeof s->sock, "/tmp/weft-test-%d-%d.sock", (int)getpid(), s->port);
        snprintf(s->url, sizeof s->url, "redis://127.0.0.1:%d", s->port);
        snprintf(s->unix_url, sizeof s->unix_url, "unix://%s", s->sock);
        if (rf_spawn(s, bin) == 0) return 0;
    }
    return -1;
}

/* Kill the server (SIGKILL: it goes away like a crash) and wait for it. */
RF_FN void rf_kill(rf_server *s)
{
    int status;
    if (s->pid > 0) {
        kill(s->pid, SIGKILL);
        waitpid(s->pid, &status, 0);
    }
    s->pid = 0;
    unlink(s->sock);
}

/* Start the server again on the same port (after rf_kill): 0 or -1. */
RF_FN int rf_restart(rf_server *s)
{
    const char *bin = rf_binary();
    int i;
    if (!bin) return -1;
    for (i = 0; i < 50; i++) { /* the port may take a moment to be free */
        if (rf_spawn(s, bin) == 0) return 0;
        rf_sleep_ms(100);
    }
    return -1;
}

RF_FN void rf_stop(rf_server *s)
{
    int status;
    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        waitpid(s->pid, &status, 0);
    }
    s->pid = 0;
    unlink(s->sock);
}

#endif
