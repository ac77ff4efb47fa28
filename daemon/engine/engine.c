/* Online aggregation of one run's record stream (see engine.h for the feeding contract).
 *
 * Shape of the data:
 *  - definitions are dense ids announced before use: sources, frames, calling-context nodes.
 *    Each frame maps to one function identity (CONTRACT_READINGS 1), interned on definition.
 *    Each node precomputes what a sample needs: its function, its call chain (the function
 *    sequence root..node, interned), whether it is the root-most occurrence of its function on
 *    its path (reading 4: recursion counts once), and whether it ends a truncated stack. A CPU
 *    sample bumps its leaf node's count and its self/hot-line counters; inclusive and chain
 *    counts are settled from the node counts when a report is built (cpu_settle).
 *  - memory mode keeps an exact live table: open addressing keyed by allocation id, 12 bytes a
 *    slot (32-bit key array + 64-bit packed value array) for ids below 2^32-1, a second table
 *    with 64-bit keys for larger ids; the value packs the size (40 bits) and the creation site
 *    (24 bits), and anything that does not fit goes to an exact overflow array. In front of
 *    both, the newest ids sit in a direct-mapped young window of 4-byte slots (id mod W), so
 *    the many allocations that die young are never hashed (live table, below).
 *  - live_at_peak_bytes uses epochs instead of copying the table at each new peak: the global
 *    peak epoch advances when live bytes rise strictly above the previous peak (reading 10);
 *    before a site's live bytes change, a site whose stamp is older than the current epoch
 *    saves its live value as its snapshot (that is its value at the latest peak) and takes the
 *    current stamp. A site untouched since the latest peak still holds its peak value live.
 *
 * Budgets: every table growth is accounted in `used` against the run's budget before it
 * happens. A refused growth of a definition/detail table stops all detail for the rest of the
 * run (later definitions are counted as defined, so their ids stay valid, but carry no
 * detail); totals go on. A refused growth of the live table ends exact live tracking.
 * A growth holds the old and the new array at once (a rehash reads one while filling the
 * other; realloc may copy), so it must fit used + new bytes, not just the steady state after
 * it: the budget is never exceeded even for an instant (budget_hold). The narrow live table
 * is sharded so that transient is one shard's copy, not the whole table's.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "engine_internal.h"

struct jp_node {
    uint32_t parent; /* node id, 0 for a root */
    uint32_t func;
    uint32_t chain;  /* chain index */
    uint8_t depth;
    uint8_t first;   /* root-most occurrence of func on this path */
    uint8_t trunc;   /* this node is a <truncated-stack> frame */
    uint8_t reserved;
    uint32_t last_hot; /* hot-line index + 1 this node's samples last hit: skips the hash */
    uint32_t exec_epoch; /* the EXEC epoch this node's chain last noted (exec_note) */
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
#ifndef LN_SHARD_BITS
#define LN_SHARD_BITS 6u
#endif
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

struct overflow_ent { uint64_t size; uint32_t site; uint32_t next_free; };

struct interval { uint64_t lo, hi; };

#define SIZE_BITS 40u
#define SIZE_MASK ((UINT64_C(1) << SIZE_BITS) - 1u)
#define SITE_OVERFLOW 0xFFFFFFu /* site field value marking an overflow entry */
#define LIVE_MAX_LOAD_NUM 9u   /* wide table: grow past 90% load */
#define LIVE_MAX_LOAD_DEN 10u

struct jp_engine {
    bool started, stopped;
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
    uint64_t seed; /* keys every hash a producer's input can steer (hashing, below) */
    uint64_t peak_used; /* the most held at once, growth transients included */
    bool detail_stopped, live_exact;
    /* The host ran out of memory while a record was being counted: that record may be only
     * partly counted, so the engine takes no more (every later feed is -ENOMEM) and what it
     * renders is what it had. */
    bool oom;

    bool have_stop;
    uint32_t termination;
    uint64_t wall_ns, process_cpu_ns, stop_record_count, records_counted;
    uint64_t violations, producer_records, truncated_stacks;

    uint64_t state_samples[JP_STATE_LIMIT], attributed_stacks;
    bool cpu_dirty; /* leaf counts changed since cpu_settle */

    uint64_t allocation_count, resize_count, allocated_bytes, freed_bytes, live_bytes, peak_bytes;
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
    uint32_t *ring; uint64_t *ring_grp; uint32_t ring_w, nring;
    uint32_t ring_grow_at; /* nring at which the window doubles, UINT32_MAX: never again */
    uint64_t ring_hi; bool ring_off;
    struct overflow_ent *ovf; uint32_t novf, ovf_cap, ovf_free; /* free list: index + 1 */
    struct interval *seen; uint32_t nseen, seen_cap; /* ids ever allocated, in order */
    struct live_wide seen_extra; bool seen_max;         /* ...and those that came late */
};

/* ---- budget ---------------------------------------------------------------------------- */

/* Whether the budget admits holding `extra` bytes on top of what is accounted now (a growth's
 * new array while the old one is still held); records the high-water mark when it does. */
static int budget_hold(struct jp_engine *e, uint64_t extra)
{
    if (extra > e->budget || e->used > e->budget - extra)
        return -ENOBUFS;
    if (e->used + extra > e->peak_used)
        e->peak_used = e->used + extra;
    return 0;
}

/* Grows *p (an array of elem-sized items, capacity *cap) to hold need items, counting the new
 * bytes against the budget first: realloc may hold old and new at once, so the whole new
 * array must fit beside the old. -ENOBUFS when the budget refuses, -ENOMEM when malloc does. */
static int vec_grow(struct jp_engine *e, void **p, uint32_t *cap, uint32_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    uint64_t ncap = *cap ? *cap : 8u;
    while (ncap < need)
        ncap *= 2u;
    if (ncap > UINT32_MAX)
        return -ENOBUFS;
    uint64_t delta = (ncap - *cap) * (uint64_t)elem;
    if (budget_hold(e, ncap * (uint64_t)elem) < 0)
        return -ENOBUFS;
    void *np = realloc(*p, (size_t)ncap * elem);
    if (!np)
        return -ENOMEM;
    memset((char *)np + (size_t)*cap * elem, 0, (size_t)(ncap - *cap) * elem);
    e->used += delta;
    *p = np;
    *cap = (uint32_t)ncap;
    return 0;
}

/* A NUL-terminated copy of src[0..len) in *out, counted against the budget. -ENOBUFS when the
 * budget refuses (the caller degrades as the contract says), -ENOMEM when malloc does (the
 * caller passes it up: the host is out of memory, which is not a budget state). */
static int budget_dup(struct jp_engine *e, const void *src, size_t len, char **out)
{
    *out = NULL;
    if (budget_hold(e, len + 1u) < 0)
        return -ENOBUFS;
    char *d = malloc(len + 1u);
    if (!d)
        return -ENOMEM;
    memcpy(d, src, len);
    d[len] = 0;
    e->used += len + 1u;
    *out = d;
    return 0;
}

/* ---- hashing --------------------------------------------------------------------------- */

static uint64_t mix64(uint64_t x)
{
    x ^= x >> 33;
    x *= UINT64_C(0xff51afd7ed558ccd);
    x ^= x >> 33;
    x *= UINT64_C(0xc4ceb9fe1a85ec53);
    x ^= x >> 33;
    return x;
}

/* Seeded hashing. Every table a producer's ids and names fill is keyed by the engine's seed,
 * so no stream can be precomputed to collide (a hostile producer would otherwise make probes
 * linear and the daemon quadratic). Output never depends on it: the report walks the
 * definition-ordered arrays and sorts on the contract's keys, tables only find things, and
 * every table grows on its entry count alone, so budgets run out at the same record whatever
 * the seed. The narrow live table (engine.c, live table) keeps a fixed hash: its cuckoo
 * displacement can fail, and a failure grows it, so a seeded layout could move the point
 * where the retention budget runs out; chosen ids there cost at most a growth each, which
 * scales every bucket index and breaks the collision.
 *
 * Names go through SipHash-2-4 (keyed 64-bit, streamed a byte at a time: definitions are
 * rare); numeric keys are packed injectively and finished with mix64 around the seed. */
struct sip {
    uint64_t v0, v1, v2, v3, m;
    uint32_t nb, len;
};

static inline uint64_t rotl64(uint64_t x, unsigned r)
{
    return (x << r) | (x >> (64u - r));
}

static void sip_round(struct sip *h)
{
    h->v0 += h->v1; h->v1 = rotl64(h->v1, 13); h->v1 ^= h->v0; h->v0 = rotl64(h->v0, 32);
    h->v2 += h->v3; h->v3 = rotl64(h->v3, 16); h->v3 ^= h->v2;
    h->v0 += h->v3; h->v3 = rotl64(h->v3, 21); h->v3 ^= h->v0;
    h->v2 += h->v1; h->v1 = rotl64(h->v1, 17); h->v1 ^= h->v2; h->v2 = rotl64(h->v2, 32);
}

static void sip_init(struct sip *h, uint64_t seed)
{
    uint64_t k0 = seed, k1 = mix64(seed ^ UINT64_C(0x5bd1e9955bd1e995));
    h->v0 = k0 ^ UINT64_C(0x736f6d6570736575);
    h->v1 = k1 ^ UINT64_C(0x646f72616e646f6d);
    h->v2 = k0 ^ UINT64_C(0x6c7967656e657261);
    h->v3 = k1 ^ UINT64_C(0x7465646279746573);
    h->m = 0;
    h->nb = h->len = 0;
}

static void sip_word(struct sip *h, uint64_t m)
{
    h->v3 ^= m;
    sip_round(h);
    sip_round(h);
    h->v0 ^= m;
}

static void sip_bytes(struct sip *h, const void *p, size_t n)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) {
        h->m |= (uint64_t)s[i] << (8u * h->nb);
        h->len++;
        if (++h->nb == 8u) {
            sip_word(h, h->m);
            h->m = 0;
            h->nb = 0;
        }
    }
}

static uint64_t sip_final(struct sip *h)
{
    sip_word(h, h->m | (uint64_t)(h->len & 0xffu) << 56);
    h->v2 ^= 0xff;
    for (int i = 0; i < 4; i++)
        sip_round(h);
    return h->v0 ^ h->v1 ^ h->v2 ^ h->v3;
}

/* Two 64-bit words, injective, under the seed. */
static inline uint64_t hash2(uint64_t seed, uint64_t a, uint64_t b)
{
    return mix64(mix64(a ^ seed) ^ b ^ rotl64(seed, 29));
}

typedef bool (*itab_eq)(const struct jp_engine *e, uint32_t idx, const void *key);

/* Finds key; returns the index or UINT32_MAX, and in *slot_out the slot where it is or would
 * go. */
static uint32_t itab_find(const struct jp_engine *e, const struct itab *t, uint64_t h,
                          itab_eq eq, const void *key, uint32_t *slot_out)
{
    if (!t->cap) {
        *slot_out = UINT32_MAX;
        return UINT32_MAX;
    }
    uint32_t mask = t->cap - 1u;
    for (uint32_t i = (uint32_t)h & mask;; i = (i + 1u) & mask) {
        uint32_t s = t->slot[i];
        if (!s) {
            *slot_out = i;
            return UINT32_MAX;
        }
        if (eq(e, s - 1u, key)) {
            *slot_out = i;
            return s - 1u;
        }
    }
}

typedef uint64_t (*itab_hash)(const struct jp_engine *e, uint32_t idx);

/* Makes room for one more entry (load <= 1/2), rehashing with hf. */
static int itab_reserve(struct jp_engine *e, struct itab *t, itab_hash hf)
{
    if ((uint64_t)(t->n + 1u) * 2u <= t->cap)
        return 0;
    uint64_t ncap = t->cap ? (uint64_t)t->cap * 2u : 16u;
    if (ncap > (UINT32_C(1) << 31))
        return -ENOBUFS;
    uint64_t bytes = ncap * sizeof(uint32_t), old = (uint64_t)t->cap * sizeof(uint32_t);
    if (budget_hold(e, bytes) < 0) /* the old slots are read while the new fill */
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

/* ---- sources --------------------------------------------------------------------------- */

struct source_key { uint8_t origin; const char *path; uint16_t len; };

static uint64_t source_hash_k(const struct jp_engine *e, const struct source_key *k)
{
    struct sip h;
    sip_init(&h, e->seed);
    sip_bytes(&h, &k->origin, 1);
    sip_bytes(&h, k->path, k->len);
    return sip_final(&h);
}
static uint64_t source_hash(const struct jp_engine *e, uint32_t idx)
{
    const struct jp_source *s = &e->sources[idx];
    struct source_key k = {s->origin, s->path, s->path_len};
    return source_hash_k(e, &k);
}
static bool source_eq(const struct jp_engine *e, uint32_t idx, const void *key)
{
    const struct source_key *k = key;
    const struct jp_source *s = &e->sources[idx];
    return s->origin == k->origin && s->path_len == k->len && !memcmp(s->path, k->path, k->len);
}

/* ---- functions ------------------------------------------------------------------------- */

struct func_key {
    const char *ns, *fn; uint16_t ns_len, fn_len;
    uint8_t kind; uint32_t source, decl_start, decl_end, uniq;
};

/* Exactly the fields func_eq compares; lengths first, so (ns, fn) splits stay distinct. */
static uint64_t func_hash_k(const struct jp_engine *e, const struct func_key *k)
{
    struct sip h;
    sip_init(&h, e->seed);
    uint32_t nums[6] = {k->ns_len, k->fn_len, k->source, k->decl_start, k->decl_end, k->uniq};
    sip_bytes(&h, nums, sizeof nums);
    sip_bytes(&h, k->ns, k->ns_len);
    sip_bytes(&h, k->fn, k->fn_len);
    return sip_final(&h);
}
static uint64_t func_hash(const struct jp_engine *e, uint32_t idx)
{
    const struct jp_func *f = &e->funcs[idx];
    struct func_key k = {f->ns, f->fn, f->ns_len, f->fn_len, f->kind, f->source,
                         f->decl_start, f->decl_end, f->uniq};
    return func_hash_k(e, &k);
}
static bool func_eq(const struct jp_engine *e, uint32_t idx, const void *key)
{
    const struct func_key *k = key;
    const struct jp_func *f = &e->funcs[idx];
    return f->source == k->source && f->decl_start == k->decl_start &&
           f->decl_end == k->decl_end && f->uniq == k->uniq && f->ns_len == k->ns_len &&
           f->fn_len == k->fn_len && !memcmp(f->ns, k->ns, k->ns_len) &&
           !memcmp(f->fn, k->fn, k->fn_len);
}

/* ---- chains and hot lines -------------------------------------------------------------- */

struct chain_key { uint32_t parent, func; };
static uint64_t chain_hash_k(const struct jp_engine *e, const struct chain_key *k)
{
    return hash2(e->seed, k->parent, k->func);
}
static uint64_t chain_hash(const struct jp_engine *e, uint32_t idx)
{
    struct chain_key k = {e->chains[idx].parent, e->chains[idx].func};
    return chain_hash_k(e, &k);
}
static bool chain_eq(const struct jp_engine *e, uint32_t idx, const void *key)
{
    const struct chain_key *k = key;
    return e->chains[idx].parent == k->parent && e->chains[idx].func == k->func;
}

struct hot_key { uint32_t func, line, col; };
static uint64_t hot_hash_k(const struct jp_engine *e, const struct hot_key *k)
{
    return hash2(e->seed, (uint64_t)k->func << 32 | k->line, k->col);
}
static uint64_t hot_hash(const struct jp_engine *e, uint32_t idx)
{
    struct hot_key k = {e->hots[idx].func, e->hots[idx].line, e->hots[idx].col};
    return hot_hash_k(e, &k);
}
static bool hot_eq(const struct jp_engine *e, uint32_t idx, const void *key)
{
    const struct hot_key *k = key;
    const struct jp_hot *h = &e->hots[idx];
    return h->func == k->func && h->line == k->line && h->col == k->col;
}

static uint64_t exec_hash_k(const struct jp_engine *e, const struct jp_exec_tuple *k)
{
    return hash2(e->seed, (uint64_t)k->key << 32 | k->thread, k->task);
}
static uint64_t exec_hash(const struct jp_engine *e, uint32_t idx)
{
    return exec_hash_k(e, &e->exec_tuples[idx]);
}
static bool exec_eq(const struct jp_engine *e, uint32_t idx, const void *key)
{
    return !memcmp(&e->exec_tuples[idx], key, sizeof(struct jp_exec_tuple));
}
static uint64_t thread_hash(const struct jp_engine *e, uint32_t idx)
{
    return hash2(e->seed, e->threads[idx], 0);
}
static bool thread_eq(const struct jp_engine *e, uint32_t idx, const void *key)
{
    return e->threads[idx] == *(const uint32_t *)key;
}

/* Stops all further detail; returns 0 so callers can `return stop_detail(e)` on -ENOBUFS. */
static int stop_detail(struct jp_engine *e)
{
    e->detail_stopped = true;
    return 0;
}

/* -ENOBUFS is the budget speaking (detail stops); -ENOMEM is the host running out. */
static int budget_fail(struct jp_engine *e, int r)
{
    if (r == -ENOBUFS)
        return stop_detail(e);
    return r;
}

/* ---- life cycle ------------------------------------------------------------------------ */

static void set_seed(struct jp_engine *e, uint64_t seed)
{
    e->seed = seed;
    e->lw.seed = mix64(seed ^ UINT64_C(0x1d8e4e27c47d124f));
    e->seen_extra.seed = mix64(seed ^ UINT64_C(0x2545f4914f6cdd1d));
}

int jp_engine_new(struct jp_engine **out)
{
    struct jp_engine *e = calloc(1, sizeof *e);
    if (!e)
        return -ENOMEM;
    /* A fresh secret per engine; where the kernel has no entropy yet, the clock and the
     * address still differ per run (the seed only has to be unknown to the producer). */
    uint64_t seed;
    if (getrandom(&seed, sizeof seed, GRND_NONBLOCK) != (ssize_t)sizeof seed) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        seed = mix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 30) ^ (uintptr_t)e);
    }
    set_seed(e, seed);
    e->live_exact = true;
    e->exec.runtime_thread_id = e->exec.task_id = e->exec.actor_id = JP_ID_UNAVAILABLE;
    *out = e;
    return 0;
}

int jp_engine_set_hash_seed(struct jp_engine *e, uint64_t seed)
{
    if (e->started)
        return -EBUSY; /* tables may hold entries placed under the old seed */
    set_seed(e, seed);
    return 0;
}

uint32_t jp_engine_func_slot(const struct jp_engine *e, uint32_t func)
{
    for (uint32_t i = 0; i < e->func_tab.cap; i++)
        if (e->func_tab.slot[i] == func + 1u)
            return i;
    return UINT32_MAX;
}

void jp_engine_free(struct jp_engine *e)
{
    if (!e)
        return;
    for (uint32_t i = 1; i < e->nsources; i++)
        free((void *)e->sources[i].path);
    for (uint32_t i = 0; i < e->nfuncs; i++) {
        free((void *)e->funcs[i].ns);
        free((void *)e->funcs[i].fn);
    }
    for (uint32_t i = 0; i < e->nexcerpts; i++)
        free(e->excerpts[i].text);
    free(e->sources); free(e->source_tab.slot); free(e->source_map);
    free(e->frame_func); free(e->funcs); free(e->func_tab.slot);
    free(e->nodes); free(e->chains); free(e->chain_tab.slot);
    free(e->hots); free(e->hot_tab.slot); free(e->excerpts);
    free(e->exec_tuples); free(e->exec_tab.slot); free(e->threads); free(e->thread_tab.slot);
    for (unsigned i = 0; i < LN_SHARDS; i++)
        free(e->ln[i].b);
    free(e->lw.ent); free(e->ring); free(e->seen_extra.ent);
    free(e->ovf); free(e->seen);
    free(e);
}

static int violation(struct jp_engine *e)
{
    e->violations++;
    return 0;
}

/* ---- definitions ----------------------------------------------------------------------- */

static int on_run_start(struct jp_engine *e, const struct jp_rec_run_start *r, const char **why)
{
    if (r->format_version != JP_FORMAT_VERSION) {
        *why = "unsupported record format version";
        return -EPROTO;
    }
    if (r->mode != JP_MODE_CPU && r->mode != JP_MODE_MEMORY) {
        *why = "RUN_START names no known mode";
        return -EPROTO;
    }
    e->start = *r;
    e->mode = r->mode;
    e->budget = r->mode == JP_MODE_CPU ? r->cpu_budget_bytes : r->retention_budget_bytes;
    e->started = true;
    return 0;
}

/* A logical path the report may show: relative, '/'-separated, no empty, "." or ".."
 * segment, no backslash, drive letter or control character. Anything else would be an
 * absolute or unauthorized path, which never reaches a report. */
static bool path_authorized(const char *p, size_t n)
{
    if (!n || p[0] == '/' || (n >= 2 && p[1] == ':'))
        return false;
    size_t seg = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || p[i] == '/') {
            size_t len = i - seg;
            const char *s = p + seg;
            if (!len || (len == 1 && s[0] == '.') || (len == 2 && s[0] == '.' && s[1] == '.'))
                return false;
            seg = i + 1;
            continue;
        }
        if ((unsigned char)p[i] < 0x20 || p[i] == '\\' || p[i] == 0x7f)
            return false;
    }
    return true;
}

static int on_source_def(struct jp_engine *e, const uint8_t *rec)
{
    struct jp_rec_source_def r;
    memcpy(&r, rec, sizeof r);
    if (r.source_id != e->nsource_defined + 1u)
        return violation(e); /* not dense */
    e->nsource_defined++;
    if (e->detail_stopped)
        return 0;
    struct source_key k = {r.origin, (const char *)rec + sizeof r, r.path_len};
    if (r.origin < JP_ORIGIN_PROJECT || r.origin > JP_ORIGIN_STDLIB ||
        !path_authorized(k.path, k.len)) {
        /* The id stays defined (later ids keep their meaning) but names no source: frames
         * in it report their location unavailable. */
        int rc = vec_grow(e, (void **)&e->source_map, &e->source_map_cap,
                          e->nsource_defined + 1u, sizeof *e->source_map);
        if (rc < 0)
            return budget_fail(e, rc);
        e->source_map[r.source_id] = 0;
        e->nsource_stored = e->nsource_defined;
        return violation(e);
    }
    uint64_t h = source_hash_k(e, &k);
    uint32_t slot, idx = itab_find(e, &e->source_tab, h, source_eq, &k, &slot);
    int rc = vec_grow(e, (void **)&e->source_map, &e->source_map_cap, e->nsource_defined + 1u,
                      sizeof *e->source_map);
    if (rc < 0)
        return budget_fail(e, rc);
    if (idx == UINT32_MAX) {
        if (!e->nsources)
            e->nsources = 1; /* index 0 means "unavailable" */
        if ((rc = vec_grow(e, (void **)&e->sources, &e->sources_cap, e->nsources + 1u,
                           sizeof *e->sources)) < 0 ||
            (rc = itab_reserve(e, &e->source_tab, source_hash)) < 0)
            return budget_fail(e, rc);
        char *path;
        if ((rc = budget_dup(e, k.path, k.len, &path)) < 0)
            return budget_fail(e, rc);
        idx = e->nsources++;
        e->sources[idx] = (struct jp_source){path, k.len, r.origin, r.source_id};
        itab_find(e, &e->source_tab, h, source_eq, &k, &slot);
        e->source_tab.slot[slot] = idx + 1u;
        e->source_tab.n++;
    }
    e->source_map[r.source_id] = idx;
    e->nsource_stored = e->nsource_defined;
    return 0;
}

static int on_frame_def(struct jp_engine *e, const uint8_t *rec)
{
    struct jp_rec_frame_def r;
    memcpy(&r, rec, sizeof r);
    if (r.frame_id != e->nframe_defined + 1u)
        return violation(e);
    if (r.source_id > e->nsource_defined)
        return violation(e); /* names an undefined source */
    e->nframe_defined++;
    if (e->detail_stopped || r.source_id > e->nsource_stored)
        return stop_detail(e);
    struct func_key k = {
        .ns = (const char *)rec + sizeof r, .ns_len = r.ns_len,
        .fn = (const char *)rec + sizeof r + r.ns_len, .fn_len = r.fn_len,
        .kind = r.kind,
        .source = r.source_id ? e->source_map[r.source_id] : 0,
        /* Two native frames without a symbol are never one function because their display
         * names match (the contract forbids merging unknown native addresses). */
        .uniq = r.kind == JP_FRAME_UNAVAILABLE_SYMBOL ? r.frame_id : 0,
    };
    if (k.source) { /* without a source the declaration span means nothing */
        k.decl_start = r.decl_start;
        k.decl_end = r.decl_end;
    }
    int rc = vec_grow(e, (void **)&e->frame_func, &e->frame_cap, e->nframe_defined + 1u,
                      sizeof *e->frame_func);
    if (rc < 0)
        return budget_fail(e, rc);
    uint64_t h = func_hash_k(e, &k);
    uint32_t slot, idx = itab_find(e, &e->func_tab, h, func_eq, &k, &slot);
    if (idx == UINT32_MAX) {
        if (e->nfuncs >= SITE_OVERFLOW - 2u)
            return stop_detail(e);
        if ((rc = vec_grow(e, (void **)&e->funcs, &e->funcs_cap, e->nfuncs + 1u,
                           sizeof *e->funcs)) < 0 ||
            (rc = itab_reserve(e, &e->func_tab, func_hash)) < 0)
            return budget_fail(e, rc);
        char *ns, *fn = NULL;
        if ((rc = budget_dup(e, k.ns, k.ns_len, &ns)) < 0 ||
            (rc = budget_dup(e, k.fn, k.fn_len, &fn)) < 0) {
            if (ns) {
                free(ns);
                e->used -= k.ns_len + 1u;
            }
            return budget_fail(e, rc);
        }
        idx = e->nfuncs++;
        struct jp_func *f = &e->funcs[idx];
        memset(f, 0, sizeof *f);
        f->ns = ns; f->ns_len = k.ns_len;
        f->fn = fn; f->fn_len = k.fn_len;
        f->kind = r.kind;
        f->source = k.source;
        f->origin = k.source ? e->sources[k.source].origin : JP_ORIGIN_NONE;
        f->decl_start = k.decl_start;
        f->decl_end = k.decl_end;
        f->decl_line = k.source ? r.decl_line : 0;
        f->uniq = k.uniq;
        itab_find(e, &e->func_tab, h, func_eq, &k, &slot);
        e->func_tab.slot[slot] = idx + 1u;
        e->func_tab.n++;
    }
    e->frame_func[r.frame_id] = idx;
    e->nframe_stored = e->nframe_defined;
    return 0;
}

static int on_node_def(struct jp_engine *e, const struct jp_rec_node_def *r)
{
    if (r->node_id != e->nnode_defined + 1u || r->parent > e->nnode_defined ||
        r->frame_id == JP_ID_NONE || r->frame_id > e->nframe_defined)
        return violation(e); /* not dense, or names an undefined parent or frame */
    bool storable = !e->detail_stopped && r->parent <= e->nnode_stored &&
                    r->frame_id <= e->nframe_stored;
    uint32_t depth = 1;
    if (storable && r->parent)
        depth = e->nodes[r->parent - 1u].depth + 1u;
    if (depth > JP_MAX_DEPTH)
        return violation(e);
    /* Past the budget the parent's depth is unknown; such a node carries no detail anyway. */
    e->nnode_defined++;
    if (!storable)
        return stop_detail(e);
    int rc = vec_grow(e, (void **)&e->nodes, &e->node_cap, e->nnode_defined, sizeof *e->nodes);
    if (rc < 0)
        return budget_fail(e, rc);
    uint32_t func = e->frame_func[r->frame_id];
    bool first = true;
    for (uint32_t p = r->parent; p; p = e->nodes[p - 1u].parent)
        if (e->nodes[p - 1u].func == func) {
            first = false;
            break;
        }
    struct chain_key k = {r->parent ? e->nodes[r->parent - 1u].chain + 1u : 0, func};
    uint64_t h = chain_hash_k(e, &k);
    uint32_t slot, ci = itab_find(e, &e->chain_tab, h, chain_eq, &k, &slot);
    if (ci == UINT32_MAX) {
        if ((rc = vec_grow(e, (void **)&e->chains, &e->chains_cap, e->nchains + 1u,
                           sizeof *e->chains)) < 0 ||
            (rc = itab_reserve(e, &e->chain_tab, chain_hash)) < 0)
            return budget_fail(e, rc);
        ci = e->nchains++;
        e->chains[ci] = (struct jp_chain){k.parent, func, depth, 0, 0};
        itab_find(e, &e->chain_tab, h, chain_eq, &k, &slot);
        e->chain_tab.slot[slot] = ci + 1u;
        e->chain_tab.n++;
    }
    e->nodes[r->node_id - 1u] = (struct jp_node){
        r->parent, func, ci, (uint8_t)depth, first,
        e->funcs[func].kind == JP_FRAME_TRUNCATED, 0, 0, 0, 0};
    e->nnode_stored = e->nnode_defined;
    return 0;
}

/* Classifies a node reference: -1 undefined (violation), 0 defined without detail, 1 stored. */
static int node_ref(const struct jp_engine *e, uint32_t node)
{
    if (node == JP_ID_NONE || node > e->nnode_defined)
        return -1;
    return node <= e->nnode_stored ? 1 : 0;
}

/* ---- execution identity ---------------------------------------------------------------- */

/* Notes the current identity against a detail key (see struct jp_exec_tuple). A refused
 * growth stops detail like any detail table and makes the counts unavailable. */
static int exec_note(struct jp_engine *e, uint32_t key)
{
    if (e->exec_lost || e->detail_stopped)
        return 0;
    struct jp_exec_tuple k = {key, e->exec.runtime_thread_id, e->exec.task_id};
    if (k.thread == JP_ID_UNAVAILABLE && k.task == JP_ID_UNAVAILABLE)
        return 0;
    uint64_t h = exec_hash_k(e, &k);
    uint32_t slot;
    if (itab_find(e, &e->exec_tab, h, exec_eq, &k, &slot) != UINT32_MAX)
        return 0;
    int rc;
    if ((rc = vec_grow(e, (void **)&e->exec_tuples, &e->exec_cap, e->nexec + 1u,
                       sizeof *e->exec_tuples)) < 0 ||
        (rc = itab_reserve(e, &e->exec_tab, exec_hash)) < 0) {
        if (rc == -ENOBUFS)
            e->exec_lost = true;
        return budget_fail(e, rc);
    }
    e->exec_tuples[e->nexec] = k;
    itab_find(e, &e->exec_tab, h, exec_eq, &k, &slot);
    e->exec_tab.slot[slot] = ++e->nexec;
    e->exec_tab.n++;
    return 0;
}

/* Notes the current runtime thread among the run's distinct threads (totals); the slow half
 * runs once per EXEC record at most. */
static int thread_note_slow(struct jp_engine *e)
{
    e->thread_epoch = e->exec_epoch;
    uint32_t tid = e->exec.runtime_thread_id;
    if (tid == JP_ID_UNAVAILABLE || e->threads_lost)
        return 0;
    uint64_t h = hash2(e->seed, tid, 0);
    uint32_t slot;
    if (itab_find(e, &e->thread_tab, h, thread_eq, &tid, &slot) != UINT32_MAX)
        return 0;
    int rc;
    if ((rc = vec_grow(e, (void **)&e->threads, &e->threads_cap, e->nthreads + 1u,
                       sizeof *e->threads)) < 0 ||
        (rc = itab_reserve(e, &e->thread_tab, thread_hash)) < 0) {
        if (rc == -ENOBUFS)
            e->threads_lost = true;
        return budget_fail(e, rc);
    }
    e->threads[e->nthreads] = tid;
    itab_find(e, &e->thread_tab, h, thread_eq, &tid, &slot);
    e->thread_tab.slot[slot] = ++e->nthreads;
    e->thread_tab.n++;
    return 0;
}

static inline int thread_note(struct jp_engine *e)
{
    return e->thread_epoch == e->exec_epoch ? 0 : thread_note_slow(e);
}

/* ---- CPU ------------------------------------------------------------------------------- */

static int on_cpu_sample(struct jp_engine *e, const struct jp_rec_cpu_sample *r)
{
    if (e->mode != JP_MODE_CPU)
        return violation(e);
    int rc;
    if (r->state != JP_STATE_JETT) {
        /* reading 8: stacks on non-jett samples are ignored */
        e->state_samples[r->state]++;
        e->producer_records++;
        return thread_note(e);
    }
    int ref = node_ref(e, r->node);
    if (ref < 0)
        return violation(e);
    e->state_samples[JP_STATE_JETT]++;
    e->producer_records++;
    if ((rc = thread_note(e)) < 0)
        return rc;
    if (ref == 0)
        return 0;
    struct jp_node *leaf = &e->nodes[r->node - 1u];
    if (leaf->exec_epoch != e->exec_epoch) { /* epoch 0: no EXEC yet, nothing to note */
        leaf->exec_epoch = e->exec_epoch;
        if ((rc = exec_note(e, leaf->chain)) < 0)
            return rc;
    }
    if (leaf->trunc)
        e->truncated_stacks++;
    e->attributed_stacks++;
    /* Inclusive and chain counts are settled per node when a report is built (cpu_settle):
     * a sample costs one counter on its leaf node, not a walk to the root. */
    leaf->samples++;
    e->cpu_dirty = true;
    e->funcs[leaf->func].b++;
    if (!(r->flags & JP_SAMPLE_HAS_STMT) || e->detail_stopped)
        return 0; /* reading 6: self still counted, no hot line */
    if (leaf->last_hot) {
        struct jp_hot *h = &e->hots[leaf->last_hot - 1u];
        if (h->line == r->stmt_line && h->col == r->stmt_col) {
            h->samples++; /* same statement as this node's previous sample */
            return 0;
        }
    }
    struct hot_key k = {leaf->func, r->stmt_line, r->stmt_col};
    uint64_t h = hot_hash_k(e, &k);
    uint32_t slot, hi = itab_find(e, &e->hot_tab, h, hot_eq, &k, &slot);
    if (hi == UINT32_MAX) {
        if ((rc = vec_grow(e, (void **)&e->hots, &e->hots_cap, e->nhots + 1u,
                           sizeof *e->hots)) < 0 ||
            (rc = itab_reserve(e, &e->hot_tab, hot_hash)) < 0)
            return budget_fail(e, rc);
        hi = e->nhots++;
        e->hots[hi] = (struct jp_hot){k.func, k.line, k.col, 0, 0};
        itab_find(e, &e->hot_tab, h, hot_eq, &k, &slot);
        e->hot_tab.slot[slot] = hi + 1u;
        e->hot_tab.n++;
    }
    e->hots[hi].samples++;
    leaf->last_hot = hi + 1u;
    return 0;
}

/* Turns per-node leaf counts into inclusive samples per function and samples per call chain:
 * each node's count goes to every function whose root-most occurrence is on its path (reading
 * 4) and to that occurrence's chain. Cost: nodes x depth, once per report, not per sample. */
static void cpu_settle(struct jp_engine *e)
{
    if (e->mode != JP_MODE_CPU || !e->cpu_dirty)
        return;
    for (uint32_t i = 0; i < e->nfuncs; i++)
        e->funcs[i].a = 0;
    for (uint32_t i = 0; i < e->nchains; i++)
        e->chains[i].samples = 0;
    for (uint32_t i = 0; i < e->nnode_stored; i++) {
        uint64_t c = e->nodes[i].samples;
        if (!c)
            continue;
        for (const struct jp_node *n = &e->nodes[i];; n = &e->nodes[n->parent - 1u]) {
            if (n->first) {
                e->funcs[n->func].a += c;
                e->chains[n->chain].samples += c;
            }
            if (!n->parent)
                break;
        }
    }
    e->cpu_dirty = false;
}

/* ---- memory: the live table ------------------------------------------------------------ */

/* The wide tables (ids >= 2^32 - 1, late ids) probe linearly, so their home slots are
 * seeded: a run of chosen ids cannot pile up on one slot. */
static inline uint32_t home_slot(uint64_t seed, uint64_t id, uint32_t cap)
{
    uint64_t h = mix64(id ^ seed);
    return (uint32_t)(((h >> 32) * (uint64_t)cap) >> 32);
}

/* The two tables share one body through this macro: T the table, E its slot, KEY the key
 * type. Stored keys are never 0. Robin Hood linear probing: an entry's distance from its home
 * slot orders each run, so a miss stops as soon as it meets an entry closer to home than
 * itself, and deletion shifts back only until an entry sits at its home. That keeps probes
 * short at the 90% load that holds slots near 12 bytes per live allocation. */
#define LIVE_TABLE_FUNCS(NAME, T, E, KEY)                                                         \
    static inline uint32_t NAME##_dist(const T *t, KEY key, uint32_t i)                          \
    {                                                                                             \
        uint32_t h = home_slot(t->seed, key, t->cap);                                              \
        return i >= h ? i - h : i + t->cap - h;                                                   \
    }                                                                                             \
    static uint32_t *NAME##_find(T *t, KEY key)                                                   \
    {                                                                                             \
        if (!t->cap)                                                                              \
            return NULL;                                                                          \
        for (uint32_t i = home_slot(t->seed, key, t->cap), d = 0;; d++) {                          \
            E *s = &t->ent[i];                                                                    \
            if (s->key == key)                                                                    \
                return &s->lo;                                                                    \
            if (!s->key || NAME##_dist(t, s->key, i) < d)                                         \
                return NULL;                                                                      \
            if (++i == t->cap)                                                                    \
                i = 0;                                                                            \
        }                                                                                         \
    }                                                                                             \
    static void NAME##_put(T *t, KEY key, uint64_t val)                                           \
    {                                                                                             \
        E cur = {.key = key};                                                                     \
        val_set(&cur.lo, val);                                                                    \
        for (uint32_t i = home_slot(t->seed, key, t->cap), d = 0;; d++) {                          \
            E *s = &t->ent[i];                                                                    \
            if (!s->key) {                                                                        \
                *s = cur;                                                                         \
                break;                                                                            \
            }                                                                                     \
            uint32_t sd = NAME##_dist(t, s->key, i);                                              \
            if (sd < d) { /* take the slot from the richer entry, carry it on */                  \
                E tmp = *s;                                                                       \
                *s = cur;                                                                         \
                cur = tmp;                                                                        \
                d = sd;                                                                           \
            }                                                                                     \
            if (++i == t->cap)                                                                    \
                i = 0;                                                                            \
        }                                                                                         \
        t->n++;                                                                                   \
    }                                                                                             \
    /* Backward-shift deletion: no tombstones, so probe lengths never rot. */                    \
    static void NAME##_del(T *t, uint32_t *lop)                                                   \
    {                                                                                             \
        uint32_t i = (uint32_t)(((char *)lop - (char *)t->ent) / sizeof(E));                      \
        for (;;) {                                                                                \
            uint32_t j = i + 1u == t->cap ? 0 : i + 1u;                                           \
            if (!t->ent[j].key || NAME##_dist(t, t->ent[j].key, j) == 0)                          \
                break;                                                                            \
            t->ent[i] = t->ent[j];                                                                \
            i = j;                                                                                \
        }                                                                                         \
        t->ent[i].key = 0;                                                                        \
        t->n--;                                                                                   \
    }                                                                                             \
    static int NAME##_reserve(struct jp_engine *e, T *t)                                          \
    {                                                                                             \
        if ((uint64_t)(t->n + 1u) * LIVE_MAX_LOAD_DEN <= (uint64_t)t->cap * LIVE_MAX_LOAD_NUM)    \
            return 0;                                                                             \
        uint64_t ncap = t->cap < 64u ? 64u : (uint64_t)t->cap + t->cap / 4u;                      \
        if (ncap > UINT32_MAX / 2u)                                                               \
            return -ENOBUFS;                                                                      \
        uint64_t old = (uint64_t)t->cap * sizeof(E), bytes = ncap * sizeof(E);                    \
        if (budget_hold(e, bytes) < 0) /* old and new coexist during the rehash */                \
            return -ENOBUFS;                                                                      \
        T n = {calloc((size_t)ncap, sizeof(E)), (uint32_t)ncap, 0, t->seed};                               \
        if (!n.ent)                                                                               \
            return -ENOMEM;                                                                       \
        for (uint32_t i = 0; i < t->cap; i++)                                                     \
            if (t->ent[i].key)                                                                    \
                NAME##_put(&n, t->ent[i].key, val_get(&t->ent[i].lo));                            \
        free(t->ent);                                                                             \
        *t = n;                                                                                   \
        e->used = e->used - old + bytes;                                                          \
        return 0;                                                                                 \
    }

LIVE_TABLE_FUNCS(lw, struct live_wide, struct lw_ent, uint64_t)

/* Growth schedule: a shard grows by 1/LN_GROW_DIV once it is LN_MAX_LOAD_PCT full. The two
 * trade rehash work (every live entry moves about LN_GROW_DIV + 1 times on the way to its
 * size) against bytes per live entry (12.8 / load, the load sawing between
 * LN_MAX_LOAD_PCT / (1 + 1/LN_GROW_DIV) and LN_MAX_LOAD_PCT) and cuckoo kicks near the top.
 * Most allocations now die in the young window (below), so the table sees few inserts and
 * can run fuller, which pays for growing in larger steps at the same bytes per entry. */
#ifndef LN_MAX_LOAD_PCT
#define LN_MAX_LOAD_PCT 97u
#endif
#ifndef LN_GROW_DIV
#define LN_GROW_DIV 3u
#endif

/* Fixed, not seeded: a shard's growth schedule follows from the ids alone, so the bytes the
 * table accounts (and so where a budget runs out) never depend on the seed. Hostile ids can
 * only crowd one shard, which then grows like an unsharded table. */
static inline struct live_narrow *ln_shard(struct jp_engine *e, uint32_t key)
{
    return &e->ln[LN_SHARD_BITS ? (uint32_t)((key * UINT64_C(0xD6E8FEB86659FD93)) >>
                                            (63u - LN_SHARD_BITS) >> 1)
                                : 0];
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

static inline uint32_t ln_alt(const struct live_narrow *t, uint32_t key, uint32_t b)
{
    uint32_t b1 = ln_b1(t, key), b2 = ln_b2(t, key, b1);
    return b == b1 ? b2 : b1;
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

/* Rehashes into a table at least 1/LN_GROW_DIV larger (more if re-homing fails there), counting the new
 * size against the budget; with_orphan re-homes t->orphan too. */
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
        if (budget_hold(e, bytes) < 0) /* this shard's old and new copies coexist */
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

static uint32_t *table_find(struct jp_engine *e, uint64_t id)
{
    if (id < UINT32_MAX)
        return ln_find(ln_shard(e, (uint32_t)(id + 1u)), (uint32_t)(id + 1u));
    if (id == UINT64_MAX)
        return e->max_id_live ? e->max_id_val : NULL;
    return lw_find(&e->lw, id + 1u);
}

static void table_del(struct jp_engine *e, uint64_t id, uint32_t *valp)
{
    if (id < UINT32_MAX)
        ln_del(ln_shard(e, (uint32_t)(id + 1u)), valp);
    else if (id == UINT64_MAX)
        e->max_id_live = false;
    else
        lw_del(&e->lw, valp);
}

static void ovf_release(struct jp_engine *e, uint64_t val)
{
    if ((val >> SIZE_BITS) != SITE_OVERFLOW)
        return;
    uint32_t i = (uint32_t)(val & SIZE_MASK);
    e->ovf[i].next_free = e->ovf_free;
    e->ovf_free = i + 1u;
}

/* Packs (size, site) into one value, using the overflow array when either does not fit.
 * site is the function index + 1, 0 for "no site". */
static int live_pack(struct jp_engine *e, uint64_t size, uint32_t site, uint64_t *out)
{
    if (size < SIZE_MASK && site < SITE_OVERFLOW) {
        *out = size | ((uint64_t)site << SIZE_BITS);
        return 0;
    }
    uint32_t i;
    if (e->ovf_free) {
        i = e->ovf_free - 1u;
        e->ovf_free = e->ovf[i].next_free;
    } else {
        int rc = vec_grow(e, (void **)&e->ovf, &e->ovf_cap, e->novf + 1u, sizeof *e->ovf);
        if (rc < 0)
            return rc;
        i = e->novf++;
    }
    e->ovf[i] = (struct overflow_ent){size, site, 0};
    *out = (uint64_t)i | ((uint64_t)SITE_OVERFLOW << SIZE_BITS);
    return 0;
}

static void live_unpack(const struct jp_engine *e, uint64_t val, uint64_t *size, uint32_t *site)
{
    if ((val >> SIZE_BITS) == SITE_OVERFLOW) {
        const struct overflow_ent *o = &e->ovf[val & SIZE_MASK];
        *size = o->size;
        *site = o->site;
    } else {
        *size = val & SIZE_MASK;
        *site = (uint32_t)(val >> SIZE_BITS);
    }
}

static int table_insert(struct jp_engine *e, uint64_t id, uint64_t val)
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
        if ((rc = lw_reserve(e, &e->lw)) < 0)
            return rc;
        lw_put(&e->lw, id + 1u, val);
    }
    return 0;
}

/* Young allocations. Most allocations die young, and the agent hands out ids in increasing
 * order, so the newest ids live in a direct-mapped window (slot = id mod W) and never touch
 * the hashed tables; an allocation still live when its slot is needed by a newer id moves to
 * the tables then. A slot's occupant is the one id of (ring_hi - W, ring_hi] congruent to it.
 * Ids that do not arrive as a new highest go straight to the tables, as do values the 4-byte
 * slot cannot hold; so an empty slot says nothing, and a lookup that finds one goes on to the
 * tables: the window only ever holds a subset, exactly.
 *
 * A slot is 4 bytes: 0 empty, else 1 + (site << RING_SIZE_BITS | size) for a size below
 * 2^RING_SIZE_BITS and a site below RING_SITE_LIMIT. A bit per 64 slots (ring_mark) lets a
 * jump of the highest id (sparse or huge ids) find the survivors it displaces in O(W / 4096)
 * words plus the groups that held something, never O(W).
 *
 * The window starts at 2^RING_MIN_BITS slots and doubles (up to 2^RING_MAX_BITS) while at
 * least 1/RING_GROW_DIV of its slots hold live allocations (so it costs at most 16 bytes per
 * allocation it holds when it grows, about what the tables would): a run whose allocations mostly die within a few thousand ids, or whose
 * survivors are few, keeps a small window; one whose allocations live for hundreds of
 * thousands of ids gets one that lets them die there, so they are never hashed, moved by a
 * table growth, or displaced by cuckoo kicks. The growth is counted against the budget
 * (old and new at once) and, refused, just leaves the window as it is: exactness never
 * depends on it. When it grows depends on the ids alone (never on the seed or the budget),
 * so a run replayed with a budget that fits what it held does the very same. */
#ifndef RING_MIN_BITS
#define RING_MIN_BITS 12u
#endif
#ifndef RING_MAX_BITS
#define RING_MAX_BITS 18u /* 1 MiB of slots: about a core's L2 */
#endif
#ifndef RING_GROW_DIV
#define RING_GROW_DIV 4u
#endif
#define RING_SIZE_BITS 20u
#define RING_SITE_LIMIT 4095u /* keeps 1 + the largest packed slot below 2^32 */
_Static_assert(RING_MIN_BITS >= 12u, "the summary needs a whole word");

static inline uint64_t ring_bytes(uint32_t w)
{
    return (uint64_t)w * sizeof(uint32_t) + w / 512u;
}

/* Allocates a window of w slots (all empty), counting it against the budget on top of what
 * is held now. */
static int ring_alloc(struct jp_engine *e, uint32_t w, uint32_t **ring, uint64_t **grp)
{
    uint64_t bytes = ring_bytes(w);
    if (budget_hold(e, bytes) < 0)
        return -ENOBUFS;
    uint32_t *r = calloc(1, (size_t)bytes);
    if (!r)
        return -ENOMEM;
    *ring = r;
    *grp = (uint64_t *)(void *)(r + w);
    return 0;
}

/* 1 when the window exists, 0 when the budget refused it (the tables alone still track
 * exactly), -ENOMEM when malloc did. */
static int ring_ready(struct jp_engine *e)
{
    if (e->ring || e->ring_off)
        return e->ring != NULL;
    uint32_t w = UINT32_C(1) << RING_MIN_BITS;
    int rc = ring_alloc(e, w, &e->ring, &e->ring_grp);
    if (rc == -ENOMEM)
        return rc;
    if (rc < 0) {
        e->ring_off = true;
        return 0;
    }
    e->ring_w = w;
    e->ring_grow_at = w / RING_GROW_DIV;
    e->used += ring_bytes(w);
    return 1;
}

static inline bool ring_fits(uint64_t val)
{
    return (val & SIZE_MASK) < (UINT64_C(1) << RING_SIZE_BITS) &&
           (val >> SIZE_BITS) < RING_SITE_LIMIT;
}
static inline uint32_t ring_enc(uint64_t val)
{
    return 1u + (uint32_t)((val >> SIZE_BITS) << RING_SIZE_BITS | (val & SIZE_MASK));
}
static inline uint64_t ring_dec(uint32_t v)
{
    v--;
    return (v & ((UINT32_C(1) << RING_SIZE_BITS) - 1u)) |
           (uint64_t)(v >> RING_SIZE_BITS) << SIZE_BITS;
}

/* Group g (slots 64g .. 64g + 63) has its bit set whenever one of its slots is occupied; a
 * bit may stay set after its group empties (a free only zeroes the slot), and the scan that
 * finds the group empty clears it: each set bit costs one scan of its 64 slots at most. */
static inline void ring_mark(struct jp_engine *e, uint32_t s)
{
    e->ring_grp[s >> 12] |= UINT64_C(1) << ((s >> 6) & 63u);
}
static inline void ring_clear(struct jp_engine *e, uint32_t s)
{
    e->ring[s] = 0;
    e->nring--;
}

/* The first occupied slot in [a, b) (b <= W), or b. Skips groups whose bit is clear through
 * the bit words (64 groups each), so a scan costs O(W / 4096) words plus the set groups. */
static uint32_t ring_next(struct jp_engine *e, uint32_t a, uint32_t b)
{
    while (a < b) {
        uint32_t g = a >> 6;
        uint64_t bit = UINT64_C(1) << (g & 63u);
        if (e->ring_grp[g >> 6] & bit) {
            uint32_t end = (g + 1u) << 6 < b ? (g + 1u) << 6 : b;
            for (uint32_t s = a; s < end; s++)
                if (e->ring[s])
                    return s;
            if (end == (g + 1u) << 6) { /* scanned to the group's end: maybe it is empty */
                uint32_t s = g << 6;
                while (s < a && !e->ring[s])
                    s++;
                if (s == a)
                    e->ring_grp[g >> 6] &= ~bit;
            }
            a = end;
            continue;
        }
        /* the next group whose bit is set */
        for (g++;;) {
            if ((uint64_t)g << 6 >= b)
                return b;
            uint64_t gw = e->ring_grp[g >> 6] & (~UINT64_C(0) << (g & 63u));
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

/* The window slot holding id, or NULL (id outside the window, or not held there). */
static inline uint32_t *ring_find(struct jp_engine *e, uint64_t id)
{
    if (e->ring && id <= e->ring_hi && e->ring_hi - id < e->ring_w) {
        uint32_t *v = &e->ring[id & (e->ring_w - 1u)];
        if (*v)
            return v;
    }
    return NULL;
}

/* Moves the survivors of slots [a, b) to the tables (ring_hi not yet advanced). */
static int ring_evict(struct jp_engine *e, uint32_t a, uint32_t b)
{
    uint32_t m = e->ring_w - 1u;
    for (uint32_t s = ring_next(e, a, b); s < b; s = ring_next(e, s + 1u, b)) {
        uint64_t occupant = e->ring_hi - ((e->ring_hi - s) & m);
        int rc = table_insert(e, occupant, ring_dec(e->ring[s]));
        if (rc < 0)
            return rc;
        ring_clear(e, s);
    }
    return 0;
}

/* Doubles the window, re-placing its survivors (same ids, now mod 2W). Ids of the new half's
 * range older than the old window are not in it (they are in the tables). 0, or -ENOMEM
 * (the window is left as it was). */
static int ring_grow(struct jp_engine *e)
{
    uint32_t w = e->ring_w, nw = w * 2u;
    if (nw > (UINT32_C(1) << RING_MAX_BITS)) {
        e->ring_grow_at = UINT32_MAX;
        return 0;
    }
    uint32_t *ring, *old = e->ring;
    uint64_t *grp;
    int rc = ring_alloc(e, nw, &ring, &grp);
    if (rc == -ENOMEM)
        return rc;
    if (rc < 0) {
        /* stays as it is, still exact; asks again only once twice as full */
        e->ring_grow_at = e->ring_grow_at > UINT32_MAX / 2u ? UINT32_MAX : e->ring_grow_at * 2u;
        return 0;
    }
    e->ring_grow_at = nw / RING_GROW_DIV;
    e->ring = ring;
    e->ring_grp = grp;
    e->ring_w = nw;
    e->nring = 0;
    for (uint32_t s = 0; s < w; s++) {
        if (!old[s])
            continue;
        uint64_t id = e->ring_hi - ((e->ring_hi - s) & (w - 1u));
        uint32_t ns = (uint32_t)(id & (nw - 1u));
        ring[ns] = old[s];
        ring_mark(e, ns);
        e->nring++;
    }
    free(old);
    e->used += ring_bytes(nw) - ring_bytes(w);
    return 0;
}

/* A live allocation's value, wherever it is held. */
struct live_ref {
    uint32_t *ring; /* its window slot, or NULL */
    uint32_t *valp; /* else its table value */
};

static inline bool live_find(struct jp_engine *e, uint64_t id, struct live_ref *r)
{
    if ((r->ring = ring_find(e, id)) != NULL)
        return true;
    return (r->valp = table_find(e, id)) != NULL;
}

static inline uint64_t live_val(const struct live_ref *r)
{
    return r->ring ? ring_dec(*r->ring) : val_get(r->valp);
}

static void live_del(struct jp_engine *e, uint64_t id, const struct live_ref *r)
{
    if (r->ring)
        ring_clear(e, (uint32_t)(r->ring - e->ring));
    else
        table_del(e, id, r->valp);
}

/* Replaces a live allocation's value; one the window cannot hold moves to the tables. */
static int live_set(struct jp_engine *e, uint64_t id, const struct live_ref *r, uint64_t val)
{
    if (!r->ring) {
        val_set(r->valp, val);
        return 0;
    }
    if (ring_fits(val)) {
        *r->ring = ring_enc(val);
        return 0;
    }
    int rc = table_insert(e, id, val);
    if (rc < 0)
        return rc;
    ring_clear(e, (uint32_t)(r->ring - e->ring));
    return 0;
}

static int live_insert(struct jp_engine *e, uint64_t id, uint64_t val)
{
    int rc;
    if (id <= e->ring_hi || id == UINT64_MAX)
        return table_insert(e, id, val);
    if ((rc = ring_ready(e)) <= 0)
        return rc < 0 ? rc : table_insert(e, id, val);
    if (e->nring >= e->ring_grow_at && (rc = ring_grow(e)) < 0)
        return rc;
    uint32_t m = e->ring_w - 1u, slot = (uint32_t)(id & m);
    if (id - e->ring_hi == 1u) { /* the agent's counter: one slot to look at */
        if (e->ring[slot] && (rc = ring_evict(e, slot, slot + 1u)) < 0)
            return rc;
    } else if (id - e->ring_hi >= e->ring_w) { /* everything in the window is displaced */
        if (e->nring && (rc = ring_evict(e, 0, e->ring_w)) < 0)
            return rc;
    } else { /* slots ring_hi + 1 .. id, maybe wrapping */
        uint32_t a = (uint32_t)((e->ring_hi + 1u) & m);
        if (a <= slot) {
            if ((rc = ring_evict(e, a, slot + 1u)) < 0)
                return rc;
        } else if ((rc = ring_evict(e, a, e->ring_w)) < 0 ||
                   (rc = ring_evict(e, 0, slot + 1u)) < 0) {
            return rc;
        }
    }
    if (ring_fits(val)) {
        e->ring[slot] = ring_enc(val);
        ring_mark(e, slot);
        e->nring++;
    } else if ((rc = table_insert(e, id, val)) < 0) {
        return rc;
    }
    e->ring_hi = id;
    /* The next id will most likely displace the slot after this one: if a survivor sits
     * there, start loading the buckets it moves to now, so that move does not wait on
     * memory. */
    uint64_t next_occ = id + 1u - e->ring_w;
    if (e->ring[(id + 1u) & m] && next_occ < UINT32_MAX)
        ln_prefetch(e, (uint32_t)(next_occ + 1u));
    return 0;
}

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

static int on_alloc(struct jp_engine *e, const struct jp_rec_alloc *r)
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
        struct live_ref ref;
        if (!fresh && (live_find(e, r->allocation_id, &ref) || seen_has(e, r->allocation_id)))
            return violation(e); /* reused id, live or retired */
    }
    uint32_t site = (uint32_t)event_site(e, r->node);
    e->producer_records++;
    e->allocation_count++;
    e->allocated_bytes += r->size;
    if (site) {
        struct jp_func *f = &e->funcs[site - 1u];
        f->b++;
        f->a += r->size;
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

static int on_resize(struct jp_engine *e, const struct jp_rec_resize *r)
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
            e->funcs[site - 1u].a += grow;
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

static int on_free(struct jp_engine *e, const struct jp_rec_free *r)
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
    struct live_ref ref;
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

/* ---- excerpts -------------------------------------------------------------------------- */

static int on_excerpt(struct jp_engine *e, const uint8_t *rec)
{
    struct jp_rec_excerpt r;
    memcpy(&r, rec, sizeof r);
    if (r.source_id == JP_ID_NONE || r.source_id > e->nsource_defined)
        return violation(e);
    if (r.source_id > e->nsource_stored)
        return 0; /* no detail for that source: the hot line cannot be shown either */
    uint32_t src = e->source_map[r.source_id];
    if (!src)
        return 0; /* an unauthorized source shows no code */
    struct jp_excerpt_ent *x = NULL;
    for (uint32_t i = 0; i < e->nexcerpts; i++)
        if (e->excerpts[i].source == src && e->excerpts[i].line == r.line &&
            e->excerpts[i].col == r.col)
            x = &e->excerpts[i]; /* a later answer for the same line replaces the earlier */
    if (!x) {
        if (e->nexcerpts >= JP_CTL_MAX_EXCERPT_KEYS)
            return 0;
        int rc = vec_grow(e, (void **)&e->excerpts, &e->excerpts_cap, e->nexcerpts + 1u,
                          sizeof *e->excerpts);
        if (rc < 0)
            return rc == -ENOBUFS ? 0 : rc; /* code stays unavailable */
        x = &e->excerpts[e->nexcerpts++];
        memset(x, 0, sizeof *x);
    }
    /* A replaced text gives its bytes back to the budget before the new one is counted, so
     * answering the same line again never costs more than answering it once. */
    if (x->text) {
        free(x->text);
        e->used -= x->text_len + 1u;
        x->text = NULL;
    }
    char *text = NULL;
    if (!(r.flags & JP_EXCERPT_UNAVAILABLE)) {
        int rc = budget_dup(e, rec + sizeof r, r.text_len, &text);
        if (rc == -ENOMEM)
            return rc; /* the entry stays, its code unavailable: consistent */
        if (rc < 0)
            r.flags |= JP_EXCERPT_UNAVAILABLE; /* the budget refused: code unavailable */
    }
    *x = (struct jp_excerpt_ent){src, r.line, r.col, r.flags, text, text ? r.text_len : 0};
    return 0;
}

/* ---- feeding --------------------------------------------------------------------------- */

static inline int feed_record(struct jp_engine *e, const void *rec, uint32_t len,
                              const char **why)
{
    int rc = jp_rec_validate(rec, len, why);
    if (rc < 0)
        return rc;
    struct jp_rec_hdr h;
    memcpy(&h, rec, sizeof h);
    if (e->stopped) {
        *why = "record after RUN_STOP";
        return -EPROTO;
    }
    if (!e->started && h.type != JP_REC_RUN_START) {
        *why = "record before RUN_START";
        return -EPROTO;
    }
    if (e->started && h.type == JP_REC_RUN_START) {
        *why = "second RUN_START";
        return -EPROTO;
    }
    if (h.type != JP_REC_PAD && h.type != JP_REC_EXCERPT && h.type != JP_REC_RUN_STOP)
        e->records_counted++;
    const uint8_t *p = rec;
    union {
        struct jp_rec_run_start start;
        struct jp_rec_node_def node;
        struct jp_rec_exec exec;
        struct jp_rec_cpu_sample cpu;
        struct jp_rec_alloc alloc;
        struct jp_rec_resize resize;
        struct jp_rec_free free;
        struct jp_rec_counters counters;
        struct jp_rec_run_stop stop;
    } u;
    switch (h.type) {
    case JP_REC_PAD:
        return 0;
    case JP_REC_RUN_START:
        memcpy(&u.start, p, sizeof u.start);
        return on_run_start(e, &u.start, why);
    case JP_REC_SOURCE_DEF:
        return on_source_def(e, p);
    case JP_REC_FRAME_DEF:
        return on_frame_def(e, p);
    case JP_REC_NODE_DEF:
        memcpy(&u.node, p, sizeof u.node);
        return on_node_def(e, &u.node);
    case JP_REC_EXEC:
        /* Execution identity is run-local: aggregation merges functions across workers;
         * the report only counts the distinct threads and tasks behind each entry. */
        memcpy(&e->exec, p, sizeof e->exec);
        e->exec_epoch++;
        if (e->exec_epoch == 0) { /* after 2^32 switches: forget what was noted, stay exact */
            e->exec_epoch = 1;
            for (uint32_t i = 0; i < e->nnode_stored; i++)
                e->nodes[i].exec_epoch = 0;
            for (uint32_t i = 0; i < e->nfuncs; i++)
                e->funcs[i].exec_epoch = 0;
            e->thread_epoch = 0;
        }
        return 0;
    case JP_REC_CPU_SAMPLE:
        memcpy(&u.cpu, p, sizeof u.cpu);
        return on_cpu_sample(e, &u.cpu);
    case JP_REC_ALLOC:
        memcpy(&u.alloc, p, sizeof u.alloc);
        return on_alloc(e, &u.alloc);
    case JP_REC_RESIZE:
        memcpy(&u.resize, p, sizeof u.resize);
        return on_resize(e, &u.resize);
    case JP_REC_FREE:
        memcpy(&u.free, p, sizeof u.free);
        return on_free(e, &u.free);
    case JP_REC_COUNTERS:
        memcpy(&e->counters, p, sizeof e->counters); /* cumulative: the last one wins */
        return 0;
    case JP_REC_EXCERPT:
        return on_excerpt(e, p);
    case JP_REC_RUN_STOP:
        memcpy(&u.stop, p, sizeof u.stop);
        e->stopped = e->have_stop = true;
        e->termination = u.stop.termination;
        e->wall_ns = u.stop.wall_ns;
        e->process_cpu_ns = u.stop.process_cpu_ns;
        e->stop_record_count = u.stop.record_count;
        return 0;
    default:
        *why = "unknown record type";
        return -EPROTO;
    }
}

static inline int feed_one(struct jp_engine *e, const void *rec, uint32_t len, const char **why)
{
    if (__builtin_expect(e->oom, 0))
        return -ENOMEM;
    int rc = feed_record(e, rec, len, why);
    if (__builtin_expect(rc == -ENOMEM, 0))
        e->oom = true;
    return rc;
}

int jp_engine_feed(struct jp_engine *e, const void *rec, uint32_t len, const char **why)
{
    const char *dummy;
    if (!why)
        why = &dummy;
    *why = NULL;
    return feed_one(e, rec, len, why);
}

/* How many records ahead the batch feed starts loading what a record will touch: enough to
 * cover a miss to memory with the work of the records in between, few enough that the lines
 * are still in cache when their record comes. */
#define BATCH_LOOKAHEAD 12u

/* Starts loading the live-table lines the record at p will touch, if it is an allocation
 * event; returns the record's span in the batch (slots), 0 when its header is not sound (the
 * feed loop then reports it). Reads only the copy the caller owns, and only hints: nothing
 * here changes state, so a record that turns out invalid costs a wasted prefetch. */
static inline uint32_t batch_prefetch(struct jp_engine *e, const uint8_t *p, uint32_t avail)
{
    struct jp_rec_hdr h;
    if (avail < JP_SLOT_SIZE)
        return 0;
    memcpy(&h, p, sizeof h);
    if (h.size < sizeof h || h.size > JP_REC_MAX_SIZE)
        return 0;
    uint32_t span = jp_rec_slots(h.size) * JP_SLOT_SIZE;
    if (!e->live_exact || e->mode != JP_MODE_MEMORY || h.size != JP_SLOT_SIZE)
        return span;
    uint64_t id;
    memcpy(&id, p + 8, sizeof id); /* allocation_id sits at offset 8 in all three */
    if (h.type == JP_REC_ALLOC) {
        /* A fresh id evicts its ring slot's survivor into the table: load where it goes. */
        if (!e->ring || id <= e->ring_hi || id == UINT64_MAX)
            return span;
        uint32_t slot = (uint32_t)(id & (e->ring_w - 1u));
        if (!e->ring[slot])
            return span;
        uint64_t occ = e->ring_hi - ((e->ring_hi - slot) & (e->ring_w - 1u));
        if (occ < UINT32_MAX)
            ln_prefetch(e, (uint32_t)(occ + 1u));
    } else if (h.type == JP_REC_FREE || h.type == JP_REC_RESIZE) {
        if (e->ring && id <= e->ring_hi && e->ring_hi - id < e->ring_w) {
            if (e->ring_hi - id >= 2048u) /* the newest few KiB of the window are in cache */
                __builtin_prefetch(&e->ring[id & (e->ring_w - 1u)], 1);
            return span;
        }
        if (id < UINT32_MAX)
            ln_prefetch(e, (uint32_t)(id + 1u));
    }
    return span;
}

int jp_engine_feed_batch(struct jp_engine *e, const uint8_t *recs, uint32_t len,
                         uint32_t *consumed, const char **why)
{
    const char *dummy;
    if (!why)
        why = &dummy;
    *why = NULL;
    uint32_t off = 0, ahead = 0, lead = 0;
    int rc = e->oom ? -ENOMEM : 0;
    while (rc == 0 && off < len) {
        /* Software pipeline: keep the prefetch cursor BATCH_LOOKAHEAD records ahead. */
        while (lead < BATCH_LOOKAHEAD && ahead < len) {
            uint32_t span = batch_prefetch(e, recs + ahead, len - ahead);
            if (!span) {
                ahead = len;
                break;
            }
            ahead += span;
            lead++;
        }
        struct jp_rec_hdr h;
        if (len - off < sizeof h)
            break; /* a partial header: the caller's next batch starts here */
        memcpy(&h, recs + off, sizeof h);
        if (h.size < sizeof h || h.size > JP_REC_MAX_SIZE) {
            /* The same verdict and reason as feeding this record alone would give. */
            if (jp_rec_validate(recs + off, len - off, why) == 0 || !*why)
                *why = h.size < sizeof h ? "record smaller than its fixed part"
                                         : "record larger than JP_REC_MAX_SIZE";
            rc = -EPROTO;
            break;
        }
        if (h.size > len - off)
            break; /* incomplete record at the end: not consumed */
        rc = feed_one(e, recs + off, h.size, why);
        if (rc < 0)
            break;
        uint32_t span = jp_rec_slots(h.size) * JP_SLOT_SIZE;
        off += span < len - off ? span : len - off;
        if (lead)
            lead--;
        if (ahead < off) { /* the cursor stopped at a bad header the feed skipped past */
            ahead = off;
            lead = 0;
        }
    }
    if (consumed)
        *consumed = off;
    return rc;
}

/* ---- views for render/ and callers ----------------------------------------------------- */

void jp_engine_view(const struct jp_engine *e, struct jp_engine_view *v)
{
    memset(v, 0, sizeof *v);
    v->mode = e->mode;
    v->start = e->started ? &e->start : NULL;
    v->have_stop = e->have_stop;
    v->termination = e->termination;
    v->wall_ns = e->wall_ns;
    v->process_cpu_ns = e->process_cpu_ns;
    v->stop_record_count = e->stop_record_count;
    v->records_counted = e->records_counted;
    v->counters = &e->counters;
    v->violations = e->violations;
    v->producer_records = e->producer_records;
    v->detail_stopped = e->detail_stopped;
    v->live_exact = e->live_exact;
    v->truncated_stacks = e->truncated_stacks;
    memcpy(v->state_samples, e->state_samples, sizeof v->state_samples);
    v->attributed_stacks = e->attributed_stacks;
    v->allocation_count = e->allocation_count;
    v->resize_count = e->resize_count;
    v->allocated_bytes = e->allocated_bytes;
    v->freed_bytes = e->freed_bytes;
    v->live_bytes = e->live_bytes;
    v->peak_bytes = e->peak_bytes;
    v->attributed_allocated = e->attributed_allocated;
    v->peak_epoch = e->peak_epoch;
    v->funcs = e->funcs; v->nfuncs = e->nfuncs;
    v->sources = e->sources; v->nsources = e->nsources;
    v->chains = e->chains; v->nchains = e->nchains;
    v->hots = e->hots; v->nhots = e->nhots;
    v->excerpts = e->excerpts; v->nexcerpts = e->nexcerpts;
    v->exec = e->exec_tuples; v->nexec = e->nexec;
    v->exec_exact = !e->exec_lost;
    v->runtime_threads = e->nthreads;
    v->threads_exact = !e->threads_lost;
}

int jp_engine_render(struct jp_engine *e, const struct jp_report_opts *o, struct jp_rendered *out)
{
    if (!o || o->size < sizeof *o || !out)
        return -EINVAL;
    memset(out, 0, sizeof *out);
    if (!e->started)
        return -ENODATA; /* no RUN_START: no mode, nothing to report */
    cpu_settle(e);
    struct jp_engine_view v;
    jp_engine_view(e, &v);
    return jp_render_build(&v, o, out, NULL, NULL);
}

int jp_engine_excerpt_keys(struct jp_engine *e, const struct jp_report_opts *o,
                           struct jp_ctl_excerpt_key **keys, uint32_t *count)
{
    if (!o || o->size < sizeof *o || !keys || !count)
        return -EINVAL;
    *keys = NULL;
    *count = 0;
    if (!e->started)
        return -ENODATA;
    cpu_settle(e);
    struct jp_engine_view v;
    jp_engine_view(e, &v);
    struct jp_report_opts q = *o;
    q.outputs = 0;
    struct jp_rendered r;
    memset(&r, 0, sizeof r);
    int rc = jp_render_build(&v, &q, &r, keys, count);
    jp_rendered_free(&r);
    return rc;
}

void jp_rendered_free(struct jp_rendered *r)
{
    if (!r)
        return;
    free(r->human);
    free(r->toon);
    r->human = r->toon = NULL;
    r->human_len = r->toon_len = 0;
}

/* Bytes the engine has accounted against the run's budget (for benches and tests). */
uint64_t jp_engine_metadata_bytes(const struct jp_engine *e)
{
    return e->used;
}

uint64_t jp_engine_metadata_peak_bytes(const struct jp_engine *e)
{
    return e->peak_used > e->used ? e->peak_used : e->used;
}

/* Bytes of the live-allocation table alone, and the allocations it tracks. */
uint64_t jp_engine_live_table_bytes(const struct jp_engine *e, uint64_t *live_count)
{
    if (live_count)
        *live_count = e->lw.n + e->nring + (e->max_id_live ? 1u : 0u);
    uint64_t nb = 0;
    for (unsigned i = 0; i < LN_SHARDS; i++) {
        nb += e->ln[i].nb;
        if (live_count)
            *live_count += e->ln[i].n;
    }
    return (e->ring ? ring_bytes(e->ring_w) : 0) +
           nb * sizeof(struct ln_bucket) +
           (uint64_t)e->lw.cap * sizeof(struct lw_ent) +
           (uint64_t)e->ovf_cap * sizeof(struct overflow_ent) +
           (uint64_t)e->seen_cap * sizeof(struct interval) +
           (uint64_t)e->seen_extra.cap * sizeof(struct lw_ent);
}

int jp_engine_summary(const struct jp_engine *e, uint32_t ending, struct jp_engine_summary *out)
{
    if (!out)
        return -EINVAL;
    memset(out, 0, sizeof *out);
    if (!e->started)
        return -ENODATA;
    struct jp_engine_view v;
    jp_engine_view(e, &v);
    struct jp_report_opts o = {sizeof o, -1, -1, ending, 0};
    struct jp_rendered r;
    memset(&r, 0, sizeof r);
    int rc = jp_render_build(&v, &o, &r, NULL, NULL);
    if (rc < 0)
        return rc;
    jp_rendered_free(&r);
    out->mode = e->mode;
    out->termination = e->have_stop ? e->termination : JP_TERM_NONE;
    out->status = r.status;
    out->records = e->records_counted;
    out->violations = e->violations;
    if (e->mode == JP_MODE_CPU) {
        uint64_t extra = e->counters.waiting_ticks + e->counters.runtime_ticks;
        out->requested_ticks = e->counters.requested_ticks;
        for (unsigned s = 0; s < JP_STATE_LIMIT; s++)
            out->recorded_samples += e->state_samples[s];
        out->recorded_samples += extra;
        out->attributed_samples = e->state_samples[JP_STATE_JETT];
        out->live_exact = 1;
    } else {
        out->allocation_count = e->allocation_count;
        out->resize_count = e->resize_count;
        out->allocated_bytes = e->allocated_bytes;
        out->live_exact = jp_view_live_exact(&v);
        if (out->live_exact) {
            out->freed_bytes = e->freed_bytes;
            out->peak_live_bytes = e->peak_bytes;
            out->retained_bytes = e->live_bytes;
        }
    }
    return 0;
}
