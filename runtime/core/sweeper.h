/*
 * The sweeper's look at an execution that came due on the decider queue
 * (a timer, a timeout, a result, or nothing heard for sweep_ms): it
 * remaps control-flow tasks whose timer fired, reads the end of a child
 * whose notice was lost (and starts again a child whose start was lost),
 * queues again a task a crash left in no queue,
 * times out what is overdue and decides. The daemon's workers and the
 * embedded engine both look through here. Prefix sw_.
 */
#ifndef WEFT_SWEEPER_H
#define WEFT_SWEEPER_H

#include "core/ops.h"

/* An op_fn (ud unused): OP_NOCHANGE for an execution already ended. */
int sw_look(op_env *env, const dec_env *dec, xc_exec *x, dec_out *o, void *ud, weft_error *err);

#endif
