/* The exact live-allocation tables, the live store's last place (live.h): a sharded
 * bucketized cuckoo table for narrow ids, a Robin Hood table for wide ones (also the late-id
 * history and the resize counts, memory.c), a slot for id UINT64_MAX, and the overflow array
 * for values that do not pack.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

/* The wide tables (ids >= 2^32 - 1, late ids) probe linearly, so their home slots are
 * seeded: a run of chosen ids cannot pile up on one slot. */
static inline uint32_t home_slot(uint64_t seed, uint64_t id, uint32_t cap)
{
    uint64_t h = mix64(id ^ seed);
    return (uint32_t)(((h >> 32) * (uint64_t)cap) >> 32);
}

/* The wide table (ids >= 2^32 - 1; also the late-id history, memory.c). Stored keys are id + 1,
 * never 0. Robin Hood linear probing: an entry's distance from its home slot orders each run,
 * so a miss stops as soon as it meets an entry closer to home than itself, and deletion shifts
 * back only until an entry sits at its home. That keeps probes short at the 90% load the
 * table runs at. */
static inline uint32_t lw_dist(const struct live_wide *t, uint64_t key, uint32_t i)
{
    uint32_t h = home_slot(t->seed, key, t->cap);
    return i >= h ? i - h : i + t->cap - h;
}

uint32_t *jpe_lw_find(struct live_wide *t, uint64_t key)
{
    if (!t->cap)
        return NULL;
    for (uint32_t i = home_slot(t->seed, key, t->cap), d = 0;; d++) {
        struct lw_ent *s = &t->ent[i];
        if (s->key == key)
            return &s->lo;
        if (!s->key || lw_dist(t, s->key, i) < d)
            return NULL;
        if (++i == t->cap)
            i = 0;
    }
}

void jpe_lw_put(struct live_wide *t, uint64_t key, uint64_t val)
{
    struct lw_ent cur = {.key = key};
    val_set(&cur.lo, val);
    for (uint32_t i = home_slot(t->seed, key, t->cap), d = 0;; d++) {
        struct lw_ent *s = &t->ent[i];
        if (!s->key) {
            *s = cur;
            break;
        }
        uint32_t sd = lw_dist(t, s->key, i);
        if (sd < d) { /* take the slot from the richer entry, carry it on */
            struct lw_ent tmp = *s;
            *s = cur;
            cur = tmp;
            d = sd;
        }
        if (++i == t->cap)
            i = 0;
    }
    t->n++;
}

/* Backward-shift deletion: no tombstones, so probe lengths never rot. */
void jpe_lw_del(struct live_wide *t, uint32_t *lop)
{
    uint32_t i = (uint32_t)(((char *)lop - (char *)t->ent) / sizeof(struct lw_ent));
    for (;;) {
        uint32_t j = i + 1u == t->cap ? 0 : i + 1u;
        if (!t->ent[j].key || lw_dist(t, t->ent[j].key, j) == 0)
            break;
        t->ent[i] = t->ent[j];
        i = j;
    }
    t->ent[i].key = 0;
    t->n--;
}

int jpe_lw_reserve(struct jp_engine *e, struct live_wide *t)
{
    if ((uint64_t)(t->n + 1u) * LIVE_MAX_LOAD_DEN <= (uint64_t)t->cap * LIVE_MAX_LOAD_NUM)
        return 0;
    uint64_t ncap = t->cap < 64u ? 64u : (uint64_t)t->cap + t->cap / 4u;
    if (ncap > UINT32_MAX / 2u)
        return -ENOBUFS;
    uint64_t old = (uint64_t)t->cap * sizeof(struct lw_ent), bytes = ncap * sizeof(struct lw_ent);
    if (jpe_budget_hold(e, bytes) < 0) /* old and new coexist during the rehash */
        return -ENOBUFS;
    struct live_wide n = {calloc((size_t)ncap, sizeof(struct lw_ent)), (uint32_t)ncap, 0, t->seed};
    if (!n.ent)
        return -ENOMEM;
    for (uint32_t i = 0; i < t->cap; i++)
        if (t->ent[i].key)
            jpe_lw_put(&n, t->ent[i].key, val_get(&t->ent[i].lo));
    free(t->ent);
    *t = n;
    e->used = e->used - old + bytes;
    return 0;
}

/* Growth schedule: a shard grows by 1/LN_GROW_DIV once it is LN_MAX_LOAD_PCT full. The two
 * trade rehash work (every live entry moves about LN_GROW_DIV + 1 times on the way to its
 * size) against bytes per live entry (12.8 / load, the load sawing between
 * LN_MAX_LOAD_PCT / (1 + 1/LN_GROW_DIV) and LN_MAX_LOAD_PCT) and cuckoo kicks near the top.
 * Most allocations now die in the young window (window.c), so the table sees few inserts and
 * can run fuller, which pays for growing in larger steps at the same bytes per entry. */
#define LN_MAX_LOAD_PCT 97u /* two 5-slot buckets per key still place nearly every insert */
#define LN_GROW_DIV 3u       /* grows by a third: each entry moves about 4 times on the way */

static inline uint32_t ln_alt(const struct live_narrow *t, uint32_t key, uint32_t b)
{
    uint32_t b1 = ln_b1(t, key), b2 = ln_b2(t, key, b1);
    return b == b1 ? b2 : b1;
}

static uint32_t *ln_find(struct live_narrow *t, uint32_t key)
{
    if (!t->nb)
        return NULL;
    uint32_t b1 = ln_b1(t, key), b2 = ln_b2(t, key, b1);
    __builtin_prefetch(&t->b[b2]); /* overlap the two possible misses */
    struct ln_bucket *x = &t->b[b1];
    for (unsigned i = 0; i < LN_SLOTS; i++)
        if (x->s[i].key == key)
            return &x->s[i].lo;
    x = &t->b[b2];
    for (unsigned i = 0; i < LN_SLOTS; i++)
        if (x->s[i].key == key)
            return &x->s[i].lo;
    for (unsigned i = 0; i < t->nstash; i++)
        if (t->stash[i].key == key)
            return &t->stash[i].lo;
    return NULL;
}

static inline bool ln_place(struct ln_bucket *x, const struct ln_ent *ent)
{
    for (unsigned i = 0; i < LN_SLOTS; i++)
        if (!x->s[i].key) {
            x->s[i] = *ent;
            return true;
        }
    return false;
}

/* 0, or -ENOSPC when the bounded displacement walk and the stash are exhausted: the entry
 * left over is in t->orphan and the caller must grow the table (which re-homes it). */
/* One step of a breadth-first search: a resident of bucket b that has room in its other
 * bucket moves there and cur takes its slot. At high load this finds a home far more often
 * than the first steps of a random walk, for fewer lines touched. */
static bool ln_shift_one(struct live_narrow *t, const struct ln_ent *cur, uint32_t b)
{
    struct ln_bucket *x = &t->b[b];
    for (unsigned i = 0; i < LN_SLOTS; i++) {
        uint32_t alt = ln_alt(t, x->s[i].key, b);
        if (alt != b && ln_place(&t->b[alt], &x->s[i])) {
            x->s[i] = *cur;
            return true;
        }
    }
    return false;
}

static int ln_put_at(struct live_narrow *t, struct ln_ent cur, uint32_t b)
{
    if (!ln_place(&t->b[b], &cur)) {
        uint32_t alt = ln_alt(t, cur.key, b);
        if (!ln_place(&t->b[alt], &cur) && !ln_shift_one(t, &cur, b) &&
            !ln_shift_one(t, &cur, alt))
            goto walk;
    }
    t->n++;
    return 0;
walk:
    for (unsigned kicks = 0; kicks < 256u; kicks++) {
        if (ln_place(&t->b[b], &cur)) {
            t->n++;
            return 0;
        }
        uint32_t alt = ln_alt(t, cur.key, b);
        if (ln_place(&t->b[alt], &cur)) {
            t->n++;
            return 0;
        }
        struct ln_ent *victim = &t->b[b].s[t->kick++ % LN_SLOTS];
        struct ln_ent tmp = *victim;
        *victim = cur;
        cur = tmp;
        b = ln_alt(t, cur.key, b);
    }
    if (t->nstash < LN_STASH) {
        t->stash[t->nstash++] = cur;
        t->n++;
        return 0;
    }
    t->orphan = cur;
    return -ENOSPC;
}

static int ln_put_ent(struct live_narrow *t, struct ln_ent cur)
{
    return ln_put_at(t, cur, ln_b1(t, cur.key));
}

static void ln_del(struct live_narrow *t, uint32_t *lop)
{
    struct ln_ent *ent = (struct ln_ent *)(void *)((char *)lop - offsetof(struct ln_ent, lo));
    if (ent >= t->stash && ent < t->stash + LN_STASH)
        *ent = t->stash[--t->nstash];
    else
        ent->key = 0;
    t->n--;
}

/* Rehashes into a table at least 1/LN_GROW_DIV larger (more if re-homing fails there),
 * counting the new size against the budget; with_orphan re-homes t->orphan too. */
static int ln_grow(struct jp_engine *e, struct live_narrow *t, bool with_orphan)
{
    /* A shard starts at two buckets so a small run does not pay LN_SHARDS cache lines up
     * front; small shards grow a bucket at a time (their rehash is a few lines). */
    uint64_t nb = t->nb < 2u ? 2u : (uint64_t)t->nb + (t->nb < 8u ? 1u : t->nb / LN_GROW_DIV);
    for (;;) {
        if (nb > UINT32_MAX / LN_SLOTS)
            return -ENOBUFS;
        uint64_t old = (uint64_t)t->nb * sizeof(struct ln_bucket);
        uint64_t bytes = nb * sizeof(struct ln_bucket);
        if (jpe_budget_hold(e, bytes) < 0) /* this shard's old and new copies coexist */
            return -ENOBUFS;
        struct live_narrow n;
        memset(&n, 0, sizeof n);
        n.b = aligned_alloc(64, (size_t)bytes);
        if (!n.b)
            return -ENOMEM;
        memset(n.b, 0, (size_t)bytes);
        n.nb = (uint32_t)nb;
        int rc = 0;
        /* Each entry first tries the same choice (first or second bucket) it had: both
         * bucket functions scale monotonically with the table size, so walking the old
         * buckets in order writes the new ones in order too, instead of at random. */
        for (uint32_t i = 0; i < t->nb && rc == 0; i++)
            for (unsigned k = 0; k < LN_SLOTS && rc == 0; k++) {
                struct ln_ent ent = t->b[i].s[k];
                if (!ent.key)
                    continue;
                uint32_t nb1 = ln_b1(&n, ent.key);
                bool second = i != ln_b1(t, ent.key);
                rc = ln_put_at(&n, ent, second ? ln_b2(&n, ent.key, nb1) : nb1);
            }
        for (uint32_t i = 0; i < t->nstash && rc == 0; i++)
            rc = ln_put_ent(&n, t->stash[i]);
        if (rc == 0 && with_orphan)
            rc = ln_put_ent(&n, t->orphan);
        if (rc < 0) { /* not one lost: try a larger table */
            free(n.b);
            nb += nb / 8u + 1u;
            continue;
        }
        free(t->b);
        n.kick = t->kick;
        *t = n;
        e->used = e->used - old + bytes;
        return 0;
    }
}

static int ln_insert(struct jp_engine *e, struct live_narrow *t, uint32_t key, uint64_t val)
{
    int rc;
    if ((uint64_t)(t->n + 1u) * 100u > (uint64_t)t->nb * LN_SLOTS * LN_MAX_LOAD_PCT &&
        (rc = ln_grow(e, t, false)) < 0)
        return rc;
    struct ln_ent ent = {key, 0, 0};
    val_set(&ent.lo, val);
    if (ln_put_ent(t, ent) == 0)
        return 0;
    /* The orphan is some resident, not necessarily this entry; growing re-homes it. If the
     * budget refuses, exact tracking ends (the caller marks it), so nothing is reported from
     * a table that lost an entry. */
    if ((rc = ln_grow(e, t, true)) < 0)
        return rc;
    return 0;
}

uint32_t *jpe_table_find(struct jp_engine *e, uint64_t id)
{
    if (id < UINT32_MAX)
        return ln_find(ln_shard(e, (uint32_t)(id + 1u)), (uint32_t)(id + 1u));
    if (id == UINT64_MAX)
        return e->max_id_live ? e->max_id_val : NULL;
    return jpe_lw_find(&e->lw, id + 1u);
}

void jpe_table_del(struct jp_engine *e, uint64_t id, uint32_t *valp)
{
    if (id < UINT32_MAX)
        ln_del(ln_shard(e, (uint32_t)(id + 1u)), valp);
    else if (id == UINT64_MAX)
        e->max_id_live = false;
    else
        jpe_lw_del(&e->lw, valp);
}

/* live_pack's half for a value that does not pack: an overflow entry holds it. */
int jpe_ovf_pack(struct jp_engine *e, uint64_t size, uint32_t chain, uint64_t *out)
{
    uint32_t i;
    if (e->ovf_free) {
        i = e->ovf_free - 1u;
        e->ovf_free = e->ovf[i].next_free;
    } else {
        int rc = jpe_vec_grow(e, (void **)&e->ovf, &e->ovf_cap, e->novf + 1u, sizeof *e->ovf);
        if (rc < 0)
            return rc;
        i = e->novf++;
    }
    e->ovf[i] = (struct overflow_ent){size, chain, 0};
    *out = (uint64_t)i | ((uint64_t)CHAIN_OVERFLOW << SIZE_BITS);
    return 0;
}

int jpe_table_insert(struct jp_engine *e, uint64_t id, uint64_t val)
{
    int rc;
    if (id < UINT32_MAX) {
        uint32_t key = (uint32_t)(id + 1u);
        if ((rc = ln_insert(e, ln_shard(e, key), key, val)) < 0)
            return rc;
    } else if (id == UINT64_MAX) {
        e->max_id_live = true;
        val_set(e->max_id_val, val);
    } else {
        if ((rc = jpe_lw_reserve(e, &e->lw)) < 0)
            return rc;
        jpe_lw_put(&e->lw, id + 1u, val);
    }
    return 0;
}
