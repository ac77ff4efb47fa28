/* The young window: a direct-mapped window of the newest allocation ids in front of the pages
 * and the tables, and its growth. What goes in and what leaves it, and where a survivor goes,
 * is the live store's (live.h, live.c).
 */
#include <errno.h>
#include <stdlib.h>

#include "engine_internal.h"

/* Young allocations. Most allocations die young, and the agent hands out ids in increasing
 * order, so the newest ids live in a direct-mapped window (slot = id mod W) and never touch
 * the hashed tables; an allocation still live when its slot is needed by a newer id moves out
 * then (to the pages, or the tables: live.c). A slot's occupant is the one id of
 * (win_hi - W, win_hi] congruent to it. Ids that do not arrive as a new highest go straight to
 * the tables, as do values the 4-byte slot cannot hold; so an empty slot says nothing, and a
 * lookup that misses it goes on to the pages and the tables: the window only ever holds a
 * subset, exactly.
 *
 * A slot is 4 bytes: 0 empty, else 1 + (chain << WIN_SIZE_BITS | size) for a size below
 * 2^WIN_SIZE_BITS and a creation chain (index + 1) below WIN_CHAIN_LIMIT (engine_internal.h).
 * A bit per 64 slots (win_mark) lets a jump of the highest id (sparse or huge ids) find the
 * survivors it displaces in O(W / 4096) words plus the groups that held something, never
 * O(W).
 *
 * The window starts at 2^WIN_MIN_BITS slots and doubles (up to 2^WIN_MAX_BITS) while at
 * least 1/WIN_GROW_DIV of its slots hold live allocations (so it costs at most 16 bytes per
 * allocation it holds when it grows, about what the tables would): a run whose allocations
 * mostly die within a few thousand ids, or whose survivors are few, keeps a small window; one
 * whose allocations live for hundreds of thousands of ids gets one that lets them die there,
 * so they are never hashed, moved by a table growth, or displaced by cuckoo kicks. The growth
 * is counted against the budget (old and new at once) and, refused, just leaves the window as
 * it is: exactness never depends on it. When it grows depends on the ids alone (never on the
 * seed or the budget), so a run replayed with a budget that fits what it held does the very
 * same. */
/* 4096 slots (16 KiB) to start: one summary word covers them, and a run that frees young
 * never needs more. */
#define WIN_MIN_BITS 12u
/* 2^19 slots, 2 MiB: about a core's L2 cache. A run whose allocations live for a few
 * hundred thousand ids lets them die here instead of moving a share of them out
 * (bench/RESULTS.md has the figures for agg_bench's 65536 mix), and the window is still at
 * most 1/4 full when it stops growing: 16 bytes per allocation it holds, what the tables
 * cost. The window slot of a young free is fetched a few records ahead (feed.c), so
 * slots that miss the first-level cache do not stall the drain. */
#define WIN_MAX_BITS 19u
/* Doubles at 1/4 full: 16 bytes of window per allocation it holds, about a table slot's cost
 * at the tables' load. */
#define WIN_GROW_DIV 4u
_Static_assert(WIN_MIN_BITS >= 12u, "the summary needs a whole word");

/* Allocates a window of w slots (all empty), counting it against the budget on top of what
 * is held now. */
static int win_alloc(struct jp_engine *e, uint32_t w, uint32_t **slots, uint64_t **grp)
{
    uint64_t bytes = win_bytes(w);
    if (jpe_budget_hold(e, bytes) < 0)
        return -ENOBUFS;
    uint32_t *r = calloc(1, (size_t)bytes);
    if (!r)
        return -ENOMEM;
    *slots = r;
    *grp = (uint64_t *)(void *)(r + w);
    return 0;
}

int jpe_win_ready(struct jp_engine *e)
{
    if (e->win || e->win_off)
        return e->win != NULL;
    uint32_t w = UINT32_C(1) << WIN_MIN_BITS;
    int rc = win_alloc(e, w, &e->win, &e->win_grp);
    if (rc == -ENOMEM)
        return rc;
    if (rc < 0) {
        e->win_off = true;
        return 0;
    }
    e->win_w = w;
    e->win_grow_at = w / WIN_GROW_DIV;
    e->used += win_bytes(w);
    return 1;
}

/* Skips groups whose bit is clear through the bit words (64 groups each), so a scan costs
 * O(W / 4096) words plus the set groups. */
uint32_t jpe_win_next(struct jp_engine *e, uint32_t a, uint32_t b)
{
    while (a < b) {
        uint32_t g = a >> 6;
        uint64_t bit = UINT64_C(1) << (g & 63u);
        if (e->win_grp[g >> 6] & bit) {
            uint32_t end = (g + 1u) << 6 < b ? (g + 1u) << 6 : b;
            for (uint32_t s = a; s < end; s++)
                if (e->win[s])
                    return s;
            if (end == (g + 1u) << 6) { /* scanned to the group's end: maybe it is empty */
                uint32_t s = g << 6;
                while (s < a && !e->win[s])
                    s++;
                if (s == a)
                    e->win_grp[g >> 6] &= ~bit;
            }
            a = end;
            continue;
        }
        /* the next group whose bit is set */
        for (g++;;) {
            if ((uint64_t)g << 6 >= b)
                return b;
            uint64_t gw = e->win_grp[g >> 6] & (~UINT64_C(0) << (g & 63u));
            if (gw) {
                g = (g & ~63u) + (uint32_t)__builtin_ctzll(gw);
                break;
            }
            g = (g | 63u) + 1u;
        }
        a = g << 6 > a ? g << 6 : a;
    }
    return b;
}

/* Re-places the survivors (same ids, now mod 2W). Ids of the new half's range older than the
 * old window are not in it (they are in the pages or the tables). -ENOMEM leaves the window as
 * it was; a budget refusal too, asking again only once twice as full. */
int jpe_win_grow(struct jp_engine *e)
{
    uint32_t w = e->win_w, nw = w * 2u;
    if (nw > (UINT32_C(1) << WIN_MAX_BITS)) {
        e->win_grow_at = UINT32_MAX;
        return 0;
    }
    uint32_t *slots, *old = e->win;
    uint64_t *grp;
    int rc = win_alloc(e, nw, &slots, &grp);
    if (rc == -ENOMEM)
        return rc;
    if (rc < 0) {
        /* stays as it is, still exact; asks again only once twice as full */
        e->win_grow_at = e->win_grow_at > UINT32_MAX / 2u ? UINT32_MAX : e->win_grow_at * 2u;
        return 0;
    }
    e->win_grow_at = nw / WIN_GROW_DIV;
    e->win = slots;
    e->win_grp = grp;
    e->win_w = nw;
    e->nwin = 0;
    for (uint32_t s = 0; s < w; s++) {
        if (!old[s])
            continue;
        uint64_t id = e->win_hi - ((e->win_hi - s) & (w - 1u));
        win_put(e, (uint32_t)(id & (nw - 1u)), old[s]);
    }
    free(old);
    e->used += win_bytes(nw) - win_bytes(w);
    return 0;
}
