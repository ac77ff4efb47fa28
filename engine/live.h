/* Private to engine/: the live store's one owner. A live allocation (its packed size and
 * creation chain) is held in exactly one of three places, tried in this order:
 *   1. the young window (window.c): the newest ids, direct-mapped, where most die;
 *   2. the survivor pages (pages.c): what the window let go of, appended in id order while
 *      the ids keep rising;
 *   3. the hashed tables (live_table.c): everything else, and what the pages gave up on.
 * These calls, and live.c behind them, are the only ones that decide which: they find, read,
 * insert, change and drop a live allocation, and move one from place to place (a window
 * survivor to the pages or the tables, a page too sparse to keep to the tables). The three
 * stores hold values and never call each other or this file. The one-pass paths of account.h
 * take step 1 inline (an allocation that is the window's next id, a free the window holds),
 * through the same window calls.
 */
#ifndef JETTPROF_ENGINE_LIVE_H
#define JETTPROF_ENGINE_LIVE_H

#include "engine_internal.h"

/* Where a live allocation's value is held. */
struct live_ref {
    uint32_t *win;  /* its window slot, or NULL */
    uint32_t *valp; /* else its value in a page or a table */
    bool page;      /* valp is a page's */
};

/* live.c: the moves and every insert the inline path below leaves. */
int jpe_live_insert_slow(struct jp_engine *e, uint64_t id, uint64_t val);
int jpe_live_evict_one(struct jp_engine *e, uint32_t s);
void jpe_live_page_del(struct jp_engine *e, uint64_t id, uint32_t *valp);

static inline bool live_find(struct jp_engine *e, uint64_t id, struct live_ref *r)
{
    r->page = false;
    if ((r->win = win_find(e, id)) != NULL)
        return true;
    if (e->pg_n && (r->valp = jpe_pg_find(e, id)) != NULL) {
        r->page = true;
        return true;
    }
    return (r->valp = jpe_table_find(e, id)) != NULL;
}

static inline uint64_t live_val(const struct live_ref *r)
{
    return r->win ? win_dec(*r->win) : val_get(r->valp);
}

static inline void live_del(struct jp_engine *e, uint64_t id, const struct live_ref *r)
{
    if (r->win)
        win_clear(e, (uint32_t)(r->win - e->win));
    else if (r->page)
        jpe_live_page_del(e, id, r->valp);
    else
        jpe_table_del(e, id, r->valp);
}

/* Replaces a live allocation's value; one the window slot cannot hold moves to the tables. */
static inline int live_set(struct jp_engine *e, uint64_t id, const struct live_ref *r,
                           uint64_t val)
{
    if (!r->win) {
        val_set(r->valp, val);
        return 0;
    }
    if (win_fits(val)) {
        *r->win = win_enc(val);
        return 0;
    }
    int rc = jpe_table_insert(e, id, val);
    if (rc < 0)
        return rc;
    win_clear(e, (uint32_t)(r->win - e->win));
    return 0;
}

/* The agent's counter: id is win_hi + 1 (no wrap, below UINT64_MAX), the window exists and is
 * not due to grow, and v is its slot value. A survivor in its slot (the id one window older)
 * moves out first, through a call; that is the only failure (-ENOBUFS, -ENOMEM). */
static inline int live_take_next(struct jp_engine *e, uint64_t id, uint32_t v)
{
    uint32_t slot = (uint32_t)(id & (e->win_w - 1u));
    if (__builtin_expect(e->win[slot] != 0, 0)) {
        int rc = jpe_live_evict_one(e, slot);
        if (rc < 0)
            return rc;
    }
    win_put(e, slot, v);
    win_advance(e, id);
    return 0;
}

/* Tracks a new live allocation. Inline for the agent's counter (the next id after the
 * highest, the window not due to grow, a value the slot holds): live_take_next, which is what
 * jpe_live_insert_slow does in that case; every other case there. */
static inline int live_insert(struct jp_engine *e, uint64_t id, uint64_t val)
{
    /* nwin < win_grow_at implies a window (win_grow_at is 0 until one exists); id is
     * win_hi + 1 without wrapping and is not UINT64_MAX (which lives in its own slot). */
    if (e->nwin < e->win_grow_at && e->win_hi < UINT64_MAX - 1u && id == e->win_hi + 1u &&
        win_fits(val))
        return live_take_next(e, id, win_enc(val));
    return jpe_live_insert_slow(e, id, val);
}

#endif
