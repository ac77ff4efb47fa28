/* The survivor pages: the live allocations the young window (window.c) lets go of, kept in id
 * order instead of hashed.
 *
 * An allocation still live when a newer id needs its window slot leaves the window then, so
 * the survivors leave it oldest first: with the agent's counter, every survivor's id is above the
 * last one's. Hashing each of them into the cuckoo tables costs two cache misses on random
 * lines (and the kicks and growths of a table near full); a workload that keeps one
 * allocation in ten spent about as long on those inserts as on all its other records. Here
 * they are appended instead, to the page of their id: a page covers PG_IDS consecutive ids
 * with a bit per id and the values of the set bits in id order, so an append writes the end
 * of one page (the same few lines as the last), and a lookup is a bit test, a popcount and one
 * value. A page of dense survivors costs about 8 bytes each (the cuckoo tables 13 to 18), so
 * the live set the budget holds grows too.
 *
 * Only what keeps that true comes here (the live store, live.c, asks jpe_pg_admit); everything
 * else goes to the tables, and a lookup that misses the pages goes on to them:
 *  - an id at or below the highest appended (a survivor out of order: several rings, a
 *    window that jumped) or UINT64_MAX;
 *  - an id more than PG_MAX_GAP pages past the newest page while a page holds anything (the
 *    directory stays small: it covers the pages from the oldest that holds a value);
 *  - a page that is closed (a newer page took an id) holding fewer than PG_MIN values, and a
 *    closed page that frees down to fewer than PG_KEEP live: too sparse to beat the tables,
 *    their live values move there (this file says so; live.c moves them, jpe_pg_next_live);
 *  - a page the budget or malloc refuses.
 * A freed value is marked PG_DEAD (no packed value is all ones: an overflow index is below
 * 2^32); a page whose live values fall below three quarters of its values is compacted in
 * place (at most a third more values than live ones, for four moves a free at most), and a
 * page with none left is freed. Where pages are made, grown, closed and freed depends on the ids
 * alone, like the window's growth, so a replay with a budget that fits does the very same.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

#define PG_WORDS (PG_IDS / 64u)
#define PG_DEAD UINT64_MAX
#define PG_FIRST_CAP 64u  /* values a new page has room for; doubles up to PG_IDS */
#define PG_MIN 128u       /* a closed page with fewer values is too sparse to keep */
#define PG_KEEP 64u       /* a closed page freed down to fewer live values does too */
#define PG_MAX_GAP 4096u  /* pages an append may skip while pages hold anything */

struct pg_page {
    uint64_t bits[PG_WORDS];   /* the ids that have a value, by id - the page's first id */
    uint16_t before[PG_WORDS]; /* values of the ids in the words below (valid where bits set) */
    uint32_t n, live, cap;     /* values appended (live or PG_DEAD), live ones, room */
    uint32_t val[][2];         /* in id order: val_get / val_set */
};
_Static_assert(PG_IDS <= 65536u && PG_IDS % 64u == 0, "a page is whole words; ranks fit before[]");

static inline uint64_t page_bytes(uint32_t cap)
{
    return sizeof(struct pg_page) + (uint64_t)cap * sizeof(uint32_t[2]);
}

/* The directory entry of id's page, or NULL when no page of it can exist. */
static inline struct pg_page **page_ref(struct jp_engine *e, uint64_t id)
{
    uint64_t p = id >> PG_ID_BITS;
    if (p < e->pg_base || p - e->pg_base >= e->pg_n)
        return NULL;
    return &e->pg[p - e->pg_base];
}

static inline uint32_t *page_val(struct pg_page *g, uint32_t i)
{
    uint32_t w = i >> 6;
    uint64_t bit = UINT64_C(1) << (i & 63u);
    if (!(g->bits[w] & bit))
        return NULL;
    return g->val[g->before[w] + (uint32_t)__builtin_popcountll(g->bits[w] & (bit - 1u))];
}

uint32_t *jpe_pg_find(struct jp_engine *e, uint64_t id)
{
    struct pg_page **r = page_ref(e, id), *g;
    if (!r || !(g = *r))
        return NULL;
    uint32_t *v = page_val(g, (uint32_t)(id & (PG_IDS - 1u)));
    return v && val_get(v) != PG_DEAD ? v : NULL;
}

static void page_free(struct jp_engine *e, struct pg_page **r)
{
    e->used -= page_bytes((*r)->cap);
    free(*r);
    *r = NULL;
    /* the leading empty entries: dropped once they are half the directory (each entry is
     * passed once by the scan, moved at most once by the memmove it pays for) */
    while (e->pg_front < e->pg_n && !e->pg[e->pg_front])
        e->pg_front++;
    if (e->pg_front == e->pg_n) {
        e->pg_n = e->pg_front = 0;
    } else if (e->pg_front >= e->pg_n / 2u) {
        memmove(e->pg, e->pg + e->pg_front, (e->pg_n - e->pg_front) * sizeof *e->pg);
        memset(e->pg + e->pg_n - e->pg_front, 0, e->pg_front * sizeof *e->pg);
        e->pg_base += e->pg_front;
        e->pg_n -= e->pg_front;
        e->pg_front = 0;
    }
}

/* Drops the dead values, keeping the live ones in id order (ranks are recomputed), and gives
 * back the room past them (a refused shrink keeps the page as it is). */
static void page_compact(struct jp_engine *e, struct pg_page **r)
{
    struct pg_page *g = *r;
    uint32_t k = 0, rank = 0;
    for (uint32_t w = 0; w < PG_WORDS; w++) {
        uint64_t keep = 0;
        for (uint64_t b = g->bits[w]; b; b &= b - 1u, rank++) {
            if (val_get(g->val[rank]) == PG_DEAD)
                continue;
            if (!keep)
                g->before[w] = (uint16_t)k;
            keep |= b & -b;
            memmove(g->val[k++], g->val[rank], sizeof g->val[0]); /* k <= rank */
        }
        g->bits[w] = keep;
    }
    g->n = k;
    uint32_t cap = (k + 15u) & ~15u; /* an append past it doubles it again */
    if (cap >= g->cap)
        return;
    struct pg_page *s = realloc(g, (size_t)page_bytes(cap));
    if (!s)
        return; /* still correct, only larger than it needs to be */
    uint64_t saved = page_bytes(s->cap) - page_bytes(cap);
    e->used -= saved;
    s->cap = cap;
    *r = s;
}

uint32_t *jpe_pg_next_live(struct jp_engine *e, uint64_t page_id, uint32_t *cursor,
                           uint64_t *id)
{
    struct pg_page **r = page_ref(e, page_id), *g;
    if (!r || !(g = *r))
        return NULL;
    for (uint32_t i = *cursor; i < PG_IDS;) {
        uint32_t w = i >> 6;
        uint64_t m = g->bits[w] & (~UINT64_C(0) << (i & 63u));
        if (!m) {
            i = (w + 1u) << 6;
            continue;
        }
        i = (w << 6) + (uint32_t)__builtin_ctzll(m);
        uint32_t *v = page_val(g, i);
        if (val_get(v) != PG_DEAD) {
            *cursor = i + 1u;
            *id = (page_id & ~(uint64_t)(PG_IDS - 1u)) + i;
            return v;
        }
        i++;
    }
    return NULL;
}

void jpe_pg_moved(struct jp_engine *e, uint64_t id, uint32_t *valp)
{
    struct pg_page **r = page_ref(e, id);
    val_set(valp, PG_DEAD);
    if (!--(*r)->live)
        page_free(e, r);
}

void jpe_pg_tidy(struct jp_engine *e, uint64_t page_id)
{
    struct pg_page **r = page_ref(e, page_id);
    if (r && *r && (*r)->live < (*r)->n / 4u * 3u)
        page_compact(e, r);
}

int jpe_pg_del(struct jp_engine *e, uint64_t id, uint32_t *valp)
{
    struct pg_page **r = page_ref(e, id), *g = *r;
    val_set(valp, PG_DEAD);
    g->live--;
    if (!g->live) {
        page_free(e, r);
        return 0;
    }
    bool closed = (uint64_t)(r - e->pg) + 1u < e->pg_n;
    if (closed && g->live < PG_KEEP)
        return 1;
    if (g->live < g->n / 4u * 3u)
        page_compact(e, r);
    return 0;
}

/* The newest page stops taking values (a newer page took one); the values it took size the
 * next page. 1 when it is too sparse to keep, else 0. */
static int page_close(struct jp_engine *e)
{
    struct pg_page **r = &e->pg[e->pg_n - 1u];
    if (!*r)
        return 0;
    e->pg_hint = (*r)->n;
    if ((*r)->n < PG_MIN)
        return 1;
    if ((*r)->cap / 4u * 3u > (*r)->n) /* made for more than came: the room goes back */
        page_compact(e, r);
    return 0;
}

/* Room for the value of id in its page, the page made or grown as needed: 0, -ENOBUFS,
 * -ENOMEM. */
static int page_room(struct jp_engine *e, uint64_t id, struct pg_page ***out)
{
    uint64_t p = id >> PG_ID_BITS;
    if (!e->pg_n)
        e->pg_base = p;
    if (p - e->pg_base >= e->pg_n) { /* a page past the newest */
        uint64_t need = p - e->pg_base + 1u;
        if (need > UINT32_MAX)
            return -ENOBUFS;
        int rc = jpe_vec_grow(e, (void **)&e->pg, &e->pg_cap, (uint32_t)need, sizeof *e->pg);
        if (rc < 0)
            return rc;
        e->pg_n = (uint32_t)need;
    }
    struct pg_page **r = &e->pg[p - e->pg_base], *g = *r;
    if (!g) {
        /* room for as many values as the last page took, so a steady rate of survivors
         * makes each page once instead of doubling it up from PG_FIRST_CAP */
        uint32_t cap = PG_FIRST_CAP;
        while (cap < e->pg_hint && cap < PG_IDS)
            cap *= 2u;
        uint64_t bytes = page_bytes(cap);
        if (jpe_budget_hold(e, bytes) < 0)
            return -ENOBUFS;
        if (!(g = malloc((size_t)bytes)))
            return -ENOMEM;
        memset(g, 0, sizeof *g);
        g->cap = cap;
        *r = g;
        e->used += bytes;
    } else if (g->n == g->cap) {
        uint32_t cap = g->cap * 2u;
        uint64_t old = page_bytes(g->cap), bytes = page_bytes(cap);
        if (jpe_budget_hold(e, bytes) < 0) /* realloc may hold both */
            return -ENOBUFS;
        if (!(g = realloc(g, (size_t)bytes)))
            return -ENOMEM;
        g->cap = cap;
        *r = g;
        e->used += bytes - old;
    }
    *out = r;
    return 0;
}

int jpe_pg_admit_slow(struct jp_engine *e, uint64_t id, uint64_t *sparse)
{
    if (id < e->pg_next || id == UINT64_MAX)
        return 0;
    /* A directory entry is non-NULL only while its page holds a live value (a page is made
     * for the value it takes and freed with its last), so pg_n is 0 exactly when nothing is
     * held; then the next page may be anywhere past pg_next (page_room starts there). */
    uint64_t p = id >> PG_ID_BITS;
    if (e->pg_n && p >= e->pg_base + e->pg_n) {
        uint64_t newest = e->pg_base + e->pg_n - 1u;
        if (p - newest > PG_MAX_GAP)
            return 0;
        if (page_close(e))
            *sparse = newest << PG_ID_BITS;
    }
    return 1;
}

int jpe_pg_append(struct jp_engine *e, uint64_t id, uint64_t val)
{
    struct pg_page **r;
    int rc = page_room(e, id, &r);
    if (rc < 0)
        return rc == -ENOMEM ? rc : 0;
    struct pg_page *g = *r;
    uint32_t i = (uint32_t)(id & (PG_IDS - 1u)), w = i >> 6;
    if (!g->bits[w])
        g->before[w] = (uint16_t)g->n;
    g->bits[w] |= UINT64_C(1) << (i & 63u);
    val_set(g->val[g->n++], val);
    g->live++;
    e->pg_next = id + 1u;
    return 1;
}

uint64_t jpe_pg_bytes(const struct jp_engine *e, uint64_t *live)
{
    uint64_t bytes = (uint64_t)e->pg_cap * sizeof *e->pg;
    *live = 0;
    for (uint32_t i = e->pg_front; i < e->pg_n; i++)
        if (e->pg[i]) {
            bytes += page_bytes(e->pg[i]->cap);
            *live += e->pg[i]->live;
        }
    return bytes;
}

void jpe_pg_free_all(struct jp_engine *e)
{
    for (uint32_t i = 0; i < e->pg_n; i++)
        free(e->pg[i]);
    free(e->pg);
}
