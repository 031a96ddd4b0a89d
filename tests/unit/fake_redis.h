/*
 * A stand-in Redis for the replies a real one never sends (what fuzz_redis
 * finds): a thread serving a unix socket in a directory of its own, which
 * answers every connection with the same RESP text, whatever it is asked,
 * then reads until the client closes. Prefix fr_. Header-only (static
 * functions) so any test can include it.
 *
 *     fake_redis f;
 *     fr_start(&f, "+OK\r\n:1\r\n", 9);   // f.url: unix:///tmp/.../redis.sock
 *     ... rs_open with f.url ...
 *     fr_stop(&f);
 *
 * fr_start_greeted answers a store's first connect first (fr_greeted).
 */
#ifndef WEFT_TEST_FAKE_REDIS_H
#define WEFT_TEST_FAKE_REDIS_H

#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#define FR_FN static __attribute__((unused))

typedef struct fake_redis {
    char dir[64], path[108], url[160];
    const char *replies; /* borrowed: outlives the server */
    size_t len;
    char *owned; /* fr_start_greeted's replies */
    int lfd, stop[2];
    pthread_t thread;
} fake_redis;

static void *fr_main(void *arg)
{
    fake_redis *f = arg;
    for (;;) {
        struct pollfd p[2] = {{f->lfd, POLLIN, 0}, {f->stop[0], POLLIN, 0}};
        char buf[65536];
        size_t off = 0;
        ssize_t n;
        int c;
        if (poll(p, 2, -1) < 0 || p[1].revents) return NULL;
        if ((c = accept(f->lfd, NULL, NULL)) < 0) continue;
        while (off < f->len && (n = send(c, f->replies + off, f->len - off, MSG_NOSIGNAL)) > 0)
            off += (size_t)n;
        for (;;) {
            struct pollfd in[2] = {{c, POLLIN, 0}, {f->stop[0], POLLIN, 0}};
            if (poll(in, 2, -1) < 0 || in[1].revents || recv(c, buf, sizeof buf, 0) <= 0) break;
        }
        close(c);
    }
}

/* Serve replies (len bytes of RESP, borrowed) on a new socket: 0, or -1. */
FR_FN int fr_start(fake_redis *f, const char *replies, size_t len)
{
    struct sockaddr_un a;
    memset(f, 0, sizeof *f);
    f->replies = replies;
    f->len = len;
    snprintf(f->dir, sizeof f->dir, "/tmp/weft-fake-redis-XXXXXX");
    if (!mkdtemp(f->dir)) return -1;
    snprintf(f->path, sizeof f->path, "%s/redis.sock", f->dir);
    snprintf(f->url, sizeof f->url, "unix://%s", f->path);
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    snprintf(a.sun_path, sizeof a.sun_path, "%s", f->path);
    if ((f->lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
        bind(f->lfd, (struct sockaddr *)&a, sizeof a) || listen(f->lfd, 8) || pipe(f->stop) ||
        pthread_create(&f->thread, NULL, fr_main, f))
        return -1;
    return 0;
}

/* What a store's first connect to a single Redis reads (SCRIPT LOAD of each
 * of its 14 scripts, INFO cluster, the layout: one partition, one queue
 * shard), then then (len bytes): malloc'd, *n bytes, for fr_start. */
FR_FN char *fr_greeted(const char *then, size_t len, size_t *n)
{
    static const char sha[] = "$40\r\n1fc062685980c67e00d6ae1716d1c9167df54a56\r\n";
    static const char tail[] = "$19\r\ncluster_enabled:0\r\n\r\n"
                               "*3\r\n$1\r\n1\r\n$1\r\n1\r\n$4\r\nslot\r\n";
    char *out = malloc(14 * (sizeof sha - 1) + sizeof tail - 1 + len), *p = out;
    int i;
    if (!out) return NULL;
    for (i = 0; i < 14; i++, p += sizeof sha - 1)
        memcpy(p, sha, sizeof sha - 1);
    memcpy(p, tail, sizeof tail - 1);
    p += sizeof tail - 1;
    memcpy(p, then, len);
    *n = (size_t)(p - out) + len;
    return out;
}

/* fr_start with fr_greeted(then, len)'s replies (freed by fr_stop). */
FR_FN int fr_start_greeted(fake_redis *f, const char *then, size_t len)
{
    size_t n = 0;
    char *replies = fr_greeted(then, len, &n);
    if (!replies || fr_start(f, replies, n)) {
        free(replies);
        return -1;
    }
    f->owned = replies;
    return 0;
}

FR_FN void fr_stop(fake_redis *f)
{
    if (write(f->stop[1], "x", 1) == 1) pthread_join(f->thread, NULL);
    close(f->stop[0]);
    close(f->stop[1]);
    close(f->lfd);
    unlink(f->path);
    rmdir(f->dir);
    free(f->owned);
}

#endif
