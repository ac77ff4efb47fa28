/* Private to engine/: what the engine's files share (the engine's state, its tables'
 * layouts and the calls one file makes into another). Nothing outside this folder includes it;
 * the report and the writers (render/, which the engine never includes or calls) read the
 * engine through view.h only.
 *
 * Online aggregation of one run's record stream (see engine.h for the feeding contract).
 *
 * Shape of the data:
 *  - definitions are dense ids announced before use: sources, frames, calling-context nodes.
 *    Each frame maps to one function identity (READINGS.md #1), interned on
 *    definition. Each node precomputes what a sample needs: its function, its call chain (the
 *    function sequence root..node, interned), whether it is the root-most occurrence of its
 *    function on its path (READINGS.md #4: recursion counts once), and whether it
 *    ends a truncated stack. A CPU sample bumps its leaf node's count and its hot line's (found
 *    in its function's eight hot-line ways, or else in the hot-line table); self, inclusive
 *    and chain counts are settled from the node counts when a view is taken (jpe_cpu_settle).
 *  - memory mode keeps an exact live table keyed by allocation id: sharded bucketized cuckoo
 *    tables of 12-byte slots (32-bit key and 64-bit packed value side by side) for ids below
 *    2^32-1, a Robin Hood table with 64-bit keys for larger ids; the value packs the size (40
 *    bits) and the creation chain (24 bits: chain index + 1, 0 for none; the chain's func is
 *    the creation site), and anything that does not fit (a size of 2^40 - 1 or more, a chain
 *    index of 2^24 - 2 or more) goes to an exact overflow array. In front of both, the newest
 *    ids sit in a direct-mapped young window of 4-byte slots (id mod W), so the many
 *    allocations that die young are never hashed (window.c, live_table.c); the survivors it
 *    lets go of, oldest first, are appended to pages in id order (pages.c) while their ids
 *    keep rising, and hashed only when they do not (live.c decides).
 *  - live_at_peak_bytes uses epochs instead of copying the table at each new peak: the global
 *    peak epoch advances when live bytes rise strictly above the previous peak
 *    (READINGS.md #10); before a chain's live bytes change, a chain whose stamp
 *    is older than the current epoch saves its live value as its snapshot (that is its value
 *    at the latest peak) and takes the current stamp (chain_live, account.h). A chain
 *    untouched since the latest peak still holds its peak value live.
 *  - memory mode counts allocations, allocated and live bytes per creation chain only; a
 *    site's figures are the sums of its chains, settled when a view is taken (jpe_mem_settle), so
 *    an event touches one chain, not a chain and a function. Freed bytes and resize counts are
 *    the site's alone (the view has no per-chain figure for them).
 *
 * Budgets: every table growth is accounted in `used` against the run's budget before it
 * happens. A refused growth of a definition/detail table stops all detail for the rest of the
 * run (later definitions are counted as defined, so their ids stay valid, but carry no
 * detail); totals go on. A refused growth of the live table ends exact live tracking.
 * A growth holds the old and the new array at once (a rehash reads one while filling the
 * other; realloc may copy), so it must fit used + new bytes, not just the steady state after
 * it: the budget is never exceeded even for an instant (jpe_budget_hold). The narrow live table
 * is sharded so that transient is one shard's copy, not the whole table's.
 *
 * Files, one job each:
 *   account.h     the accounting rules, each once, and the one-pass event paths built on them
 *   budget.c      accounting against the run's metadata budget (jpe_budget_hold, jpe_vec_grow, ...)
 *   hash.c        the seeded name hash (SipHash-2-4); the numeric mixers are inline below
 *   intern.c      the open-addressing index (itab) and the one interning sequence
 *   defs.c        RUN_START, source, frame and node definitions; function and chain interning
 *   exec.c        execution identity: identity tuples and distinct runtime threads
 *   cpu.c         CPU samples, hot lines, and settling self/inclusive/chain counts (jpe_cpu_settle)
 *   memory.c      alloc/resize/free accounting per creation chain, the id history, the
 *                 live-at-peak snapshot, settling the sites' figures from their chains
 *   live.[ch]     the live store's one owner: where a live allocation is held (the window,
 *                 then the pages, then the tables), found, changed, dropped and moved; the
 *                 three below are its leaves, which hold values and never call each other
 *   window.c      the young window: the newest ids, direct-mapped
 *   pages.c       the window's survivors in id order, appended to pages of PG_IDS ids
 *   live_table.c  the exact live tables: sharded cuckoo (narrow ids), Robin Hood (wide ids),
 *                 the overflow array for values that do not pack
 *   timeline.c    the run over time: at most 512 points placed by the daemon's time marks
 *   excerpt.c     EXCERPT records (the runtime's redacted code for hot lines)
 *   feed.c        life cycle and record dispatch
 *   view.c        the read-only view (view.h) and the totals (jp_engine_summary)
 */
#ifndef JETTPROF_ENGINE_INTERNAL_H
#define JETTPROF_ENGINE_INTERNAL_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"
#include "view.h"

struct jp_node {
    uint32_t parent; /* node id, 0 for a root */
    uint32_t func;
    uint32_t chain;  /* chain index */
    uint8_t depth;
    uint8_t first;   /* root-most occurrence of func on this path */
    uint8_t trunc;   /* this node is a <truncated-stack> frame */
    uint8_t reserved;
    uint32_t reserved2;
    uint32_t exec_epoch; /* the EXEC epoch this node last noted (jpe_exec_note): CPU its chain,
                          * memory its site */
    uint64_t samples;  /* CPU: jett samples whose leaf is this node */
};
_Static_assert(sizeof(struct jp_node) == 32, "two nodes a cache line: samples hit random nodes");

/* Open-addressing index over an array the caller owns: slots hold index + 1, 0 is empty. */
struct itab {
    uint32_t *slot;
    uint32_t cap; /* power of two */
    uint32_t n;
};

/* The live tables: keys are id + 1 (0 empty) in both tables (UINT64_MAX is kept in its own
 * slot). Capacity is any size >= 64; home slots come from the high 32 bits of a
 * multiplicative hash scaled to the capacity. A slot keeps key and value side by side (one
 * cache line per probe); the 64-bit value is split in two 32-bit halves so a narrow slot is
 * 12 bytes with 4-byte alignment. A value is handled through a pointer to its `lo` half. */
struct ln_ent { uint32_t key, lo, hi; };
struct lw_ent { uint64_t key; uint32_t lo, hi; };
/* Narrow ids live in a bucketized cuckoo table: every id has two candidate buckets of five
 * slots (one 64-byte cache line each), so a lookup reads at most two lines and the table runs
 * at up to 97% load; an insert that finds both full moves a resident to its other bucket
 * (bounded), and a rare leftover waits in a small stash until the next growth. */
#define LN_SLOTS 5u
#define LN_STASH 8u
/* The narrow table is LN_SHARDS independent cuckoo tables, the shard picked from the id by a
 * fixed hash. Each grows on its own, so a growth rehashes 1/LN_SHARDS of the live set (it
 * stays in cache) and briefly holds old + new copies of one shard only: the transient the
 * budget must cover is about 1/LN_SHARDS of the table instead of the whole table again. */
#define LN_SHARD_BITS 6u /* 64 shards: a growth's transient is 1/64 of the table */
#define LN_SHARDS (1u << LN_SHARD_BITS)
struct ln_bucket { struct ln_ent s[LN_SLOTS]; uint32_t pad; };
struct live_narrow {
    struct ln_bucket *b;
    uint32_t nb, n, nstash, kick;
    struct ln_ent stash[LN_STASH];
    struct ln_ent orphan; /* the resident left homeless by a failed insert (-ENOSPC) */
};
_Static_assert(sizeof(struct ln_bucket) == 64, "a bucket is one cache line");
struct live_wide { struct lw_ent *ent; uint32_t cap, n; uint64_t seed; };
_Static_assert(sizeof(struct ln_ent) == 12, "a narrow live slot is 12 bytes");

static inline uint64_t val_get(const uint32_t *lo)
{
    return lo[0] | ((uint64_t)lo[1] << 32);
}
static inline void val_set(uint32_t *lo, uint64_t v)
{
    lo[0] = (uint32_t)v;
    lo[1] = (uint32_t)(v >> 32);
}

struct overflow_ent { uint64_t size; uint32_t chain; uint32_t next_free; };

struct interval { uint64_t lo, hi; };

#define SIZE_BITS 40u
#define SIZE_MASK ((UINT64_C(1) << SIZE_BITS) - 1u)
#define CHAIN_OVERFLOW 0xFFFFFFu /* chain field value marking an overflow entry */
#define LIVE_MAX_LOAD_NUM 9u   /* wide table: grow past 90% load */
#define LIVE_MAX_LOAD_DEN 10u

struct jp_engine {
    bool started, stopped;
    bool open; /* started && !stopped: the stream takes records (one test per record) */
    struct jp_rec_run_start start;
    struct jp_rec_counters counters;
    struct jp_rec_exec exec; /* current execution identity (run-local, not aggregated) */
    /* Counts one per EXEC record, 0 before the first: a node or site that already noted the
     * current epoch skips the tuple set, so a sample costs one compare while the identity
     * holds (EXEC records are rare next to samples). */
    uint32_t exec_epoch, thread_epoch;
    struct jp_exec_tuple *exec_tuples; uint32_t nexec, exec_cap;
    struct itab exec_tab;
    uint32_t *threads; uint32_t nthreads, threads_cap;
    struct itab thread_tab;
    bool exec_lost, threads_lost; /* a growth was refused: counts are unavailable */
    uint32_t mode;
    uint64_t budget, used;
    uint64_t seed; /* keys every hash a producer's input can steer (hash.c) */
    uint64_t peak_used; /* the most held at once, growth transients included */
    bool detail_stopped, live_exact;
    /* memory mode with exact live tracking: on_alloc and on_free may take their one-pass
     * paths (set at RUN_START unless no_fast_paths, cleared with live_exact) */
    bool mem_fast, no_fast_paths;
    /* CPU mode with detail going on: on_cpu_sample may take its one-pass path (set at
     * RUN_START unless no_fast_paths, cleared with detail_stopped, jpe_stop_detail) */
    bool cpu_fast;
    /* The host ran out of memory while a record was being counted: that record may be only
     * partly counted, so the engine takes no more (every later feed is -ENOMEM) and what it
     * renders is what it had. */
    bool oom;
    /* Hold mode (jp_engine_set_hold): an event that names what the stream has not given yet
     * is handed back (JP_ENGINE_HELD) instead of counted as a violation. */
    bool hold;

    bool have_stop;
    uint32_t termination;
    uint64_t wall_ns, process_cpu_ns, stop_record_count, records_counted;
    uint64_t violations, producer_records, truncated_stacks;

    uint64_t state_samples[JP_STATE_LIMIT], attributed_stacks;
    bool cpu_dirty; /* leaf counts changed since jpe_cpu_settle */

    uint64_t allocation_count, resize_count, allocated_bytes, freed_bytes, live_bytes, peak_bytes;
    uint64_t live_count; /* allocations tracked live (exact while live_exact) */
    uint64_t attributed_allocated, peak_epoch;

    struct jp_source *sources; uint32_t nsources, sources_cap; /* index 0 unused */
    struct itab source_tab;
    uint32_t *source_map; uint32_t nsource_defined, nsource_stored, source_map_cap;

    uint32_t *frame_func; uint32_t nframe_defined, nframe_stored, frame_cap;
    struct jp_func *funcs; uint32_t nfuncs, funcs_cap;
    struct itab func_tab;

    struct jp_node *nodes; uint32_t nnode_defined, nnode_stored, node_cap; /* index = id - 1 */
    struct jp_chain *chains; uint32_t nchains, chains_cap;
    struct itab chain_tab;
    struct jp_hot *hots; uint32_t nhots, hots_cap;
    struct itab hot_tab;

    struct jp_excerpt_ent *excerpts; uint32_t nexcerpts, excerpts_cap;

    struct live_narrow ln[LN_SHARDS];
    struct live_wide lw;
    bool max_id_live; uint32_t max_id_val[2]; /* allocation id UINT64_MAX */
    /* young ids: the window (live table) and its bit per 64 slots */
    uint32_t *win; uint64_t *win_grp; uint32_t win_w, nwin;
    uint32_t win_grow_at; /* nwin at which the window doubles, UINT32_MAX: never again */
    uint64_t win_hi; bool win_off;
    struct overflow_ent *ovf; uint32_t novf, ovf_cap, ovf_free; /* free list: index + 1 */
    /* the window's survivors in id order (pages.c): pg[i] is the page of ids from
     * (pg_base + i) * PG_IDS, NULL when it holds nothing; pg_front: the first non-NULL */
    struct pg_page **pg; uint32_t pg_n, pg_cap, pg_front;
    uint64_t pg_base;
    uint64_t pg_next;  /* the lowest id a page may take next (the highest taken + 1) */
    uint32_t pg_hint;  /* values the last closed page took: a new page's first room */
    struct interval *seen; uint32_t nseen, seen_cap; /* ids ever allocated, in order */
    uint64_t seen_next; /* the id that extends the last interval (seen_extend); 0: none */
    struct live_wide seen_extra; bool seen_max;         /* ...and those that came late */
    /* Resize sequences (streams of format 2, memory.c): the resizes taken so far of every live
     * block resized at least once, keyed id + 1 (id UINT64_MAX's in rseq_max); empty while no
     * live block was ever resized, so the rest cost nothing. */
    bool seq_stream;
    struct live_wide rseq; uint64_t rseq_max;
    /* The timeline (timeline.c): its points, the stretch each covers, how many are drawn, and
     * the run's figures at the last time mark (what the next mark's point adds); tl_live_max is
     * the most bytes live since that mark (mem_live_add keeps it). */
    struct jp_timeline_point *tl; uint32_t tl_n; uint64_t tl_stretch_ns;
    uint64_t tl_samples[JP_STATE_LIMIT], tl_allocated, tl_count, tl_live_max;
};


/* ---- budget.c ----------------------------------------------------------------------------- */

int jpe_budget_hold(struct jp_engine *e, uint64_t extra);
int jpe_vec_grow(struct jp_engine *e, void **p, uint32_t *cap, uint32_t need, size_t elem);
int jpe_budget_dup(struct jp_engine *e, const void *src, size_t len, char **out);
int jpe_stop_detail(struct jp_engine *e);
int jpe_budget_fail(struct jp_engine *e, int r);

/* Counts a semantic violation the contract says to count and exclude; 0 so a handler can
 * `return violation(e)`. */
static inline int violation(struct jp_engine *e)
{
    e->violations++;
    return 0;
}

/* An event that names what another ring may still give (a node not yet defined, an id not yet
 * live or live with another size): handed back in hold mode, else a violation. Called before
 * the handler changed anything. */
static inline int held_or_violation(struct jp_engine *e)
{
    return e->hold ? JP_ENGINE_HELD : violation(e);
}

/* ---- hashing (hash.c) --------------------------------------------------------------------- */

static inline uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x *= UINT64_C(0xc4ceb9fe1a85ec53);
    x ^= x >> 33;
    return x;
}

static inline uint64_t rotl64(uint64_t x, unsigned r)
{
    return (x << r) | (x >> (64u - r));
}

/* Two 64-bit words, injective, under the seed. */
static inline uint64_t hash2(uint64_t seed, uint64_t a, uint64_t b)
{
    return mix64(mix64(a ^ seed) ^ b ^ rotl64(seed, 29));
}

/* SipHash-2-4 streamed a byte at a time (names: definitions are rare). */
struct sip {
    uint64_t v0, v1, v2, v3, m;
    uint32_t nb, len;
};
void jpe_sip_init(struct sip *h, uint64_t seed);
void jpe_sip_bytes(struct sip *h, const void *p, size_t n);
uint64_t jpe_sip_final(struct sip *h);

/* ---- interning (intern.c) ------------------------------------------------------------------ */

typedef bool (*itab_eq)(const struct jp_engine *e, uint32_t idx, const void *key);
typedef uint64_t (*itab_hash)(const struct jp_engine *e, uint32_t idx);

/* Makes room for one more entry (load <= 1/2), rehashing with hf. 0, -ENOBUFS, -ENOMEM. */
int jpe_itab_reserve(struct jp_engine *e, struct itab *t, itab_hash hf);
/* Inserts idx under h: the caller knows the key is absent and room is reserved. */
void jpe_intern_put(struct itab *t, uint64_t h, uint32_t idx);

/* The index of the entry equal to key under hash h, or UINT32_MAX. Always inlined, so the
 * constant eq of each caller is inlined too (a hot-line lookup per sample is no indirect
 * call per probe). */
__attribute__((always_inline))
static inline uint32_t itab_find(const struct jp_engine *e, const struct itab *t, uint64_t h,
                                 itab_eq eq, const void *key)
{
    if (!t->cap)
        return UINT32_MAX;
    uint32_t mask = t->cap - 1u;
    for (uint32_t i = (uint32_t)h & mask;; i = (i + 1u) & mask) {
        uint32_t s = t->slot[i];
        if (!s)
            return UINT32_MAX;
        if (eq(e, s - 1u, key))
            return s - 1u;
    }
}

/* One interned table: entries in a definition-ordered array (*arr, n used of *cap, elem bytes
 * each) found through the index t by hash and eq; max bounds n. */
struct intern {
    struct itab *t;
    itab_hash hash;
    itab_eq eq;
    void **arr;
    uint32_t *cap;
    uint32_t n, max;
    size_t elem;
};

/* The interning sequence of every definition and detail table: find key; when absent, grow the
 * entry array to n + 1 and then reserve the index, in that order (so the budget sees the same
 * growths at the same records whatever the table). Returns 0 when found (*idx its index); 1
 * when absent with room made (*idx = n: the caller fills entry n, counts it, and publishes it
 * with jpe_intern_put(in->t, h, n), or leaves it unfilled on a later failure); -ENOBUFS when the
 * budget (or max) refuses, -ENOMEM when malloc does. */
__attribute__((always_inline))
static inline int intern_find(struct jp_engine *e, const struct intern *in, uint64_t h,
                              const void *key, uint32_t *idx)
{
    *idx = itab_find(e, in->t, h, in->eq, key);
    if (*idx != UINT32_MAX)
        return 0;
    if (in->n >= in->max)
        return -ENOBUFS;
    int rc;
    if ((rc = jpe_vec_grow(e, in->arr, in->cap, in->n + 1u, in->elem)) < 0 ||
        (rc = jpe_itab_reserve(e, in->t, in->hash)) < 0)
        return rc;
    *idx = in->n;
    return 1;
}

/* ---- defs.c ------------------------------------------------------------------------------- */

int jpe_on_run_start(struct jp_engine *e, const struct jp_rec_run_start *r, const char **why);
int jpe_on_source_def(struct jp_engine *e, const uint8_t *rec);
int jpe_on_frame_def(struct jp_engine *e, const uint8_t *rec);
int jpe_on_node_def(struct jp_engine *e, const struct jp_rec_node_def *r);

/* Classifies a node reference: -1 undefined (violation), 0 defined without detail, 1 stored. */
static inline int node_ref(const struct jp_engine *e, uint32_t node)
{
    if (node == JP_ID_NONE || node > e->nnode_defined)
        return -1;
    return node <= e->nnode_stored ? 1 : 0;
}

/* ---- exec.c ------------------------------------------------------------------------------- */

int jpe_exec_note(struct jp_engine *e, uint32_t key);
int jpe_thread_note_slow(struct jp_engine *e);

/* Notes the current runtime thread among the run's distinct threads: one compare while the
 * identity holds, the slow half once per EXEC record at most. */
static inline int thread_note(struct jp_engine *e)
{
    return e->thread_epoch == e->exec_epoch ? 0 : jpe_thread_note_slow(e);
}

/* ---- timeline.c --------------------------------------------------------------------------- */

/* A TIME record: what came since the last mark goes to the point of its time. 0, -ENOMEM. */
int jpe_on_time(struct jp_engine *e, const struct jp_rec_time *r);

/* ---- cpu.c -------------------------------------------------------------------------------- */

int jpe_on_cpu_sample_general(struct jp_engine *e, const struct jp_rec_cpu_sample *r);
void jpe_cpu_settle(struct jp_engine *e);

/* ---- memory.c ----------------------------------------------------------------------------- */

int jpe_on_alloc_general(struct jp_engine *e, const struct jp_rec_alloc *r);
/* seq: the resizes of the block before this one the record names (RESIZE: 0), read in a
 * stream of format 2 only. */
int jpe_on_resize(struct jp_engine *e, const struct jp_rec_resize *r, uint64_t seq);
int jpe_on_free_general(struct jp_engine *e, const struct jp_rec_free *r);
void jpe_mem_settle(struct jp_engine *e);

/* ---- live_table.c ------------------------------------------------------------------------- */

uint32_t *jpe_lw_find(struct live_wide *t, uint64_t key);
void jpe_lw_put(struct live_wide *t, uint64_t key, uint64_t val);
void jpe_lw_del(struct live_wide *t, uint32_t *lop); /* lop: what jpe_lw_find returned */
int jpe_lw_reserve(struct jp_engine *e, struct live_wide *t);
uint32_t *jpe_table_find(struct jp_engine *e, uint64_t id);
void jpe_table_del(struct jp_engine *e, uint64_t id, uint32_t *valp);
int jpe_table_insert(struct jp_engine *e, uint64_t id, uint64_t val);
int jpe_ovf_pack(struct jp_engine *e, uint64_t size, uint32_t chain, uint64_t *out);

/* Packs (size, creation chain) into one value, using the overflow array when either does not
 * fit. chain is the chain index + 1, 0 for "no chain" (an event without detail). */
static inline int live_pack(struct jp_engine *e, uint64_t size, uint32_t chain, uint64_t *out)
{
    if (__builtin_expect(size < SIZE_MASK && chain < CHAIN_OVERFLOW, 1)) {
        *out = size | ((uint64_t)chain << SIZE_BITS);
        return 0;
    }
    return jpe_ovf_pack(e, size, chain, out);
}

static inline void live_unpack(const struct jp_engine *e, uint64_t val, uint64_t *size,
                               uint32_t *chain)
{
    if ((val >> SIZE_BITS) == CHAIN_OVERFLOW) {
        const struct overflow_ent *o = &e->ovf[val & SIZE_MASK];
        *size = o->size;
        *chain = o->chain;
    } else {
        *size = val & SIZE_MASK;
        *chain = (uint32_t)(val >> SIZE_BITS);
    }
}

/* Gives a value's overflow entry (if it has one) back to the free list. */
static inline void ovf_release(struct jp_engine *e, uint64_t val)
{
    if ((val >> SIZE_BITS) != CHAIN_OVERFLOW)
        return;
    uint32_t i = (uint32_t)(val & SIZE_MASK);
    e->ovf[i].next_free = e->ovf_free;
    e->ovf_free = i + 1u;
}

/* Fixed, not seeded: a shard's growth schedule follows from the ids alone, so the bytes the
 * table accounts (and so where a budget runs out) never depend on the seed. Hostile ids can
 * only crowd one shard, which then grows like an unsharded table. */
static inline struct live_narrow *ln_shard(struct jp_engine *e, uint32_t key)
{
    return &e->ln[(uint32_t)((key * UINT64_C(0xD6E8FEB86659FD93)) >> (63u - LN_SHARD_BITS) >> 1)];
}

static inline uint32_t ln_b1(const struct live_narrow *t, uint32_t key)
{
    uint64_t h = key * UINT64_C(0x9E3779B97F4A7C15);
    return (uint32_t)(((h >> 32) * (uint64_t)t->nb) >> 32);
}

static inline uint32_t ln_b2(const struct live_narrow *t, uint32_t key, uint32_t b1)
{
    uint64_t h = (key ^ (key >> 16)) * UINT64_C(0xC2B2AE3D27D4EB4F);
    uint32_t b = (uint32_t)(((h >> 32) * (uint64_t)t->nb) >> 32);
    return b != b1 ? b : (b1 + 1u == t->nb ? 0 : b1 + 1u);
}

/* Starts loading the two buckets key may live in (a hint: a growth in between is harmless). */
static inline void ln_prefetch(struct jp_engine *e, uint32_t key)
{
    const struct live_narrow *t = ln_shard(e, key);
    if (!t->nb)
        return;
    uint32_t b1 = ln_b1(t, key);
    __builtin_prefetch(&t->b[b1], 1);
    __builtin_prefetch(&t->b[ln_b2(t, key, b1)], 1);
}

/* ---- pages.c ------------------------------------------------------------------------------ */

#define PG_ID_BITS 12u
#define PG_IDS (1u << PG_ID_BITS) /* ids a survivor page covers */
/* The pages hold values only; which value goes where is live.c's. */
/* Whether a survivor with this id may go to the pages (1) or not (0: out of order, too far
 * past the newest page, UINT64_MAX). When it opens a page past the newest, the newest closes
 * first; if that page is too sparse to keep, *sparse is set to an id of it (its live values
 * are to move to the tables, jpe_pg_next_live), else left alone. */
int jpe_pg_admit_slow(struct jp_engine *e, uint64_t id, uint64_t *sparse);
static inline int jpe_pg_admit(struct jp_engine *e, uint64_t id, uint64_t *sparse)
{
    /* the common survivor: in order, within the newest page (or the first of all) */
    if (id >= e->pg_next && id != UINT64_MAX &&
        (!e->pg_n || (id >> PG_ID_BITS) < e->pg_base + e->pg_n))
        return 1;
    return jpe_pg_admit_slow(e, id, sparse);
}
/* Appends an admitted id's value to its page, made or grown as needed: 1, 0 when the budget
 * refused the room, -ENOMEM. */
int jpe_pg_append(struct jp_engine *e, uint64_t id, uint64_t val);
/* id's live value in the pages, or NULL. */
uint32_t *jpe_pg_find(struct jp_engine *e, uint64_t id);
/* Drops id's value (valp: what jpe_pg_find gave). 1 when its page, closed, is now too sparse
 * to keep (its live values are to move to the tables), else 0. */
int jpe_pg_del(struct jp_engine *e, uint64_t id, uint32_t *valp);
/* A page's live values in id order, to move them out: *cursor starts at 0; gives the next
 * live value's word and its id, or NULL at the end. jpe_pg_moved marks one moved (its page is
 * freed with the last); jpe_pg_tidy compacts a page whose move was refused midway. */
uint32_t *jpe_pg_next_live(struct jp_engine *e, uint64_t page_id, uint32_t *cursor,
                           uint64_t *id);
void jpe_pg_moved(struct jp_engine *e, uint64_t id, uint32_t *valp);
void jpe_pg_tidy(struct jp_engine *e, uint64_t page_id);
void jpe_pg_free_all(struct jp_engine *e);
/* The pages' bytes, their directory's included, and the live values they hold. */
uint64_t jpe_pg_bytes(const struct jp_engine *e, uint64_t *live);
/* Whether a survivor with this id would be appended to a page (most likely: a hint). */
static inline bool pg_would_take(const struct jp_engine *e, uint64_t id)
{
    return id >= e->pg_next;
}

/* ---- window.c ----------------------------------------------------------------------------- */

/* The window's own mechanics; what moves in and out of it is live.c's. */
/* 1 when the window exists (made now if need be), 0 when the budget refused it (the tables
 * alone still track exactly), -ENOMEM when malloc did. */
int jpe_win_ready(struct jp_engine *e);
/* Doubles the window when it is due, re-placing its values: 0, or -ENOMEM. */
int jpe_win_grow(struct jp_engine *e);
/* The first occupied slot in [a, b) (b <= W), or b. */
uint32_t jpe_win_next(struct jp_engine *e, uint32_t a, uint32_t b);
/* What a failure to track a live allocation returns (memory.c): the budget's refusal
 * (-ENOBUFS) ends exact live tracking for the run and is no error; anything else is. */
int jpe_live_lost(struct jp_engine *e, int rc);

/* A window slot's value (window.c): see the slot format there. */
#define WIN_SIZE_BITS 20u
#define WIN_CHAIN_LIMIT 4095u /* keeps 1 + the largest packed slot below 2^32 */
static inline bool win_fits(uint64_t val)
{
    return (val & SIZE_MASK) < (UINT64_C(1) << WIN_SIZE_BITS) &&
           (val >> SIZE_BITS) < WIN_CHAIN_LIMIT;
}
/* The slot of a creation chain (index + 1, below WIN_CHAIN_LIMIT) and a size (below
 * 2^WIN_SIZE_BITS), and the two back out of an occupied slot. */
static inline uint32_t win_slot(uint32_t chain, uint64_t size)
{
    return 1u + (chain << WIN_SIZE_BITS | (uint32_t)size);
}
static inline uint64_t win_slot_size(uint32_t v)
{
    return (v - 1u) & ((UINT32_C(1) << WIN_SIZE_BITS) - 1u);
}
static inline uint32_t win_slot_chain(uint32_t v)
{
    return (v - 1u) >> WIN_SIZE_BITS;
}
/* A packed live value (win_fits) as a slot, and back. */
static inline uint32_t win_enc(uint64_t val)
{
    return win_slot((uint32_t)(val >> SIZE_BITS), val & SIZE_MASK);
}
static inline uint64_t win_dec(uint32_t v)
{
    return win_slot_size(v) | (uint64_t)win_slot_chain(v) << SIZE_BITS;
}
static inline void win_clear(struct jp_engine *e, uint32_t s)
{
    e->win[s] = 0;
    e->nwin--;
}

/* The window slot holding id, or NULL (id outside the window, or not held there). */
static inline uint32_t *win_find(struct jp_engine *e, uint64_t id)
{
    if (e->win && id <= e->win_hi && e->win_hi - id < e->win_w) {
        uint32_t *v = &e->win[id & (e->win_w - 1u)];
        if (*v)
            return v;
    }
    return NULL;
}

/* Group g (slots 64g .. 64g + 63) has its bit set whenever one of its slots is occupied; a
 * bit may stay set after its group empties (a free only zeroes the slot), and the scan that
 * finds the group empty clears it: each set bit costs one scan of its 64 slots at most. */
static inline void win_mark(struct jp_engine *e, uint32_t s)
{
    e->win_grp[s >> 12] |= UINT64_C(1) << ((s >> 6) & 63u);
}

/* How many ids ahead the survivor a new id will displace is looked at: far enough that its
 * table buckets arrive before the move (a few records an id, some nanoseconds each, against a miss
 * of 100 ns and more), near enough that the window slot is still the one it will be. */
#define WIN_EVICT_AHEAD 16u
/* A newer id will most likely displace the slot WIN_EVICT_AHEAD after id's: if a survivor
 * sits there and will go to the tables (not to a page, whose end is in cache), start loading
 * the buckets it moves to now, so that move does not wait on memory. */
static inline void win_prefetch_next(struct jp_engine *e, uint64_t id)
{
    uint64_t next_occ = id + WIN_EVICT_AHEAD - e->win_w;
    if (e->win[(id + WIN_EVICT_AHEAD) & (e->win_w - 1u)] && next_occ < UINT32_MAX &&
        !pg_would_take(e, next_occ))
        ln_prefetch(e, (uint32_t)(next_occ + 1u));
}

/* Slot s (empty) takes window value v. */
static inline void win_put(struct jp_engine *e, uint32_t s, uint32_t v)
{
    e->win[s] = v;
    win_mark(e, s);
    e->nwin++;
}

/* id, above every id before it, is the window's newest now (held in its slot or not). */
static inline void win_advance(struct jp_engine *e, uint64_t id)
{
    e->win_hi = id;
    win_prefetch_next(e, id);
}

/* Bytes a window of w slots holds: the slots and a bit per 64 of them. */
static inline uint64_t win_bytes(uint32_t w)
{
    return (uint64_t)w * sizeof(uint32_t) + w / 512u;
}

/* ---- excerpt.c ---------------------------------------------------------------------------- */

int jpe_on_excerpt(struct jp_engine *e, const uint8_t *rec);

#endif
