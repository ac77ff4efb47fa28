/* The inline fast paths of jettprof.h (call-site enter, leave, memory hooks) against the plain
 * calls: the same nodes and the same record stream, and a call site that was filled by another
 * run, another thread's registration or another caller never yields a node that is not this
 * thread's. Read back from the ring as the daemon would. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "stream.h"

static struct jettprof_fast *fast_of(jettprof_thread *t)
{
    struct jettprof_fast *f = jettprof_thread_fast(t, JETTPROF_FAST_VERSION);
    cr_assert_not_null(f);
    return f;
}

/* The (parent, frame) of a node, from its definition in the stream. */
static void node_def(const struct stream *s, uint32_t node, uint32_t *parent, uint32_t *frame)
{
    for (size_t i = 0; i < ta_stream_count(s, JP_REC_NODE_DEF); i++) {
        const struct jp_rec_node_def *n = ta_stream_nth(s, JP_REC_NODE_DEF, i);
        if (n->node_id == node) {
            *parent = n->parent;
            *frame = n->frame_id;
            return;
        }
    }
    cr_assert_fail("node %u was never defined", node);
}

Test(fast, only_this_layout_is_handed_out)
{
    struct stream s;
    jettprof_run *run = ta_local_run(JETTPROF_MODE_MEMORY, &s);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    cr_assert_not_null(jettprof_thread_fast(t, JETTPROF_FAST_VERSION));
    cr_assert_null(jettprof_thread_fast(t, JETTPROF_FAST_VERSION + 1u));
    cr_assert_null(jettprof_thread_fast(t, 0));
    cr_assert_eq((void *)jettprof_stmt_pos(t), (void *)&fast_of(t)->pos_,
                 "the statement word is the fast path's");
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    ta_stream_free(&s);
}

Test(fast, a_site_resolves_the_same_nodes_as_plain_enter)
{
    struct stream s;
    jettprof_run *run = ta_local_run(JETTPROF_MODE_MEMORY, &s);
    uint32_t fa = ta_frame(run, "m", "a", 1), fb = ta_frame(run, "m", "b", 2);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    struct jettprof_fast *f = fast_of(t);
    struct jettprof_site main_a = {0}, a_b = {0}, a_a = {0};
    /* a -> b alternating with a -> a at depth 2 through their own sites: each site stays a
     * hit while the per-depth cache of the plain path would thrash. */
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(jettprof_enter_fast(f, &main_a, fa), 0);
        cr_assert_eq(ta_node_now(t, &s), 1);
        cr_assert_eq(jettprof_enter_fast(f, &a_b, fb), 0);
        cr_assert_eq(ta_node_now(t, &s), 2);
        jettprof_leave_fast(f);
        cr_assert_eq(jettprof_enter_fast(f, &a_a, fa), 0);
        cr_assert_eq(ta_node_now(t, &s), 3);
        jettprof_leave_fast(f);
        cr_assert_eq(ta_node_now(t, &s), 1);
        jettprof_leave_fast(f);
        cr_assert_eq(ta_node_now(t, &s), 0);
    }
    /* The plain calls agree with what the sites hold. */
    cr_assert_eq(jettprof_enter(t, fa), 0);
    cr_assert_eq(jettprof_enter(t, fb), 0);
    cr_assert_eq(ta_node_now(t, &s), 2);
    jettprof_leave(t);
    jettprof_leave(t);
    cr_assert_eq(ta_stream_count(&s, JP_REC_NODE_DEF), 3, "each (caller, frame) interned once");
    /* A site used from another caller is a miss that resolves the right node. */
    cr_assert_eq(jettprof_enter_fast(f, &main_a, fb), 0); /* b as a root: a new node */
    cr_assert_eq(ta_node_now(t, &s), 4);
    cr_assert_eq(jettprof_enter_fast(f, &main_a, fa), 0); /* then a under b */
    cr_assert_eq(ta_node_now(t, &s), 5);
    uint32_t parent, frame;
    node_def(&s, 5, &parent, &frame);
    cr_assert_eq(parent, 4);
    cr_assert_eq(frame, fa);
    jettprof_leave_fast(f);
    jettprof_leave_fast(f);
    jettprof_leave_fast(f); /* unbalanced: ignored, as by jettprof_leave */
    cr_assert_eq(ta_node_now(t, &s), 0);
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    ta_stream_free(&s);
}

/* The distinct entries a stamped site holds (no way of a stamped site is empty: the first fill
 * writes its entry into every way). */
static unsigned site_keys(const struct jettprof_site *site)
{
    unsigned n = 0;
    for (unsigned w = 0; w < JETTPROF_SITE_WAYS; w++) {
        cr_assert_neq(site->way_[w].key_, 0, "way %u of a stamped site is empty", w);
        unsigned j = 0;
        while (j < w && site->way_[j].key_ != site->way_[w].key_)
            j++;
        n += j == w;
    }
    return n;
}

/* A site reached from as many callers as it has ways, all of whose node ids fall in the same
 * way (1, 1 + WAYS, 1 + 2 WAYS, ...): none throws another out. Each stays in the site, found
 * outside its own way without a table lookup and swapped back into it, so the next enter from
 * that caller is an inline hit; and every enter resolves the node the plain call does. */
Test(fast, callers_sharing_a_way_all_stay_in_the_site)
{
    struct stream s;
    jettprof_run *run = ta_local_run(JETTPROF_MODE_MEMORY, &s);
    enum { N = JETTPROF_SITE_WAYS };
    const uint32_t roots = 1u + (N - 1u) * JETTPROF_SITE_WAYS;
    uint32_t fr[1u + (N - 1u) * JETTPROF_SITE_WAYS];
    for (uint32_t i = 0; i < roots; i++) {
        char name[16];
        snprintf(name, sizeof name, "r%u", i);
        fr[i] = ta_frame(run, "m", name, i + 1u);
    }
    uint32_t callee = ta_frame(run, "m", "callee", 999);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    struct jettprof_fast *f = fast_of(t);
    for (uint32_t i = 0; i < roots; i++) { /* (root, r_i) is node i + 1 */
        cr_assert_eq(jettprof_enter(t, fr[i]), 0);
        cr_assert_eq(ta_node_now(t, &s), i + 1u);
        jettprof_leave(t);
    }
    struct jettprof_site site = {0};
    uint32_t got[3][N];
    for (int round = 0; round < 3; round++) {
        for (uint32_t k = 0; k < N; k++) {
            uint32_t caller = 1u + k * JETTPROF_SITE_WAYS;
            cr_assert_eq(jettprof_enter(t, fr[caller - 1u]), 0);
            cr_assert_eq(ta_node_now(t, &s), caller);
            cr_assert_eq(jettprof_enter_fast(f, &site, callee), 0);
            got[round][k] = ta_node_now(t, &s);
            cr_assert_eq(site.way_[caller & (JETTPROF_SITE_WAYS - 1u)].key_,
                         (uint64_t)caller << 32 | callee, "round %d: caller %u is in its way",
                         round, caller);
            uint32_t parent, frame;
            node_def(&s, got[round][k], &parent, &frame);
            cr_assert_eq(parent, caller);
            cr_assert_eq(frame, callee);
            jettprof_leave_fast(f);
            jettprof_leave(t);
        }
        cr_assert_eq(site_keys(&site), N, "round %d: the site holds all %d callers", round, N);
    }
    for (uint32_t k = 0; k < N; k++)
        cr_assert_eq(got[2][k], got[0][k]);
    cr_assert_eq(ta_stream_count(&s, JP_REC_NODE_DEF), roots + N, "each (caller, frame) once");
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    ta_stream_free(&s);
}

/* One site reached from four callers (as a recursive call site is, its caller another node
 * at each depth) keeps all four: after one round each caller's way holds its node, so the
 * second round takes the inline path every time, and resolves the same nodes. */
Test(fast, a_site_keeps_one_way_per_caller)
{
    struct stream s;
    jettprof_run *run = ta_local_run(JETTPROF_MODE_MEMORY, &s);
    uint32_t fr = ta_frame(run, "m", "rec", 1);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    struct jettprof_fast *f = fast_of(t);
    struct jettprof_site root = {0}, self = {0};
    uint32_t got[2][4];
    for (int round = 0; round < 2; round++) {
        cr_assert_eq(jettprof_enter_fast(f, &root, fr), 0); /* node 1 */
        for (int d = 0; d < 4; d++) {
            uint32_t caller = ta_node_now(t, &s);
            if (round == 1) {
                unsigned w = caller & (JETTPROF_SITE_WAYS - 1u);
                cr_assert_eq(self.way_[w].key_, (uint64_t)caller << 32 | fr,
                             "caller %u's way was kept", caller);
            }
            cr_assert_eq(jettprof_enter_fast(f, &self, fr), 0); /* rec under rec: 2, 3, ... */
            got[round][d] = ta_node_now(t, &s);
        }
        for (int d = 0; d < 5; d++)
            jettprof_leave_fast(f);
        cr_assert_eq(ta_node_now(t, &s), 0);
    }
    for (int d = 0; d < 4; d++)
        cr_assert_eq(got[1][d], got[0][d], "depth %d: %u then %u", d, got[0][d], got[1][d]);
    cr_assert_eq(ta_stream_count(&s, JP_REC_NODE_DEF), 5, "each (caller, frame) interned once");
    jettprof_thread_unregister(t);
    /* Another registration's use of the site drops every way the first one left. */
    cr_assert_eq(jettprof_thread_register(run, 2, &t), 0);
    f = fast_of(t);
    cr_assert_eq(jettprof_enter_fast(f, &self, fr), 0); /* a miss (another stamp) */
    cr_assert_eq(site_keys(&self), 1, "only the new registration's entry is left");
    jettprof_leave_fast(f);
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    ta_stream_free(&s);
}

/* Run 2 interns the same frames but creates its nodes in another order, so the key a site
 * holds from run 1 names a different node there. */
Test(fast, a_site_reused_after_its_run_ended_is_a_miss)
{
    struct stream s1, s2;
    jettprof_run *r1 = ta_local_run(JETTPROF_MODE_MEMORY, &s1);
    uint32_t fa = ta_frame(r1, "m", "a", 1), fb = ta_frame(r1, "m", "b", 2);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(r1, 1, &t), 0);
    struct jettprof_site site = {0};
    cr_assert_eq(jettprof_enter_fast(fast_of(t), &site, fa), 0);
    cr_assert_eq(ta_node_now(t, &s1), 1, "(root, a) is node 1 in run 1");
    jettprof_leave_fast(fast_of(t));
    jettprof_thread_unregister(t);
    jp_agent_local_end(r1, JETTPROF_TERM_RETURNED);
    ta_stream_free(&s1);

    jettprof_run *r2 = ta_local_run(JETTPROF_MODE_MEMORY, &s2);
    cr_assert_eq(ta_frame(r2, "m", "a", 1), fa);
    cr_assert_eq(ta_frame(r2, "m", "b", 2), fb);
    cr_assert_eq(jettprof_thread_register(r2, 1, &t), 0);
    cr_assert_eq(jettprof_enter(t, fb), 0); /* (root, b) takes node 1 in run 2 */
    jettprof_leave(t);
    cr_assert_eq(jettprof_enter_fast(fast_of(t), &site, fa), 0);
    uint32_t n = ta_node_now(t, &s2);
    cr_assert_eq(n, 2, "run 1's node for (root, a) is run 2's (root, b): never reused");
    uint32_t parent, frame;
    node_def(&s2, n, &parent, &frame);
    cr_assert_eq(parent, 0);
    cr_assert_eq(frame, fa);
    jettprof_leave_fast(fast_of(t));
    jettprof_thread_unregister(t);
    jp_agent_local_end(r2, JETTPROF_TERM_RETURNED);
    ta_stream_free(&s2);
}

struct site_user {
    jettprof_run *run;
    uint32_t thread_id, first, second; /* frames entered: first (plain), then second (site) */
    struct jettprof_site *site;
    struct stream *s;
    uint32_t node; /* out: where the site's enter put the thread */
};

static void *use_site(void *arg)
{
    struct site_user *u = arg;
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(u->run, u->thread_id, &t), 0);
    if (u->first) {
        cr_assert_eq(jettprof_enter(t, u->first), 0);
        jettprof_leave(t);
    }
    cr_assert_eq(jettprof_enter_fast(fast_of(t), u->site, u->second), 0);
    u->node = ta_node_now(t, u->s);
    jettprof_leave_fast(fast_of(t));
    jettprof_thread_unregister(t);
    return NULL;
}

/* Two runs live at once, one thread in each: a site filled by the first thread is a miss for
 * the second, whose run numbers its nodes differently. */
Test(fast, a_site_filled_by_another_thread_is_a_miss)
{
    struct stream s1, s2;
    jettprof_run *r1 = ta_local_run(JETTPROF_MODE_MEMORY, &s1);
    jettprof_run *r2 = ta_local_run(JETTPROF_MODE_MEMORY, &s2);
    uint32_t fa = ta_frame(r1, "m", "a", 1);
    cr_assert_eq(ta_frame(r2, "m", "a", 1), fa);
    uint32_t fb = ta_frame(r2, "m", "b", 2);
    struct jettprof_site site = {0};
    struct site_user u1 = {r1, 1, 0, fa, &site, &s1, 0};
    struct site_user u2 = {r2, 2, fb, fa, &site, &s2, 0};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, use_site, &u1), 0);
    pthread_join(th, NULL);
    cr_assert_eq(u1.node, 1);
    cr_assert_eq(pthread_create(&th, NULL, use_site, &u2), 0);
    pthread_join(th, NULL);
    cr_assert_eq(u2.node, 2, "the first thread's node 1 is (root, b) in the second's run");
    uint32_t parent, frame;
    node_def(&s2, u2.node, &parent, &frame);
    cr_assert_eq(frame, fa);
    jp_agent_local_end(r1, JETTPROF_TERM_RETURNED);
    jp_agent_local_end(r2, JETTPROF_TERM_RETURNED);
    ta_stream_free(&s1);
    ta_stream_free(&s2);
}

/* Two local memory runs driven side by side from this thread with the same program: one
 * through the plain calls, one through the fast paths. Each run has its own thread. */
struct twins {
    struct stream sp, sf;
    jettprof_run *rp, *rf;
    jettprof_thread *tp, *tf;
    struct jettprof_fast *f; /* tf's */
    uint32_t frame;          /* the same id in both */
};

static void twins_start(struct twins *w, const char *fn, uint32_t thread_id)
{
    w->rp = ta_local_run(JETTPROF_MODE_MEMORY, &w->sp);
    w->rf = ta_local_run(JETTPROF_MODE_MEMORY, &w->sf);
    w->frame = ta_frame(w->rp, "m", fn, 1);
    cr_assert_eq(ta_frame(w->rf, "m", fn, 1), w->frame);
    cr_assert_eq(jettprof_thread_register(w->rp, thread_id, &w->tp), 0);
    cr_assert_eq(jettprof_thread_register(w->rf, thread_id, &w->tf), 0);
    w->f = fast_of(w->tf);
}

static void twins_end(struct twins *w)
{
    jettprof_thread_unregister(w->tp);
    jettprof_thread_unregister(w->tf);
    jp_agent_local_end(w->rp, JETTPROF_TERM_RETURNED);
    jp_agent_local_end(w->rf, JETTPROF_TERM_RETURNED);
    ta_stream_free(&w->sp);
    ta_stream_free(&w->sf);
}

/* One site for a recursive call: every level has another caller node, so every level is a
 * miss that resolves its own node, past the truncation at 128, and the unwinding is exact. */
Test(fast, recursion_through_one_site_matches_plain_calls)
{
    struct twins w;
    twins_start(&w, "rec", 1);
    struct jettprof_fast *f = w.f;
    jettprof_thread *tp = w.tp, *tf = w.tf;
    uint32_t fr = w.frame;
    struct jettprof_site site = {0};
    for (int rep = 0; rep < 2; rep++) {
        for (int d = 1; d <= 200; d++) {
            cr_assert_eq(jettprof_enter(tp, fr), 0);
            cr_assert_eq(jettprof_enter_fast(f, &site, fr), 0);
            jettprof_stmt(tp, (uint32_t)d, 2);
            jettprof_stmt_set(jettprof_stmt_pos(tf), (uint32_t)d, 2);
            cr_assert_eq(ta_node_now(tf, &w.sf), ta_node_now(tp, &w.sp), "depth %d", d);
        }
        for (int d = 200; d >= 1; d--) {
            jettprof_leave(tp);
            jettprof_leave_fast(f);
            cr_assert_eq(ta_node_now(tf, &w.sf), ta_node_now(tp, &w.sp), "back to depth %d",
                         d - 1);
            if (d - 1 >= 1 && d - 1 <= 128)
                cr_assert_eq(f->pos_.line, (uint32_t)(d - 1), "the caller's statement");
        }
    }
    cr_assert_eq(ta_stream_count(&w.sf, JP_REC_NODE_DEF), 129);
    twins_end(&w);
}

/* The body of a memory record (after its header), to compare streams. */
static int same_mem_records(const struct stream *a, const struct stream *b)
{
    size_t i = 0, j = 0;
    for (;;) {
        while (i < a->n && a->recs[i].type != JP_REC_ALLOC && a->recs[i].type != JP_REC_RESIZE &&
               a->recs[i].type != JP_REC_FREE && a->recs[i].type != JP_REC_EXEC)
            i++;
        while (j < b->n && b->recs[j].type != JP_REC_ALLOC && b->recs[j].type != JP_REC_RESIZE &&
               b->recs[j].type != JP_REC_FREE && b->recs[j].type != JP_REC_EXEC)
            j++;
        if (i == a->n || j == b->n)
            return i == a->n && j == b->n;
        if (a->recs[i].size != b->recs[j].size ||
            memcmp(ta_rec_at(a, i), ta_rec_at(b, j), a->recs[i].size) != 0)
            return 0;
        i++;
        j++;
    }
}

/* The same program through the plain hooks and through the inline ones: the same records, the
 * same ids, the same counters; set_task re-announces the identity before the next event. */
Test(fast, inline_hooks_record_what_the_plain_hooks_record)
{
    struct twins w;
    twins_start(&w, "a", 3);
    struct jettprof_fast *f = w.f;
    jettprof_thread *tp = w.tp, *tf = w.tf;
    uint32_t fa = w.frame;
    struct jettprof_site site = {0};
    uint64_t idp[64], idf[64];
    for (int k = 0; k < 64; k++) {
        if (k == 20) {
            jettprof_set_task(tp, 9, 4);
            jettprof_set_task(tf, 9, 4);
        }
        cr_assert_eq(jettprof_enter(tp, fa), 0);
        cr_assert_eq(jettprof_enter_fast(f, &site, fa), 0);
        cr_assert_eq(jettprof_alloc(tp, (uint64_t)k, &idp[k]), 0);
        cr_assert_eq(jettprof_alloc_fast(f, (uint64_t)k, &idf[k]), 0);
        cr_assert_eq(idp[k], idf[k]);
        if (k % 3 == 0) {
            cr_assert_eq(jettprof_resize(tp, idp[k], (uint64_t)k, 2u * (uint64_t)k), 0);
            cr_assert_eq(jettprof_resize_fast(f, idf[k], (uint64_t)k, 2u * (uint64_t)k), 0);
        }
        jettprof_leave(tp);
        jettprof_leave_fast(f);
        if (k % 2 == 1) {
            uint64_t sz = (uint64_t)(k - 1) * ((k - 1) % 3 == 0 ? 2u : 1u);
            cr_assert_eq(jettprof_free(tp, idp[k - 1], sz), 0);
            cr_assert_eq(jettprof_free_fast(f, idf[k - 1], sz), 0);
        }
    }
    cr_assert_eq(jettprof_alloc_id(tp, 5000, 7), 0);
    cr_assert_eq(jettprof_alloc_id_fast(f, 5000, 7), 0);
    cr_assert_eq(jettprof_alloc_fast(f, 1, NULL), 0, "no id wanted");
    cr_assert_eq(jettprof_alloc(tp, 1, NULL), 0);
    ta_stream_drain(&w.sp);
    ta_stream_drain(&w.sf);
    cr_assert_gt(ta_stream_count(&w.sf, JP_REC_ALLOC), 64);
    cr_assert_eq(ta_stream_count(&w.sf, JP_REC_EXEC), 2, "one identity, then the task's");
    cr_assert(same_mem_records(&w.sp, &w.sf));
    struct jp_rec_counters cp, cf;
    jp_agent_counters(w.rp, &cp);
    jp_agent_counters(w.rf, &cf);
    cr_assert_eq(memcmp(&cp, &cf, sizeof cp), 0, "the same counters");
    twins_end(&w);
}

struct second {
    jettprof_run *run;
    int allocs;
};

static void *second_thread(void *arg)
{
    struct second *x = arg;
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(x->run, 2, &t), 0);
    struct jettprof_fast *f = fast_of(t);
    for (int i = 0; i < x->allocs; i++) {
        uint64_t id;
        cr_assert_eq(jettprof_alloc_fast(f, 200, &id), 0);
    }
    jettprof_thread_unregister(t);
    return NULL;
}

/* Walks the stream's allocations, each charged to the identity of the last EXEC before it:
 * the owner (thread 1) allocates 100 bytes, the second thread (2) 200. Every id in 1..total
 * appears once. Returns how many allocations there were. */
static size_t check_charges(const struct stream *s, uint64_t total)
{
    uint8_t *seen = calloc(total + 1, 1);
    cr_assert_not_null(seen);
    uint32_t who = JP_ID_UNAVAILABLE;
    size_t allocs = 0;
    for (size_t i = 0; i < s->n; i++) {
        const struct jp_rec_hdr *h = ta_rec_at(s, i);
        if (h->type == JP_REC_EXEC)
            who = ((const struct jp_rec_exec *)(const void *)h)->runtime_thread_id;
        if (h->type != JP_REC_ALLOC)
            continue;
        const struct jp_rec_alloc *a = (const void *)h;
        allocs++;
        cr_assert(a->allocation_id >= 1 && a->allocation_id <= total);
        cr_assert_eq(seen[a->allocation_id], 0, "id %llu twice",
                     (unsigned long long)a->allocation_id);
        seen[a->allocation_id] = 1;
        cr_assert_eq(who, a->size == 100 ? 1u : 2u, "allocation %zu charged to thread %u",
                     allocs, who);
    }
    free(seen);
    return allocs;
}

/* Every allocation record is charged to the thread that made it: after a second thread pushed
 * under its own identity, the first thread's inline hooks (which, on a local run's shared main
 * ring, take the plain calls) announce the first thread again first. */
Test(fast, another_producer_never_takes_the_owners_identity)
{
    struct stream s;
    jettprof_run *run = ta_local_run(JETTPROF_MODE_MEMORY, &s);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    struct jettprof_fast *f = fast_of(t);
    uint64_t id;
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 4; i++)
            cr_assert_eq(jettprof_alloc_fast(f, 100, &id), 0);
        struct second x = {run, 3};
        pthread_t th;
        cr_assert_eq(pthread_create(&th, NULL, second_thread, &x), 0);
        pthread_join(th, NULL);
    }
    for (int i = 0; i < 4; i++)
        cr_assert_eq(jettprof_alloc_fast(f, 100, &id), 0);
    ta_stream_drain(&s);
    cr_assert_eq(check_charges(&s, 16 + 9), 16 + 9);
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    ta_stream_free(&s);
}

/* A full ring: the inline hook takes the plain path, which waits its bounded time, drops and
 * counts, exactly as the plain hook would. */
Test(fast, full_ring_drops_and_counts_like_the_plain_hook)
{
    struct stream s;
    struct jettprof_config c = ta_config(JETTPROF_MODE_MEMORY);
    c.ring_slots = 64;
    jettprof_run *run = NULL;
    cr_assert_eq(jp_agent_start_local(&c, 0, &run), 0);
    ta_stream_open(&s, run);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    struct jettprof_fast *f = fast_of(t);
    int dropped = 0;
    uint64_t last = 0;
    for (int i = 0; i < 200; i++) {
        uint64_t id = 0;
        int r = jettprof_alloc_fast(f, 8, &id);
        cr_assert(r == 0 || r == -ENOBUFS);
        cr_assert_eq(id, last + 1, "an id is assigned even when the event is dropped");
        last = id;
        dropped += r == -ENOBUFS;
    }
    cr_assert_gt(dropped, 0);
    struct jp_rec_counters k;
    jp_agent_counters(run, &k);
    cr_assert_eq(k.lost_records, (uint64_t)dropped);
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    ta_stream_free(&s);
}

struct churn {
    jettprof_run *run;
    int rounds;
};

static void *churn_thread(void *arg)
{
    struct churn *c = arg;
    for (int r = 0; r < c->rounds; r++) {
        struct second x = {c->run, 5};
        second_thread(&x);
    }
    return NULL;
}

/* One thread allocates through the inline hooks while another keeps registering,
 * allocating and unregistering: every record of both is in the stream once, none overwritten,
 * each under its own thread's identity. */
Test(fast, owner_and_churning_producer_lose_nothing)
{
    struct stream s;
    struct jettprof_config c = ta_config(JETTPROF_MODE_MEMORY);
    c.ring_slots = 1u << 16;
    jettprof_run *run = NULL;
    cr_assert_eq(jp_agent_start_local(&c, 0, &run), 0);
    ta_stream_open(&s, run);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    struct jettprof_fast *f = fast_of(t);
    enum { OWNER = 20000, ROUNDS = 200 };
    struct churn ch = {run, ROUNDS};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, churn_thread, &ch), 0);
    for (int i = 0; i < OWNER; i++) {
        uint64_t id;
        cr_assert_eq(jettprof_alloc_fast(f, 100, &id), 0);
    }
    pthread_join(th, NULL);
    ta_stream_drain(&s);
    const uint64_t total = OWNER + ROUNDS * 5;
    cr_assert_eq(check_charges(&s, total), total, "every allocation of both threads is there");
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    ta_stream_free(&s);
}
