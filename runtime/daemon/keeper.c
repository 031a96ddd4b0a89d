/* The keeper thread: renews the workers' leases, returns expired ones to
 * their queues, says the node is alive and sweeps old payload files. */
#include "daemon/internal.h"

#include <stdio.h>
#include <unistd.h>

static void warn_reaped(void *ud, const char *workflow_id, const char *msg)
{
    lg_log(WEFT_LOG_WARN, LG_FIELDS(LG_STR("workflow", workflow_id)), "%s", msg);
}

static int execs_alive(void *ud, const char *const *ids, size_t n, int *alive, weft_error *err)
{
    st_store *s = ud;
    return ST(s, exec_exists_many, ids, n, alive, err);
}

/*
 * Payload files of executions that no longer exist (ended and expired, or
 * never created) go, a batch of directory entries per keeper round so that
 * leases are still renewed on time; every payload_sweep a new pass starts.
 * Every daemon sweeps: they only race to remove the same files.
 */
static void sweep_payloads(worker *k)
{
    nd_node *n = k->n;
    weft_error err = {0};
    int rc;
    if (!n->payloads || !n->cfg->payload_sweep_ms || (!n->ps_pass && wu_mono_ms() < n->ps_next))
        return;
    n->ps_pass = 1;
    rc = ps_sweep(n->payloads, n->cfg->payload_grace_ms, ND_PS_BATCH, execs_alive, k->st,
                  &n->ps_removed, &err);
    if (rc == 0) return;
    if (rc < 0 && !ST(k->st, broken))
        lg_say(WEFT_LOG_WARN, "payload sweep: %s (again in %llds)", err.msg,
               (long long)(n->cfg->payload_sweep_ms / 1000));
    if (n->ps_removed)
        lg_say(WEFT_LOG_INFO, "%zu payload file(s) of ended workflows removed", n->ps_removed);
    n->ps_pass = 0;
    n->ps_removed = 0;
    n->ps_next = wu_mono_ms() + n->cfg->payload_sweep_ms;
}

int nd_beat(worker *k, weft_error *err)
{
    nd_node *n = k->n;
    char host[256] = "?";
    json_object *j = json_object_new_object(), *types = json_object_new_array();
    size_t t;
    int rc;
    gethostname(host, sizeof host - 1);
    for (t = 0; t < n->nserves; t++)
        json_object_array_add(types, json_object_new_string(n->serves[t]));
    json_object_object_add(j, "types", types);
    json_object_object_add(j, "pid", json_object_new_int(getpid()));
    json_object_object_add(j, "host", json_object_new_string(host));
    json_object_object_add(j, "seen", json_object_new_int64(wu_now_ms()));
    rc = ST(k->st, daemon_beat, n->id, json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN),
            err);
    json_object_put(j);
    return rc;
}

static void keep(worker *k)
{
    nd_node *n = k->n;
    weft_error err = {0};
    st_lease renew[1024];
    int ok[1024], nr = 0, i;
    size_t t;

    /* leases of held tasks, but for young ones: the keeper comes again
     * within a third of a lease, well before they expire */
    pthread_mutex_lock(&n->mu);
    for (i = 0; i < n->nworkers; i++) {
        int j2;
        for (j2 = 0; j2 < n->workers[i].nleases && nr < 1024; j2++)
            if (wu_mono_ms() - n->workers[i].leases[j2].since >= n->cfg->lease_ms / 4)
                renew[nr++] = n->workers[i].leases[j2].l;
    }
    pthread_mutex_unlock(&n->mu);
    if (nr && ST(k->st, renew_many, renew, (size_t)nr, n->cfg->lease_ms, ok, &err) == 0) {
        for (i = 0; i < nr; i++)
            if (!ok[i])
                lg_log(WEFT_LOG_WARN,
                       LG_FIELDS(LG_STR("workflow", renew[i].workflow_id),
                                 LG_STR("task_id", renew[i].task_id)),
                       "lost its lease");
    } else if (nr && !ST(k->st, broken)) {
        lg_say(WEFT_LOG_WARN, "renewing %d lease(s): %s", nr, err.msg);
    }
    /* expired leases go back to their queues */
    for (t = 0; t < n->ntypes; t++) {
        char **exhausted = NULL;
        size_t ne = 0;
        int back = ST(k->st, reap, n->types[t], n->cfg->max_reaps, &exhausted, &ne, &err);
        if (back > 0) {
            mt_lease_reaps(n->metrics, back);
            lg_say(WEFT_LOG_INFO, "%d expired lease(s) of %s returned to the queue", back,
                   n->types[t]);
        }
        if (ne > 0) mt_lease_reaps(n->metrics, (long)ne);
        op_fail_reaped(&k->op, exhausted, ne, warn_reaped, n);
    }
    if (nd_beat(k, &err) == 0) nd_redis_fine(k);
    sweep_payloads(k);
    if (wu_mono_ms() >= n->forget_next) {
        /* the heartbeats of daemons long gone: every start that looks for a
         * type's daemon reads them all (served.h) */
        size_t gone = 0;
        n->forget_next = wu_mono_ms() + 60000;
        if (ST(k->st, daemons_forget, wu_now_ms() - ND_DAEMON_FORGET_MS, &gone, &err) == 0 && gone)
            lg_say(WEFT_LOG_INFO, "%zu daemon(s) not heard of for an hour forgotten", gone);
    }
}

void *nd_keeper_main(void *arg)
{
    worker *k = arg;
    nd_node *n = k->n;
    int64_t every = n->cfg->lease_ms / 3, last = 0;
    if (every > 1000) every = 1000;
    if (every < 50) every = 50;
    while (!n->stopping || __atomic_load_n(&n->running, __ATOMIC_ACQUIRE) > 0) {
        int64_t now = wu_mono_ms();
        if (now - last >= every) {
            keep(k);
            last = now;
        }
        nd_sleep_ms(20);
    }
    return NULL;
}
