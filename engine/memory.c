/* Memory mode: ALLOC, RESIZE and FREE accounting per creation chain and in total (a site's
 * figures are its chains' sums, settled per view), the history of every id allocated (reused
 * ids are caught exactly), and the live-at-peak snapshot.
 */
#include <errno.h>
#include <string.h>

#include "account.h"

/* Writes the last interval's end that seen_extend leaves implicit in seen_next. */
static inline void seen_settle(struct jp_engine *e)
{
    if (e->seen_next)
        e->seen[e->nseen - 1u].hi = e->seen_next - 1u;
}

/* The set of every id allocated in the run, so a retired id that comes back is caught
 * exactly. Ids that arrive above every earlier one (the agent's own counter) extend or append
 * sorted disjoint intervals in O(1): one interval for a gapless counter. A run with several
 * worker rings has one counter per ring (each drawing blocks of ids, agent/agent.h), merged:
 * an id below the highest seen extends the interval just below it (a binary search), or opens
 * one in its gap while there are fewer than SEEN_INSERT_MAX intervals (a bounded move). Any
 * other id goes to a hash set (16 bytes each, within the budget), so no order of ids can make
 * insertion cost more than that bound. */
#define SEEN_INSERT_MAX 1024u
static bool seen_has(struct jp_engine *e, uint64_t id)
{
    seen_settle(e);
    if (id == UINT64_MAX)
        return e->seen_max;
    uint32_t lo = 0, hi = e->nseen;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2u;
        if (e->seen[mid].hi < id)
            lo = mid + 1u;
        else
            hi = mid;
    }
    if (lo < e->nseen && e->seen[lo].lo <= id)
        return true;
    return jpe_lw_find(&e->seen_extra, id + 1u) != NULL;
}

static int seen_add(struct jp_engine *e, uint64_t id)
{
    if (id == UINT64_MAX) {
        e->seen_max = true;
        return 0;
    }
    if (e->seen_next && id == e->seen_next) {
        seen_extend(e, id); /* the common case */
        return 0;
    }
    seen_settle(e);
    struct interval *last = e->nseen ? &e->seen[e->nseen - 1u] : NULL;
    int rc;
    if (last && id <= last->hi) {
        /* the first interval starting above id; the one before it ends below id (id is new) */
        uint32_t lo = 0, hi = e->nseen;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2u;
            if (e->seen[mid].lo <= id)
                lo = mid + 1u;
            else
                hi = mid;
        }
        if (lo > 0 && e->seen[lo - 1u].hi + 1u == id) {
            e->seen[lo - 1u].hi = id; /* never the last interval: its hi is above id */
            return 0;
        }
        if (e->nseen < SEEN_INSERT_MAX) {
            rc = jpe_vec_grow(e, (void **)&e->seen, &e->seen_cap, e->nseen + 1u,
                              sizeof *e->seen);
            if (rc < 0)
                return rc;
            memmove(&e->seen[lo + 1u], &e->seen[lo], (e->nseen - lo) * sizeof *e->seen);
            e->seen[lo] = (struct interval){id, id};
            e->nseen++;
            return 0;
        }
        if ((rc = jpe_lw_reserve(e, &e->seen_extra)) < 0)
            return rc;
        jpe_lw_put(&e->seen_extra, id + 1u, 0);
        return 0;
    }
    if ((rc = jpe_vec_grow(e, (void **)&e->seen, &e->seen_cap, e->nseen + 1u, sizeof *e->seen)) < 0)
        return rc;
    e->seen[e->nseen++] = (struct interval){id, id};
    seen_extend(e, id);
    return 0;
}

/* Ends exact live tracking for the rest of the run (retention budget exhausted). */
int jpe_live_lost(struct jp_engine *e, int rc)
{
    if (rc != -ENOBUFS)
        return rc;
    e->live_exact = e->mem_fast = false;
    return 0;
}

/* The stored node an event's node id attributes to, or NULL (no stack, or a node past the
 * budget: totals only), given its node_ref (the caller has refused an undefined one). Counts
 * a truncated stack. */
static inline struct jp_node *event_node(struct jp_engine *e, uint32_t node, int ref)
{
    if (ref <= 0)
        return NULL;
    struct jp_node *n = &e->nodes[node - 1u];
    stack_note(e, n);
    return n;
}

/* A free's stack attributes nothing (READINGS.md #9), but a free whose stack was
 * cut still counts in truncated_stacks and makes the profile partial, like an alloc or resize
 * (READINGS.md #17). */
static void free_stack_note(struct jp_engine *e, uint32_t node)
{
    if (node_ref(e, node) == 1)
        stack_note(e, &e->nodes[node - 1u]);
}

/* Every allocation; on_alloc (account.h) takes the common one itself. */
int jpe_on_alloc_general(struct jp_engine *e, const struct jp_rec_alloc *r)
{
    if (e->mode != JP_MODE_MEMORY)
        return violation(e);
    int nref = node_ref(e, r->node); /* JP_ID_NONE: -1, no stack */
    if (nref < 0 && r->node != JP_ID_NONE)
        return held_or_violation(e);
    int rc;
    bool fresh = false;
    if (e->live_exact) {
        /* The next id after the highest ever seen cannot be live or retired: the agent's own
         * counter always takes this path, and it saves a table probe per allocation. */
        fresh = e->seen_next && r->allocation_id == e->seen_next;
        struct live_ref ref = {0};
        if (!fresh && (live_find(e, r->allocation_id, &ref) || seen_has(e, r->allocation_id)))
            return violation(e); /* reused id, live or retired */
    }
    struct jp_node *n = event_node(e, r->node, nref);
    struct jp_chain *c = n ? node_chain(e, n) : NULL;
    e->producer_records++;
    mem_count_alloc(e, c, r->size);
    if (n) {
        /* Creation events carry the identity, noted against the site; once per node and
         * EXEC epoch (another node of the same site notes the same tuple, a no-op). */
        if (n->exec_epoch != e->exec_epoch) {
            n->exec_epoch = e->exec_epoch;
            if ((rc = jpe_exec_note(e, n->func)) < 0)
                return rc;
        }
    }
    if ((rc = thread_note(e)) < 0)
        return rc;
    if (!e->live_exact)
        return 0;
    uint64_t val;
    if (fresh) /* seen_add's common case; nothing above touched the history */
        seen_extend(e, r->allocation_id);
    else if ((rc = seen_add(e, r->allocation_id)) < 0)
        return jpe_live_lost(e, rc);
    if ((rc = live_pack(e, r->size, n ? n->chain + 1u : 0, &val)) < 0)
        return jpe_live_lost(e, rc);
    if ((rc = live_insert(e, r->allocation_id, val)) < 0) {
        ovf_release(e, val);
        return jpe_live_lost(e, rc);
    }
    mem_live_add(e, c, r->size, 1);
    return 0;
}

/* ---- resize sequences -------------------------------------------------------------------- */

/* In a stream of format 2 every RESIZE and FREE names how many resizes of its block came before
 * it, so an event whose count is not the block's (its predecessor is still on another ring) is
 * held like one whose size is not, however the sizes went. Only blocks resized at least once
 * have a count kept (e->rseq): the rest read as 0 without a probe while no live block was
 * resized. The counts are bytes of the retention budget like the live tables. */

/* The resizes taken so far of live block id, and where the count is kept (*slot NULL: not in
 * the table). */
static uint64_t rseq_get(struct jp_engine *e, uint64_t id, uint32_t **slot)
{
    *slot = NULL;
    if (id == UINT64_MAX)
        return e->rseq_max;
    if (!e->rseq.n)
        return 0;
    *slot = jpe_lw_find(&e->rseq, id + 1u);
    return *slot ? val_get(*slot) : 0;
}

/* Counts a resize taken of block id, which had `had` before it (slot: rseq_get's). */
static int rseq_step(struct jp_engine *e, uint64_t id, uint64_t had, uint32_t *slot)
{
    if (id == UINT64_MAX) {
        e->rseq_max = had + 1u;
        return 0;
    }
    if (slot) {
        val_set(slot, had + 1u);
        return 0;
    }
    int rc = jpe_lw_reserve(e, &e->rseq);
    if (rc < 0)
        return rc;
    jpe_lw_put(&e->rseq, id + 1u, had + 1u);
    return 0;
}

/* The block id is retired: its count goes. */
static void rseq_drop(struct jp_engine *e, uint64_t id, uint32_t *slot)
{
    if (id == UINT64_MAX)
        e->rseq_max = 0;
    else if (slot)
        jpe_lw_del(&e->rseq, slot);
}

int jpe_on_resize(struct jp_engine *e, const struct jp_rec_resize *r, uint64_t seq)
{
    if (e->mode != JP_MODE_MEMORY)
        return violation(e);
    int nref = node_ref(e, r->node); /* JP_ID_NONE: -1, no stack */
    if (nref < 0 && r->node != JP_ID_NONE)
        return held_or_violation(e);
    struct live_ref ref = {0};
    uint64_t size = r->old_size, had = 0;
    uint32_t creation = 0; /* the creation chain, index + 1 */
    uint32_t *sslot = NULL;
    if (e->live_exact) {
        if (!live_find(e, r->allocation_id, &ref))
            return held_or_violation(e); /* unknown or retired id */
        live_unpack(e, live_val(&ref), &size, &creation);
        if (size != r->old_size)
            return held_or_violation(e); /* the producer's old size disagrees with ours */
        if (e->seq_stream && (had = rseq_get(e, r->allocation_id, &sslot)) != seq)
            return held_or_violation(e); /* an earlier resize of it is still to come */
    }
    struct jp_node *n = event_node(e, r->node, nref);
    e->producer_records++;
    e->resize_count++;
    if (n)
        e->funcs[n->func].resize_count++;
    if (r->new_size >= r->old_size) {
        /* Growth is allocation pressure where the resize happened: the resizing event's
         * chain (and so its leaf), not the creation chain. */
        mem_charge(e, n ? node_chain(e, n) : NULL, r->new_size - r->old_size);
    } else {
        mem_freed(e, chain_at(e, creation), r->old_size - r->new_size);
    }
    int rc = thread_note(e);
    if (rc < 0 || !e->live_exact)
        return rc;
    uint64_t nval;
    rc = live_pack(e, r->new_size, creation, &nval);
    if (rc < 0)
        return jpe_live_lost(e, rc);
    uint64_t oval = live_val(&ref);
    if ((rc = live_set(e, r->allocation_id, &ref, nval)) < 0) {
        ovf_release(e, nval);
        return jpe_live_lost(e, rc);
    }
    ovf_release(e, oval);
    if (r->new_size >= r->old_size)
        mem_live_add(e, chain_at(e, creation), r->new_size - r->old_size, 0);
    else
        mem_live_sub(e, chain_at(e, creation), r->old_size - r->new_size, 0);
    if (e->seq_stream && (rc = rseq_step(e, r->allocation_id, had, sslot)) < 0)
        return jpe_live_lost(e, rc);
    return 0;
}

/* Every free; on_free (account.h) takes the common one itself. */
int jpe_on_free_general(struct jp_engine *e, const struct jp_rec_free *r)
{
    if (e->mode != JP_MODE_MEMORY)
        return violation(e);
    if (r->node != JP_ID_NONE && node_ref(e, r->node) < 0)
        return held_or_violation(e);
    if (!e->live_exact) {
        /* frees can no longer be matched: freed/live are reported unavailable */
        e->producer_records++;
        free_stack_note(e, r->node);
        return thread_note(e);
    }
    struct live_ref ref = {0};
    uint32_t creation;
    uint64_t size;
    if (!live_find(e, r->allocation_id, &ref))
        return held_or_violation(e); /* unknown id, or a double free */
    uint64_t val = live_val(&ref);
    live_unpack(e, val, &size, &creation);
    if (size != r->old_size)
        return held_or_violation(e);
    uint32_t *sslot = NULL;
    if (e->seq_stream && rseq_get(e, r->allocation_id, &sslot) != r->seq)
        return held_or_violation(e); /* a resize of it is still to come */
    e->producer_records++;
    free_stack_note(e, r->node);
    ovf_release(e, val);
    live_del(e, r->allocation_id, &ref);
    if (e->seq_stream)
        rseq_drop(e, r->allocation_id, sslot);
    mem_free(e, chain_at(e, creation), size);
    return thread_note(e);
}

/* A site's allocation count, allocated, live and live-at-peak bytes are the sums of its
 * creation chains' (the per-event path counts chains only); done when a view is taken, from
 * scratch, so taking several views is harmless. The site's stamp is the current epoch, so
 * jp_func_live_at_peak reads the summed snapshot. */
void jpe_mem_settle(struct jp_engine *e)
{
    if (e->mode != JP_MODE_MEMORY)
        return;
    for (uint32_t i = 0; i < e->nfuncs; i++) {
        struct jp_func *f = &e->funcs[i];
        f->mem.allocated = f->mem.count = f->live = f->snap = 0;
        f->stamp = e->peak_epoch;
    }
    for (uint32_t i = 0; i < e->nchains; i++) {
        const struct jp_chain *c = &e->chains[i];
        struct jp_func *f = &e->funcs[c->func];
        f->mem.allocated += c->allocated;
        f->mem.count += c->count;
        f->live += c->live;
        f->snap += jp_chain_live_at_peak(c, e->peak_epoch);
    }
}

/* Bytes of the live-allocation table alone, and the allocations it tracks. */
uint64_t jp_engine_live_table_bytes(const struct jp_engine *e, uint64_t *live_count)
{
    uint64_t pg_live, pg_bytes = jpe_pg_bytes(e, &pg_live);
    if (live_count)
        *live_count = e->lw.n + e->nwin + (e->max_id_live ? 1u : 0u) + pg_live;
    uint64_t nb = 0;
    for (unsigned i = 0; i < LN_SHARDS; i++) {
        nb += e->ln[i].nb;
        if (live_count)
            *live_count += e->ln[i].n;
    }
    return (e->win ? win_bytes(e->win_w) : 0) +
           nb * sizeof(struct ln_bucket) +
           (uint64_t)e->lw.cap * sizeof(struct lw_ent) + pg_bytes +
           (uint64_t)e->ovf_cap * sizeof(struct overflow_ent) +
           (uint64_t)e->seen_cap * sizeof(struct interval) +
           (uint64_t)e->seen_extra.cap * sizeof(struct lw_ent) +
           (uint64_t)e->rseq.cap * sizeof(struct lw_ent);
}
