/* The young-id window in front of the live tables: sequential ids with long lifetimes (the
 * window grows), sparse and huge ids (jumps past the window, the wide table, UINT64_MAX),
 * values a window slot cannot hold (sizes >= 2^20, sites >= 4095, resizes across that line),
 * retired-id reuse and double frees wherever the id lives, budgets that refuse the window
 * or its growth, and the survivor pages behind it (what they cost a survivor, dense, thinned
 * and sparse; frees, resizes and bad events against ids they hold). Every stream is checked
 * against a naive model of the live set. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

enum { SRC = 1, N_MAIN = 1, N_A = 2, N_B = 3 };

static void define_sites(struct jp_engine *e)
{
    t_source(e, SRC, JP_ORIGIN_PROJECT, "src/win.jett");
    t_frame(e, 1, SRC, "<root>", "main", 0, 10, 1, JP_FRAME_FUNCTION);
    t_frame(e, 2, SRC, "w", "a", 10, 20, 20, JP_FRAME_FUNCTION);
    t_frame(e, 3, SRC, "w", "b", 20, 30, 30, JP_FRAME_FUNCTION);
    t_node(e, N_MAIN, 0, 1);
    t_node(e, N_A, N_MAIN, 2);
    t_node(e, N_B, N_MAIN, 3);
}

/* A memory-mode engine with room for everything (a 64 MiB budget) and the sites defined. */
static struct jp_engine *roomy_engine(void)
{
    struct jp_engine *e;
    cr_assert_eq(jp_engine_new(&e), 0);
    t_start(e, JP_MODE_MEMORY, 0, 0, 10, 32 * MiB, 64 * MiB);
    define_sites(e);
    return e;
}

static uint64_t rng;
static uint64_t next_rand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* The naive model: the live set as an array, totals beside. */
struct model {
    uint64_t *ids, *sizes;
    uint32_t n, cap;
    uint64_t *retired; /* some freed ids, to try again */
    uint32_t nretired;
    uint64_t allocated, freed, live, peak, nalloc, nresize, violations;
};

static void m_init(struct model *m, uint32_t cap)
{
    memset(m, 0, sizeof *m);
    m->cap = cap;
    m->ids = calloc(cap, sizeof *m->ids);
    m->sizes = calloc(cap, sizeof *m->sizes);
    m->retired = calloc(4096, sizeof *m->retired);
    cr_assert(m->ids && m->sizes && m->retired);
}

static void m_free_all(struct model *m)
{
    free(m->ids);
    free(m->sizes);
    free(m->retired);
}

static void m_alloc(struct jp_engine *e, struct model *m, uint64_t id, uint64_t size)
{
    cr_assert_lt(m->n, m->cap);
    uint64_t x = next_rand();
    t_alloc(e, (x & 3u) == 0 ? JP_ID_NONE : (x & 4u) ? N_A : N_B, id, size);
    m->ids[m->n] = id;
    m->sizes[m->n++] = size;
    m->allocated += size;
    m->live += size;
    m->nalloc++;
    if (m->live > m->peak)
        m->peak = m->live;
}

static void m_free(struct jp_engine *e, struct model *m, uint32_t i)
{
    t_free(e, 0, m->ids[i], m->sizes[i]);
    m->freed += m->sizes[i];
    m->live -= m->sizes[i];
    m->retired[m->nretired++ % 4096u] = m->ids[i];
    m->ids[i] = m->ids[m->n - 1u];
    m->sizes[i] = m->sizes[--m->n];
}

static void m_resize(struct jp_engine *e, struct model *m, uint32_t i, uint64_t ns)
{
    t_resize(e, N_A, m->ids[i], m->sizes[i], ns);
    if (ns >= m->sizes[i]) {
        m->allocated += ns - m->sizes[i];
        m->live += ns - m->sizes[i];
    } else {
        m->freed += m->sizes[i] - ns;
        m->live -= m->sizes[i] - ns;
    }
    m->sizes[i] = ns;
    m->nresize++;
    if (m->live > m->peak)
        m->peak = m->live;
}

/* A reused id (live or retired), a double free and a wrong-size free: each one violation,
 * nothing else changes. */
static void m_bad(struct jp_engine *e, struct model *m)
{
    if (m->n) {
        uint32_t i = (uint32_t)(next_rand() % m->n);
        struct jp_rec_alloc live_again = {{JP_REC_ALLOC, 32}, N_A, m->ids[i], 1, 0};
        struct jp_rec_free wrong = {{JP_REC_FREE, 32}, 0, m->ids[i], m->sizes[i] + 1u, 0};
        cr_assert_eq(t_feed_raw(e, &live_again, 32, NULL), 0);
        cr_assert_eq(t_feed_raw(e, &wrong, 32, NULL), 0);
        m->violations += 2;
    }
    if (m->nretired) {
        uint32_t k = m->nretired < 4096u ? m->nretired : 4096u;
        uint64_t id = m->retired[next_rand() % k];
        struct jp_rec_alloc reuse = {{JP_REC_ALLOC, 32}, N_B, id, 1, 0};
        struct jp_rec_free twice = {{JP_REC_FREE, 32}, 0, id, 1, 0};
        cr_assert_eq(t_feed_raw(e, &reuse, 32, NULL), 0);
        cr_assert_eq(t_feed_raw(e, &twice, 32, NULL), 0);
        m->violations += 2;
    }
}

static void m_check(struct jp_engine *e, struct model *m)
{
    struct jp_engine_summary s;
    cr_assert_eq(jp_engine_summary(e, &s), 0);
    cr_assert_eq(s.live_exact, 1);
    cr_assert_eq(s.violations, m->violations);
    cr_assert_eq(s.allocation_count, m->nalloc);
    cr_assert_eq(s.resize_count, m->nresize);
    cr_assert_eq(s.allocated_bytes, m->allocated);
    cr_assert_eq(s.freed_bytes, m->freed);
    cr_assert_eq(s.retained_bytes, m->live);
    cr_assert_eq(s.peak_live_bytes, m->peak);
    uint64_t tracked;
    jp_engine_live_table_bytes(e, &tracked);
    cr_assert_eq(tracked, m->n);
}

/* Frees everything still live (each exactly once, wherever it is held) and checks again. */
static void m_drain(struct jp_engine *e, struct model *m)
{
    while (m->n)
        m_free(e, m, m->n - 1u);
    m_bad(e, m);
    m_check(e, m);
}

static uint64_t small_size(void)
{
    return next_rand() % 300u;
}

/* Ids from the agent's counter, lifetimes up to a few hundred thousand ids: the window grows
 * to its largest size, survivors still leave it for the tables. */
Test(window, sequential_ids_long_lifetimes)
{
    struct jp_engine *e = roomy_engine();
    struct model m;
    m_init(&m, 200000);
    rng = 0x1234567887654321u;
    for (uint64_t id = 1; id <= 600000; id++) {
        m_alloc(e, &m, id, small_size());
        if (id <= 3500) { /* short-lived first, so no growth lines up with a power of two */
            m_free(e, &m, m.n - 1u);
            continue;
        }
        uint64_t x = next_rand();
        if (m.n > 60000 && (x % 10u) != 0)
            m_free(e, &m, (uint32_t)((x >> 8) % m.n));
        if ((x >> 40) % 64u == 0 && m.n)
            m_resize(e, &m, (uint32_t)((x >> 20) % m.n), small_size());
        if (id % 50000u == 0)
            m_bad(e, &m);
    }
    m_check(e, &m);
    m_drain(e, &m);
    m_free_all(&m);
    jp_engine_free(e);
}

/* Sparse ids: strides below, at and beyond the window (a jump displaces everything), big
 * random jumps with survivors spread over the window (the occupancy bitmap finds them), and
 * ids that arrive below the highest (straight to the tables). */
Test(window, sparse_and_jumping_ids)
{
    static const uint64_t strides[] = {3, 4095, 4096, 4097, 70000, UINT64_C(1) << 20};
    for (unsigned k = 0; k < sizeof strides / sizeof *strides; k++) {
        struct jp_engine *e = roomy_engine();
        struct model m;
        m_init(&m, 40000);
        rng = 0x9E3779B97F4A7C15u + k;
        for (uint64_t i = 1; i <= 30000; i++) {
            m_alloc(e, &m, i * strides[k], small_size());
            uint64_t x = next_rand();
            if (m.n > 3000 && (x % 4u) != 0)
                m_free(e, &m, (uint32_t)((x >> 8) % m.n));
        }
        m_bad(e, &m);
        m_check(e, &m);
        m_drain(e, &m);
        m_free_all(&m);
        jp_engine_free(e);
    }

    struct jp_engine *e = roomy_engine();
    struct model m;
    m_init(&m, 100000);
    rng = 42;
    /* even ids climb, mostly by 2, sometimes by up to 600000; odd ones count down from just
     * below where the even ones start, so each arrives below the highest id seen */
    uint64_t hi = UINT64_C(1) << 62, low = hi + 1u;
    for (int i = 0; i < 150000; i++) {
        uint64_t x = next_rand();
        unsigned kind = (unsigned)(x % 16u);
        if (kind < 10 || m.n < 100) {
            hi += kind < 8 ? 2u : 2u * (1u + (x >> 8) % 300000u);
            m_alloc(e, &m, hi, small_size());
        } else if (kind == 10) {
            low -= 2u * (1u + (x >> 8) % 1000u);
            m_alloc(e, &m, low, small_size());
        } else {
            m_free(e, &m, (uint32_t)((x >> 8) % m.n));
        }
    }
    m_bad(e, &m);
    m_check(e, &m);
    m_drain(e, &m);
    m_free_all(&m);
    jp_engine_free(e);
}

/* Ids past 2^32 (the wide table when they leave the window), across the narrow/wide line,
 * and UINT64_MAX (a slot of its own), with the ids around them. */
Test(window, huge_ids)
{
    static const uint64_t bases[] = {UINT32_MAX - 5000u, UINT64_C(1) << 40,
                                     UINT64_MAX - 20000u};
    for (unsigned k = 0; k < 3; k++) {
        struct jp_engine *e = roomy_engine();
        struct model m;
        m_init(&m, 30000);
        rng = 7u + k;
        uint64_t last = k == 2 ? 20000u : 10000u; /* k == 2 ends at UINT64_MAX itself */
        for (uint64_t i = 0; i <= last; i++) {
            m_alloc(e, &m, bases[k] + i, small_size());
            uint64_t x = next_rand();
            if (m.n > 5000 && (x % 3u) != 0)
                m_free(e, &m, (uint32_t)((x >> 8) % m.n));
        }
        m_bad(e, &m);
        m_check(e, &m);
        m_drain(e, &m);
        m_free_all(&m);
        jp_engine_free(e);
    }
}

/* Values a 4-byte window slot cannot hold: sizes from 2^20 up (and past 2^40, the overflow
 * array), no site, resizes that cross 2^20 both ways while the allocation is young or old. */
Test(window, values_that_do_not_fit_a_slot)
{
    struct jp_engine *e = roomy_engine();
    struct model m;
    m_init(&m, 70000);
    rng = 99;
    static const uint64_t sizes[] = {0, 1, (1u << 20) - 1u, 1u << 20, (1u << 20) + 1u,
                                     UINT64_C(1) << 40, UINT64_C(1) << 41};
    for (uint64_t id = 1; id <= 60000; id++) {
        uint64_t x = next_rand();
        m_alloc(e, &m, id, sizes[x % 7u]);
        if ((x >> 8) % 4u == 0 && m.n) /* the newest, or a random one */
            m_resize(e, &m, (x >> 12) & 1u ? m.n - 1u : (uint32_t)((x >> 16) % m.n),
                     sizes[(x >> 32) % 7u]);
        if (m.n > 8000 && (x >> 40) % 2u == 0)
            m_free(e, &m, (uint32_t)((x >> 44) % m.n));
    }
    m_bad(e, &m);
    m_check(e, &m);
    m_drain(e, &m);
    m_free_all(&m);
    jp_engine_free(e);
}

/* Sites from 4095 up do not fit a window slot either: their allocations go to the tables and
 * their live bytes stay exact. */
Test(window, many_sites)
{
    struct jp_engine *e;
    cr_assert_eq(jp_engine_new(&e), 0);
    t_start(e, JP_MODE_MEMORY, 0, 0, 10, 32 * MiB, 64 * MiB);
    t_source(e, SRC, JP_ORIGIN_PROJECT, "src/many.jett");
    enum { NF = 4200 };
    char fn[16];
    for (uint32_t i = 1; i <= NF; i++) {
        snprintf(fn, sizeof fn, "f%u", i);
        t_frame(e, i, SRC, "m", fn, i * 10, i * 10 + 5, i, JP_FRAME_FUNCTION);
        t_node(e, i, 0, i);
    }
    uint64_t live = 0, allocated = 0;
    for (uint64_t id = 1; id <= 3 * NF; id++) {
        uint32_t node = (uint32_t)(id % NF) + 1u;
        t_alloc(e, node, id, node);
        allocated += node;
        live += node;
        if (id > 100 && (id % 3u)) {
            uint64_t old = id - 100;
            t_free(e, node, old, (uint32_t)(old % NF) + 1u);
            live -= (uint32_t)(old % NF) + 1u;
        }
    }
    t_resize(e, NF, 3 * NF - 1, NF, 7); /* node NF: the last site, still live */
    live -= NF - 7;
    /* freed when id 3 * NF - 1 came: a second free is caught */
    struct jp_rec_free twice = {{JP_REC_FREE, 32}, 0, 3 * NF - 101, NF - 100, 0};
    cr_assert_eq(t_feed_raw(e, &twice, 32, NULL), 0);
    struct jp_engine_summary s;
    cr_assert_eq(jp_engine_summary(e, &s), 0);
    cr_assert_eq(s.violations, 1);
    cr_assert_eq(s.retained_bytes, live);
    cr_assert_eq(s.allocated_bytes, allocated);
    cr_assert_eq(s.live_exact, 1);
    jp_engine_free(e);
}

/* Long-lived sequential allocations under a sweep of budgets: every run stays within its
 * budget and is either exact (equal to the roomy run) or degraded as an exhausted budget is;
 * some budget refuses a window growth yet stays exact, and a budget below the first window
 * tracks exactly through the tables alone. */
static void budget_stream(struct jp_engine *e, uint64_t budget, uint32_t n)
{
    t_start(e, JP_MODE_MEMORY, 0, 0, 10, 32 * MiB, budget);
    define_sites(e);
    for (uint64_t id = 1; id <= n; id++) {
        t_alloc(e, N_A, id, id % 97u);
        if (id > 10 && (id - 10) % 3u != 0)
            t_free(e, 0, id - 10, (id - 10) % 97u);
    }
}

Test(window, budgets_refusing_the_window)
{
    enum { N = 20000 };
    struct jp_engine *e;
    cr_assert_eq(jp_engine_new(&e), 0);
    budget_stream(e, 64 * MiB, N);
    struct jp_engine_summary roomy;
    cr_assert_eq(jp_engine_summary(e, &roomy), 0);
    cr_assert_eq(roomy.live_exact, 1);
    uint64_t peak = jp_engine_metadata_peak_bytes(e);
    jp_engine_free(e);

    bool exact_below_peak = false, partial_seen = false;
    for (uint64_t b = 8192; b < peak; b += 2048) {
        cr_assert_eq(jp_engine_new(&e), 0);
        budget_stream(e, b, N);
        struct jp_engine_summary s;
        cr_assert_eq(jp_engine_summary(e, &s), 0);
        cr_assert_leq(jp_engine_metadata_peak_bytes(e), b, "held more than %llu",
                      (unsigned long long)b);
        cr_assert_eq(s.allocation_count, roomy.allocation_count); /* counts go on */
        cr_assert_eq(s.allocated_bytes, roomy.allocated_bytes);
        if (s.live_exact) {
            cr_assert_eq(s.retained_bytes, roomy.retained_bytes);
            cr_assert_eq(s.freed_bytes, roomy.freed_bytes);
            cr_assert_eq(s.peak_live_bytes, roomy.peak_live_bytes);
            cr_assert_eq(s.violations, 0);
            exact_below_peak = true;
        } else {
            partial_seen = true;
            char *json;
            t_render(e, JP_END_TRUNCATED, NULL, NULL, &json, NULL);
            J_EQ(json, "profile.totals.retained_bytes", "unavailable");
            free(json);
        }
        jp_engine_free(e);
    }
    cr_assert(exact_below_peak, "no budget below the roomy peak stayed exact");
    cr_assert(partial_seen, "no budget ran out");

    /* below the first window: the tables alone, still exact */
    cr_assert_eq(jp_engine_new(&e), 0);
    budget_stream(e, 16384, 300);
    struct jp_engine_summary s;
    cr_assert_eq(jp_engine_summary(e, &s), 0);
    cr_assert_eq(s.live_exact, 1);
    cr_assert_leq(jp_engine_metadata_peak_bytes(e), 16384);
    uint64_t tracked, bytes = jp_engine_live_table_bytes(e, &tracked);
    cr_assert_lt(bytes, 16384, "no window: %llu bytes", (unsigned long long)bytes);
    cr_assert_eq(tracked, 300u - (290u - 290u / 3u));
    jp_engine_free(e);
}

/* A grown window with a few survivors far apart (empty runs of thousands of slots between
 * them), then jumps of the highest id that displace part of the window and then all of it:
 * every survivor reaches the tables once, none is skipped. */
Test(window, jumps_over_a_sparse_grown_window)
{
    struct jp_engine *e = roomy_engine();
    struct model m;
    m_init(&m, 210000);
    rng = 5;
    for (uint64_t id = 1; id <= 200000; id++)
        m_alloc(e, &m, id, small_size());
    for (uint32_t i = m.n; i-- > 0;)
        if (m.ids[i] % 9973u != 0)
            m_free(e, &m, i);
    cr_assert_eq(m.n, 200000u / 9973u);
    m_alloc(e, &m, 200000u + 150000u, 5);       /* displaces part of the window */
    m_alloc(e, &m, 200000u + 150000u + 3u, 6);  /* a small jump */
    m_alloc(e, &m, 200000u + (1u << 20), 7);    /* past the largest window: all of it */
    m_alloc(e, &m, 200000u + (1u << 20) + 1u, 8);
    m_bad(e, &m);
    m_check(e, &m);
    m_drain(e, &m);
    m_free_all(&m);
    jp_engine_free(e);
}

/* ---- the one-pass event paths against the general ones ---------------------------------- */

enum { N_TRUNC = 4, N_UNDEFINED = 9 };

static void t_exec_id(struct jp_engine *e, uint32_t thread)
{
    struct jp_rec_exec x = {{JP_REC_EXEC, sizeof x}, thread, JP_ID_UNAVAILABLE,
                            JP_ID_UNAVAILABLE};
    cr_assert_eq(t_feed_raw(e, &x, sizeof x, NULL), 0);
}

/* A memory run that walks the edge of every condition on_alloc's and on_free's one-pass paths
 * test: the agent's counter with jumps and ids below the highest, sizes either side of the
 * window slot's 2^20, no stack, a truncated stack and an undefined node, EXEC switches, frees of
 * allocations in the window and in the tables, wrong sizes and double frees, resizes; and, with
 * a small retention budget, the end of exact live tracking part way. */
static void edge_stream(struct jp_engine *e, uint64_t retention_budget, uint64_t seed)
{
    t_start(e, JP_MODE_MEMORY, 0, 0, 10, 32 * MiB, retention_budget);
    define_sites(e);
    t_frame(e, 4, 0, "<root>", "<truncated-stack>", 0, 0, 0, JP_FRAME_TRUNCATED);
    t_node(e, N_TRUNC, N_A, 4);
    static const uint32_t nodes[] = {JP_ID_NONE, N_MAIN, N_A, N_B, N_TRUNC, N_UNDEFINED};
    static const uint64_t sizes[] = {0, 1, 48, (UINT64_C(1) << 20) - 1u, UINT64_C(1) << 20,
                                     UINT64_C(1) << 41};
    enum { CAP = 1u << 16 };
    static uint64_t ids[CAP], szs[CAP];
    uint32_t n = 0;
    uint64_t next = 1;
    rng = seed;
    t_exec_id(e, 1);
    for (int i = 0; i < 200000; i++) {
        uint64_t x = next_rand();
        unsigned what = (unsigned)(x % 100u);
        uint32_t node = nodes[(x >> 8) % 64u < 58u ? 1u + (x >> 16) % 3u : (x >> 20) % 6u];
        uint64_t size = (x >> 24) % 16u ? (x >> 28) % 300u : sizes[(x >> 32) % 6u];
        if (what < 50 || n == 0) {
            uint64_t id = next++;
            if (what == 1)
                id = next += 1u + (x >> 36) % 70000u; /* a jump */
            else if (what == 2 && next > 10)
                id = next - 2u - (x >> 36) % 8u; /* below the highest: maybe a reuse */
            struct jp_rec_alloc a = {{JP_REC_ALLOC, 32}, node, id, size, 0};
            cr_assert_eq(t_feed_raw(e, &a, 32, NULL), 0);
            if (n < CAP && node != N_UNDEFINED && what != 2) {
                ids[n] = id;
                szs[n++] = size;
            }
        } else if (what < 92) {
            /* most frees among the newest: they are still in the window */
            uint32_t k = (x >> 40) % 8u ? n - 1u - (uint32_t)((x >> 44) % (n < 64 ? n : 64))
                                        : (uint32_t)((x >> 44) % n);
            uint64_t old = (x >> 52) % 50u ? szs[k] : szs[k] + 1u; /* sometimes wrong */
            struct jp_rec_free f = {{JP_REC_FREE, 32}, what < 60 ? node : JP_ID_NONE, ids[k],
                                    old, 0};
            cr_assert_eq(t_feed_raw(e, &f, 32, NULL), 0);
            if ((x >> 56) % 20u) { /* else it is freed again later: a double free */
                ids[k] = ids[n - 1u];
                szs[k] = szs[--n];
            }
        } else if (what < 97) {
            uint32_t k = (uint32_t)((x >> 40) % n);
            struct jp_rec_resize r = {{JP_REC_RESIZE, 32}, node, ids[k], szs[k], size};
            cr_assert_eq(t_feed_raw(e, &r, 32, NULL), 0);
            szs[k] = size;
        } else {
            t_exec_id(e, 1u + (uint32_t)((x >> 40) % 3u));
        }
    }
    t_stop(e, JP_TERM_RETURNED, 10, 0, 0);
}

/* Each record of tap, in order, into e (all accepted, as they were by the first engine). */
static void replay_tap(struct jp_engine *e, const struct t_tap *tap)
{
    for (uint32_t off = 0; off < tap->len;) {
        struct jp_rec_hdr h;
        memcpy(&h, tap->buf + off, sizeof h);
        const char *why = NULL;
        cr_assert_eq(jp_engine_feed(e, tap->buf + off, h.size, &why), 0, "at %u: %s", off,
                     why ? why : "");
        off += jp_rec_slots(h.size) * JP_SLOT_SIZE;
    }
}

/* Feeds stream(engine, budget, seed) into an engine with the one-pass paths, replays what it
 * was fed into one without them, and asserts the two agree on every total, on the metadata
 * they hold and on the rendered profiles. */
static void fast_and_general_agree(void (*stream)(struct jp_engine *, uint64_t, uint64_t),
                                   uint64_t budget, bool exact, bool violations, uint64_t seed)
{
    struct t_tap tap = {0};
    t_tap_set(&tap);
    struct jp_engine *fast = t_engine();
    stream(fast, budget, seed);
    t_tap_set(NULL);
    cr_assert_eq(jp_engine_set_event_fast_paths(fast, false), -EBUSY);
    struct jp_engine *general;
    cr_assert_eq(jp_engine_new(&general), 0);
    cr_assert_eq(jp_engine_set_event_fast_paths(general, false), 0);
    replay_tap(general, &tap);
    struct jp_engine_summary sf, sg;
    cr_assert_eq(jp_engine_summary(fast, &sf), 0);
    cr_assert_eq(jp_engine_summary(general, &sg), 0);
    cr_assert_eq(sf.live_exact, exact, "budget %llu: live tracking %s",
                 (unsigned long long)budget, exact ? "stays exact" : "ends part way");
    cr_assert_eq(sf.violations > 0, violations);
    cr_assert_eq(sf.violations, sg.violations);
    cr_assert_eq(sf.records, sg.records);
    cr_assert_eq(sf.allocation_count, sg.allocation_count);
    cr_assert_eq(sf.resize_count, sg.resize_count);
    cr_assert_eq(sf.allocated_bytes, sg.allocated_bytes);
    cr_assert_eq(sf.freed_bytes, sg.freed_bytes);
    cr_assert_eq(sf.peak_live_bytes, sg.peak_live_bytes);
    cr_assert_eq(sf.retained_bytes, sg.retained_bytes);
    cr_assert_eq(sf.live_exact, sg.live_exact);
    cr_assert_eq(jp_engine_metadata_bytes(fast), jp_engine_metadata_bytes(general));
    cr_assert_eq(jp_engine_metadata_peak_bytes(fast), jp_engine_metadata_peak_bytes(general));
    char *tf, *hf, *jf, *tg, *hg, *jg;
    uint32_t stf, stg;
    t_render(fast, JP_END_STOP, &tf, &hf, &jf, &stf);
    t_render(general, JP_END_STOP, &tg, &hg, &jg, &stg);
    cr_assert_eq(stf, stg);
    cr_assert_str_eq(tf, tg, "budget %llu seed %llu: the TOON profiles differ",
                     (unsigned long long)budget, (unsigned long long)seed);
    cr_assert_str_eq(hf, hg);
    free(tf), free(hf), free(jf), free(tg), free(hg), free(jg);
    jp_engine_free(fast);
    jp_engine_free(general);
    free(tap.buf);
}

Test(window, one_pass_and_general_event_paths_agree)
{
    static const uint64_t budgets[] = {64 * MiB, 192 * 1024};
    for (unsigned b = 0; b < 2; b++)
        for (uint64_t seed = 1; seed <= 3; seed++)
            fast_and_general_agree(edge_stream, budgets[b], b == 0, true,
                                   seed * 0x9E3779B97F4A7C15u);
}

/* The agent's counter only, one allocation in ten kept to the end and the rest freed among
 * the newest 64: each kept one is still in its window slot when the id a window later comes,
 * so the one-pass allocation moves it to the tables itself. Under a budget the tables can no
 * longer grow part way, and that move is what ends exact tracking. */
static void survivor_stream(struct jp_engine *e, uint64_t retention_budget, uint64_t seed)
{
    t_start(e, JP_MODE_MEMORY, 0, 0, 10, 32 * MiB, retention_budget);
    define_sites(e);
    static const uint32_t nodes[] = {N_MAIN, N_A, N_B};
    enum { YOUNG = 64 };
    uint64_t ids[YOUNG], szs[YOUNG];
    uint32_t n = 0;
    rng = seed;
    t_exec_id(e, 1);
    for (uint64_t id = 1; id <= 120000; id++) {
        uint64_t x = next_rand();
        uint64_t size = 16u + x % 200u;
        struct jp_rec_alloc a = {{JP_REC_ALLOC, 32}, nodes[(x >> 8) % 3u], id, size, 0};
        cr_assert_eq(t_feed_raw(e, &a, 32, NULL), 0);
        if ((x >> 16) % 10u == 0)
            continue; /* kept to the end */
        if (n == YOUNG) {
            uint32_t k = (uint32_t)((x >> 24) % YOUNG);
            struct jp_rec_free f = {{JP_REC_FREE, 32}, JP_ID_NONE, ids[k], szs[k], 0};
            cr_assert_eq(t_feed_raw(e, &f, 32, NULL), 0);
            ids[k] = id;
            szs[k] = size;
        } else {
            ids[n] = id;
            szs[n++] = size;
        }
    }
    t_stop(e, JP_TERM_RETURNED, 10, 0, 0);
}

Test(window, one_pass_allocation_moving_survivors_agrees_with_the_general_path)
{
    static const uint64_t budgets[] = {64 * MiB, 96 * 1024};
    for (unsigned b = 0; b < 2; b++)
        for (uint64_t seed = 1; seed <= 2; seed++)
            fast_and_general_agree(survivor_stream, budgets[b], b == 0, false,
                                   seed * 0xD1B54A32D192ED03u);
}

/* ---- the survivor pages (pages.c) --------------------------------------------------------- */

/* Bytes the largest window holds (2^19 slots of 4 bytes and a bit per 64 of them). */
#define BIG_WINDOW_BYTES ((UINT64_C(1) << 19) * 4u + (UINT64_C(1) << 19) / 512u)

/* Every allocation lives on: the window lets each go in id order and the pages keep them at
 * about 8 bytes each, where the cuckoo tables need 12 bytes a slot at up to 97 % load (13 to
 * 17 bytes each). Three in four freed: the pages shrink to what is left. All but one in 128
 * freed: the pages give way to the tables (a page's header would cost 20 bytes and more a
 * survivor). Freeing the rest, newest first, gives every page back. */
Test(window, pages_keep_dense_survivors_in_about_eight_bytes)
{
    enum { N = 2000000 };
    struct jp_engine *e = roomy_engine();
    struct model m;
    m_init(&m, N);
    rng = 77;
    for (uint64_t id = 1; id <= N; id++)
        m_alloc(e, &m, id, small_size());
    m_check(e, &m);
    uint64_t tracked, bytes = jp_engine_live_table_bytes(e, &tracked);
    cr_assert_eq(tracked, N);
    /* past the window (which holds the newest 2^19), bytes per survivor */
    double per = (double)(bytes - BIG_WINDOW_BYTES) / (double)(N - (UINT64_C(1) << 19));
    cr_assert_lt(per, 8.5, "%.2f bytes a survivor past the window", per);
    /* three in four freed: the pages are compacted to what is left */
    const uint64_t past = N - (UINT64_C(1) << 19);
    for (uint32_t i = m.n; i-- > 0;)
        if (m.ids[i] % 4u != 0)
            m_free(e, &m, i);
    m_check(e, &m);
    bytes = jp_engine_live_table_bytes(e, &tracked);
    per = (double)(bytes - BIG_WINDOW_BYTES) / (double)(past / 4u);
    /* at most a third more values than live ones and the header: 8 * 4 / 3 + 652 / 1024 */
    cr_assert_lt(per, 12.0, "%.2f bytes a survivor once three in four are freed", per);
    /* one in 128 left (32 a page): too few for a page, they move to the tables */
    for (uint32_t i = m.n; i-- > 0;)
        if (m.ids[i] % 128u != 0)
            m_free(e, &m, i);
    m_check(e, &m);
    bytes = jp_engine_live_table_bytes(e, &tracked);
    per = (double)(bytes - BIG_WINDOW_BYTES) / (double)(past / 128u);
    cr_assert_lt(per, 24.0, "%.2f bytes a survivor once one in 128 is left", per);
    m_drain(e, &m);
    bytes = jp_engine_live_table_bytes(e, &tracked);
    cr_assert_eq(tracked, 0u);
    /* the window and the tables keep their size (neither shrinks): the tables took 11,500
     * survivors above; the pages are gone (they held 12 MB) */
    cr_assert_lt(bytes, BIG_WINDOW_BYTES + 256 * 1024, "%llu bytes held with nothing live",
                 (unsigned long long)bytes);
    m_free_all(&m);
    jp_engine_free(e);
}

/* The agent's counter with one allocation in ten kept, then waves that free old survivors at
 * random (pages go sparse: compacted, and moved to the tables once few are left), resize them
 * (in place, sizes a window slot could not hold included), ids that come below the highest (to
 * the tables, beside pages), a stretch that keeps one in two hundred (pages too sparse to keep:
 * moved to the tables when the next one opens), a jump of more than 4096 pages while pages hold
 * survivors (to the tables), and the bad events of m_bad against ids held in pages. Checked
 * against the model after every wave and freed to nothing. */
Test(window, pages_agree_with_the_model_whatever_is_freed)
{
    struct jp_engine *e = roomy_engine();
    struct model m;
    m_init(&m, 400000);
    rng = 0xC0FFEEu;
    enum { YOUNG = 64 };
    uint64_t id = 0, late[512];
    uint32_t nlate = 0;
    for (unsigned wave = 0; wave < 12; wave++) {
        uint32_t keep_one_in = wave == 5 || wave == 6 ? 200u : 10u;
        if (wave == 9)
            id += UINT64_C(4097) << 12; /* past PG_MAX_GAP pages: survivors go to the tables */
        for (uint32_t k = 0; k < 150000; k++) {
            id++;
            uint64_t x = next_rand();
            if (x % 997u == 0 && nlate < 512) { /* skipped now, allocated below the highest */
                late[nlate++] = id;
                continue;
            }
            m_alloc(e, &m, id, small_size());
            /* the young die among the newest YOUNG unless kept */
            if ((x >> 12) % keep_one_in != 0 && m.n > YOUNG)
                m_free(e, &m, m.n - 1u - (uint32_t)((x >> 20) % YOUNG));
        }
        while (nlate) /* ids below the highest */
            m_alloc(e, &m, late[--nlate], small_size());
        /* old survivors: some waves free most of them, some a few, some resize them */
        uint32_t frees = wave % 3 == 0 ? m.n * 3u / 4u : m.n / 10u;
        for (uint32_t k = 0; k < frees && m.n; k++)
            m_free(e, &m, (uint32_t)(next_rand() % m.n));
        for (uint32_t k = 0; k < 2000 && m.n; k++) {
            uint64_t x = next_rand();
            m_resize(e, &m, (uint32_t)(x % m.n),
                     (x >> 32) % 5u == 0 ? (UINT64_C(1) << 20) + (x >> 40) : small_size());
        }
        m_bad(e, &m);
        m_check(e, &m);
    }
    m_drain(e, &m);
    uint64_t tracked;
    jp_engine_live_table_bytes(e, &tracked);
    cr_assert_eq(tracked, 0u);
    m_free_all(&m);
    jp_engine_free(e);
}
