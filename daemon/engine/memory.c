/* Memory mode: ALLOC, RESIZE and FREE accounting per site and in total, the history of every
 * id allocated (reused ids are caught exactly), and the live-at-peak snapshot.
 */
#include <errno.h>

#include "engine_internal.h"

/* The set of every id allocated in the run, so a retired id that comes back is caught
 * exactly. Ids that arrive above every earlier one (the agent's own counter) extend or append
 * sorted disjoint intervals in O(1): one interval for a gapless counter. An id at or below the
 * highest seen goes to a hash set instead (16 bytes each, within the budget), so no order of
 * ids can make insertion cost more than constant time. */
static bool seen_has(struct jp_engine *e, uint64_t id)
{
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
    return lw_find(&e->seen_extra, id + 1u) != NULL;
}

static int seen_add(struct jp_engine *e, uint64_t id)
{
    if (id == UINT64_MAX) {
        e->seen_max = true;
        return 0;
    }
    struct interval *last = e->nseen ? &e->seen[e->nseen - 1u] : NULL;
    if (last && id == last->hi + 1u) {
        last->hi = id; /* the common case */
        return 0;
    }
    int rc;
    if (last && id <= last->hi) {
        if ((rc = lw_reserve(e, &e->seen_extra)) < 0)
            return rc;
        lw_put(&e->seen_extra, id + 1u, 0);
        return 0;
    }
    if ((rc = vec_grow(e, (void **)&e->seen, &e->seen_cap, e->nseen + 1u, sizeof *e->seen)) < 0)
        return rc;
    e->seen[e->nseen++] = (struct interval){id, id};
    return 0;
}

/* Ends exact live tracking for the rest of the run (retention budget exhausted). */
static int live_lost(struct jp_engine *e, int rc)
{
    if (rc != -ENOBUFS)
        return rc;
    e->live_exact = false;
    return 0;
}

/* Site live bytes change only through here, so the peak snapshot is taken first. */
static inline void site_live_add(struct jp_engine *e, uint32_t site, uint64_t add, uint64_t sub)
{
    if (!site)
        return;
    struct jp_func *f = &e->funcs[site - 1u];
    if (f->stamp != e->peak_epoch) {
        f->snap = f->live;
        f->stamp = e->peak_epoch;
    }
    f->live = f->live + add - sub;
}

static inline void total_live_add(struct jp_engine *e, uint64_t add)
{
    e->live_bytes += add;
    if (e->live_bytes > e->peak_bytes) {
        e->peak_bytes = e->live_bytes;
        e->peak_epoch++;
    }
}

/* The site (function index + 1, or 0) an event's node attributes to; -1: undefined node. */
static int64_t event_site(struct jp_engine *e, uint32_t node)
{
    if (node == JP_ID_NONE)
        return 0;
    int ref = node_ref(e, node);
    if (ref < 0)
        return -1;
    if (ref == 0)
        return 0;
    const struct jp_node *n = &e->nodes[node - 1u];
    if (n->trunc)
        e->truncated_stacks++;
    return (int64_t)n->func + 1;
}

/* A free's stack attributes nothing (reading 9), but a free whose stack was cut still counts
 * in truncated_stacks and makes the profile partial, like an alloc or resize (reading 17). */
static void free_stack_note(struct jp_engine *e, uint32_t node)
{
    if (node_ref(e, node) == 1 && e->nodes[node - 1u].trunc)
        e->truncated_stacks++;
}

int on_alloc(struct jp_engine *e, const struct jp_rec_alloc *r)
{
    if (e->mode != JP_MODE_MEMORY)
        return violation(e);
    if (r->node != JP_ID_NONE && node_ref(e, r->node) < 0)
        return violation(e);
    int rc;
    if (e->live_exact) {
        /* The next id after the highest ever seen cannot be live or retired: the agent's own
         * counter always takes this path, and it saves a table probe per allocation. */
        const struct interval *last = e->nseen ? &e->seen[e->nseen - 1u] : NULL;
        bool fresh = last && last->hi != UINT64_MAX && r->allocation_id == last->hi + 1u;
        struct live_ref ref = {0};
        if (!fresh && (live_find(e, r->allocation_id, &ref) || seen_has(e, r->allocation_id)))
            return violation(e); /* reused id, live or retired */
    }
    uint32_t site = (uint32_t)event_site(e, r->node);
    e->producer_records++;
    e->allocation_count++;
    e->allocated_bytes += r->size;
    if (site) {
        struct jp_func *f = &e->funcs[site - 1u];
        f->mem.count++;
        f->mem.allocated += r->size;
        e->attributed_allocated += r->size;
        if (f->exec_epoch != e->exec_epoch) { /* creation events carry the identity */
            f->exec_epoch = e->exec_epoch;
            if ((rc = exec_note(e, site - 1u)) < 0)
                return rc;
        }
    }
    if ((rc = thread_note(e)) < 0)
        return rc;
    if (!e->live_exact)
        return 0;
    uint64_t val;
    if ((rc = seen_add(e, r->allocation_id)) < 0 || (rc = live_pack(e, r->size, site, &val)) < 0)
        return live_lost(e, rc);
    if ((rc = live_insert(e, r->allocation_id, val)) < 0) {
        ovf_release(e, val);
        return live_lost(e, rc);
    }
    site_live_add(e, site, r->size, 0);
    total_live_add(e, r->size);
    return 0;
}

int on_resize(struct jp_engine *e, const struct jp_rec_resize *r)
{
    if (e->mode != JP_MODE_MEMORY)
        return violation(e);
    if (r->node != JP_ID_NONE && node_ref(e, r->node) < 0)
        return violation(e);
    struct live_ref ref = {NULL, NULL};
    uint64_t size = r->old_size;
    uint32_t creation = 0;
    if (e->live_exact) {
        if (!live_find(e, r->allocation_id, &ref))
            return violation(e); /* unknown or retired id */
        live_unpack(e, live_val(&ref), &size, &creation);
        if (size != r->old_size)
            return violation(e); /* the producer's old size disagrees with ours */
    }
    uint32_t site = (uint32_t)event_site(e, r->node);
    e->producer_records++;
    e->resize_count++;
    if (site)
        e->funcs[site - 1u].resize_count++;
    if (r->new_size >= r->old_size) {
        uint64_t grow = r->new_size - r->old_size;
        e->allocated_bytes += grow;
        if (site) {
            e->funcs[site - 1u].mem.allocated += grow;
            e->attributed_allocated += grow;
        }
    } else {
        e->freed_bytes += r->old_size - r->new_size;
        if (creation)
            e->funcs[creation - 1u].freed += r->old_size - r->new_size;
    }
    int rc = thread_note(e);
    if (rc < 0 || !e->live_exact)
        return rc;
    uint64_t nval;
    rc = live_pack(e, r->new_size, creation, &nval);
    if (rc < 0)
        return live_lost(e, rc);
    uint64_t oval = live_val(&ref);
    if ((rc = live_set(e, r->allocation_id, &ref, nval)) < 0) {
        ovf_release(e, nval);
        return live_lost(e, rc);
    }
    ovf_release(e, oval);
    if (r->new_size >= r->old_size) {
        site_live_add(e, creation, r->new_size - r->old_size, 0);
        total_live_add(e, r->new_size - r->old_size);
    } else {
        site_live_add(e, creation, 0, r->old_size - r->new_size);
        e->live_bytes -= r->old_size - r->new_size;
    }
    return 0;
}

int on_free(struct jp_engine *e, const struct jp_rec_free *r)
{
    if (e->mode != JP_MODE_MEMORY)
        return violation(e);
    if (r->node != JP_ID_NONE && node_ref(e, r->node) < 0)
        return violation(e);
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
        return violation(e); /* unknown id, or a double free */
    uint64_t val = live_val(&ref);
    live_unpack(e, val, &size, &creation);
    if (size != r->old_size)
        return violation(e);
    e->producer_records++;
    free_stack_note(e, r->node);
    ovf_release(e, val);
    live_del(e, r->allocation_id, &ref);
    e->freed_bytes += size;
    e->live_bytes -= size;
    if (creation) {
        e->funcs[creation - 1u].freed += size;
        site_live_add(e, creation, 0, size);
    }
    return thread_note(e);
}

/* Bytes of the live-allocation table alone, and the allocations it tracks. */
uint64_t jp_engine_live_table_bytes(const struct jp_engine *e, uint64_t *live_count)
{
    if (live_count)
        *live_count = e->lw.n + e->nwin + (e->max_id_live ? 1u : 0u);
    uint64_t nb = 0;
    for (unsigned i = 0; i < LN_SHARDS; i++) {
        nb += e->ln[i].nb;
        if (live_count)
            *live_count += e->ln[i].n;
    }
    return (e->win ? win_bytes(e->win_w) : 0) +
           nb * sizeof(struct ln_bucket) +
           (uint64_t)e->lw.cap * sizeof(struct lw_ent) +
           (uint64_t)e->ovf_cap * sizeof(struct overflow_ent) +
           (uint64_t)e->seen_cap * sizeof(struct interval) +
           (uint64_t)e->seen_extra.cap * sizeof(struct lw_ent);
}
