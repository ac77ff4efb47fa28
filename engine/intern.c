/* The open-addressing index over a definition-ordered array (itab): its growth and its
 * insert. The lookup and the interning sequence built on them (find, grow the array, reserve
 * the index, insert) are inline in engine_internal.h, so each table's hash and equality calls
 * are direct at its call site.
 */
#include <errno.h>
#include <stdlib.h>

#include "engine_internal.h"

/* Makes room for one more entry (load <= 1/2), rehashing with hf. */
int jpe_itab_reserve(struct jp_engine *e, struct itab *t, itab_hash hf)
{
    if ((uint64_t)(t->n + 1u) * 2u <= t->cap)
        return 0;
    uint64_t ncap = t->cap ? (uint64_t)t->cap * 2u : 16u;
    if (ncap > (UINT32_C(1) << 31))
        return -ENOBUFS;
    uint64_t bytes = ncap * sizeof(uint32_t), old = (uint64_t)t->cap * sizeof(uint32_t);
    if (jpe_budget_hold(e, bytes) < 0) /* the old slots are read while the new fill */
        return -ENOBUFS;
    uint32_t *ns = calloc((size_t)ncap, sizeof(uint32_t));
    if (!ns)
        return -ENOMEM;
    uint32_t mask = (uint32_t)ncap - 1u;
    for (uint32_t i = 0; i < t->cap; i++) {
        uint32_t s = t->slot[i];
        if (!s)
            continue;
        uint32_t j = (uint32_t)hf(e, s - 1u) & mask;
        while (ns[j])
            j = (j + 1u) & mask;
        ns[j] = s;
    }
    free(t->slot);
    t->slot = ns;
    t->cap = (uint32_t)ncap;
    e->used = e->used - old + bytes;
    return 0;
}

void jpe_intern_put(struct itab *t, uint64_t h, uint32_t idx)
{
    /* The key is absent (intern_find said so and nothing was added since), so its slot is the
     * first empty one on its probe sequence: where a lookup with equality would stop too. */
    uint32_t mask = t->cap - 1u, i = (uint32_t)h & mask;
    while (t->slot[i])
        i = (i + 1u) & mask;
    t->slot[i] = idx + 1u;
    t->n++;
}
