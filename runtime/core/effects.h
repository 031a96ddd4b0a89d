/*
 * Applying a decision: the one place where the decider's actions
 * (decider.h, dec_out) turn into what happens outside the execution. A
 * queued task, an unqueued one, the execution's next look and its end
 * become queue steps saved with the execution (one fenced save, store.h);
 * a child to terminate, a parent to tell and a failure workflow to start
 * become cascades, run after that save, one after the other (a tree
 * thousands of levels deep costs no C stack per level). Prefix fx_.
 */
#ifndef WEFT_EFFECTS_H
#define WEFT_EFFECTS_H

#include "core/decider.h"
#include "core/ops.h"

/*
 * The queue steps of x's actions in o (malloc'd into *out, *n of them),
 * the last one when x is next due: a decider looks at x again at once when
 * follow (the change was made where no decider follows it) or something is
 * left to follow; else at its next deadline (timeouts, an inline task's
 * timer), within env->sweep_ms. Finding that deadline may time tasks out,
 * which adds their actions to o. Tasks leased eagerly (op_env.eager, up to
 * *room; room NULL = none) are listed in *eager (malloc'd, caller frees;
 * NULL when none), which the steps' lease tokens point into. 0 or
 * WEFT_ENOMEM.
 */
int fx_steps(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, int follow, st_step **out,
             size_t *n, size_t *room, st_lease **eager, size_t *neager);

/* Room for the steps and eager leases of a decision up to a fork of 16,
 * for a caller that applies them at once (the embedded engine): no
 * allocation (about 6 KB of stack). */
typedef struct fx_buf {
    st_step steps[17];
    st_lease leases[16];
} fx_buf;

/* fx_steps into buf when they fit (else allocated as there); release
 * them with fx_free. */
int fx_steps_in(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, int follow, fx_buf *buf,
                st_step **out, size_t *n, size_t *room, st_lease **eager, size_t *neager);
void fx_free(const fx_buf *buf, st_step *steps, st_lease *eager);

/*
 * After the save of x that o's actions came with: queue its cascades on
 * env (children to terminate; when x ended, its parent told and its
 * failure workflow started where env->cascade, else the parent's decider
 * woken) and tell env->hooks->ended. Best effort: what a crash loses the
 * sweeper repairs. fx_drain runs them.
 */
void fx_after(op_env *env, xc_exec *x, const dec_out *o);

/* Terminate execution id ("parent task canceled") as a cascade step. */
void fx_terminate_later(op_env *env, const char *id);

/* Run the queued cascades, and those they queue, until none is left
 * (only the outermost update does; nested ones leave theirs here). */
void fx_drain(op_env *env);

#endif
