/* The live store's one owner (live.h): every insert the inline path leaves, and every move of
 * a live value from one place to another - a window survivor to the pages or the tables, a
 * page too sparse to keep to the tables. The window, the pages and the tables only hold
 * values; the order they are tried in, and what goes where, is decided here.
 */
#include <errno.h>

#include "live.h"

/* A page the pages gave up on (page_id: an id of it): its live values to the tables, in id
 * order. A refusal leaves the values not yet moved where they are (every one still found
 * exactly once): 0, or the table's error. */
__attribute__((noinline)) static int page_to_tables(struct jp_engine *e, uint64_t page_id)
{
    uint32_t cursor = 0, *v;
    uint64_t id;
    while ((v = jpe_pg_next_live(e, page_id, &cursor, &id)) != NULL) {
        int rc = jpe_table_insert(e, id, val_get(v));
        if (rc < 0)
            return rc;
        jpe_pg_moved(e, id, v);
    }
    return 0;
}

/* A survivor the window lets go of: appended to its page when the pages admit it (a page they
 * close on the way, too sparse to keep, moves to the tables first), else into the tables.
 * 0, -ENOBUFS, -ENOMEM. */
static int place_survivor(struct jp_engine *e, uint64_t id, uint64_t val)
{
    uint64_t sparse = UINT64_MAX;
    if (jpe_pg_admit(e, id, &sparse)) {
        /* A refused move leaves that page as it is (exact, only larger); the table's next
         * insert meets the same refusal and reports it. */
        if (sparse != UINT64_MAX && page_to_tables(e, sparse) == -ENOMEM)
            return -ENOMEM;
        int rc = jpe_pg_append(e, id, val);
        if (rc != 0)
            return rc < 0 ? rc : 0;
    }
    return jpe_table_insert(e, id, val);
}

int jpe_live_evict_one(struct jp_engine *e, uint32_t s)
{
    uint64_t occupant = e->win_hi - ((e->win_hi - s) & (e->win_w - 1u));
    int rc = place_survivor(e, occupant, win_dec(e->win[s]));
    if (rc < 0)
        return rc;
    win_clear(e, s);
    return 0;
}

/* Moves the survivors of window slots [a, b) out (win_hi not yet advanced). */
static int evict_range(struct jp_engine *e, uint32_t a, uint32_t b)
{
    for (uint32_t s = jpe_win_next(e, a, b); s < b; s = jpe_win_next(e, s + 1u, b)) {
        int rc = jpe_live_evict_one(e, s);
        if (rc < 0)
            return rc;
    }
    return 0;
}

int jpe_live_insert_slow(struct jp_engine *e, uint64_t id, uint64_t val)
{
    int rc;
    if (id <= e->win_hi || id == UINT64_MAX)
        return jpe_table_insert(e, id, val);
    if ((rc = jpe_win_ready(e)) <= 0)
        return rc < 0 ? rc : jpe_table_insert(e, id, val);
    if (e->nwin >= e->win_grow_at && (rc = jpe_win_grow(e)) < 0)
        return rc;
    uint32_t m = e->win_w - 1u, slot = (uint32_t)(id & m);
    if (id - e->win_hi == 1u) { /* the agent's counter: one slot to look at */
        if (e->win[slot] && (rc = jpe_live_evict_one(e, slot)) < 0)
            return rc;
    } else if (id - e->win_hi >= e->win_w) { /* everything in the window is displaced */
        if (e->nwin && (rc = evict_range(e, 0, e->win_w)) < 0)
            return rc;
    } else { /* slots win_hi + 1 .. id, maybe wrapping */
        uint32_t a = (uint32_t)((e->win_hi + 1u) & m);
        if (a <= slot) {
            if ((rc = evict_range(e, a, slot + 1u)) < 0)
                return rc;
        } else if ((rc = evict_range(e, a, e->win_w)) < 0 ||
                   (rc = evict_range(e, 0, slot + 1u)) < 0) {
            return rc;
        }
    }
    if (win_fits(val))
        win_put(e, slot, win_enc(val));
    else if ((rc = jpe_table_insert(e, id, val)) < 0)
        return rc;
    win_advance(e, id);
    return 0;
}

void jpe_live_page_del(struct jp_engine *e, uint64_t id, uint32_t *valp)
{
    if (jpe_pg_del(e, id, valp) && page_to_tables(e, id) != 0)
        jpe_pg_tidy(e, id); /* the move was refused: the page stays, compacted if due */
}
