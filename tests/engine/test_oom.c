/* Out of memory is reported as out of memory. An allocation-failure sweep: for every N, the
 * N-th allocation made by the engine, the report builder or a writer fails, over a CPU run and
 * a memory run with excerpts, fed record by record. Each run either returns
 * -ENOMEM from one of the public calls (feed, excerpt keys, render, summary), or,
 * where the failure cost nothing visible, gives exactly the bytes of the run without a failure.
 * Never other bytes with success (a host out of memory must not pass for a budget refusal, a
 * missing excerpt or a partial profile), and nothing is leaked: every allocation made while the
 * hook is armed is freed by the time the engine and its outputs are.
 *
 * The hook: this executable is linked with --wrap for malloc, calloc, realloc, aligned_alloc
 * and free (tests/engine/meson.build), which redirects the calls of every object linked
 * statically into it (the engine, render/, protocol/) and of no shared library. The wrappers
 * do nothing unless armed, and the test arms them only around the code under test. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t m);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t a, size_t n);
void __real_free(void *p);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t m);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_aligned_alloc(size_t a, size_t n);
void __wrap_free(void *p);

static struct {
    bool armed;
    uint64_t fail_at; /* the allocation (1-based, counted while armed) that fails; 0: none */
    uint64_t count;   /* allocations attempted while armed */
    bool failed;      /* fail_at was reached */
    int64_t live;     /* blocks allocated while armed and not yet freed */
} hook;

static bool hook_fails(void)
{
    if (!hook.armed)
        return false;
    if (++hook.count == hook.fail_at) {
        hook.failed = true;
        return true;
    }
    return false;
}

static void *counted(void *p)
{
    if (p && hook.armed)
        hook.live++;
    return p;
}

void *__wrap_malloc(size_t n)
{
    return hook_fails() ? NULL : counted(__real_malloc(n));
}

void *__wrap_calloc(size_t n, size_t m)
{
    return hook_fails() ? NULL : counted(__real_calloc(n, m));
}

void *__wrap_aligned_alloc(size_t a, size_t n)
{
    return hook_fails() ? NULL : counted(__real_aligned_alloc(a, n));
}

void *__wrap_realloc(void *p, size_t n)
{
    if (hook_fails())
        return NULL; /* p stays valid, as realloc leaves it */
    void *np = __real_realloc(p, n);
    return p ? np : counted(np);
}

void __wrap_free(void *p)
{
    if (p && hook.armed)
        hook.live--;
    __real_free(p);
}

static void hook_arm(uint64_t fail_at)
{
    hook.fail_at = fail_at;
    hook.count = 0;
    hook.failed = false;
    hook.live = 0;
    hook.armed = true;
}

static void hook_disarm(void)
{
    hook.armed = false;
}

/* A run as three record runs laid out as in the ring: everything before the excerpts, the
 * excerpt answers, and RUN_STOP (the daemon feeds them in that order, asking for the excerpt
 * keys in between). */
struct stream {
    struct t_tap body, excerpts, stop;
};

static void exec_rec(struct jp_engine *e, uint32_t thread, uint32_t task)
{
    struct jp_rec_exec x = {{JP_REC_EXEC, sizeof x}, thread, task, JP_ID_UNAVAILABLE};
    cr_assert_eq(t_feed_raw(e, &x, sizeof x, NULL), 0);
}

static void stream_free(struct stream *s)
{
    free(s->body.buf);
    free(s->excerpts.buf);
    free(s->stop.buf);
}

/* The golden CPU stream (helpers.c) with execution identities and a stdlib source, a
 * source-less symbol and enough hot lines to grow their table. */
static void cpu_stream(struct stream *s)
{
    memset(s, 0, sizeof *s);
    struct jp_engine *e = t_engine();
    t_tap_set(&s->body);
    t_start(e, JP_MODE_CPU, 100, 0, 10, 32 * MiB, 64 * MiB);
    t_golden_cpu_program(e);
    t_source(e, 2, JP_ORIGIN_STDLIB, "stdlib/list.jett");
    t_frame(e, 5, 2, "std.list", "push", 0, 50, 3, JP_FRAME_FUNCTION);
    t_frame(e, 6, 0, "<root>", "<unavailable-symbol>", 0, 0, 0, JP_FRAME_UNAVAILABLE_SYMBOL);
    t_node(e, 8, 2, 5);
    t_node(e, 9, 8, 6);
    exec_rec(e, 1, 7);
    t_golden_cpu_samples(e);
    exec_rec(e, 2, 8);
    for (uint32_t i = 0; i < 40; i++)
        t_sample(e, JP_STATE_JETT, 8, 4 + i, 1 + i % 3);
    t_sample(e, JP_STATE_JETT, 9, 0, 0);
    t_counters(e, 80, 5, 1, 2, 1, 0);
    t_tap_set(&s->excerpts);
    t_excerpt(e, 1, 21, 5, JP_EXCERPT_REDACTED, "x = <redacted-literal> + y");
    t_excerpt(e, 1, 22, 3, JP_EXCERPT_UNAVAILABLE, NULL);
    t_excerpt(e, 1, 21, 5, JP_EXCERPT_REDACTED, "x = <redacted-literal> + y"); /* replaced */
    t_excerpt(e, 1, 11, 1, 0, "work_step(i)");
    t_excerpt(e, 2, 4, 1, 0, "items.append(v)");
    t_tap_set(&s->stop);
    t_stop(e, JP_TERM_RETURNED, 1000000000, 500000000, 0);
    t_tap_set(NULL);
    jp_engine_free(e);
}

/* A memory run that reaches every live-table path: a young window that grows and evicts
 * survivors into the sharded tables, ids out of order and past 2^32 (the wide tables), sizes
 * and ids that need the overflow array, resizes both ways, frees, several sites and threads,
 * and an excerpt. */
static void memory_stream(struct stream *s)
{
    memset(s, 0, sizeof *s);
    struct jp_engine *e = t_engine();
    t_tap_set(&s->body);
    t_start(e, JP_MODE_MEMORY, 0, 100, 10, 32 * MiB, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/cache.jett");
    t_frame(e, 1, 1, "<root>", "main", 0, 9, 1, JP_FRAME_FUNCTION);
    t_frame(e, 2, 1, "cache", "fill", 10, 19, 5, JP_FRAME_FUNCTION);
    t_frame(e, 3, 1, "cache", "grow", 20, 29, 12, JP_FRAME_FUNCTION);
    t_frame(e, 4, 1, "cache", "drop", 30, 39, 20, JP_FRAME_FUNCTION);
    t_node(e, 1, 0, 1);
    t_node(e, 2, 1, 2);
    t_node(e, 3, 1, 3);
    t_node(e, 4, 1, 4);
    exec_rec(e, 1, JP_ID_UNAVAILABLE);
    uint64_t id = 1;
    for (int i = 0; i < 12000; i++, id++) {
        if (i == 6000)
            exec_rec(e, 2, 3);
        t_alloc(e, 2 + (uint32_t)(i % 3 == 0), id, 16 + (uint64_t)(i % 7) * 8);
        /* two in three die young; every third lives on and leaves the window */
        if (id > 2 && (id - 2) % 3 != 0)
            t_free(e, 4, id - 2, 16 + (uint64_t)((i - 2) % 7) * 8);
    }
    for (uint64_t k = 3; k < 3000; k += 3) /* survivors resized, grown and shrunk */
        t_resize(e, 3, k, 16 + ((k - 1) % 7) * 8, k % 2 ? 4096 : 8);
    for (uint64_t k = 0; k < 200; k++) /* late and wide ids */
        t_alloc(e, 1, (UINT64_C(1) << 33) + k * 977, 24);
    for (uint64_t k = 0; k < 100; k++)
        t_free(e, 1, (UINT64_C(1) << 33) + k * 977, 24);
    t_alloc(e, 1, UINT64_MAX, 8);
    t_alloc(e, 2, id++, UINT64_C(1) << 41); /* too large for a packed slot: overflow */
    t_counters(e, 0, 0, 0, 0, 0, 0);
    t_tap_set(&s->excerpts);
    t_excerpt(e, 1, 5, 1, 0, "let slot = table.get(k)");
    t_excerpt(e, 1, 5, 1, 0, "let slot = table.get(k)");
    t_tap_set(&s->stop);
    t_stop(e, JP_TERM_RETURNED, 2000000, 0, 0);
    t_tap_set(NULL);
    jp_engine_free(e);
}

static int feed_run(struct jp_engine *e, const struct t_tap *t)
{
    const char *why = NULL;
    for (uint32_t off = 0; off < t->len;) {
        struct jp_rec_hdr h;
        memcpy(&h, t->buf + off, sizeof h);
        int rc = jp_engine_feed(e, t->buf + off, h.size, &why);
        if (rc < 0)
            return rc;
        off += jp_rec_slots(h.size) * JP_SLOT_SIZE;
    }
    return 0;
}

struct result {
    uint32_t status;
    char reason[40];
    char *toon, *human;
    size_t toon_len, human_len;
    struct jp_engine_summary sum;
    uint32_t nkeys;
};

/* The whole life of one run: engine, feeding, excerpt keys, excerpts, stop, summary, report
 * in both outputs (and at threshold 0, limit 100, so every entry is written). Returns 0 with
 * *res filled (the caller frees toon/human), or the first error. */
static int run_once(const struct stream *s, struct result *res)
{
    memset(res, 0, sizeof *res);
    struct jp_engine *e;
    int rc = jp_engine_new(&e);
    if (rc < 0)
        return rc;
    cr_assert_eq(jp_engine_set_hash_seed(e, 0x5eed), 0);
    struct jp_report_opts o = {sizeof o, -1, -1, JP_END_STOP, JP_OUT_HUMAN | JP_OUT_TOON, 0, 0, 0};
    struct jp_ctl_excerpt_key *keys = NULL;
    struct jp_engine_view v;
    struct jp_report *rep = NULL;
    /* As the daemon does it: one report built before the excerpts, rebound after the stop. */
    if ((rc = feed_run(e, &s->body)) == 0 && (rc = jp_engine_view(e, &v)) == 0 &&
        (rc = jp_report_build(&v, &o, &rep)) == 0 &&
        (rc = jp_report_excerpt_keys(rep, &keys, &res->nkeys)) == 0 &&
        (rc = feed_run(e, &s->excerpts)) == 0 &&
        (rc = feed_run(e, &s->stop)) == 0 &&
        (rc = jp_engine_summary(e, &res->sum)) == 0 && (rc = jp_engine_view(e, &v)) == 0) {
        struct jp_rendered a, b;
        struct jp_report_opts all = {sizeof all, 0, 100, JP_END_STOP, JP_OUT_TOON, 0, 0, 0};
        jp_report_rebind(rep, &v, JP_END_STOP);
        rc = jp_report_write(rep, &o, &a);
        if (rc == 0) {
            rc = jp_profile_render(e, &all, &b);
            if (rc == 0) {
                /* one document of both: the everything-shown TOON after the human text */
                res->status = a.status;
                memcpy(res->reason, a.reason, sizeof res->reason);
                res->toon = a.toon;
                res->toon_len = a.toon_len;
                res->human = a.human;
                res->human_len = a.human_len;
                a.toon = a.human = NULL;
                char *both = realloc(res->human, res->human_len + b.toon_len + 1u);
                if (!both) {
                    rc = -ENOMEM; /* the test's own allocation, also swept */
                } else {
                    memcpy(both + res->human_len, b.toon, b.toon_len + 1u);
                    res->human = both;
                    res->human_len += b.toon_len;
                }
                jp_rendered_free(&b);
            }
            jp_rendered_free(&a);
        }
    }
    free(keys);
    jp_report_free(rep);
    jp_engine_free(e);
    if (rc < 0) {
        free(res->toon);
        free(res->human);
        res->toon = res->human = NULL;
    }
    return rc;
}

static void sweep(const char *what, void (*make)(struct stream *))
{
    struct stream s;
    make(&s);
    struct result ref;
    hook_arm(0);
    cr_assert_eq(run_once(&s, &ref), 0, "%s: the run without a failure", what);
    hook_disarm();
    uint64_t total = hook.count;
    cr_assert_gt(total, 50, "%s: only %llu allocations to fail", what,
                 (unsigned long long)total);
    if (s.body.buf[6] == JP_MODE_CPU) /* RUN_START.mode: CPU runs have hot lines to ask for */
        cr_assert_gt(ref.nkeys, 0, "%s: excerpt keys asked", what);
    cr_assert_eq(ref.status, JP_STATUS_COMPLETE, "%s: %s", what, ref.reason);

    uint64_t enomem = 0, same = 0;
    for (uint64_t n = 1;; n++) {
        struct result got;
        hook_arm(n);
        int rc = run_once(&s, &got);
        bool failed = hook.failed;
        /* compared and freed while armed, so the blocks still live at the end are leaks */
        bool toon_same = rc == 0 && got.toon_len == ref.toon_len &&
                         !memcmp(got.toon, ref.toon, ref.toon_len);
        bool human_same = rc == 0 && got.human_len == ref.human_len &&
                          !memcmp(got.human, ref.human, ref.human_len);
        bool sum_same = rc == 0 && !memcmp(&got.sum, &ref.sum, sizeof ref.sum);
        free(got.toon);
        free(got.human);
        hook_disarm();
        cr_assert_eq(hook.live, 0, "%s: failing allocation %llu leaks %lld blocks", what,
                     (unsigned long long)n, (long long)hook.live);
        if (!failed) {
            /* past the last allocation: the whole run succeeded unharmed */
            cr_assert(rc == 0 && toon_same && human_same && sum_same);
            cr_assert_eq(n, total + 1u, "%s: %llu allocations, the sweep ended at %llu", what,
                         (unsigned long long)total, (unsigned long long)n);
            break;
        }
        cr_assert(rc == 0 || rc == -ENOMEM, "%s: allocation %llu failed, the run gave %d", what,
                  (unsigned long long)n, rc);
        if (rc == -ENOMEM) {
            enomem++;
            continue;
        }
        same++;
        cr_assert(got.status == ref.status && !strcmp(got.reason, ref.reason),
                  "%s: allocation %llu failed, status %u (%s) instead of %u (%s)", what,
                  (unsigned long long)n, got.status, got.reason, ref.status, ref.reason);
        cr_assert(toon_same, "%s: allocation %llu failed and the TOON changed", what,
                  (unsigned long long)n);
        cr_assert(human_same, "%s: allocation %llu failed and the human text changed", what,
                  (unsigned long long)n);
        cr_assert(sum_same, "%s: allocation %llu failed and the summary changed", what,
                  (unsigned long long)n);
    }
    cr_assert_gt(enomem, 0);
    cr_log_info("%s: %llu allocations, %llu runs ended in -ENOMEM, %llu gave the same bytes",
                what, (unsigned long long)total, (unsigned long long)enomem,
                (unsigned long long)same);
    free(ref.toon);
    free(ref.human);
    stream_free(&s);
}

Test(oom, cpu_run_fed_record_by_record)
{
    sweep("cpu", cpu_stream);
}

Test(oom, memory_run_with_excerpts_fed_record_by_record)
{
    sweep("memory", memory_stream);
}

/* After a feed ran out of memory the engine takes nothing more, and still renders what it
 * had. */
Test(oom, an_engine_out_of_memory_refuses_further_records)
{
    struct stream s;
    cpu_stream(&s);
    struct jp_engine *e = t_engine();
    /* fail the first allocation a source definition makes */
    const struct t_tap *t = &s.body;
    uint32_t off = 0;
    struct jp_rec_hdr h;
    memcpy(&h, t->buf, sizeof h);
    cr_assert_eq(jp_engine_feed(e, t->buf, h.size, NULL), 0); /* RUN_START */
    off += jp_rec_slots(h.size) * JP_SLOT_SIZE;
    memcpy(&h, t->buf + off, sizeof h);
    cr_assert_eq(h.type, JP_REC_SOURCE_DEF);
    hook_arm(1);
    int rc = jp_engine_feed(e, t->buf + off, h.size, NULL);
    hook_disarm();
    cr_assert_eq(rc, -ENOMEM);
    off += jp_rec_slots(h.size) * JP_SLOT_SIZE;
    memcpy(&h, t->buf + off, sizeof h);
    cr_assert_eq(jp_engine_feed(e, t->buf + off, h.size, NULL), -ENOMEM, "latched");
    struct jp_rendered r;
    struct jp_report_opts o = {sizeof o, -1, -1, JP_END_PRODUCER_LOST, JP_OUT_TOON, 0, 0, 0};
    cr_assert_eq(jp_profile_render(e, &o, &r), 0);
    cr_assert_not_null(strstr(r.toon, "mode: cpu"));
    jp_rendered_free(&r);
    jp_engine_free(e);
    stream_free(&s);
}
