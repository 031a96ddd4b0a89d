/*
 * Redis URLs, the one parser weft has: the Redis store (store/redis) and the
 * lock_redis plugin both read theirs here. Prefix ru_. Self-contained (libc
 * only, no weft library calls), so a plugin compiles this file into itself
 * instead of linking weft.
 *
 *   redis://[[user]:password@]host[:port][/db]       host may be [v6 address]
 *   unix://[[user]:password@]/path/to/socket[?db=N]
 *
 * user and password may hold %XX escapes. port 1..65535 (default 6379), db
 * 0..1000000 (default 0).
 */
#ifndef WEFT_BASE_REDIS_URL_H
#define WEFT_BASE_REDIS_URL_H

#include "weft/plugin.h"

typedef struct ru_url {
    char *host;     /* NULL for a unix socket */
    int port;       /* 6379 unless given; 0 for a unix socket */
    char *path;     /* the unix socket; NULL for redis:// */
    char *user;     /* NULL: AUTH with the password alone */
    char *password; /* NULL: no AUTH */
    int db;
    char *shown; /* the URL with any password masked (":***@"): the form for messages */
} ru_url;

/*
 * Parse url into *out (every string malloc'd, owned by *out: ru_clear).
 * Returns 0, WEFT_EINVAL with a message "Redis URL <url>: <what is wrong>"
 * (the URL with its password masked, or not repeated when it may hold one
 * that cannot be found), or WEFT_ENOMEM. On failure *out holds what was
 * parsed so far and still needs ru_clear. url is borrowed.
 */
int ru_parse(const char *url, ru_url *out, weft_error *err);

/* Free what *u owns (the password wiped first) and zero it; NULL is fine. */
void ru_clear(ru_url *u);

#define RU_SEEDS_MAX 16

/*
 * A comma-separated list of URLs (seed nodes: "redis://a:6379,redis://b:6379";
 * one URL is a list of one) into out[0..*n), at most max (RU_SEEDS_MAX).
 * A ',' inside a password is written %2C. Returns what ru_parse returns,
 * naming the URL that is wrong, or WEFT_EINVAL for an empty entry or too
 * many; on failure out[0..*n) still need ru_clear.
 */
int ru_parse_list(const char *urls, ru_url *out, size_t max, size_t *n, weft_error *err);

#endif
