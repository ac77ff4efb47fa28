/* Private to engine/: the engine's accounting rules, each written once, and the
 * one-pass event paths built on them.
 *
 * A rule is what one event does to the run's counters, tables, live bytes and peak: an
 * allocation counted and made live, bytes charged or given back, a free, a CPU sample counted
 * and attributed. Each is one inline function below, and every path that applies it calls it:
 * the general paths (jpe_on_alloc_general, jpe_on_resize, jpe_on_free_general in memory.c;
 * jpe_on_cpu_sample_general in cpu.c) and the one-pass paths here, which the slot entry (feed.c)
 * runs without a call. A one-pass path only adds what makes it fast: it tests, before anything
 * changes, that its event is the common case (so the lookups and notes the general path makes
 * are known no-ops) and then applies the same rules in the general path's order; any other
 * event goes to the general path whole. jp_engine_set_event_fast_paths turns the one-pass
 * paths off so tests and fuzzers can compare the two.
 */
#ifndef JETTPROF_ENGINE_ACCOUNT_H
#define JETTPROF_ENGINE_ACCOUNT_H

#include "live.h"

/* ---- every event ------------------------------------------------------------------------- */

/* An event attributed to stored node n: a stack that was cut (a <truncated-stack> leaf)
 * counts in truncated_stacks and makes the profile partial, whatever the event. */
static inline void stack_note(struct jp_engine *e, const struct jp_node *n)
{
    e->truncated_stacks += n->trunc; /* 0 or 1 */
}

/* ---- memory mode -------------------------------------------------------------------------- */

/* The last interval now ends at hi: the next id after it extends it, unless that is
 * UINT64_MAX, which is never in an interval (seen_max holds it). While seen_next is set, the
 * last interval's end is seen_next - 1 and its stored hi may lag: seen_settle writes it before
 * anything reads the history (memory.c), so the common allocation stores one word. */
static inline void seen_extend(struct jp_engine *e, uint64_t hi)
{
    if (__builtin_expect(hi + 1u < UINT64_MAX, 1)) {
        e->seen_next = hi + 1u;
    } else {
        e->seen[e->nseen - 1u].hi = hi;
        e->seen_next = 0;
    }
}

/* A creation chain given as index + 1 (0: none, an event without detail), NULL for none. */
static inline struct jp_chain *chain_at(struct jp_engine *e, uint32_t chain)
{
    return chain ? &e->chains[chain - 1u] : NULL;
}

/* The chain of stored node n (its creation chain when the event creates). Never NULL, which
 * the compiler is told, so the rules' tests for no chain fold away on a path that has one. */
static inline struct jp_chain *node_chain(struct jp_engine *e, const struct jp_node *n)
{
    struct jp_chain *c = &e->chains[n->chain];
    if (!c)
        __builtin_unreachable();
    return c;
}

/* Live bytes (and, by objs, live allocations) of a creation chain change only through here,
 * so the chain takes its peak snapshot first (the site's live figures are its chains' sums). */
static inline void chain_live(struct jp_engine *e, struct jp_chain *c, uint64_t add,
                              uint64_t sub, int objs)
{
    if (c->stamp != e->peak_epoch) {
        c->snap = c->live;
        c->stamp = e->peak_epoch;
    }
    c->live = c->live + add - sub;
    c->live_count += (uint32_t)objs;
}

/* Bytes of allocation pressure where they happened (an allocation's size, a resize's growth):
 * in total, and at chain c (NULL: the event has no detail). */
static inline void mem_charge(struct jp_engine *e, struct jp_chain *c, uint64_t bytes)
{
    e->allocated_bytes += bytes;
    if (c) {
        c->allocated += bytes;
        e->attributed_allocated += bytes;
    }
}

/* An allocation of size bytes, created with chain c (NULL: none), is counted; tracking it
 * live is mem_live_add's, once the live tables hold it. */
static inline void mem_count_alloc(struct jp_engine *e, struct jp_chain *c, uint64_t size)
{
    e->allocation_count++;
    if (c)
        c->count++;
    mem_charge(e, c, size);
}

/* Live bytes rise by bytes (a new tracked allocation, objs 1; a resize's growth, objs 0) for
 * creation chain c (NULL: none) and in total; a rise past the peak opens a new peak epoch. */
static inline void mem_live_add(struct jp_engine *e, struct jp_chain *c, uint64_t bytes,
                                uint32_t objs)
{
    if (c)
        chain_live(e, c, bytes, 0, (int)objs);
    e->live_bytes += bytes;
    if (e->live_bytes > e->tl_live_max) { /* at most the peak: the peak is tested only then */
        e->tl_live_max = e->live_bytes;
        if (e->live_bytes > e->peak_bytes) {
            e->peak_bytes = e->live_bytes;
            e->peak_epoch++;
        }
    }
    e->live_count += objs;
}

/* Live bytes fall by bytes (a free, objs 1; a resize's shrink, objs 0) for creation chain c
 * (NULL: none) and in total. */
static inline void mem_live_sub(struct jp_engine *e, struct jp_chain *c, uint64_t bytes,
                                uint32_t objs)
{
    if (c)
        chain_live(e, c, 0, bytes, -(int)objs);
    e->live_bytes -= bytes;
    e->live_count -= objs;
}

/* Bytes given back (a free, a resize's shrink) by an allocation created with chain c (NULL:
 * none): freed in total and at the creation site (the view has no per-chain freed bytes). */
static inline void mem_freed(struct jp_engine *e, struct jp_chain *c, uint64_t bytes)
{
    e->freed_bytes += bytes;
    if (c)
        e->funcs[c->func].freed += bytes;
}

/* A tracked allocation of size bytes created with chain c (NULL: none) is freed; the caller
 * has taken it out of the live tables. */
static inline void mem_free(struct jp_engine *e, struct jp_chain *c, uint64_t size)
{
    mem_freed(e, c, size);
    mem_live_sub(e, c, size, 1);
}

/* ---- CPU mode ----------------------------------------------------------------------------- */

/* A sample the producer recorded, in its state (jett or another). */
static inline void cpu_count(struct jp_engine *e, uint32_t state)
{
    e->state_samples[state]++;
    e->producer_records++;
}

/* A jett sample attributed to its stored leaf node. Self, inclusive and chain counts are
 * settled per node when a view is taken (jpe_cpu_settle): a sample costs one counter on its leaf
 * node, not a walk to the root. */
static inline void cpu_attribute(struct jp_engine *e, struct jp_node *leaf)
{
    stack_note(e, leaf);
    e->attributed_stacks++;
    leaf->samples++;
    e->cpu_dirty = true;
}

/* The way of leaf's function that caches the hot line of statement (line, col) (struct
 * jp_func's hot_way): hot-line index + 1, 0 none. */
static inline uint32_t *hot_way(struct jp_engine *e, const struct jp_node *leaf, uint32_t line,
                                uint32_t col)
{
    return &e->funcs[leaf->func].hot_way[(line ^ col) & (JP_FUNC_HOT_WAYS - 1u)];
}

/* The hot line way value w names when it is statement (line, col)'s, else NULL. */
static inline struct jp_hot *hot_at(struct jp_engine *e, uint32_t w, uint32_t line,
                                    uint32_t col)
{
    if (!w)
        return NULL;
    struct jp_hot *h = &e->hots[w - 1u];
    return h->line == line && h->col == col ? h : NULL;
}

/* ---- the one-pass paths ------------------------------------------------------------------- */

/* The common allocation in one pass: the agent's next id (fresh, and the next window slot,
 * the window not due to grow; a survivor still in that slot moves to the pages or the tables
 * through a call, live.c), a stored node that is not a truncation, under the EXEC identity already noted for it
 * and for the thread, a size and chain the window slot holds, live tracking exact (mem_fast).
 * So the general path's reuse check, identity notes, history append and packing are known to
 * do nothing but what seen_extend and the window slot do. */
static inline int on_alloc(struct jp_engine *e, const struct jp_rec_alloc *r)
{
    uint64_t id = r->allocation_id, size = r->size;
    uint32_t node = r->node;
    /* seen_next set means id < UINT64_MAX, so id == win_hi + 1 did not wrap and win_hi is
     * below UINT64_MAX - 1, as live_take_next requires */
    if (__builtin_expect(!(e->mem_fast && e->seen_next &&
                           id == e->seen_next && node - 1u < e->nnode_stored &&
                           e->thread_epoch == e->exec_epoch && e->nwin < e->win_grow_at &&
                           id == e->win_hi + 1u && size < (UINT64_C(1) << WIN_SIZE_BITS)),
                         0))
        return jpe_on_alloc_general(e, r);
    struct jp_node *n = &e->nodes[node - 1u];
    if (__builtin_expect(n->trunc || n->exec_epoch != e->exec_epoch ||
                             n->chain + 1u >= WIN_CHAIN_LIMIT,
                         0))
        return jpe_on_alloc_general(e, r);
    struct jp_chain *c = node_chain(e, n);
    e->producer_records++;
    mem_count_alloc(e, c, size);
    seen_extend(e, id);
    int rc = live_take_next(e, id, win_slot(n->chain + 1u, size));
    if (__builtin_expect(rc < 0, 0))
        return jpe_live_lost(e, rc);
    mem_live_add(e, c, size, 1);
    return 0;
}

/* The common free in one pass with no call: of an allocation held in the young window (so its
 * value is no overflow entry) with the size the record gives, a resize sequence of 0 while no
 * live block has a count kept (memory.c), its stack none or a stored node that is not a
 * truncation, under the thread identity already noted, live tracking exact (mem_fast). */
static inline int on_free(struct jp_engine *e, const struct jp_rec_free *r)
{
    uint64_t id = r->allocation_id;
    uint32_t node = r->node;
    /* win_find's test: win_w is 0 while there is no window */
    if (__builtin_expect(!(e->mem_fast && id <= e->win_hi &&
                           e->win_hi - id < e->win_w &&
                           e->thread_epoch == e->exec_epoch && !(r->seq | e->rseq.n) &&
                           (node == JP_ID_NONE ||
                            (node - 1u < e->nnode_stored && !e->nodes[node - 1u].trunc))),
                         0))
        return jpe_on_free_general(e, r);
    uint32_t slot = (uint32_t)(id & (e->win_w - 1u)), v = e->win[slot];
    uint64_t size = win_slot_size(v);
    if (__builtin_expect(!v || size != r->old_size, 0))
        return jpe_on_free_general(e, r);
    e->producer_records++;
    win_clear(e, slot); /* live_del */
    mem_free(e, chain_at(e, win_slot_chain(v)), size);
    return 0;
}

/* The common sample in one pass with no call: a jett sample with a statement, its leaf a
 * stored node under the EXEC identity already noted for it, its statement the hot line its
 * function's way holds, detail going on (cpu_fast). Any other sample goes to the general path
 * whole, after the slot entry's fault test (a faulty sample is declined, 1, for the full
 * validation to name). None of these conditions holds for a faulty sample: its state is jett,
 * its flags are the one flag, its node is not 0.
 * The thread needs no test of its own: in CPU mode a node notes the epoch only in the general
 * path, after thread_note has (thread_epoch == exec_epoch whenever leaf->exec_epoch is). */
static inline int on_cpu_sample(struct jp_engine *e, const struct jp_rec_cpu_sample *r)
{
    uint32_t node = r->node, line = r->stmt_line, col = r->stmt_col;
    if (__builtin_expect(!(e->cpu_fast && r->state == JP_STATE_JETT &&
                           r->flags == JP_SAMPLE_HAS_STMT && node - 1u < e->nnode_stored),
                         0))
        return jp_rec_sample_fault(r) ? 1 : jpe_on_cpu_sample_general(e, r);
    struct jp_node *leaf = &e->nodes[node - 1u];
    uint32_t w = *hot_way(e, leaf, line, col);
    if (__builtin_expect(leaf->exec_epoch != e->exec_epoch, 0))
        return jpe_on_cpu_sample_general(e, r);
    struct jp_hot *h = hot_at(e, w, line, col);
    if (__builtin_expect(!h, 0))
        return jpe_on_cpu_sample_general(e, r);
    cpu_count(e, JP_STATE_JETT);
    cpu_attribute(e, leaf);
    h->samples++;
    return 0;
}

#endif
