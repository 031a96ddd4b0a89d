#include "store/payload.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/sha256.h"
#include "base/util.h"

/* ---- names ---- */

#define HASH_HEX 64

static int owner_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
}

/* Length of a workflow id that can name payloads, else 0. */
static size_t owner_len(const char *owner)
{
    size_t n = 0;
    while (owner[n] && owner_char(owner[n]))
        n++;
    return !owner[n] && n > 0 && n <= PS_OWNER_MAX ? n : 0;
}

/* At s: ".<64 lowercase hex>.json"? Returns its length, else 0. */
static size_t digest_part(const char *s)
{
    size_t i;
    if (*s != '.') return 0;
    for (i = 1; i <= HASH_HEX; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f'))) return 0;
    return strncmp(s + i, ".json", 5) ? 0 : i + 5;
}

int ps_ref_check(const char *owner, const char *ref, weft_error *err)
{
    size_t n = owner ? owner_len(owner) : 0;
    if (ref && n && !strncmp(ref, owner, n) && digest_part(ref + n) &&
        !ref[n + digest_part(ref + n)])
        return 0;
    return wu_err(err, WEFT_EINVAL,
                  "payload reference '%.120s' of workflow %.64s is not one this runtime wrote "
                  "(only its own names inside the payload store are read)",
                  ref ? ref : "", owner ? owner : "?");
}

/*
 * Whose file a directory entry is, when it is one a sweep may remove: a
 * payload "<owner>.<digest>.json", or a write of one that never finished,
 * "<owner>.<digest>.json.<token>.tmp". Returns the owner's length, else 0.
 */
static size_t sweepable(const char *name)
{
    size_t n = 0, d, t = 0;
    while (name[n] && owner_char(name[n]))
        n++;
    if (n == 0 || n > PS_OWNER_MAX || !(d = digest_part(name + n))) return 0;
    name += n + d;
    if (!*name) return n;
    if (*name++ != '.') return 0;
    while (owner_char(name[t]))
        t++;
    return t > 0 && !strcmp(name + t, ".tmp") ? n : 0;
}

/* ---- a directory of files ---- */

typedef struct dir_store {
    char *dir;
    pthread_mutex_t mu; /* guards scan */
    DIR *scan;          /* the sweep pass under way, NULL = none */
} dir_store;

static int dir_put(void *ud, const char *name, const char *data, size_t len, weft_error *err)
{
    dir_store *d = ud;
    char path[4096], tmp[4200], token[37];
    struct stat st;
    int fd;
    size_t done = 0;
    snprintf(path, sizeof path, "%s/%s", d->dir, name);
    if (stat(path, &st) == 0 && S_ISREG(st.st_mode) && (size_t)st.st_size == len) {
        /* the same bytes (the name is their digest): kept once, made young
         * again so that no sweep takes it while it is being referenced anew */
        utimensat(AT_FDCWD, path, NULL, 0);
        return 0;
    }
    /* several writers of one name each write their own temporary file */
    wu_uuid(token);
    snprintf(tmp, sizeof tmp, "%s.%s.tmp", path, token);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    if (fd < 0) return wu_err(err, WEFT_EIO, "payload store %s: %s", d->dir, strerror(errno));
    while (done < len) {
        ssize_t n = write(fd, data + done, len - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            int e = errno;
            close(fd);
            unlink(tmp);
            return wu_err(err, WEFT_EIO, "payload store %s: %s", d->dir, strerror(e));
        }
        done += (size_t)n;
    }
    /* durable before it is referenced */
    if (fsync(fd) || close(fd) || rename(tmp, path)) {
        int e = errno;
        unlink(tmp);
        return wu_err(err, WEFT_EIO, "payload store %s: %s", d->dir, strerror(e));
    }
    return 0;
}

static int dir_get(void *ud, const char *name, char **data, size_t *len, weft_error *err)
{
    dir_store *d = ud;
    char path[4096];
    struct stat st;
    size_t done = 0;
    int fd;
    *data = NULL;
    snprintf(path, sizeof path, "%s/%s", d->dir, name);
    /* a link planted in the directory is not followed out of it */
    fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        int e = fd < 0 ? errno : EINVAL;
        if (fd >= 0) close(fd);
        return wu_err(err, e == ENOENT ? WEFT_ENOTFOUND : WEFT_EIO, "payload %s in %s: %s", name,
                      d->dir, e == EINVAL ? "not a regular file" : strerror(e));
    }
    if (!(*data = malloc((size_t)st.st_size + 1))) {
        close(fd);
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    }
    while (done < (size_t)st.st_size) {
        ssize_t n = read(fd, *data + done, (size_t)st.st_size - done);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            int e = n < 0 ? errno : EIO;
            close(fd);
            free(*data);
            *data = NULL;
            return wu_err(err, WEFT_EIO, "payload %s in %s: %s", name, d->dir, strerror(e));
        }
        done += (size_t)n;
    }
    close(fd);
    (*data)[done] = '\0';
    *len = done;
    return 0;
}

/* A file a sweep step looked at: its name and how long its owner's id is. */
typedef struct seen {
    char *name;
    size_t owner;
} seen;

/* The distinct owners of files[0..n) into ids (each malloc'd); *nids. */
static int owners_of(const seen *files, size_t n, char **ids, size_t *nids)
{
    size_t i, j;
    *nids = 0;
    for (i = 0; i < n; i++) {
        for (j = 0; j < *nids; j++)
            if (strlen(ids[j]) == files[i].owner && !strncmp(ids[j], files[i].name, files[i].owner))
                break;
        if (j < *nids) continue;
        if (!(ids[*nids] = strndup(files[i].name, files[i].owner))) return WEFT_ENOMEM;
        ++*nids;
    }
    return 0;
}

static int is_alive(char **ids, const int *alive, size_t nids, const seen *f)
{
    size_t j;
    for (j = 0; j < nids; j++)
        if (strlen(ids[j]) == f->owner && !strncmp(ids[j], f->name, f->owner)) return alive[j];
    return 1;
}

static int dir_sweep(void *ud, int64_t grace_ms, size_t max, ps_alive_fn alive, void *alive_ud,
                     size_t *removed, weft_error *err)
{
    dir_store *d = ud;
    seen *files = calloc(max ? max : 1, sizeof *files);
    char **ids = calloc(max ? max : 1, sizeof *ids);
    int *live = calloc(max ? max : 1, sizeof *live);
    size_t nfiles = 0, nids = 0, looked = 0, i;
    int64_t young = wu_now_ms() - grace_ms;
    int rc = 0, done = 0;
    struct dirent *e;

    if (!files || !ids || !live) {
        rc = wu_err(err, WEFT_ENOMEM, "out of memory");
        goto out;
    }
    pthread_mutex_lock(&d->mu);
    if (!d->scan && !(d->scan = opendir(d->dir))) {
        rc = wu_err(err, WEFT_EIO, "payload directory %s: %s", d->dir, strerror(errno));
        goto unlock;
    }
    while (looked < max && !(done = !(e = readdir(d->scan)))) {
        struct stat st;
        size_t owner = sweepable(e->d_name);
        looked++;
        /* young files may belong to a start whose execution is not created yet */
        if (!owner || fstatat(dirfd(d->scan), e->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
            !S_ISREG(st.st_mode) ||
            (int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000 > young)
            continue;
        if (!(files[nfiles].name = strdup(e->d_name))) {
            rc = wu_err(err, WEFT_ENOMEM, "out of memory");
            goto unlock;
        }
        files[nfiles++].owner = owner;
    }
    if (nfiles) {
        if (owners_of(files, nfiles, ids, &nids)) {
            rc = wu_err(err, WEFT_ENOMEM, "out of memory");
            goto unlock;
        }
        if ((rc = alive(alive_ud, (const char *const *)ids, nids, live, err))) goto unlock;
        for (i = 0; i < nfiles; i++)
            if (!is_alive(ids, live, nids, &files[i]) &&
                unlinkat(dirfd(d->scan), files[i].name, 0) == 0 && removed)
                ++*removed;
    }
    if (done) {
        closedir(d->scan);
        d->scan = NULL;
    }
unlock:
    pthread_mutex_unlock(&d->mu);
out:
    for (i = 0; files && i < nfiles; i++)
        free(files[i].name);
    for (i = 0; ids && i < nids; i++)
        free(ids[i]);
    free(files);
    free(ids);
    free(live);
    return rc ? rc : done;
}

static void dir_close(void *ud)
{
    dir_store *d = ud;
    if (d->scan) closedir(d->scan);
    pthread_mutex_destroy(&d->mu);
    free(d->dir);
    free(d);
}

static const ps_ops dir_ops = {dir_put, dir_get, dir_sweep, dir_close};

int ps_dir_open(const char *dir, size_t soft, size_t hard, ps_store **out, weft_error *err)
{
    ps_store *s;
    dir_store *d;
    *out = NULL;
    if (mkdir(dir, 0750) && errno != EEXIST)
        return wu_err(err, WEFT_EIO, "payload directory %s: %s", dir, strerror(errno));
    s = calloc(1, sizeof *s);
    d = calloc(1, sizeof *d);
    if (!s || !d || !(d->dir = strdup(dir))) {
        free(s);
        if (d) free(d->dir);
        free(d);
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    }
    pthread_mutex_init(&d->mu, NULL);
    s->ops = &dir_ops;
    s->ud = d;
    s->soft = soft;
    s->hard = hard;
    *out = s;
    return 0;
}

static size_t env_size(const char *name, size_t dflt)
{
    const char *v = getenv(name);
    char *end;
    unsigned long long n;
    if (!v || !*v) return dflt;
    n = strtoull(v, &end, 10);
    return *end ? dflt : (size_t)n;
}

int ps_open_env(ps_store **out, weft_error *err)
{
    const char *dir = getenv("WEFT_PAYLOAD_DIR"), *tmp = getenv("TMPDIR");
    char buf[4096];
    if (!dir || !*dir) {
        snprintf(buf, sizeof buf, "%s/weft-payloads", tmp && *tmp ? tmp : "/tmp");
        dir = buf;
    }
    return ps_dir_open(dir, env_size("WEFT_PAYLOAD_SOFT", PS_DEFAULT_SOFT),
                       env_size("WEFT_PAYLOAD_HARD", PS_DEFAULT_HARD), out, err);
}

void ps_close(ps_store *s)
{
    if (!s) return;
    if (s->ops->close) s->ops->close(s->ud);
    free(s);
}

/* ---- limits ---- */

static void human(size_t n, char *buf, size_t size)
{
    if (n >= 1024 * 1024)
        snprintf(buf, size, "%.1f MiB", (double)n / (1024.0 * 1024.0));
    else if (n >= 1024)
        snprintf(buf, size, "%.1f KiB", (double)n / 1024.0);
    else
        snprintf(buf, size, "%zu bytes", n);
}

static int over_hard(const ps_store *s, const char *what, size_t len, weft_error *err)
{
    char a[32], b[32];
    human(len, a, sizeof a);
    human(s->hard, b, sizeof b);
    return wu_err(err, WEFT_ELIMIT, "%s is %s, over the hard limit of %s", what, a, b);
}

int ps_guard(const ps_store *s, const char *what, json_object *v, weft_error *err)
{
    size_t len;
    if (!s || !s->hard || !v) return 0;
    json_object_to_json_string_length(v, JSON_C_TO_STRING_PLAIN, &len);
    return len > s->hard ? over_hard(s, what, len, err) : 0;
}

int ps_keep(ps_store *s, const char *owner, const char *what, json_object *v, char **ref,
            weft_error *err)
{
    const char *text;
    size_t len;
    char name[PS_OWNER_MAX + 80], digest[65];
    int rc;
    *ref = NULL;
    if (!s || !v) return 0;
    text = json_object_to_json_string_length(v, JSON_C_TO_STRING_PLAIN, &len);
    if (s->hard && len > s->hard) return over_hard(s, what, len, err);
    if (!s->soft || len <= s->soft) return 0;
    if (!owner_len(owner))
        return wu_err(err, WEFT_EINVAL, "%s: workflow id '%.80s' cannot name a payload", what,
                      owner);
    sh_sha256_hex(text, len, digest);
    snprintf(name, sizeof name, "%s.%s.json", owner, digest);
    if ((rc = s->ops->put(s->ud, name, text, len, err))) return wu_err_prefix(err, "%s: ", what);
    if (!(*ref = strdup(name))) return wu_err(err, WEFT_ENOMEM, "out of memory");
    return 0;
}

int ps_load(ps_store *s, const char *owner, const char *ref, json_object **out, weft_error *err)
{
    char *data = NULL;
    size_t len;
    int rc;
    *out = NULL;
    if ((rc = ps_ref_check(owner, ref, err))) return rc;
    if (!s)
        return wu_err(err, WEFT_ESTATE,
                      "payload %s is stored outside, and no payload store is "
                      "configured here",
                      ref);
    if ((rc = s->ops->get(s->ud, ref, &data, &len, err))) return rc;
    rc = wu_parse_json_stored(ref, data, out, err);
    free(data);
    return rc;
}

int ps_sweep(ps_store *s, int64_t grace_ms, size_t max, ps_alive_fn alive, void *alive_ud,
             size_t *removed, weft_error *err)
{
    if (!s || !s->ops->sweep) return 1;
    return s->ops->sweep(s->ud, grace_ms, max, alive, alive_ud, removed, err);
}
