/* The engine's life cycle and record dispatch (validation and place in the stream).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "account.h"

/* ---- life cycle ------------------------------------------------------------------------ */

static void set_seed(struct jp_engine *e, uint64_t seed)
{
    e->seed = seed;
    e->lw.seed = mix64(seed ^ UINT64_C(0x1d8e4e27c47d124f));
    e->seen_extra.seed = mix64(seed ^ UINT64_C(0x2545f4914f6cdd1d));
    e->rseq.seed = mix64(seed ^ UINT64_C(0x9e3779b97f4a7c15));
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

int jp_engine_set_event_fast_paths(struct jp_engine *e, bool on)
{
    if (e->started)
        return -EBUSY;
    e->no_fast_paths = !on;
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
    free(e->lw.ent); free(e->win); free(e->seen_extra.ent); free(e->rseq.ent); free(e->tl);
    free(e->ovf); free(e->seen);
    jpe_pg_free_all(e);
    free(e);
}

/* ---- feeding --------------------------------------------------------------------------- */

/* The record types RUN_STOP's record_count does not count, one bit per type. */
#define UNCOUNTED_TYPES                                                                          \
    ((UINT32_C(1) << JP_REC_PAD) | (UINT32_C(1) << JP_REC_EXCERPT) |                              \
     (UINT32_C(1) << JP_REC_RUN_STOP))
_Static_assert(JP_REC_TYPE_LIMIT <= 32, "a type is a bit of UNCOUNTED_TYPES");

static inline int feed_record(struct jp_engine *e, const void *rec, uint32_t len,
                              const char **why)
{
    /* Samples and allocation events never get past this: jp_engine_feed gives every record
     * of a slot's size or more to jp_engine_feed_slot first, which takes each valid one in an
     * open stream; an invalid one is refused here by the validator (with its fault) and one
     * outside an open stream by the stream checks below. So the switch has no event cases. */
    int rc = jp_rec_validate(rec, len, why);
    if (rc < 0)
        return rc;
    struct jp_rec_hdr h;
    memcpy(&h, rec, sizeof h);
    if (__builtin_expect(!e->open || h.type == JP_REC_RUN_START, 0)) {
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
    }
    e->records_counted += !((UNCOUNTED_TYPES >> h.type) & 1u); /* validated: type < LIMIT */
    const uint8_t *p = rec;
    union {
        struct jp_rec_run_start start;
        struct jp_rec_node_def node;
        struct jp_rec_exec exec;
        struct jp_rec_counters counters;
        struct jp_rec_run_stop stop;
    } u;
    switch (h.type) {
    case JP_REC_PAD:
        return 0;
    case JP_REC_RUN_START:
        memcpy(&u.start, p, sizeof u.start);
        return jpe_on_run_start(e, &u.start, why);
    case JP_REC_SOURCE_DEF:
        return jpe_on_source_def(e, p);
    case JP_REC_FRAME_DEF:
        return jpe_on_frame_def(e, p);
    case JP_REC_NODE_DEF:
        memcpy(&u.node, p, sizeof u.node);
        return jpe_on_node_def(e, &u.node);
    case JP_REC_EXEC:
        /* Execution identity is run-local: aggregation merges functions across workers;
         * the report only counts the distinct threads and tasks behind each entry. */
        memcpy(&e->exec, p, sizeof e->exec);
        e->exec_epoch++;
        if (e->exec_epoch == 0) { /* after 2^32 switches: forget what was noted, stay exact */
            e->exec_epoch = 1;
            for (uint32_t i = 0; i < e->nnode_stored; i++)
                e->nodes[i].exec_epoch = 0;
            e->thread_epoch = 0;
        }
        return 0;
    case JP_REC_COUNTERS:
        memcpy(&e->counters, p, sizeof e->counters); /* cumulative: the last one wins */
        return 0;
    case JP_REC_TIME: {
        struct jp_rec_time t;
        memcpy(&t, p, sizeof t);
        return jpe_on_time(e, &t);
    }
    case JP_REC_EXCERPT:
        return jpe_on_excerpt(e, p);
    case JP_REC_RESIZE_SEQ: {
        /* Two slots, so never on the slot path; RESIZE's fields and its count. */
        struct jp_rec_resize_seq rs;
        struct jp_rec_resize r;
        memcpy(&rs, p, sizeof rs);
        memcpy(&r, p, sizeof r);
        if (!e->seq_stream)
            return violation(e); /* a stream of format 1 names no resize sequence */
        int got = jpe_on_resize(e, &r, rs.seq);
        e->records_counted -= got == JP_ENGINE_HELD; /* handed back: counted when taken */
        return got;
    }
    case JP_REC_RUN_STOP:
        memcpy(&u.stop, p, sizeof u.stop);
        e->stopped = e->have_stop = true;
        e->open = false;
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

/* One slot of an open stream in an engine not out of memory: 1 when declined (nothing
 * changed), else the handler's result. The caller counts the record unless declined (all four
 * types count in RUN_STOP's record_count) and notes -ENOMEM; nothing an event does closes the
 * stream, so a run of slots tests that once. */
_Static_assert(!((UNCOUNTED_TYPES >> JP_REC_ALLOC) & 1u) &&
                   !((UNCOUNTED_TYPES >> JP_REC_FREE) & 1u) &&
                   !((UNCOUNTED_TYPES >> JP_REC_CPU_SAMPLE) & 1u) &&
                   !((UNCOUNTED_TYPES >> JP_REC_RESIZE) & 1u),
               "the slot path counts every record it takes");
static inline __attribute__((always_inline)) int slot_event(struct jp_engine *e,
                                                            const void *slot)
{
    union {
        struct jp_rec_hdr h;
        struct jp_rec_cpu_sample cpu;
        struct jp_rec_alloc alloc;
        struct jp_rec_resize resize;
        struct jp_rec_free free;
    } u;
    memcpy(&u, slot, JP_SLOT_SIZE);
    /* From here on only the copy is read: the compiler may not fetch a field from the slot
     * again in place of the copy (the slot is the producer's to change). */
    __asm__ __volatile__("" : : "r"(&u) : "memory");
    if (__builtin_expect(u.h.size != JP_SLOT_SIZE, 0))
        return 1;
    /* tests in the order of their frequency, not a jump table */
    if (u.h.type == JP_REC_ALLOC)
        return on_alloc(e, &u.alloc);
    if (u.h.type == JP_REC_FREE)
        return on_free(e, &u.free);
    if (u.h.type == JP_REC_CPU_SAMPLE)
        return on_cpu_sample(e, &u.cpu); /* declines a faulty sample */
    if (u.h.type == JP_REC_RESIZE)
        return jpe_on_resize(e, &u.resize, 0);
    return 1;
}

#define PREFETCH_SLOTS 32u
/* How far ahead a free's window slot is fetched, and from which window size on (64 KiB of
 * slots: a smaller window stays in the first-level cache, where the fetch costs more than it
 * saves). */
#define PREFETCH_FREE 8u
#define PREFETCH_FREE_WINDOW (UINT32_C(1) << 14)
/* The walk over a run of slots, once for each value of far_window so that a run whose window
 * is small tests nothing more per slot. far_window: the window is past the first-level cache,
 * and the young frees a few slots ahead have their window slots fetched now. */
static inline __attribute__((always_inline)) int feed_run(struct jp_engine *e, const uint8_t *q,
                                                          uint64_t n, uint64_t *k,
                                                          const bool far_window)
{
    int rc = 0;
    for (; *k < n; ++*k, q += JP_SLOT_SIZE) {
        if (*k + PREFETCH_SLOTS < n)
            __builtin_prefetch(q + PREFETCH_SLOTS * JP_SLOT_SIZE);
        if (far_window && *k + PREFETCH_FREE < n) {
            /* a hint only: whatever the producer wrote there, the address is in the window */
            struct jp_rec_free ahead;
            memcpy(&ahead, q + PREFETCH_FREE * JP_SLOT_SIZE, sizeof ahead);
            if (ahead.h.type == JP_REC_FREE)
                __builtin_prefetch(&e->win[ahead.allocation_id & (e->win_w - 1u)], 1);
        }
        if ((rc = slot_event(e, q)) != 0)
            break;
    }
    return rc;
}

/* The slot entry: n consecutive slots, in order, up to the first that is not taken (see
 * jp_engine_feed_slots); one slot is a run of one. */
static inline int feed_slots(struct jp_engine *e, const void *slots, uint64_t n, uint64_t *fed)
{
    *fed = 0;
    if (__builtin_expect(!e->open || e->oom, 0))
        return n ? 1 : 0;
    uint64_t k = 0;
    /* decided once a run of slots (win_w is 0 while there is no window; it only grows) */
    int rc = e->win_w >= PREFETCH_FREE_WINDOW ? feed_run(e, slots, n, &k, true)
                                               : feed_run(e, slots, n, &k, false);
    *fed = k;
    e->records_counted += k + (rc < 0); /* a record taken that failed counts too */
    if (__builtin_expect(rc == -ENOMEM, 0))
        e->oom = true;
    return rc;
}

void jp_engine_set_hold(struct jp_engine *e, int on)
{
    e->hold = on != 0;
}

int jp_engine_feed_slot(struct jp_engine *e, const void *slot)
{
    uint64_t fed;
    return feed_slots(e, slot, 1, &fed);
}

int jp_engine_feed_slots(struct jp_engine *e, const void *slots, uint64_t n, uint64_t *fed)
{
    return feed_slots(e, slots, n, fed);
}

int jp_engine_feed(struct jp_engine *e, const void *rec, uint32_t len, const char **why)
{
    const char *dummy;
    if (!why)
        why = &dummy;
    *why = NULL;
    if (len >= JP_SLOT_SIZE && rec) {
        uint64_t fed;
        int rc = feed_slots(e, rec, 1, &fed); /* the events: the one copy and check there */
        if (__builtin_expect(rc != 1, 1))
            return rc;
    }
    return feed_one(e, rec, len, why);
}
