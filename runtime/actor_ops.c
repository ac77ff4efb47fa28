/* The actors' builtins (actors.h): spawn, send, receive, join, sleep among actors, the globals
 * rule, the preemption point and the shared outputs' lock, and the deep copies that are the only
 * way a value crosses between actors. The scheduler they wait on is actors.c. */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "actors_internal.h"
#include "call.h"

/* ---- copies ---------------------------------------------------------------------------- */

/* A deep copy of v in rt's heap (Jett allocations at the current call site), or false after
 * the runtime error. `what` names the operation in messages. */
static bool copy_value(struct jt_rt *rt, const struct jt_node *at, jv v, int depth, jv *out,
                       const char *what)
{
    *out = NIL;
    switch (v.k) {
    case JV_NIL: case JV_INT: case JV_BOOL:
        *out = v;
        return true;
    case JV_SECRET:
        jt_rt_error(rt, at, "%s: a secret cannot be copied to another actor", what);
        return false;
    case JV_STR: {
        const struct jt_str *x = (const struct jt_str *)v.u.o;
        return jt_new_str(rt, at, x->data, x->len, out, JV_STR);
    }
    case JV_LIST: {
        if (depth >= JT_MAX_COPY_DEPTH) {
            jt_rt_error(rt, at, "%s: a list nested more than %d deep cannot be copied", what,
                        JT_MAX_COPY_DEPTH);
            return false;
        }
        const struct jt_list *x = (const struct jt_list *)v.u.o;
        struct jt_list *l;
        if (jt_heap_list(&rt->heap, x->len, &l) < 0) {
            jt_rt_error(rt, at, "out of memory: cannot allocate a list of %" PRIu64 " slots",
                        x->len);
            return false;
        }
        *out = (jv){.k = JV_LIST, .u.o = &l->h};
        for (uint64_t i = 0; i < x->len; i++) {
            jv c;
            if (!copy_value(rt, at, x->items[i], depth + 1, &c, what)) {
                jv_release(&rt->heap, *out);
                *out = NIL;
                return false;
            }
            l->items[l->len++] = c;
        }
        return true;
    }
    default:
        jt_rt_error(rt, at, "%s: a %s cannot be copied", what, jt_kind_name(v.k));
        return false;
    }
}

/* ---- builtins ------------------------------------------------------------------------------ */

uint32_t jt_actor_id(const struct jt_rt *rt)
{
    return rt->actor ? rt->actor->id : 0u;
}

/* An actor id argument: its actor, or NULL after the runtime error. */
static struct jt_actor *actor_arg(struct jt_rt *rt, const struct jt_node *n, jv id,
                                  const char *what)
{
    struct jt_sched *s = rt->sched;
    if (id.k != JV_INT) {
        jt_rt_error(rt, n, "%s expects an actor id (int), got %s", what, jt_kind_name(id.k));
        return NULL;
    }
    pthread_mutex_lock(&s->mu);
    struct jt_actor *a = id.u.i >= 0 && (uint64_t)id.u.i < s->nactors ? s->actors[id.u.i] : NULL;
    pthread_mutex_unlock(&s->mu);
    if (!a)
        jt_rt_error(rt, n, "%s: no actor %" PRId64, what, id.u.i);
    return a;
}

bool jt_actor_spawn_allowed(struct jt_rt *rt, const struct jt_node *n)
{
    if (rt->init_frame) {
        jt_rt_error(rt, n, "spawn: actors start once main runs, not in a global's initialiser");
        return false;
    }
    return true;
}

jv jt_actor_spawn_copy(struct jt_rt *rt, const struct jt_node *at, jv v)
{
    jv c;
    if (!copy_value(rt, at, v, 0, &c, "spawn"))
        c = NIL;
    jv_release(&rt->heap, v);
    return c;
}

jv jt_actor_spawn(struct jt_rt *rt, const struct jt_node *n)
{
    const struct jt_node *call = n->a;
    const struct jt_fn *f = call->fn;
    if (!jt_actor_spawn_allowed(rt, n))
        return NIL;
    jv *args = calloc(f->nparams ? f->nparams : 1, sizeof *args);
    if (!args) {
        jt_rt_error(rt, n, "out of memory: cannot start an actor");
        return NIL;
    }
    uint32_t got = 0;
    for (; got < call->nkids; got++) {
        jv v = jt_eval(rt, call->kids[got]);
        if (rt->ctl)
            break;
        args[got] = jt_actor_spawn_copy(rt, call->kids[got], v);
        if (rt->ctl)
            break;
    }
    if (rt->ctl) {
        for (uint32_t i = 0; i < got; i++)
            jv_release(&rt->heap, args[i]);
        free(args);
        return NIL;
    }
    return jt_actor_spawn_start(rt, n, args);
}

jv jt_actor_spawn_start(struct jt_rt *rt, const struct jt_node *n, jv *args)
{
    struct jt_sched *s = rt->sched;
    const struct jt_node *call = n->a;
    const struct jt_fn *f = call->fn;
    uint32_t got = f->nparams;
    struct jt_rt *nrt = NULL;
    if (!rt->ctl) {
        nrt = calloc(1, sizeof *nrt);
        if (nrt) {
            nrt->prog = rt->prog;
            nrt->interrupt = rt->interrupt;
            nrt->pw = &jt_no_pending;
            nrt->poke = &jt_no_pending;
            nrt->root = rt->root;
            nrt->fn = rt->fn; /* an error binding the arguments shows the spawn */
            nrt->line = n->line;
            nrt->col = n->col;
            nrt->stack = malloc(sizeof(jv) * JT_STACK_SLOTS);
            nrt->frames = malloc(sizeof *nrt->frames * JT_MAX_DEPTH);
        }
        if (!nrt || !nrt->stack || !nrt->frames) {
            if (nrt) {
                free(nrt->stack);
                free(nrt->frames);
                free(nrt);
            }
            nrt = NULL;
            jt_rt_error(rt, n, "out of memory: cannot start an actor");
        }
    }
    if (rt->ctl) {
        for (uint32_t i = 0; i < got; i++)
            jv_release(&rt->heap, args[i]);
        free(args);
        return NIL;
    }
    for (uint32_t i = 0; i < f->nparams; i++)
        jt_heap_detach(&rt->heap, args[i]); /* the new actor's from now on */
    pthread_mutex_lock(&s->mu);
    struct jt_actor *a =
        s->alive < JT_MAX_ACTORS_ALIVE ? jt_sched_start(s, nrt, f, args, call) : NULL;
    uint32_t alive = s->alive;
    pthread_mutex_unlock(&s->mu);
    if (!a) {
        for (uint32_t i = 0; i < f->nparams; i++) {
            jt_heap_adopt(&rt->heap, args[i]);
            jv_release(&rt->heap, args[i]);
        }
        free(args);
        free(nrt->stack);
        free(nrt->frames);
        free(nrt);
        if (alive >= JT_MAX_ACTORS_ALIVE)
            jt_rt_error(rt, n, "spawn: %u actors are alive, the most a run may have",
                        JT_MAX_ACTORS_ALIVE);
        else
            jt_rt_error(rt, n, "out of memory: cannot start an actor");
        return NIL;
    }
    return mk_int(a->id);
}

jv jt_actor_send(struct jt_rt *rt, const struct jt_node *n, jv to, jv v)
{
    struct jt_sched *s = rt->sched;
    struct jt_actor *t = actor_arg(rt, n, to, "send");
    if (!t)
        return NIL;
    pthread_mutex_lock(&s->mu);
    bool ended = t->state == A_DONE;
    pthread_mutex_unlock(&s->mu);
    if (ended)
        return mk_bool(false); /* nothing copied for an actor that has ended */
    jv c;
    if (!copy_value(rt, n, v, 0, &c, "send"))
        return NIL;
    struct msg *m = malloc(sizeof *m);
    if (!m) {
        jv_release(&rt->heap, c);
        jt_rt_error(rt, n, "out of memory: cannot send a message");
        return NIL;
    }
    jt_heap_detach(&rt->heap, c);
    m->v = c;
    m->next = NULL;
    pthread_mutex_lock(&s->mu);
    ended = t->state == A_DONE;
    if (!ended) {
        if (t->mb_tail)
            t->mb_tail->next = m;
        else
            t->mb_head = m;
        t->mb_tail = m;
        if (t->state == A_RECV)
            jt_sched_queue(s, t);
    }
    pthread_mutex_unlock(&s->mu);
    if (ended) { /* it ended meanwhile: the copy is dropped where it was made */
        free(m);
        jt_heap_adopt(&rt->heap, c);
        jv_release(&rt->heap, c);
    }
    return mk_bool(!ended);
}

/* Waits (under s->mu, which it may drop and retake) until ready(a) holds. Returns false, with
 * the interrupt recorded and s->mu released, when the run was interrupted; an ended run
 * abandons the actor here. */
static bool wait_for(struct jt_rt *rt, bool (*ready)(const struct jt_actor *), enum want w)
{
    struct jt_sched *s = rt->sched;
    struct jt_actor *a = rt->actor;
    while (!ready(a)) {
        if (s->stop) {
            pthread_mutex_unlock(&s->mu);
            jt_sched_abandon(a);
        }
        if (__atomic_load_n(rt->interrupt, __ATOMIC_RELAXED)) {
            pthread_mutex_unlock(&s->mu);
            if (rt->ctl != CTL_ERROR)
                rt->ctl = CTL_INTERRUPT;
            return false;
        }
        a->want = w;
        pthread_mutex_unlock(&s->mu);
        jt_sched_yield(a);
        pthread_mutex_lock(&s->mu);
    }
    return true;
}

static bool has_mail(const struct jt_actor *a)
{
    return a->mb_head != NULL;
}

jv jt_actor_receive(struct jt_rt *rt, const struct jt_node *n)
{
    (void)n;
    struct jt_sched *s = rt->sched;
    struct jt_actor *a = rt->actor;
    pthread_mutex_lock(&s->mu);
    if (!wait_for(rt, has_mail, W_RECV))
        return NIL;
    struct msg *m = a->mb_head;
    a->mb_head = m->next;
    if (!a->mb_head)
        a->mb_tail = NULL;
    pthread_mutex_unlock(&s->mu);
    jv v = m->v;
    free(m);
    jt_heap_adopt(&rt->heap, v);
    return v;
}

static bool target_done(const struct jt_actor *a)
{
    return a->rt->sched->actors[a->join_target]->state == A_DONE;
}

jv jt_actor_join(struct jt_rt *rt, const struct jt_node *n, jv id)
{
    struct jt_sched *s = rt->sched;
    struct jt_actor *t = actor_arg(rt, n, id, "join");
    if (!t)
        return NIL;
    if (t == rt->actor) {
        jt_rt_error(rt, n, "join: an actor cannot wait for itself");
        return NIL;
    }
    pthread_mutex_lock(&s->mu);
    rt->actor->join_target = t->id;
    if (!wait_for(rt, target_done, W_JOIN))
        return NIL;
    bool interrupted = t->interrupted;
    pthread_mutex_unlock(&s->mu);
    if (interrupted) { /* no result to copy: the joiner unwinds the interrupt too */
        if (rt->ctl != CTL_ERROR)
            rt->ctl = CTL_INTERRUPT;
        return NIL;
    }
    /* Ended under the mutex: its result is no longer written, and copies only read it. */
    jv c;
    if (!copy_value(rt, n, t->result, 0, &c, "join"))
        return NIL;
    return c;
}

static bool woke(const struct jt_actor *a)
{
    return a->wake_ns <= jt_sched_now_ns();
}

bool jt_actor_sleep(struct jt_rt *rt, const struct jt_node *n, int64_t ms)
{
    (void)n;
    struct jt_sched *s = rt->sched;
    if (!s || !s->multi)
        return false;
    struct jt_actor *a = rt->actor;
    pthread_mutex_lock(&s->mu);
    a->wake_ns = jt_sched_now_ns() + (uint64_t)ms * 1000000ull;
    if (wait_for(rt, woke, W_SLEEP))
        pthread_mutex_unlock(&s->mu);
    jt_safe_point(rt);
    return true;
}

bool jt_actor_may_read_global(struct jt_rt *rt, const struct jt_node *n, jv v)
{
    const struct jt_global *g = &rt->prog->globals[n->slot];
    if (g->init->ival != 0) {
        jt_rt_error(rt, n, "cannot read global '%s' from actor %u: a var global belongs to "
                    "main (actor 0)", g->name, jt_actor_id(rt));
        return false;
    }
    if (v.k >= JV_STR && v.u.o->rc >= 0) {
        jt_rt_error(rt, n, "cannot read global '%s' from actor %u: its value is in main's heap "
                    "(pass it with spawn or send)", g->name, jt_actor_id(rt));
        return false;
    }
    return true;
}

void jt_actor_poked(struct jt_rt *rt)
{
    struct jt_sched *s = rt->sched;
    struct jt_actor *a = rt->actor;
    if (!s || !a || !a->worker)
        return;
    __atomic_store_n(&a->worker->poke, 0u, __ATOMIC_RELAXED);
    pthread_mutex_lock(&s->mu);
    if (s->stop) {
        pthread_mutex_unlock(&s->mu);
        jt_sched_abandon(a);
    }
    if (!s->rq_head) { /* nobody waits for a worker: the slice goes on */
        pthread_mutex_unlock(&s->mu);
        return;
    }
    a->want = W_PREEMPT;
    pthread_mutex_unlock(&s->mu);
    jt_sched_yield(a);
}

void jt_actor_lock_shared(struct jt_rt *rt)
{
    if (rt->sched && rt->sched->multi)
        pthread_mutex_lock(&rt->sched->shared_mu);
}

void jt_actor_unlock_shared(struct jt_rt *rt)
{
    if (rt->sched && rt->sched->multi)
        pthread_mutex_unlock(&rt->sched->shared_mu);
}
