/* Actors: the reference runtime's concurrency (LANGUAGE.md, "Actors"; docs/READINGS.md #20).
 *
 * `spawn f(args)` starts an actor running f(args) with its own state and heap; `send`, `receive`,
 * `join` and `self` are builtins. `jett run --workers N` runs the actors on N worker threads
 * that take them from one run queue; each actor is a coroutine with its own C stack, so an
 * actor that waits gives up its worker and may resume on another (migration), and a running
 * actor is preempted at a safe point once its 10 ms slice is over and another actor is ready.
 * Every worker is a registered profiler thread (runtime thread id = worker index); the running
 * actor's id is the task and actor id of what the worker records, and a worker with nothing to
 * run is in the waiting state.
 *
 * No Jett value is ever shared between actors: spawn's arguments, a message and join's result
 * are copied (a Jett allocation by the copying actor, at the call), and the copy changes hands
 * between heaps without an event (heap.c's detach and adopt). Globals are main's: another
 * actor may read only an immutable global holding an int, bool, nil or a string literal.
 */
#ifndef JETT_RUNTIME_ACTORS_H
#define JETT_RUNTIME_ACTORS_H

#include "interp.h"

#define JT_ACTOR_SLICE_NS 10000000ull /* a running actor's slice before preemption */
#define JT_MAX_ACTORS_ALIVE 10000u    /* actors not yet ended at once (spawn fails past it) */

struct jt_sched_config {
    uint32_t workers;  /* 1..JT_MAX_WORKERS */
    jettprof_run *run; /* NULL: not profiled */
    bool hook_heap;    /* memory mode: heaps report their events */
};

/* Runs the program with root (main's state, jt_rt_init'ed) as actor 0 on worker 0, the calling
 * thread; workers 1..N-1 are started and registered first. Returns the run's outcome: a
 * runtime error in any actor (the first one, in root->errmsg) or a deadlock is the run's
 * runtime error; otherwise main's. -errno in *setup_err (and no user code run) when a worker
 * could not be started or registered. */
enum jt_outcome jt_sched_run(struct jt_rt *root, const struct jt_sched_config *cfg,
                             int *setup_err);
/* Frees every actor but main's state, their stacks and undelivered messages (no events: after
 * the profile is final). Called by jt_rt_fini for the root. */
void jt_sched_free(struct jt_sched *s);

/* The builtins and the interpreter's hooks. Each reports its errors through jt_rt_error. */
jv jt_actor_spawn(struct jt_rt *rt, const struct jt_node *n);
/* spawn in steps, for the bytecode VM (jt_actor_spawn is these around the tree walker's
 * evaluation): whether this actor may spawn now (not in a global's initialiser), before any
 * argument is evaluated; an evaluated argument v (consumed) as the copy the new actor gets
 * (NIL after the error); and the start, with args (malloc'ed, f->nparams copies, all consumed,
 * the array freed or kept by the actor) the copies of n->a's arguments. */
bool jt_actor_spawn_allowed(struct jt_rt *rt, const struct jt_node *n);
jv jt_actor_spawn_copy(struct jt_rt *rt, const struct jt_node *at, jv v);
jv jt_actor_spawn_start(struct jt_rt *rt, const struct jt_node *n, jv *args);
jv jt_actor_send(struct jt_rt *rt, const struct jt_node *n, jv to, jv v);
jv jt_actor_receive(struct jt_rt *rt, const struct jt_node *n);
jv jt_actor_join(struct jt_rt *rt, const struct jt_node *n, jv id);
uint32_t jt_actor_id(const struct jt_rt *rt);
/* sleep(ms) once several actors exist: the actor parks and its worker runs others; true when
 * done here, false when the caller should block the thread as a lone program does. */
bool jt_actor_sleep(struct jt_rt *rt, const struct jt_node *n, int64_t ms);
/* Whether an actor other than main may read global n's value v (else a runtime error). */
bool jt_actor_may_read_global(struct jt_rt *rt, const struct jt_node *n, jv v);
/* The safe point's slow path when the worker's preemption word is raised. */
void jt_actor_poked(struct jt_rt *rt);
/* Around the run's shared outputs and runlog (a no-op while main is the only actor). */
void jt_actor_lock_shared(struct jt_rt *rt);
void jt_actor_unlock_shared(struct jt_rt *rt);

#endif
