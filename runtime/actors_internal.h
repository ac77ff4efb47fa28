/* The actor scheduler's internals, shared by its two files: actors.c (workers, the run queue,
 * switching, the slice ticker, the run's start and end) and actor_ops.c (the builtins and the
 * copies that cross between actors). Nothing here is used elsewhere. Locking: actors.c's top
 * comment. */
#ifndef JETT_RUNTIME_ACTORS_INTERNAL_H
#define JETT_RUNTIME_ACTORS_INTERNAL_H

#include <pthread.h>
#include <ucontext.h>

#include "actors.h"

enum astate { A_RUNNABLE, A_RUNNING, A_RECV, A_JOIN, A_SLEEP, A_DONE };
enum want { W_NONE, W_PREEMPT, W_RECV, W_JOIN, W_SLEEP, W_DONE, W_ABANDON };

struct msg {
    jv v; /* detached from the sender's heap: in no heap until received */
    struct msg *next;
};

struct jt_worker;
struct jt_actor {
    uint32_t id;
    enum astate state;
    enum want want;
    struct jt_rt *rt; /* main: the root; else its own */
    ucontext_t ctx;
    void *stack;
    size_t stack_len;
    struct jt_worker *worker, *last_worker;
    const struct jt_fn *fn; /* spawned: the function and its detached arguments */
    jv *args;
    const struct jt_node *at;
    struct msg *mb_head, *mb_tail;
    uint32_t join_target;
    uint64_t wake_ns;
    jv result; /* in its own heap once it ended, for join's copies */
    bool interrupted; /* it ended unwinding an interrupt: it has no result */
    struct jt_actor *rq_next;
    void *asan_fake;
    void *tsan_fiber;
};

struct jt_worker {
    struct jt_sched *s;
    uint32_t index;
    pthread_t th;
    bool started;
    jettprof_thread *t;
    const uint32_t *pw;
    struct jettprof_fast *pf;
    struct jettprof_pos *stmt_pos;
    ucontext_t ctx;
    uint32_t poke;     /* raised by the ticker (slice over) and at the end of the run */
    uint64_t switches; /* actors switched in: the ticker's view of a slice (relaxed) */
    uint64_t seen;     /* ticker-only */
    struct jt_actor *owner; /* whose call stack the agent handle holds ... */
    uint32_t held;          /* ... at this depth */
    const void *asan_bottom;
    size_t asan_size;
    void *asan_fake;
    void *tsan_fiber; /* the worker's own thread */
};

struct jt_sched {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_mutex_t shared_mu; /* the root's outputs and runlog */
    struct jt_actor **actors;  /* by id */
    uint32_t nactors, cap;
    struct jt_actor *rq_head, *rq_tail;
    struct jt_worker *w;
    uint32_t nw;
    uint32_t running, sleeping, alive, ready;
    int setup_err;
    bool multi; /* a second actor was spawned: switches, locks and the ticker are live */
    bool stop;  /* the run is over: nothing more is switched in */
    bool interrupt_woken;
    bool failed;
    struct jp_buf first_err;
    pthread_t ticker;
    bool ticker_on;
    uint32_t ticker_stop;
    struct jt_rt *root;
    jettprof_run *run;
    bool hook_heap;
};

/* actors.c, for actor_ops.c. Under s->mu: jt_sched_queue, jt_sched_start. */
uint64_t jt_sched_now_ns(void);
void jt_sched_queue(struct jt_sched *s, struct jt_actor *a); /* runnable, at the queue's end */
/* The actor's side of a switch: back to its worker, which applies a->want; returns when a
 * worker (maybe another) resumes it. */
void jt_sched_yield(struct jt_actor *a);
/* Leaves for good without unwinding (the run is over). */
void jt_sched_abandon(struct jt_actor *a) __attribute__((noreturn));
/* A spawned actor running f(args) (args detached, consumed) on its own state, queued; the first
 * spawn starts the slice ticker. NULL when out of memory. */
struct jt_actor *jt_sched_start(struct jt_sched *s, struct jt_rt *rt, const struct jt_fn *f,
                                jv *args, const struct jt_node *at);

#endif
