#include "payload.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util.h"

/* ---- a directory of files ---- */

typedef struct dir_store {
    char *dir;
} dir_store;

static int dir_put(void *ud, const char *name, const char *data, size_t len, char *ref,
                   size_t ref_size, weft_error *err)
{
    dir_store *d = ud;
    char path[4096], tmp[4200], id[37];
    int fd;
    size_t done = 0;
    wu_uuid(id);
    /* name may hold '/' and the like: the file is named by a fresh id */
    (void)name;
    snprintf(path, sizeof path, "%s/%s.json", d->dir, id);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
    if (fd < 0)
        return wu_err(err, WEFT_EIO, "payload store %s: %s", d->dir, strerror(errno));
    while (done < len) {
        ssize_t n = write(fd, data + done, len - done);
        if (n < 0 && errno == EINTR)
            continue;
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
    snprintf(ref, ref_size, "%s", path);
    return 0;
}

static int dir_get(void *ud, const char *ref, char **data, size_t *len, weft_error *err)
{
    return wu_read_file(ref, data, len, err);
}

static void dir_close(void *ud)
{
    dir_store *d = ud;
    free(d->dir);
    free(d);
}

static const ps_ops dir_ops = {dir_put, dir_get, dir_close};

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
        if (d)
            free(d->dir);
        free(d);
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    }
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
    if (!v || !*v)
        return dflt;
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
    if (!s)
        return;
    if (s->ops->close)
        s->ops->close(s->ud);
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
    if (!s || !s->hard || !v)
        return 0;
    json_object_to_json_string_length(v, JSON_C_TO_STRING_PLAIN, &len);
    return len > s->hard ? over_hard(s, what, len, err) : 0;
}

int ps_keep(ps_store *s, const char *name, const char *what, json_object *v, char **ref,
            weft_error *err)
{
    const char *text;
    size_t len;
    char buf[4200];
    int rc;
    *ref = NULL;
    if (!s || !v)
        return 0;
    text = json_object_to_json_string_length(v, JSON_C_TO_STRING_PLAIN, &len);
    if (s->hard && len > s->hard)
        return over_hard(s, what, len, err);
    if (!s->soft || len <= s->soft)
        return 0;
    if ((rc = s->ops->put(s->ud, name, text, len, buf, sizeof buf, err)))
        return wu_err_prefix(err, "%s: ", what);
    if (!(*ref = strdup(buf)))
        return wu_err(err, WEFT_ENOMEM, "out of memory");
    return 0;
}

int ps_load(ps_store *s, const char *ref, json_object **out, weft_error *err)
{
    char *data = NULL;
    size_t len;
    int rc;
    *out = NULL;
    if (!s)
        return wu_err(err, WEFT_ESTATE, "payload %s is stored outside, and no payload store is "
                                        "configured here", ref);
    if ((rc = s->ops->get(s->ud, ref, &data, &len, err)))
        return rc;
    rc = wu_parse_json(ref, data, out, err);
    free(data);
    return rc;
}

json_object *ps_ref_object(const char *ref)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "$payload", json_object_new_string(ref));
    return o;
}

const char *ps_ref_of(json_object *v)
{
    json_object *r;
    if (json_object_is_type(v, json_type_object) && json_object_object_length(v) == 1 &&
        json_object_object_get_ex(v, "$payload", &r) && json_object_is_type(r, json_type_string))
        return json_object_get_string(r);
    return NULL;
}
