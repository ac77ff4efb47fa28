/* CPU mode: samples, hot lines, and settling inclusive and chain counts from the per-node
 * leaf counts when a view is taken.
 */
#include <errno.h>

#include "account.h"

struct hot_key { uint32_t func, line, col; };
static uint64_t hot_hash_k(const struct jp_engine *e, const struct hot_key *k)
{
    return hash2(e->seed, (uint64_t)k->func << 32 | k->line, k->col);
}
static uint64_t hot_hash(const struct jp_engine *e, uint32_t idx)
{
    struct hot_key k = {e->hots[idx].func, e->hots[idx].line, e->hots[idx].col};
    return hot_hash_k(e, &k);
}
static bool hot_eq(const struct jp_engine *e, uint32_t idx, const void *key)
{
    const struct hot_key *k = key;
    const struct jp_hot *h = &e->hots[idx];
    return h->func == k->func && h->line == k->line && h->col == k->col;
}

/* ---- CPU ------------------------------------------------------------------------------- */

/* Every sample (the one-pass path, on_cpu_sample in account.h, takes the common one when it
 * may). */
int jpe_on_cpu_sample_general(struct jp_engine *e, const struct jp_rec_cpu_sample *r)
{
    if (e->mode != JP_MODE_CPU)
        return violation(e);
    int rc;
    if (r->state != JP_STATE_JETT) {
        /* READINGS.md #8: stacks on non-jett samples are ignored */
        cpu_count(e, r->state);
        return thread_note(e);
    }
    int ref = node_ref(e, r->node);
    if (ref < 0)
        return held_or_violation(e);
    cpu_count(e, JP_STATE_JETT);
    if ((rc = thread_note(e)) < 0)
        return rc;
    if (ref == 0)
        return 0;
    struct jp_node *leaf = &e->nodes[r->node - 1u];
    /* after thread_note: the one-pass path takes a noted leaf for a noted thread */
    if (leaf->exec_epoch != e->exec_epoch) { /* epoch 0: no EXEC yet, nothing to note */
        leaf->exec_epoch = e->exec_epoch;
        if ((rc = jpe_exec_note(e, leaf->chain)) < 0)
            return rc;
    }
    cpu_attribute(e, leaf);
    if (!(r->flags & JP_SAMPLE_HAS_STMT) || e->detail_stopped)
        return 0; /* READINGS.md #6: self still counted, no hot line */
    uint32_t *way = hot_way(e, leaf, r->stmt_line, r->stmt_col);
    struct jp_hot *wh = hot_at(e, *way, r->stmt_line, r->stmt_col);
    if (wh) {
        wh->samples++; /* the line this way last took */
        return 0;
    }
    struct hot_key k = {leaf->func, r->stmt_line, r->stmt_col};
    uint64_t h = hot_hash_k(e, &k);
    uint32_t hi = itab_find(e, &e->hot_tab, h, hot_eq, &k); /* a known line: no interning */
    if (hi == UINT32_MAX) {
        struct intern in = {&e->hot_tab, hot_hash, hot_eq, (void **)&e->hots, &e->hots_cap,
                            e->nhots, UINT32_MAX, sizeof *e->hots};
        if ((rc = intern_find(e, &in, h, &k, &hi)) < 0)
            return jpe_budget_fail(e, rc);
        if (rc) {
            e->hots[hi] = (struct jp_hot){k.func, k.line, k.col, 0, 0};
            e->nhots++;
            jpe_intern_put(&e->hot_tab, h, hi);
        }
    }
    e->hots[hi].samples++;
    *way = hi + 1u;
    return 0;
}

/* Turns per-node leaf counts into self and inclusive samples per function and samples per
 * call chain: each node's count is self for its function and leaf for its own chain, and goes
 * to every function whose root-most occurrence is on its path (READINGS.md #4)
 * and to that occurrence's chain. Cost: nodes x depth, once per report, not per sample. */
void jpe_cpu_settle(struct jp_engine *e)
{
    if (e->mode != JP_MODE_CPU || !e->cpu_dirty)
        return;
    for (uint32_t i = 0; i < e->nfuncs; i++)
        e->funcs[i].cpu.inclusive = e->funcs[i].cpu.self = 0;
    for (uint32_t i = 0; i < e->nchains; i++)
        e->chains[i].samples = e->chains[i].leaf = 0;
    for (uint32_t i = 0; i < e->nnode_stored; i++) {
        uint64_t c = e->nodes[i].samples;
        if (!c)
            continue;
        e->funcs[e->nodes[i].func].cpu.self += c;
        e->chains[e->nodes[i].chain].leaf += c; /* a node's chain is its whole path */
        for (const struct jp_node *n = &e->nodes[i];; n = &e->nodes[n->parent - 1u]) {
            if (n->first) {
                e->funcs[n->func].cpu.inclusive += c;
                e->chains[n->chain].samples += c;
            }
            if (!n->parent)
                break;
        }
    }
    e->cpu_dirty = false;
}
