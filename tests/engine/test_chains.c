/* Memory call chains (READINGS.md #18): per creation chain allocation count, allocated,
 * live and live-at-peak bytes, checked against a naive model over a generated stream, summing
 * exactly to their sites; chains beyond what the young window's slot can name; the report's
 * top three chains per memory bottleneck and their TOON rendering. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

/* ---- the model ----------------------------------------------------------------------------- */

enum { NFRAMES = 6, NNODES = 48, MAXLIVE = 4000, OPS = 30000, MAXCH = NNODES };

struct m_chain {
    uint32_t path[NNODES], depth; /* frame ids root..site */
    uint64_t allocated, count, live, at_peak;
    uint32_t live_count;
};
struct m_site {
    uint64_t allocated, count, live, freed, resizes, at_peak;
};

static struct m_chain mch[MAXCH];
static uint32_t nmch;
static struct m_site msite[NFRAMES + 1];      /* by frame id: one function per frame */
static uint32_t node_parent[NNODES + 1], node_frame[NNODES + 1], node_chain[NNODES + 1];

/* The model chain of a node: its frame path, interned by value. */
static uint32_t m_chain_of(uint32_t node)
{
    uint32_t rev[NNODES], d = 0;
    for (uint32_t n = node; n; n = node_parent[n])
        rev[d++] = node_frame[n];
    for (uint32_t i = 0; i < nmch; i++) {
        if (mch[i].depth != d)
            continue;
        uint32_t k = 0;
        while (k < d && mch[i].path[k] == rev[d - 1u - k])
            k++;
        if (k == d)
            return i;
    }
    cr_assert_lt(nmch, MAXCH);
    struct m_chain *c = &mch[nmch];
    memset(c, 0, sizeof *c);
    c->depth = d;
    for (uint32_t k = 0; k < d; k++)
        c->path[k] = rev[d - 1u - k];
    return nmch++;
}

static void m_peak(void)
{
    for (uint32_t i = 0; i < nmch; i++)
        mch[i].at_peak = mch[i].live;
    for (uint32_t f = 1; f <= NFRAMES; f++)
        msite[f].at_peak = msite[f].live;
}

/* The frame id of a view function: the test names function k "f<k>". */
static uint32_t frame_of(const struct jp_engine_view *v, uint32_t func)
{
    const struct jp_func *f = &v->funcs[func];
    cr_assert(f->fn_len >= 2 && f->fn[0] == 'f');
    return (uint32_t)atoi(f->fn + 1);
}

/* The model chain a view chain stands for, or UINT32_MAX when the model has none like it. */
static uint32_t m_find(const struct jp_engine_view *v, uint32_t ci)
{
    uint32_t seq[NNODES], d = v->chains[ci].depth;
    cr_assert_leq(d, NNODES);
    uint32_t k = d;
    for (uint32_t c = ci + 1u; c && k; c = v->chains[c - 1u].parent)
        seq[--k] = frame_of(v, v->chains[c - 1u].func);
    for (uint32_t i = 0; i < nmch; i++)
        if (mch[i].depth == d && !memcmp(mch[i].path, seq, d * sizeof *seq))
            return i;
    return UINT32_MAX;
}

/* A memory run (threshold 0) with one source and frames 1..n, frame k the function m.f<k>
 * (frame_of reads k back). */
static void chain_program(struct jp_engine *e, const char *path, uint32_t n)
{
    t_start(e, JP_MODE_MEMORY, 0, 0, 10, 32 * MiB, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, path);
    for (uint32_t f = 1; f <= n; f++) {
        char name[16];
        snprintf(name, sizeof name, "f%u", f);
        t_frame(e, f, 1, "m", name, f * 10, f * 10 + 5, f, JP_FRAME_FUNCTION);
    }
}

static uint64_t rnd(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* A calling-context tree with repeated functions (recursion, one function reached through
 * several paths) and nodes that repeat a path (two nodes, one chain); allocations mostly in
 * sequence (the young window), some far ahead (the tables), a few past the packed size (the
 * overflow array); resizes that grow and shrink at other nodes than the creating one; frees. */
Test(chains, memory_chain_figures_match_a_model_and_sum_to_their_sites)
{
    struct jp_engine *e = t_engine();
    chain_program(e, "src/chains.jett", NFRAMES);
    uint64_t x = 0x243F6A8885A308D3u;
    nmch = 0;
    memset(msite, 0, sizeof msite);
    for (uint32_t n = 1; n <= NNODES; n++) {
        node_parent[n] = n == 1 ? 0 : 1 + (uint32_t)(rnd(&x) % (n - 1u));
        node_frame[n] = 1 + (uint32_t)(rnd(&x) % NFRAMES);
        if (n > 2 && rnd(&x) % 8u == 0) { /* the same path as an earlier node */
            node_parent[n] = node_parent[n - 1u];
            node_frame[n] = node_frame[n - 1u];
        }
        t_node(e, n, node_parent[n], node_frame[n]);
        node_chain[n] = m_chain_of(n);
    }
    static uint64_t ids[MAXLIVE], sizes[MAXLIVE];
    static uint32_t made[MAXLIVE];
    uint32_t nlive = 0;
    uint64_t next_id = 1, live = 0, peak = 0;
    for (int op = 0; op < OPS; op++) {
        uint64_t r = rnd(&x);
        uint32_t node = 1 + (uint32_t)((r >> 8) % NNODES);
        unsigned kind = (unsigned)(r % 5u);
        if (nlive < 8 || (kind < 2 && nlive < MAXLIVE)) {
            uint64_t id = (r & 64) ? next_id + 100000u : next_id;
            next_id = id + 1u;
            uint64_t size = (r >> 20) % 300u;
            if ((r >> 40) % 500u == 0)
                size += UINT64_C(1) << 41; /* past the packed 40-bit size */
            bool stack = (r >> 50) % 16u != 0;
            t_alloc(e, stack ? node : 0, id, size);
            ids[nlive] = id;
            sizes[nlive] = size;
            made[nlive++] = stack ? node_chain[node] + 1u : 0;
            if (stack) {
                struct m_chain *c = &mch[node_chain[node]];
                struct m_site *s = &msite[node_frame[node]];
                c->allocated += size;
                c->count++;
                c->live += size;
                c->live_count++;
                s->allocated += size;
                s->count++;
                s->live += size;
            }
            live += size;
        } else if (kind < 4) {
            uint32_t i = (uint32_t)((r >> 16) % nlive);
            uint64_t ns = (r >> 30) % 400u;
            t_resize(e, node, ids[i], sizes[i], ns);
            msite[node_frame[node]].resizes++;
            struct m_chain *cc = made[i] ? &mch[made[i] - 1u] : NULL;
            struct m_site *cs = cc ? &msite[cc->path[cc->depth - 1u]] : NULL;
            if (ns >= sizes[i]) {
                uint64_t g = ns - sizes[i];
                mch[node_chain[node]].allocated += g; /* where the resize happened */
                msite[node_frame[node]].allocated += g;
                if (cc) {
                    cc->live += g;
                    cs->live += g;
                }
                live += g;
            } else {
                uint64_t d = sizes[i] - ns;
                if (cc) {
                    cc->live -= d;
                    cs->live -= d;
                    cs->freed += d;
                }
                live -= d;
            }
            sizes[i] = ns;
        } else {
            uint32_t i = (uint32_t)((r >> 16) % nlive);
            t_free(e, node, ids[i], sizes[i]);
            if (made[i]) {
                struct m_chain *cc = &mch[made[i] - 1u];
                struct m_site *cs = &msite[cc->path[cc->depth - 1u]];
                cc->live -= sizes[i];
                cc->live_count--;
                cs->live -= sizes[i];
                cs->freed += sizes[i];
            }
            live -= sizes[i];
            nlive--;
            ids[i] = ids[nlive];
            sizes[i] = sizes[nlive];
            made[i] = made[nlive];
        }
        if (live > peak) {
            peak = live;
            m_peak();
        }
    }

    struct jp_engine_view v;
    cr_assert_eq(jp_engine_view(e, &v), 0);
    cr_assert_eq(v.violations, 0);
    cr_assert(jp_view_live_exact(&v));
    cr_assert_eq(v.peak_bytes, peak);
    cr_assert_eq(v.live_count, nlive, "allocations live at the end");
    /* every chain against the model; every model chain with figures found */
    uint32_t matched = 0, with_figures = 0;
    for (uint32_t i = 0; i < nmch; i++)
        with_figures += mch[i].allocated || mch[i].count || mch[i].live || mch[i].at_peak;
    for (uint32_t ci = 0; ci < v.nchains; ci++) {
        const struct jp_chain *c = &v.chains[ci];
        uint32_t m = m_find(&v, ci);
        bool any = c->allocated || c->count || c->live || jp_chain_live_at_peak(c, v.peak_epoch);
        if (m == UINT32_MAX) {
            cr_assert(!any, "chain %u has figures the model has not", ci);
            continue;
        }
        cr_assert_eq(c->allocated, mch[m].allocated, "chain %u allocated", ci);
        cr_assert_eq(c->count, mch[m].count, "chain %u count", ci);
        cr_assert_eq(c->live, mch[m].live, "chain %u live", ci);
        cr_assert_eq(c->live_count, mch[m].live_count, "chain %u live count", ci);
        cr_assert_eq(jp_chain_live_at_peak(c, v.peak_epoch), mch[m].at_peak,
                     "chain %u live at peak", ci);
        matched += any;
    }
    cr_assert_eq(matched, with_figures);
    /* each site's figures are exactly its chains' sums, and the model's */
    for (uint32_t fi = 0; fi < v.nfuncs; fi++) {
        const struct jp_func *f = &v.funcs[fi];
        uint64_t a = 0, n = 0, l = 0, p = 0;
        for (uint32_t ci = 0; ci < v.nchains; ci++) {
            const struct jp_chain *c = &v.chains[ci];
            if (c->func != fi)
                continue;
            a += c->allocated;
            n += c->count;
            l += c->live;
            p += jp_chain_live_at_peak(c, v.peak_epoch);
        }
        cr_assert_eq(a, f->mem.allocated, "site %u allocated", fi);
        cr_assert_eq(n, f->mem.count, "site %u count", fi);
        cr_assert_eq(l, f->live, "site %u live", fi);
        cr_assert_eq(p, jp_func_live_at_peak(f, v.peak_epoch), "site %u live at peak", fi);
        const struct m_site *ms = &msite[frame_of(&v, fi)];
        cr_assert_eq(f->mem.allocated, ms->allocated, "site %u allocated (model)", fi);
        cr_assert_eq(f->mem.count, ms->count, "site %u count (model)", fi);
        cr_assert_eq(f->live, ms->live, "site %u live (model)", fi);
        cr_assert_eq(f->freed, ms->freed, "site %u freed (model)", fi);
        cr_assert_eq(f->resize_count, ms->resizes, "site %u resizes (model)", fi);
        cr_assert_eq(jp_func_live_at_peak(f, v.peak_epoch), ms->at_peak,
                     "site %u live at peak (model)", fi);
    }
    /* a second view settles to the same figures */
    struct jp_engine_view v2;
    cr_assert_eq(jp_engine_view(e, &v2), 0);
    for (uint32_t fi = 0; fi < v2.nfuncs; fi++)
        cr_assert_eq(v2.funcs[fi].mem.allocated, msite[frame_of(&v2, fi)].allocated);
    jp_engine_free(e);
}

/* A young-window slot names a creation chain below 4095; allocations made through chains past
 * that go to the tables with their chain, so their frees and resizes still find it. */
Test(chains, chains_past_the_window_slot_width_keep_their_figures)
{
    enum { W = 4200 };
    struct jp_engine *e = t_engine();
    /* node 1 m.f1, node n (2..W) m.f1>m.fn, node W+1 m.f1>m.f2>m.fW: site m.fW is reached
     * through two chains, both of index 4095 or more */
    chain_program(e, "src/wide.jett", W);
    t_node(e, 1, 0, 1);
    for (uint32_t n = 2; n <= W; n++)
        t_node(e, n, 1, n);
    t_node(e, W + 1, 2, W);
    t_alloc(e, W, 1, 40);         /* into the tables: the slot cannot name the chain */
    t_alloc(e, 2, 2, 7);          /* into the window */
    t_alloc(e, W + 1, 3, 10);
    t_resize(e, 2, 1, 40, 100);   /* growth charged to m.f1>m.f2, the resizing chain */
    t_resize(e, W, 3, 10, 4);     /* a shrink: 6 freed to m.fW, off m.f1>m.f2>m.fW's live */
    t_free(e, 1, 2, 7);
    struct jp_engine_view v;
    cr_assert_eq(jp_engine_view(e, &v), 0);
    cr_assert_eq(v.violations, 0);
    cr_assert_eq(v.nchains, W + 1u);
    uint32_t direct = UINT32_MAX, via = UINT32_MAX, two = UINT32_MAX;
    for (uint32_t ci = 0; ci < v.nchains; ci++) {
        const struct jp_func *f = &v.funcs[v.chains[ci].func];
        bool fw = f->decl_start == W * 10u, f2 = f->decl_start == 20u;
        if (fw && v.chains[ci].depth == 2)
            direct = ci;
        if (fw && v.chains[ci].depth == 3)
            via = ci;
        if (f2 && v.chains[ci].depth == 2)
            two = ci;
    }
    cr_assert(direct != UINT32_MAX && via != UINT32_MAX && two != UINT32_MAX);
    cr_assert_geq(direct, 4095u);
    cr_assert_geq(via, 4095u);
    cr_assert_eq(v.chains[direct].count, 1);
    cr_assert_eq(v.chains[direct].allocated, 40);
    cr_assert_eq(v.chains[direct].live, 100);
    cr_assert_eq(v.chains[via].count, 1);
    cr_assert_eq(v.chains[via].allocated, 10);
    cr_assert_eq(v.chains[via].live, 4);
    cr_assert_eq(v.chains[two].count, 1);
    cr_assert_eq(v.chains[two].allocated, 7 + 60);
    cr_assert_eq(v.chains[two].live, 0);
    const struct jp_func *fw = &v.funcs[v.chains[direct].func];
    cr_assert_eq(fw->mem.allocated, 50);
    cr_assert_eq(fw->mem.count, 2);
    cr_assert_eq(fw->freed, 6);
    cr_assert_eq(fw->live, 104);
    cr_assert_eq(fw->resize_count, 1);
    const struct jp_func *f2 = &v.funcs[v.chains[two].func];
    cr_assert_eq(f2->freed, 7);
    cr_assert_eq(f2->mem.allocated, 67);
    jp_engine_free(e);
}

/* ---- the report ------------------------------------------------------------------------------ */

/* Site m.s reached through five chains. Ids: 1 at main>m.a>m.s 100 B, 2 at main>m.b>m.s 100 B
 * (freed), 3 at main>m.s 10 B grown by 40 at main>m.a>m.b>m.s, 4 at main>z.z>m.s 5 B; and
 * m.k, a site that only shrank an allocation (of main>m.s). */
static void report_stream(struct jp_engine *e, uint64_t lost)
{
    t_start(e, JP_MODE_MEMORY, 0, 0, 10, 32 * MiB, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/r.jett");
    t_frame(e, 1, 1, "<root>", "main", 0, 9, 1, JP_FRAME_FUNCTION);
    t_frame(e, 2, 1, "m", "a", 10, 19, 2, JP_FRAME_FUNCTION);
    t_frame(e, 3, 1, "m", "b", 20, 29, 3, JP_FRAME_FUNCTION);
    t_frame(e, 4, 1, "m", "s", 30, 39, 4, JP_FRAME_FUNCTION);
    t_frame(e, 5, 1, "z", "z", 40, 49, 5, JP_FRAME_FUNCTION);
    t_frame(e, 6, 1, "m", "k", 50, 59, 6, JP_FRAME_FUNCTION);
    t_node(e, 1, 0, 1);
    t_node(e, 2, 1, 2);
    t_node(e, 3, 1, 3);
    t_node(e, 4, 2, 4); /* main>m.a>m.s */
    t_node(e, 5, 3, 4); /* main>m.b>m.s */
    t_node(e, 6, 1, 4); /* main>m.s */
    t_node(e, 7, 2, 3);
    t_node(e, 8, 7, 4); /* main>m.a>m.b>m.s */
    t_node(e, 9, 1, 5);
    t_node(e, 10, 9, 4); /* main>z.z>m.s */
    t_node(e, 11, 1, 6); /* main>m.k */
    t_alloc(e, 5, 2, 100);
    t_alloc(e, 4, 1, 100);
    t_alloc(e, 6, 3, 10);
    t_resize(e, 8, 3, 10, 50);
    t_alloc(e, 10, 4, 5);
    t_free(e, 1, 2, 100);
    t_resize(e, 11, 3, 50, 45);
    if (lost)
        t_counters(e, 0, 0, 0, 0, 0, lost);
    t_stop(e, JP_TERM_RETURNED, 1000, JP_NS_UNAVAILABLE, 0);
}

Test(chains, memory_bottlenecks_report_their_top_three_creation_chains)
{
    struct jp_engine *e = t_engine();
    report_stream(e, 0);
    char *json, *toon;
    t_render(e, JP_END_STOP, &toon, NULL, &json, NULL);
    J_EQ(json, "profile.bottlenecks.0.function", "s");
    J_EQ(json, "profile.bottlenecks.0.allocated_bytes", "255");
    /* by allocated bytes; the two at 100 in the lexical order of READINGS.md #5 (m.a < m.b); the
     * growth-only chain (40) before main>m.s (10) and main>z.z>m.s (5), which are cut */
    cr_assert_eq(t_json_len(json, "profile.bottlenecks.0.chains"), 3);
    J_EQ(json, "profile.bottlenecks.0.chains.0.allocated_bytes", "100");
    J_EQ(json, "profile.bottlenecks.0.chains.0.allocation_count", "1");
    J_EQ(json, "profile.bottlenecks.0.chains.0.retained_bytes", "100");
    cr_assert_eq(t_json_len(json, "profile.bottlenecks.0.chains.0.frames"), 3);
    J_EQ(json, "profile.bottlenecks.0.chains.0.frames.0", "main");
    J_EQ(json, "profile.bottlenecks.0.chains.0.frames.1", "m.a");
    J_EQ(json, "profile.bottlenecks.0.chains.0.frames.2", "m.s");
    J_EQ(json, "profile.bottlenecks.0.chains.1.allocated_bytes", "100");
    J_EQ(json, "profile.bottlenecks.0.chains.1.retained_bytes", "0");
    J_EQ(json, "profile.bottlenecks.0.chains.1.frames.1", "m.b");
    J_EQ(json, "profile.bottlenecks.0.chains.2.allocated_bytes", "40");
    J_EQ(json, "profile.bottlenecks.0.chains.2.allocation_count", "0");
    J_EQ(json, "profile.bottlenecks.0.chains.2.retained_bytes", "0");
    cr_assert_eq(t_json_len(json, "profile.bottlenecks.0.chains.2.frames"), 4);
    J_EQ(json, "profile.bottlenecks.0.chains.2.frames.2", "m.b");
    /* the site that only shrank is an entry at threshold 0 (READINGS.md #14) with no chain */
    J_EQ(json, "profile.bottlenecks.1.function", "k");
    cr_assert_eq(t_json_len(json, "profile.bottlenecks.1.chains"), 0);
    cr_assert(strstr(toon, "      chains: []\n") != NULL, "%s", toon);
    /* after the contract's fields and the suggestions, before the identity counts */
    const char *sg = strstr(toon, "suggestions"), *ch = strstr(toon, "chains["),
               *th = strstr(toon, "      runtime_threads");
    cr_assert(sg && ch && th && sg < ch && ch < th, "%s", toon);
    free(json);
    free(toon);
    jp_engine_free(e);
}

Test(chains, lost_events_make_chain_retained_bytes_unavailable)
{
    struct jp_engine *e = t_engine();
    report_stream(e, 1);
    char *json;
    t_render(e, JP_END_STOP, NULL, NULL, &json, NULL);
    J_EQ(json, "profile.bottlenecks.0.retained_bytes", "unavailable");
    J_EQ(json, "profile.bottlenecks.0.chains.0.allocated_bytes", "100");
    J_EQ(json, "profile.bottlenecks.0.chains.0.allocation_count", "1");
    J_EQ(json, "profile.bottlenecks.0.chains.0.retained_bytes", "unavailable");
    J_EQ(json, "profile.bottlenecks.0.chains.2.retained_bytes", "unavailable");
    free(json);
    jp_engine_free(e);
}
