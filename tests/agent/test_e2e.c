/* End to end: a small C host that uses only the public API (jettprof.h) against the real
 * jettprofd (private, spawned through $JETTPROFD, or long-lived through $JETTPROFD_SOCKET), and
 * checks the profile it gets back. Every TOON document is decoded with the official decoder
 * (tests/toon) and the figures are read from the decoded data.
 *
 * The expected numbers are derived here from the host's own arithmetic, never copied from an
 * earlier run. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "jettprof.h"
/* Hostile peers below speak the wire format with the protocol's own encoder. */
#include "protocol/control.h"
/* Only the test's reading of the profile: the official TOON decoder and a JSON getter. */
#include "tests/lib/spawn.h"
#include "tests/lib/text.h"
#include "tests/lib/toon.h"
char *t_json_get(const char *json, const char *path);
int t_json_len(const char *json, const char *path);

static void need_daemon(void)
{
    const char *d = getenv("JETTPROFD");
    cr_assert(d && *d, "JETTPROFD must name the built jettprofd (run through meson test)");
    unsetenv("JETTPROFD_SOCKET");
}

static struct jettprof_config cfg(uint32_t mode)
{
    struct jettprof_config c = {
        .size = sizeof c,
        .mode = mode,
        .rate_hz = mode == JETTPROF_MODE_CPU ? 1000 : 0,
        .threshold_bp = 0,
        .limit = 100,
        .outputs = JETTPROF_OUT_TOON | JETTPROF_OUT_HUMAN,
        .capabilities = 0xffu,
        .capture_fd = -1,
    };
    return c;
}

static uint32_t frame(jettprof_run *run, uint32_t src, const char *ns, const char *fn,
                      uint32_t line)
{
    struct jettprof_frame_desc d = {
        .size = sizeof d, .kind = JETTPROF_FRAME_FUNCTION, .ns = ns, .function = fn,
        .source_id = src, .decl_start = line * 40, .decl_end = line * 40 + 30,
        .decl_line = line, .decl_col = 1};
    uint32_t id;
    cr_assert_eq(jettprof_frame(run, &d, &id), 0, "%s", jettprof_last_reason());
    return id;
}

/* The decoded profile as JSON, after checking the TOON is valid. */
static char *decoded(const struct jettprof_result *r)
{
    cr_assert(r->toon != NULL, "no TOON profile");
    cr_assert_eq(strlen(r->toon), r->toon_len);
    char *err = NULL;
    char *j = tl_toon_decode(r->toon, r->toon_len, &err);
    cr_assert(j != NULL, "the official decoder rejects the profile: %s\n%s", err ? err : "",
              r->toon);
    return j;
}

static uint64_t jnum(const char *json, const char *path)
{
    char *v = t_json_get(json, path);
    cr_assert(v != NULL, "%s missing", path);
    char *end;
    unsigned long long n = strtoull(v, &end, 10);
    cr_assert(*v && *end == '\0', "%s is not an integer: %s", path, v);
    free(v);
    return n;
}

static double jdouble(const char *json, const char *path)
{
    char *v = t_json_get(json, path);
    cr_assert(v != NULL, "%s missing", path);
    double d = strtod(v, NULL);
    free(v);
    return d;
}

/* Index of the bottleneck whose function is fn, or -1. */
static int entry(const char *json, const char *fn)
{
    int n = t_json_len(json, "profile.bottlenecks");
    for (int i = 0; i < n; i++) {
        char path[64];
        snprintf(path, sizeof path, "profile.bottlenecks.%d.function", i);
        char *v = t_json_get(json, path);
        int hit = v && strcmp(v, fn) == 0;
        free(v);
        if (hit)
            return i;
    }
    return -1;
}

static uint64_t efield(const char *json, int i, const char *field)
{
    char path[96];
    snprintf(path, sizeof path, "profile.bottlenecks.%d.%s", i, field);
    return jnum(json, path);
}

/* ---- memory: exact totals and per-site figures ---- */

struct mem_model {
    uint64_t count, resizes, allocated, freed, live, peak;
};

static void m_alloc(struct mem_model *m, uint64_t n)
{
    m->count++;
    m->allocated += n;
    m->live += n;
    if (m->live > m->peak)
        m->peak = m->live;
}

static void m_resize(struct mem_model *m, uint64_t from, uint64_t to)
{
    m->resizes++;
    if (to > from) {
        m->allocated += to - from;
        m->live += to - from;
    } else {
        m->freed += from - to;
        m->live -= from - to;
    }
    if (m->live > m->peak)
        m->peak = m->live;
}

static void m_free(struct mem_model *m, uint64_t n)
{
    m->freed += n;
    m->live -= n;
}

static void memory_host(struct jettprof_result *res, struct mem_model *tot,
                        struct mem_model *build, struct mem_model *cache)
{
    struct jettprof_config c = cfg(JETTPROF_MODE_MEMORY);
    jettprof_run *run;
    int r = jettprof_start(&c, &run);
    cr_assert_eq(r, 0, "%s (%s)", jettprof_strerror(r), jettprof_last_reason());
    uint32_t src;
    cr_assert_eq(jettprof_source(run, JETTPROF_ORIGIN_PROJECT, "src/app.jett", &src), 0);
    uint32_t f_main = frame(run, src, "app", "main", 1);
    uint32_t f_build = frame(run, src, "app", "build", 10);
    uint32_t f_cache = frame(run, src, "app.store", "cache", 20);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    memset(tot, 0, sizeof *tot);
    memset(build, 0, sizeof *build);
    memset(cache, 0, sizeof *cache);

    cr_assert_eq(jettprof_enter(t, f_main), 0);
    for (int round = 0; round < 3; round++) {
        cr_assert_eq(jettprof_enter(t, f_build), 0);
        uint64_t ids[100], sizes[100];
        for (int i = 0; i < 100; i++) {
            sizes[i] = 16u + (uint64_t)i;
            cr_assert_eq(jettprof_alloc(t, sizes[i], &ids[i]), 0);
            m_alloc(tot, sizes[i]);
            m_alloc(build, sizes[i]);
        }
        for (int i = 0; i < 100; i += 2) { /* grow the even ones, shrink every tenth */
            uint64_t to = i % 10 == 0 ? sizes[i] / 2 : sizes[i] * 3;
            cr_assert_eq(jettprof_resize(t, ids[i], sizes[i], to), 0);
            m_resize(tot, sizes[i], to);
            m_resize(build, sizes[i], to);
            sizes[i] = to;
        }
        for (int i = 10; i < 100; i++) {
            cr_assert_eq(jettprof_free(t, ids[i], sizes[i]), 0);
            m_free(tot, sizes[i]);
            m_free(build, sizes[i]);
        }
        jettprof_leave(t);
        cr_assert_eq(jettprof_enter(t, f_cache), 0);
        for (int i = 0; i < 20; i++) {
            uint64_t id;
            cr_assert_eq(jettprof_alloc(t, 1000, &id), 0);
            m_alloc(tot, 1000);
            m_alloc(cache, 1000);
        }
        uint64_t z;
        cr_assert_eq(jettprof_alloc(t, 0, &z), 0); /* counts, adds no bytes */
        m_alloc(tot, 0);
        m_alloc(cache, 0);
        jettprof_leave(t);
    }
    jettprof_leave(t);
    jettprof_thread_unregister(t);
    res->size = sizeof *res;
    cr_assert_eq(jettprof_finish(run, JETTPROF_TERM_RETURNED, res), 0);
}

Test(e2e, memory_totals_and_sites_are_exact)
{
    need_daemon();
    struct jettprof_result res;
    struct mem_model tot, build, cache;
    memory_host(&res, &tot, &build, &cache);
    cr_assert_eq(res.collector_failed, 0);
    cr_assert_eq(res.status, JETTPROF_STATUS_COMPLETE, "status %u reason %s", res.status,
                 res.reason);
    cr_assert_str_eq(res.reason, "");
    cr_assert(res.human && strstr(res.human, "Memory profile"));
    /* a private daemon's run has no id worth naming */
    cr_assert_eq(res.run_id, 0);
    cr_assert_null(strstr(res.human, "run id"), "%s", res.human);
    char *j = decoded(&res);
    cr_assert_eq(jnum(j, "profile.totals.allocation_count"), tot.count);
    cr_assert_eq(jnum(j, "profile.totals.resize_count"), tot.resizes);
    cr_assert_eq(jnum(j, "profile.totals.allocated_bytes"), tot.allocated);
    cr_assert_eq(jnum(j, "profile.totals.freed_bytes"), tot.freed);
    cr_assert_eq(jnum(j, "profile.totals.peak_live_bytes"), tot.peak);
    cr_assert_eq(jnum(j, "profile.totals.retained_bytes"), tot.live);
    int b = entry(j, "build"), c = entry(j, "cache");
    cr_assert(b >= 0 && c >= 0, "both sites are reported");
    cr_assert_eq(efield(j, b, "allocation_count"), build.count);
    cr_assert_eq(efield(j, b, "allocated_bytes"), build.allocated);
    cr_assert_eq(efield(j, b, "freed_bytes"), build.freed);
    cr_assert_eq(efield(j, b, "retained_bytes"), build.live);
    cr_assert_eq(efield(j, c, "allocation_count"), cache.count);
    cr_assert_eq(efield(j, c, "allocated_bytes"), cache.allocated);
    cr_assert_eq(efield(j, c, "retained_bytes"), cache.live);
    cr_assert_eq(efield(j, c, "freed_bytes"), 0);
    char *ns = t_json_get(j, "profile.bottlenecks.0.namespace");
    cr_assert_not_null(ns);
    free(ns);
    char *path = t_json_get(j, "profile.bottlenecks.0.path");
    cr_assert_str_eq(path, "src/app.jett");
    free(path);
    free(j);
    jettprof_result_release(&res);
    cr_assert_null(res.toon);
}

/* ---- two runtime threads, each on its own worker ring ---- */

/* Thread 1 allocates through the inline hooks and hands every block to thread 2, which frees
 * it through the plain ones (an object that moved to another worker): the frees arrive on
 * another ring than their allocations, and the profile must still be exact. */
#define HANDOFF_BLOCKS 20000u
struct handoff {
    jettprof_run *run;
    uint32_t f_make, f_drop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t ids[HANDOFF_BLOCKS];
    uint32_t made, dropped; /* under mu */
};

static void *handoff_maker(void *arg)
{
    struct handoff *h = arg;
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(h->run, 1, &t), 0);
    struct jettprof_fast *f = jettprof_thread_fast(t, JETTPROF_FAST_VERSION);
    cr_assert_not_null(f);
    jettprof_set_task(t, 7, 7);
    cr_assert_eq(jettprof_enter(t, h->f_make), 0);
    for (uint32_t i = 0; i < HANDOFF_BLOCKS; i++) {
        uint64_t id;
        cr_assert_eq(jettprof_alloc_fast(f, 32u + i % 7u, &id), 0);
        pthread_mutex_lock(&h->mu);
        h->ids[i] = id;
        h->made = i + 1u;
        pthread_cond_signal(&h->cv);
        pthread_mutex_unlock(&h->mu);
    }
    jettprof_leave(t);
    jettprof_thread_unregister(t);
    return NULL;
}

static void *handoff_dropper(void *arg)
{
    struct handoff *h = arg;
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(h->run, 2, &t), 0);
    jettprof_set_task(t, 8, 8);
    cr_assert_eq(jettprof_enter(t, h->f_drop), 0);
    for (uint32_t i = 0; i < HANDOFF_BLOCKS; i++) {
        pthread_mutex_lock(&h->mu);
        while (h->made <= i)
            pthread_cond_wait(&h->cv, &h->mu);
        uint64_t id = h->ids[i];
        pthread_mutex_unlock(&h->mu);
        cr_assert_eq(jettprof_free(t, id, 32u + i % 7u), 0);
    }
    jettprof_leave(t);
    jettprof_thread_unregister(t);
    return NULL;
}

Test(e2e, frees_on_another_threads_ring_than_their_allocations_are_exact)
{
    need_daemon();
    struct jettprof_config c = cfg(JETTPROF_MODE_MEMORY);
    static struct handoff h;
    memset(&h, 0, sizeof h);
    pthread_mutex_init(&h.mu, NULL);
    pthread_cond_init(&h.cv, NULL);
    int r = jettprof_start(&c, &h.run);
    cr_assert_eq(r, 0, "%s (%s)", jettprof_strerror(r), jettprof_last_reason());
    uint32_t src;
    cr_assert_eq(jettprof_source(h.run, JETTPROF_ORIGIN_PROJECT, "src/app.jett", &src), 0);
    h.f_make = frame(h.run, src, "app", "make", 1);
    h.f_drop = frame(h.run, src, "app", "drop", 9);
    pthread_t a, b;
    cr_assert_eq(pthread_create(&a, NULL, handoff_maker, &h), 0);
    cr_assert_eq(pthread_create(&b, NULL, handoff_dropper, &h), 0);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    struct jettprof_result res = {.size = sizeof res};
    cr_assert_eq(jettprof_finish(h.run, JETTPROF_TERM_RETURNED, &res), 0);
    cr_assert_eq(res.status, JETTPROF_STATUS_COMPLETE, "%s", res.toon);
    uint64_t bytes = 0;
    for (uint32_t i = 0; i < HANDOFF_BLOCKS; i++)
        bytes += 32u + i % 7u;
    char *j = decoded(&res);
    cr_assert_eq(jnum(j, "profile.totals.allocation_count"), HANDOFF_BLOCKS);
    cr_assert_eq(jnum(j, "profile.totals.allocated_bytes"), bytes);
    cr_assert_eq(jnum(j, "profile.totals.freed_bytes"), bytes);
    cr_assert_eq(jnum(j, "profile.totals.retained_bytes"), 0);
    cr_assert_eq(jnum(j, "profile.totals.protocol_violations"), 0);
    cr_assert_eq(jnum(j, "profile.totals.lost_records"), 0);
    cr_assert_eq(jnum(j, "profile.totals.record_count_mismatch"), 0);
    cr_assert_eq(jnum(j, "profile.totals.runtime_threads"), 2);
    free(j);
    jettprof_result_release(&res);
    pthread_mutex_destroy(&h.mu);
    pthread_cond_destroy(&h.cv);
}

/* ---- sixteen workers: rings cost what their events use ---- */

/* This process's shared memory in its page tables, KiB (RssShmem: the rings it has touched). */
static long rss_shmem_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    cr_assert_not_null(f);
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "RssShmem: %ld kB", &kib) == 1)
            break;
    fclose(f);
    cr_assert(kib >= 0, "no RssShmem in /proc/self/status");
    return kib;
}

#define FEW_WORKERS 16u
#define FEW_PAIRS 2000u
struct few {
    jettprof_run *run;
    uint32_t frame, id;
    pthread_barrier_t *registered, *measured;
};

static void *few_worker(void *arg)
{
    struct few *w = arg;
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(w->run, w->id, &t), 0);
    struct jettprof_fast *f = jettprof_thread_fast(t, JETTPROF_FAST_VERSION);
    cr_assert_eq(jettprof_enter(t, w->frame), 0);
    for (uint32_t i = 0; i < FEW_PAIRS; i++) {
        uint64_t id;
        cr_assert_eq(jettprof_alloc_fast(f, 48u, &id), 0);
        cr_assert_eq(jettprof_free_fast(f, id, 48u), 0);
    }
    pthread_barrier_wait(w->registered); /* all sixteen registered and written */
    pthread_barrier_wait(w->measured);
    jettprof_leave(t);
    jettprof_thread_unregister(t);
    return NULL;
}

/* Sixteen registered workers of a memory run, each with its own 16 MiB ring and 4,000 events
 * (125 KiB of records): the rings commit about what the records use. A ring faulted in whole
 * at registration makes this 256 MiB. */
Test(e2e, sixteen_workers_commit_what_their_events_use)
{
    need_daemon();
    struct jettprof_config c = cfg(JETTPROF_MODE_MEMORY);
    jettprof_run *run;
    int r = jettprof_start(&c, &run);
    cr_assert_eq(r, 0, "%s (%s)", jettprof_strerror(r), jettprof_last_reason());
    uint32_t src;
    cr_assert_eq(jettprof_source(run, JETTPROF_ORIGIN_PROJECT, "src/app.jett", &src), 0);
    uint32_t fr = frame(run, src, "app", "work", 3);
    long before = rss_shmem_kib();
    pthread_barrier_t registered, measured;
    pthread_barrier_init(&registered, NULL, FEW_WORKERS + 1u);
    pthread_barrier_init(&measured, NULL, FEW_WORKERS + 1u);
    struct few w[FEW_WORKERS];
    pthread_t th[FEW_WORKERS];
    for (uint32_t i = 0; i < FEW_WORKERS; i++) {
        w[i] = (struct few){run, fr, i + 1u, &registered, &measured};
        cr_assert_eq(pthread_create(&th[i], NULL, few_worker, &w[i]), 0);
    }
    pthread_barrier_wait(&registered);
    long grew = rss_shmem_kib() - before;
    pthread_barrier_wait(&measured);
    for (uint32_t i = 0; i < FEW_WORKERS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&registered);
    pthread_barrier_destroy(&measured);
    /* each ring: its header page, a 64 KiB step and a 128 KiB one (125 KiB of records) */
    cr_assert(grew <= (long)FEW_WORKERS * 256, "sixteen workers' rings commit %ld KiB", grew);
    struct jettprof_result res = {.size = sizeof res};
    cr_assert_eq(jettprof_finish(run, JETTPROF_TERM_RETURNED, &res), 0);
    cr_assert_eq(res.status, JETTPROF_STATUS_COMPLETE, "%s", res.toon);
    char *j = decoded(&res);
    cr_assert_eq(jnum(j, "profile.totals.allocation_count"), FEW_WORKERS * FEW_PAIRS);
    cr_assert_eq(jnum(j, "profile.totals.lost_records"), 0);
    cr_assert_eq(jnum(j, "profile.totals.runtime_threads"), FEW_WORKERS);
    free(j);
    jettprof_result_release(&res);
}

/* ---- CPU: a known share of time in one function ---- */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Spins for `ns` inside the current frame, reaching a safe point every few hundred ns as an
 * interpreter would at each statement. */
static void work(jettprof_thread *t, const uint32_t *pw, uint32_t line, uint64_t ns)
{
    uint64_t end = now_ns() + ns;
    jettprof_stmt(t, line, 5);
    while (now_ns() < end) {
        for (volatile int i = 0; i < 50; i++) {
        }
        jettprof_poll(t, pw);
    }
}

Test(e2e, cpu_share_of_a_known_hot_function)
{
    need_daemon();
    struct jettprof_config c = cfg(JETTPROF_MODE_CPU);
    jettprof_run *run;
    int r = jettprof_start(&c, &run);
    cr_assert_eq(r, 0, "%s (%s)", jettprof_strerror(r), jettprof_last_reason());
    uint32_t src;
    cr_assert_eq(jettprof_source(run, JETTPROF_ORIGIN_PROJECT, "src/cpu.jett", &src), 0);
    uint32_t f_main = frame(run, src, "app", "main", 1);
    uint32_t f_hot = frame(run, src, "app", "hot", 10);
    uint32_t f_cold = frame(run, src, "app", "cold", 30);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    const uint32_t *pw = jettprof_pending_word(t);
    /* 70% of the Jett time in hot (20 ms slices), 30% in cold, then a wait that must not be
     * charged to anyone. Measured by the host's own clock as it goes. */
    uint64_t hot_ns = 0, cold_ns = 0;
    cr_assert_eq(jettprof_enter(t, f_main), 0);
    for (int i = 0; i < 40; i++) {
        uint64_t a = now_ns();
        cr_assert_eq(jettprof_enter(t, f_hot), 0);
        work(t, pw, 11, 14000000);
        jettprof_leave(t);
        uint64_t b = now_ns();
        cr_assert_eq(jettprof_enter(t, f_cold), 0);
        work(t, pw, 31, 6000000);
        jettprof_leave(t);
        uint64_t e = now_ns();
        hot_ns += b - a;
        cold_ns += e - b;
    }
    jettprof_set_state(t, JETTPROF_STATE_WAITING);
    struct timespec ts = {0, 200000000};
    nanosleep(&ts, NULL);
    jettprof_set_state(t, JETTPROF_STATE_JETT);
    jettprof_leave(t);
    jettprof_thread_unregister(t);
    struct jettprof_result res = {.size = sizeof res};
    cr_assert_eq(jettprof_finish(run, JETTPROF_TERM_RETURNED, &res), 0);
    cr_assert_eq(res.status, JETTPROF_STATUS_COMPLETE, "status %u reason %s", res.status,
                 res.reason);
    char *j = decoded(&res);
    uint64_t jett = jnum(j, "profile.totals.attributed_samples");
    uint64_t waiting = jnum(j, "profile.totals.waiting_samples");
    cr_assert_gt(jett, 100, "too few samples to judge (%llu)", (unsigned long long)jett);
    cr_assert_gt(waiting, 10, "the wait was not observed as waiting");
    int h = entry(j, "hot"), m = entry(j, "main"), k = entry(j, "cold");
    cr_assert(h >= 0 && m >= 0 && k >= 0);
    /* main contains every Jett sample; the wait is not in it. */
    cr_assert_eq(efield(j, m, "inclusive_samples"), jett);
    double want = 100.0 * (double)hot_ns / (double)(hot_ns + cold_ns);
    double got = 100.0 * (double)efield(j, h, "inclusive_samples") / (double)jett;
    /* Tolerance: 10 percentage points, for sampling noise and a shared 2-core machine. */
    cr_assert(got > want - 10.0 && got < want + 10.0, "hot: %.1f%% sampled, %.1f%% measured", got,
              want);
    /* hot's time is its own: self within 2 points of inclusive; main is almost all callees. */
    double hself = 100.0 * (double)efield(j, h, "self_samples") / (double)jett;
    cr_assert(got - hself < 2.0, "hot self %.1f%% vs inclusive %.1f%%", hself, got);
    cr_assert_lt(efield(j, m, "self_samples") * 50, jett);
    char pp[64];
    snprintf(pp, sizeof pp, "profile.bottlenecks.%d.cpu_percent", h);
    double pct = jdouble(j, pp);
    cr_assert(pct > want - 10.0 && pct < want + 10.0);
    char *fn0 = t_json_get(j, "profile.bottlenecks.0.function");
    cr_assert_str_eq(fn0, "main", "main is inclusive of everything and ranks first");
    free(fn0);
    free(j);
    jettprof_result_release(&res);
}

/* ---- excerpts ---- */

static int excerpt_cb(void *user, uint32_t source_id, uint32_t line, uint32_t col, char *buf,
                      size_t cap, int *redacted)
{
    int *calls = user;
    (*calls)++;
    cr_assert_geq(cap, 160);
    if (line == 11) {
        int n = snprintf(buf, cap, "total = total + weight(<redacted-literal>)");
        *redacted = 1;
        return n;
    }
    return -ENOENT; /* no safe excerpt for other lines */
}

Test(e2e, hot_line_excerpts_come_from_the_runtime)
{
    need_daemon();
    struct jettprof_config c = cfg(JETTPROF_MODE_CPU);
    int calls = 0;
    c.excerpt = excerpt_cb;
    c.excerpt_user = &calls;
    jettprof_run *run;
    cr_assert_eq(jettprof_start(&c, &run), 0);
    uint32_t src;
    cr_assert_eq(jettprof_source(run, JETTPROF_ORIGIN_PROJECT, "src/x.jett", &src), 0);
    uint32_t f = frame(run, src, "app", "hot", 10);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    const uint32_t *pw = jettprof_pending_word(t);
    cr_assert_eq(jettprof_enter(t, f), 0);
    work(t, pw, 11, 150000000);
    work(t, pw, 12, 50000000);
    jettprof_leave(t);
    jettprof_thread_unregister(t);
    struct jettprof_result res = {.size = sizeof res};
    cr_assert_eq(jettprof_finish(run, JETTPROF_TERM_RETURNED, &res), 0);
    cr_assert_eq(res.status, JETTPROF_STATUS_COMPLETE, "status %u reason %s\n%s", res.status,
                 res.reason, res.toon);
    cr_assert_gt(calls, 0, "the daemon asked for no excerpt");
    cr_assert(strstr(res.toon, "total = total + weight(<redacted-literal>)"), "%s", res.toon);
    char *j = decoded(&res);
    free(j);
    jettprof_result_release(&res);
}

/* ---- failures ---- */

static pid_t only_child(void)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%ld/children", (long)syscall(SYS_gettid));
    FILE *f = fopen(path, "r");
    cr_assert(f != NULL, "cannot read %s", path);
    long pid = -1;
    int n = fscanf(f, "%ld", &pid);
    fclose(f);
    cr_assert_eq(n, 1, "no private daemon found among our children");
    return (pid_t)pid;
}

Test(e2e, daemon_killed_mid_run_gives_collector_failure)
{
    need_daemon();
    struct jettprof_config c = cfg(JETTPROF_MODE_MEMORY);
    c.ring_slots = 1024;
    jettprof_run *run;
    cr_assert_eq(jettprof_start(&c, &run), 0);
    pid_t d = only_child();
    cr_assert_neq(getpgid(d), getpgid(0), "the daemon shares the terminal's process group");
    uint32_t src;
    cr_assert_eq(jettprof_source(run, JETTPROF_ORIGIN_PROJECT, "src/k.jett", &src), 0);
    uint32_t f = frame(run, src, "app", "main", 1);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    cr_assert_eq(jettprof_enter(t, f), 0);
    uint64_t id;
    for (int i = 0; i < 100; i++)
        cr_assert_eq(jettprof_alloc(t, 8, &id), 0);
    cr_assert_eq(kill(d, SIGKILL), 0);
    /* The program runs on: far more events than the ring holds, none of them may hang. */
    uint64_t t0 = now_ns();
    for (int i = 0; i < 200000; i++) {
        int r = jettprof_alloc(t, 8, &id);
        cr_assert(r == 0 || r == -ENOBUFS);
    }
    cr_assert_lt(now_ns() - t0, 5000000000u, "a dead daemon held the program up");
    jettprof_leave(t);
    jettprof_thread_unregister(t);
    struct jettprof_result res = {.size = sizeof res};
    cr_assert_eq(jettprof_finish(run, JETTPROF_TERM_RETURNED, &res), 0);
    cr_assert_eq(res.collector_failed, 1);
    cr_assert_eq(res.status, JETTPROF_STATUS_UNAVAILABLE);
    cr_assert_str_eq(res.reason, "collector_failure");
    char *j = decoded(&res);
    char *st = t_json_get(j, "profile.status");
    cr_assert_str_eq(st, "unavailable");
    free(st);
    char *mode = t_json_get(j, "profile.mode");
    cr_assert_str_eq(mode, "memory");
    free(mode);
    free(j);
    cr_assert(res.human && strstr(res.human, "collector_failure"), "%s", res.human);
    jettprof_result_release(&res);
    /* Our daemon was reaped: no zombie is left behind. */
    cr_assert_eq(waitpid(d, NULL, WNOHANG), -1);
    cr_assert_eq(errno, ECHILD);
}

Test(e2e, spawn_failure_is_a_setup_error)
{
    unsetenv("JETTPROFD_SOCKET");
    setenv("JETTPROFD", "/nonexistent/jettprofd", 1);
    struct jettprof_config c = cfg(JETTPROF_MODE_CPU);
    jettprof_run *run = (jettprof_run *)&c;
    int r = jettprof_start(&c, &run);
    cr_assert_eq(r, -ENOEXEC);
    cr_assert_null(run);
    cr_assert_str_eq(jettprof_strerror(r), "profiler: setup failure: cannot start jettprofd");
    cr_assert_eq(waitpid(-1, NULL, WNOHANG), -1, "a child was left behind");
    cr_assert_eq(errno, ECHILD);
}

Test(e2e, daemon_that_exits_at_once_is_a_handshake_failure)
{
    unsetenv("JETTPROFD_SOCKET");
    setenv("JETTPROFD", "/bin/true", 1);
    struct jettprof_config c = cfg(JETTPROF_MODE_MEMORY);
    jettprof_run *run;
    int r = jettprof_start(&c, &run);
    cr_assert_eq(r, -EPROTO, "got %d", r);
    cr_assert_str_eq(jettprof_strerror(r), "profiler: setup failure: jettprofd handshake failed");
    cr_assert_eq(waitpid(-1, NULL, WNOHANG), -1, "the failed daemon was not reaped");
}

Test(e2e, unreachable_socket_is_a_setup_error)
{
    setenv("JETTPROFD_SOCKET", "/nonexistent/jettprofd.sock", 1);
    struct jettprof_config c = cfg(JETTPROF_MODE_CPU);
    jettprof_run *run;
    int r = jettprof_start(&c, &run);
    cr_assert_eq(r, -ECONNREFUSED);
    cr_assert_str_eq(jettprof_strerror(r), "profiler: setup failure: cannot connect to jettprofd");
}

Test(e2e, absolute_source_path_is_rejected)
{
    need_daemon();
    struct jettprof_config c = cfg(JETTPROF_MODE_MEMORY);
    jettprof_run *run;
    cr_assert_eq(jettprof_start(&c, &run), 0);
    uint32_t id = 0;
    cr_assert_eq(jettprof_source(run, JETTPROF_ORIGIN_PROJECT, "/home/alice/app/src/a.jett", &id),
                 -EINVAL);
    cr_assert_str_eq(jettprof_last_reason(), "source path is absolute");
    cr_assert_eq(jettprof_source(run, JETTPROF_ORIGIN_PROJECT, "src/a.jett", &id), 0);
    uint32_t f = frame(run, id, "app", "main", 1);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    cr_assert_eq(jettprof_enter(t, f), 0);
    uint64_t a;
    cr_assert_eq(jettprof_alloc(t, 64, &a), 0);
    jettprof_leave(t);
    jettprof_thread_unregister(t);
    struct jettprof_result res = {.size = sizeof res};
    cr_assert_eq(jettprof_finish(run, JETTPROF_TERM_RETURNED, &res), 0);
    cr_assert_eq(res.status, JETTPROF_STATUS_COMPLETE);
    cr_assert_null(strstr(res.toon, "/home"), "an absolute path reached the profile");
    cr_assert_null(strstr(res.human, "/home"));
    cr_assert(strstr(res.toon, "src/a.jett"));
    jettprof_result_release(&res);
}

static void capture_run(int capture_fd, rlim_t fsize, struct jettprof_result *res);

/* `jettprofd replay PATH --format toon`: its stdout (malloc'ed); fails the test unless the
 * replay exits 0. */
static char *replay_toon(const char *path)
{
    int p[2];
    cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
    char *argv[] = {(char *)getenv("JETTPROFD"), "replay", (char *)path, "--format", "toon",
                    NULL};
    struct tl_spawn_opts o = TL_SPAWN_OPTS_INIT;
    o.out_fd = p[1];
    pid_t pid = tl_spawn(argv[0], argv, &o);
    close(p[1]);
    cr_assert_gt(pid, 0, "cannot run %s: %s", argv[0], strerror((int)-pid));
    size_t len = 0, cap = 4096;
    char *out = malloc(cap);
    cr_assert_not_null(out);
    for (;;) {
        if (len + 1 == cap) {
            out = realloc(out, cap *= 2);
            cr_assert_not_null(out);
        }
        ssize_t n = read(p[0], out + len, cap - 1 - len);
        if (n < 0 && errno == EINTR)
            continue;
        cr_assert_geq(n, 0);
        if (n == 0)
            break;
        len += (size_t)n;
    }
    out[len] = '\0';
    close(p[0]);
    int st = tl_wait(pid, 30000);
    cr_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "replay failed (%d)", st);
    return out;
}

/* What the capture fd receives is the run's stream: its replay is the live profile. */
Test(e2e, capture_fd_receives_the_stream)
{
    need_daemon();
    char path[] = "/tmp/jp_agent_captureXXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    struct jettprof_result res;
    capture_run(fd, RLIM_INFINITY, &res);
    cr_assert_eq(res.status, JETTPROF_STATUS_COMPLETE, "reason %s", res.reason);
    cr_assert_eq(res.capture_errno, 0);
    char magic[8] = {0};
    cr_assert_eq(pread(fd, magic, sizeof magic, 0), (ssize_t)sizeof magic, "empty capture");
    cr_assert_eq(memcmp(magic, "JPCAPT\r\n", 8), 0);
    close(fd);
    char *replayed = replay_toon(path);
    unlink(path);
    cr_assert_not_null(res.toon);
    cr_expect_str_eq(replayed, res.toon);
    free(replayed);
    jettprof_result_release(&res);
}

/* The lines of a TOON profile that two runs of the same host never share: elapsed time, and
 * time spent waiting for ring room. */
static const char *const timed_keys[] = {"wall_duration_ns:", "producer_wait_ns:", NULL};

static void same_profile(const struct jettprof_result *a, const struct jettprof_result *b)
{
    char *x = tl_without_lines(a->toon, timed_keys), *y = tl_without_lines(b->toon, timed_keys);
    cr_assert(strstr(a->toon, "wall_duration_ns:") && strlen(x) < strlen(a->toon));
    cr_assert_str_eq(x, y);
    free(x);
    free(y);
}

/* A small deterministic memory run with the given capture fd; the result in *res. The
 * soft RLIMIT_FSIZE in force at start is the private daemon's (it inherits it). */
static void capture_run(int capture_fd, rlim_t fsize, struct jettprof_result *res)
{
    struct jettprof_config c = cfg(JETTPROF_MODE_MEMORY);
    c.capture_fd = capture_fd;
    c.ring_slots = 1024; /* 32 KiB: the ring's memfd must fit under the file size limit */
    struct rlimit old, lim;
    cr_assert_eq(getrlimit(RLIMIT_FSIZE, &old), 0);
    lim = old;
    lim.rlim_cur = fsize < old.rlim_max ? fsize : old.rlim_max; /* the soft limit only */
    signal(SIGXFSZ, SIG_IGN); /* a write past the limit fails with EFBIG instead */
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    jettprof_run *run;
    int r = jettprof_start(&c, &run);
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &old), 0);
    cr_assert_eq(r, 0, "%s", jettprof_last_reason());
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    uint32_t src;
    cr_assert_eq(jettprof_source(run, JETTPROF_ORIGIN_PROJECT, "src/a.jett", &src), 0);
    for (uint32_t f = 0; f < 50; f++) {
        char fn[16];
        snprintf(fn, sizeof fn, "f%u", f);
        cr_assert_eq(jettprof_enter(t, frame(run, src, "app", fn, 10 + f)), 0);
        /* sizes scattered (a multiplicative hash), so the capture packed by column stays
         * well over the 40 KiB limit below */
        for (uint64_t i = 0; i < 1200; i++) {
            uint64_t id, size = 16 + (i * 2654435761u + f * 40503u) % 3000;
            cr_assert_eq(jettprof_alloc(t, size, &id), 0);
            if (i % 3 == 0)
                cr_assert_eq(jettprof_free(t, id, size), 0);
        }
        jettprof_leave(t);
    }
    jettprof_thread_unregister(t);
    res->size = sizeof *res;
    cr_assert_eq(jettprof_finish(run, JETTPROF_TERM_RETURNED, res), 0);
}

/* A capture that cannot be written loses the capture, never the profile: the run's profile is
 * the one it gets without a capture, and the result says why the capture failed. */
Test(e2e, a_failed_capture_keeps_the_live_profile_and_reports_its_errno)
{
    need_daemon();
    struct jettprof_result plain, full, big;
    capture_run(-1, RLIM_INFINITY, &plain);
    cr_assert_eq(plain.status, JETTPROF_STATUS_COMPLETE, "reason %s", plain.reason);
    cr_assert_eq(plain.capture_errno, 0);

    int fd = open("/dev/full", O_WRONLY | O_CLOEXEC);
    cr_assert_geq(fd, 0);
    capture_run(fd, RLIM_INFINITY, &full);
    close(fd);
    cr_assert_eq(full.collector_failed, 0, "reason %s", full.reason);
    cr_assert_eq(full.status, JETTPROF_STATUS_COMPLETE, "reason %s", full.reason);
    cr_assert_eq(full.capture_errno, EINVAL, "not a regular file: %d", full.capture_errno);
    same_profile(&full, &plain);

    /* A regular file whose writes fail part way (the daemon's file size limit): EFBIG. */
    char path[] = "/tmp/jp_agent_captureXXXXXX";
    fd = mkstemp(path);
    cr_assert(fd >= 0);
    unlink(path);
    capture_run(fd, 40 * 1024, &big); /* the capture of 80000 events: over 40 KiB packed */
    close(fd);
    cr_assert_eq(big.collector_failed, 0, "reason %s", big.reason);
    cr_assert_eq(big.status, JETTPROF_STATUS_COMPLETE, "reason %s", big.reason);
    cr_assert_eq(big.capture_errno, EFBIG, "capture errno %d", big.capture_errno);
    same_profile(&big, &plain);
    jettprof_result_release(&plain);
    jettprof_result_release(&full);
    jettprof_result_release(&big);
}

Test(e2e, finish_rejects_bad_arguments_and_keeps_the_run)
{
    need_daemon();
    struct jettprof_config c = cfg(JETTPROF_MODE_MEMORY);
    jettprof_run *run;
    cr_assert_eq(jettprof_start(&c, &run), 0);
    struct jettprof_result res = {.size = 8};
    cr_assert_eq(jettprof_finish(run, JETTPROF_TERM_RETURNED, &res), -EINVAL);
    res.size = sizeof res;
    cr_assert_eq(jettprof_finish(run, 0, &res), -EINVAL);
    cr_assert_eq(jettprof_finish(run, JETTPROF_TERM_INTERRUPTED, &res), 0);
    cr_assert_neq(res.status, 0);
    jettprof_result_release(&res);
}

/* ---- a long-lived daemon ---- */

/* `jettprofd serve` on dir/d.sock (dir: a mkdtemp template); returns once the socket exists. */
/* jettprofd serve on a socket in dir (a mkdtemp template), with --max-run-ring-bytes run_cap
 * when it is not NULL. */
static pid_t spawn_serve_capped(char *dir, char *sock, size_t cap, const char *run_cap)
{
    cr_assert_not_null(mkdtemp(dir));
    snprintf(sock, cap, "%s/d.sock", dir);
    char *argv[] = {(char *)"jettprofd", (char *)"serve", (char *)"--socket", sock,
                    run_cap ? (char *)"--max-run-ring-bytes" : NULL, (char *)run_cap, NULL};
    pid_t d = tl_spawn(getenv("JETTPROFD"), argv, NULL); /* dies with this test */
    cr_assert_gt(d, 0, "jettprofd serve: %s", strerror((int)-d));
    struct stat st;
    for (int i = 0; i < 200 && stat(sock, &st) != 0; i++)
        usleep(10000);
    cr_assert_eq(stat(sock, &st), 0, "jettprofd serve did not create its socket");
    return d;
}

static pid_t spawn_serve(char *dir, char *sock, size_t cap)
{
    return spawn_serve_capped(dir, sock, cap, NULL);
}

/* One allocation in a memory run, finished into *res (whose size the caller set). */
static void small_run(struct jettprof_result *res)
{
    struct jettprof_config c = cfg(JETTPROF_MODE_MEMORY);
    jettprof_run *run;
    cr_assert_eq(jettprof_start(&c, &run), 0, "%s", jettprof_last_reason());
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    uint32_t src;
    cr_assert_eq(jettprof_source(run, JETTPROF_ORIGIN_PROJECT, "src/a.jett", &src), 0);
    cr_assert_eq(jettprof_enter(t, frame(run, src, "app", "main", 1)), 0);
    uint64_t id;
    cr_assert_eq(jettprof_alloc(t, 64, &id), 0);
    jettprof_leave(t);
    jettprof_thread_unregister(t);
    cr_assert_eq(jettprof_finish(run, JETTPROF_TERM_RETURNED, res), 0);
}

/* A served run, also with the run id: it comes back in the result and the human text names it;
 * a caller compiled before run_id existed passes the smaller size and is served without the
 * field being touched. */
Test(e2e, attaches_to_a_long_lived_daemon)
{
    need_daemon();
    char dir[] = "/tmp/jp_agent_serveXXXXXX";
    char sock[128];
    pid_t d = spawn_serve(dir, sock, sizeof sock);
    setenv("JETTPROFD_SOCKET", sock, 1);
    struct jettprof_result res;
    struct mem_model tot, build, cache;
    memory_host(&res, &tot, &build, &cache);
    cr_assert_eq(res.status, JETTPROF_STATUS_COMPLETE, "status %u reason %s", res.status,
                 res.reason);
    char *j = decoded(&res);
    cr_assert_eq(jnum(j, "profile.totals.allocated_bytes"), tot.allocated);
    cr_assert_eq(jnum(j, "profile.totals.retained_bytes"), tot.live);
    free(j);
    cr_assert_gt(res.run_id, 0);
    char want[64];
    snprintf(want, sizeof want, "\nrun id: %llu\n", (unsigned long long)res.run_id);
    cr_assert(res.human && strstr(res.human, want), "%s", res.human ? res.human : "");
    jettprof_result_release(&res);
    cr_assert_eq(res.run_id, 0, "release clears what the size covers");
    struct jettprof_result old;
    memset(&old, 0xa5, sizeof old);
    old.size = (uint32_t)offsetof(struct jettprof_result, run_id);
    small_run(&old);
    cr_assert_eq(old.status, JETTPROF_STATUS_COMPLETE, "%s", old.reason);
    cr_assert(old.human && strstr(old.human, "\nrun id: "), "%s", old.human ? old.human : "");
    jettprof_result_release(&old);
    cr_assert_eq(old.run_id, UINT64_C(0xa5a5a5a5a5a5a5a5), "a field past the size was written");
    kill(d, SIGTERM);
    int status;
    cr_assert_eq(waitpid(d, &status, 0), d);
    unlink(sock);
    rmdir(dir);
}

/* SIGTERM on `jettprofd serve` with this run in flight: the daemon delivers it as a partial
 * `interrupted` profile before it exits, and the host gets that profile from finish, not a
 * collector failure. */
Test(e2e, sigterm_on_serve_delivers_the_run_in_flight_interrupted)
{
    need_daemon();
    char dir[] = "/tmp/jp_agent_serveXXXXXX";
    char sock[128];
    pid_t d = spawn_serve(dir, sock, sizeof sock);
    setenv("JETTPROFD_SOCKET", sock, 1);
    struct jettprof_config c = cfg(JETTPROF_MODE_MEMORY);
    jettprof_run *run;
    cr_assert_eq(jettprof_start(&c, &run), 0, "%s", jettprof_last_reason());
    unsetenv("JETTPROFD_SOCKET");
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    uint32_t src;
    cr_assert_eq(jettprof_source(run, JETTPROF_ORIGIN_PROJECT, "src/a.jett", &src), 0);
    cr_assert_eq(jettprof_enter(t, frame(run, src, "app", "build", 3)), 0);
    for (int i = 0; i < 100; i++) {
        uint64_t id;
        cr_assert_eq(jettprof_alloc(t, 64, &id), 0);
    }
    /* Give the daemon's drain timer a few turns so the allocations are consumed. */
    usleep(200000);
    kill(d, SIGTERM);
    int status;
    cr_assert_eq(waitpid(d, &status, 0), d);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "daemon exit %d", status);
    uint64_t id;
    (void)jettprof_alloc(t, 64, &id); /* after the daemon left: not in the profile */
    jettprof_leave(t);
    jettprof_thread_unregister(t);
    struct jettprof_result res = {.size = sizeof res};
    cr_assert_eq(jettprof_finish(run, JETTPROF_TERM_RETURNED, &res), 0);
    cr_assert_eq(res.collector_failed, 0, "reason %s", res.reason);
    cr_assert_eq(res.status, JETTPROF_STATUS_PARTIAL, "status %u reason %s", res.status,
                 res.reason);
    cr_assert_str_eq(res.reason, "interrupted");
    char *j = decoded(&res);
    cr_assert_eq(jnum(j, "profile.totals.allocation_count"), 100, "%s", res.toon);
    free(j);
    jettprof_result_release(&res);
    rmdir(dir);
}

Test(e2e, a_silent_daemon_times_out_the_handshake)
{
    /* A peer that accepts connections (the kernel's backlog) and never answers. */
    char dir[] = "/tmp/jp_agent_silentXXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof sa.sun_path, "%s/s.sock", dir);
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    cr_assert_eq(bind(l, (struct sockaddr *)&sa, sizeof sa), 0);
    cr_assert_eq(listen(l, 4), 0);
    setenv("JETTPROFD_SOCKET", sa.sun_path, 1);
    struct jettprof_config c = cfg(JETTPROF_MODE_CPU);
    jettprof_run *run;
    uint64_t t0 = now_ns();
    int r = jettprof_start(&c, &run);
    uint64_t spent = now_ns() - t0;
    cr_assert_eq(r, -ETIMEDOUT);
    cr_assert_str_eq(jettprof_strerror(r), "profiler: setup failure: jettprofd did not answer");
    cr_assert(spent >= 4000000000u && spent < 8000000000u, "waited %.1f s",
              (double)spent / 1e9);
    close(l);
    unlink(sa.sun_path);
    rmdir(dir);
}

/* ---- hostile peers at the handshake ---- */

struct peer {
    int listen_fd;
    char path[108];
    const uint8_t *reply;   /* written after the first message (the HELLO) */
    size_t reply_len;
    const uint8_t *reply2;  /* if set: written after the second (the RING), then close */
    size_t reply2_len;
    pthread_t th;
};

/* Reads one message's worth (the agent's frames are small), closing any passed fds. */
static void peer_read(int c)
{
    char buf[4096];
    union {
        struct cmsghdr align;
        char b[CMSG_SPACE(sizeof(int) * 4)];
    } ctl;
    struct iovec iov = {buf, sizeof buf};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b,
                        .msg_controllen = sizeof ctl.b};
    if (recvmsg(c, &mh, 0) <= 0)
        return;
    for (struct cmsghdr *h = CMSG_FIRSTHDR(&mh); h; h = CMSG_NXTHDR(&mh, h)) {
        if (h->cmsg_level == SOL_SOCKET && h->cmsg_type == SCM_RIGHTS) {
            int fds[4];
            size_t n = (h->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            memcpy(fds, CMSG_DATA(h), n * sizeof(int));
            for (size_t i = 0; i < n; i++)
                close(fds[i]);
        }
    }
}

static void *peer_main(void *arg)
{
    struct peer *p = arg;
    int c = accept(p->listen_fd, NULL, NULL);
    if (c < 0)
        return NULL;
    peer_read(c); /* the HELLO */
    (void)write(c, p->reply, p->reply_len);
    if (p->reply2) {
        peer_read(c); /* the RING */
        (void)write(c, p->reply2, p->reply2_len);
    }
    usleep(100000);
    close(c);
    return NULL;
}

static void peer_start(struct peer *p, const uint8_t *reply, size_t len)
{
    snprintf(p->path, sizeof p->path, "/tmp/jp_agent_peer_%d.sock", (int)getpid());
    unlink(p->path);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, p->path, strlen(p->path) + 1);
    p->listen_fd = socket(AF_UNIX, SOCK_STREAM, 0);
    cr_assert_eq(bind(p->listen_fd, (struct sockaddr *)&sa, sizeof sa), 0);
    cr_assert_eq(listen(p->listen_fd, 1), 0);
    p->reply = reply;
    p->reply_len = len;
    p->reply2 = NULL;
    cr_assert_eq(pthread_create(&p->th, NULL, peer_main, p), 0);
    setenv("JETTPROFD_SOCKET", p->path, 1);
}

static void peer_stop(struct peer *p)
{
    pthread_join(p->th, NULL);
    close(p->listen_fd);
    unlink(p->path);
}

Test(e2e, a_refusing_daemon_is_a_setup_error)
{
    struct jp_ctl_msg m = {.type = JP_CTL_ERROR};
    m.u.error.code = JP_CTLE_TOO_MANY_RUNS;
    m.u.error.message = "too many runs";
    m.u.error.message_len = strlen(m.u.error.message);
    uint8_t *frame;
    size_t len;
    cr_assert_eq(jp_ctl_encode(&m, &frame, &len), 0);
    struct peer p;
    peer_start(&p, frame, len);
    struct jettprof_config c = cfg(JETTPROF_MODE_MEMORY);
    jettprof_run *run;
    int r = jettprof_start(&c, &run);
    peer_stop(&p);
    free(frame);
    cr_assert_eq(r, -ECONNABORTED);
    cr_assert_str_eq(jettprof_strerror(r), "profiler: setup failure: jettprofd refused the run");
}

Test(e2e, a_garbling_daemon_is_a_setup_error)
{
    /* A well-framed reply (a little-endian length of 5, well under the frame limit, and
     * those 5 bytes) whose body is no msgpack: 0xc1 is the one byte msgpack never uses. */
    static const uint8_t junk[] = {0x05, 0x00, 0x00, 0x00, 0xc1, 0xc1, 0xc1, 0xc1, 0xc1};
    struct peer p;
    peer_start(&p, junk, sizeof junk);
    struct jettprof_config c = cfg(JETTPROF_MODE_MEMORY);
    jettprof_run *run;
    int r = jettprof_start(&c, &run);
    peer_stop(&p);
    cr_assert_eq(r, -EPROTO);
    cr_assert_str_eq(jettprof_strerror(r), "profiler: setup failure: jettprofd handshake failed");
    /* refused by the decoder, for what the frame holds */
    const char *why = jettprof_last_reason();
    cr_expect(strstr(why, "bad answer to the hello: invalid msgpack byte"), "%s", why);
}

Test(e2e, an_oversized_frame_is_refused_before_allocation)
{
    /* A length prefix of 4 GiB - 1: refused on the header alone. */
    static const uint8_t huge[] = {0xff, 0xff, 0xff, 0xff};
    struct peer p;
    peer_start(&p, huge, sizeof huge);
    struct jettprof_config c = cfg(JETTPROF_MODE_MEMORY);
    jettprof_run *run;
    int r = jettprof_start(&c, &run);
    peer_stop(&p);
    cr_assert_eq(r, -EPROTO);
}

Test(e2e, a_daemon_error_mid_run_is_a_collector_failure)
{
    struct jp_ctl_msg w = {.type = JP_CTL_WELCOME};
    w.u.welcome.run_id = 7;
    struct jp_ctl_msg e = {.type = JP_CTL_ERROR};
    e.u.error.code = JP_CTLE_PROTOCOL_VIOLATION;
    e.u.error.message = "bad record";
    e.u.error.message_len = strlen(e.u.error.message);
    uint8_t *wf, *ef;
    size_t wl, el;
    cr_assert_eq(jp_ctl_encode(&w, &wf, &wl), 0);
    cr_assert_eq(jp_ctl_encode(&e, &ef, &el), 0);
    struct peer p;
    snprintf(p.path, sizeof p.path, "/tmp/jp_agent_peer_%d.sock", (int)getpid());
    unlink(p.path);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    memcpy(sa.sun_path, p.path, strlen(p.path) + 1);
    p.listen_fd = socket(AF_UNIX, SOCK_STREAM, 0);
    cr_assert_eq(bind(p.listen_fd, (struct sockaddr *)&sa, sizeof sa), 0);
    cr_assert_eq(listen(p.listen_fd, 1), 0);
    p.reply = wf;
    p.reply_len = wl;
    p.reply2 = ef;
    p.reply2_len = el;
    cr_assert_eq(pthread_create(&p.th, NULL, peer_main, &p), 0);
    setenv("JETTPROFD_SOCKET", p.path, 1);

    struct jettprof_config c = cfg(JETTPROF_MODE_MEMORY);
    c.ring_slots = 256;
    jettprof_run *run;
    cr_assert_eq(jettprof_start(&c, &run), 0, "%s", jettprof_last_reason());
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    usleep(200000); /* the peer has sent its ERROR and closed */
    uint64_t t0 = now_ns();
    for (int i = 0; i < 10000; i++) {
        uint64_t id;
        int r = jettprof_alloc(t, 8, &id);
        cr_assert(r == 0 || r == -ENOBUFS);
    }
    cr_assert_lt(now_ns() - t0, 3000000000u, "a failed daemon held the program up");
    jettprof_thread_unregister(t);
    struct jettprof_result res = {.size = sizeof res};
    cr_assert_eq(jettprof_finish(run, JETTPROF_TERM_RETURNED, &res), 0);
    cr_assert_eq(res.collector_failed, 1);
    cr_assert_eq(res.status, JETTPROF_STATUS_UNAVAILABLE);
    cr_assert_str_eq(res.reason, "collector_failure");
    jettprof_result_release(&res);
    peer_stop(&p);
    free(wf);
    free(ef);
}

/* ---- a real threaded program: blocks handed between 100 threads ---- */

/* 100 threads (more than the run's 64 slots and worker rings: they take turns, a thread that
 * registers reusing the ring of one that left) register at staggered times while the others
 * run, allocate blocks of a few sizes, and hand them to each other through one queue: a block is allocated on one thread, resized (often back
 * to a size it had before) on whichever thread takes it next, handed on again or freed there.
 * The threads end at staggered times; the blocks left in the queue are what the run retains.
 * Each thread keeps its own model of what it did; the profile must equal their sum exactly,
 * with no violation, whatever interleaving the machine chose, and its capture must replay to
 * the same bytes. The runtime declares resize sequences: a block's size does come back. */
#define HT_THREADS 100u
#define HT_QCAP 512u

struct ht_block {
    uint64_t id, size, seq;
};
/* A run holds at most 64 registered threads at once (the agent's slots, as many as its
 * worker rings): the 100 take turns, at most HT_AT_ONCE registered at a time, each waiting
 * for a slot while the others run. */
#define HT_AT_ONCE 60u
struct ht_shared {
    jettprof_run *run;
    uint32_t f_make, f_pass;
    pthread_mutex_t mu;
    pthread_cond_t slot_free;   /* under mu: `registered` fell */
    uint32_t registered;        /* under mu */
    struct ht_block q[HT_QCAP]; /* under mu: a FIFO of n blocks from head */
    uint32_t head, n;
};
struct ht_thread {
    struct ht_shared *sh;
    uint32_t index;
    pthread_t th;
    struct mem_model m;
};

static const uint64_t ht_sizes[4] = {16, 48, 32, 64};

static void *ht_main(void *arg)
{
    struct ht_thread *me = arg;
    struct ht_shared *sh = me->sh;
    usleep(200u * me->index); /* registrations arrive while the first threads already run */
    pthread_mutex_lock(&sh->mu);
    while (sh->registered == HT_AT_ONCE)
        pthread_cond_wait(&sh->slot_free, &sh->mu);
    sh->registered++;
    pthread_mutex_unlock(&sh->mu);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(sh->run, me->index + 1u, &t), 0, "%s",
                 jettprof_last_reason());
    struct jettprof_fast *f = jettprof_thread_fast(t, JETTPROF_FAST_VERSION);
    cr_assert_not_null(f);
    uint64_t rng = 0x9e3779b97f4a7c15u * (me->index + 1u);
    uint32_t rounds = 40u + (me->index % 10u) * 30u; /* the threads end at staggered times */
    for (uint32_t r = 0; r < rounds; r++) {
        rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
        struct ht_block b;
        int have = 0;
        pthread_mutex_lock(&sh->mu);
        if (sh->n && rng % 3u) {
            b = sh->q[sh->head];
            sh->head = (sh->head + 1u) % HT_QCAP;
            sh->n--;
            have = 1;
        }
        pthread_mutex_unlock(&sh->mu);
        if (!have) {
            b.size = ht_sizes[rng % 4u];
            b.seq = 0;
            cr_assert_eq(jettprof_enter(t, sh->f_make), 0);
            cr_assert_eq(jettprof_alloc_fast(f, b.size, &b.id), 0);
            jettprof_leave(t);
            m_alloc(&me->m, b.size);
        } else {
            /* taken from another thread (or this one): resize it, then pass it on or free it */
            uint64_t to = ht_sizes[(rng >> 8) % 4u];
            cr_assert_eq(jettprof_enter(t, sh->f_pass), 0);
            if (to != b.size) {
                cr_assert_eq(jettprof_resize_seq_fast(f, b.id, b.seq, b.size, to), 0);
                m_resize(&me->m, b.size, to);
                b.size = to;
                b.seq++;
            }
            int drop = (rng >> 16) % 4u == 0;
            if (drop) {
                cr_assert_eq(jettprof_free_seq_fast(f, b.id, b.seq, b.size), 0);
                m_free(&me->m, b.size);
            }
            jettprof_leave(t);
            if (drop)
                continue;
        }
        pthread_mutex_lock(&sh->mu);
        int full = sh->n == HT_QCAP;
        if (!full) {
            sh->q[(sh->head + sh->n) % HT_QCAP] = b;
            sh->n++;
        }
        pthread_mutex_unlock(&sh->mu);
        if (full) {
            cr_assert_eq(jettprof_free_seq_fast(f, b.id, b.seq, b.size), 0);
            m_free(&me->m, b.size);
        }
    }
    jettprof_thread_unregister(t);
    pthread_mutex_lock(&sh->mu);
    sh->registered--;
    pthread_cond_signal(&sh->slot_free);
    pthread_mutex_unlock(&sh->mu);
    return NULL;
}

/* Two processes that spin for the test's length: the run shares the machine. */
static void hogs_start(pid_t hog[2])
{
    for (int i = 0; i < 2; i++) {
        hog[i] = tl_fork();
        cr_assert_geq(hog[i], 0);
        if (hog[i] == 0)
            for (volatile uint64_t x = 0;; x++) {
            }
    }
}

static void hogs_stop(pid_t hog[2])
{
    for (int i = 0; i < 2; i++) {
        kill(hog[i], SIGKILL);
        tl_wait(hog[i], 10000);
    }
}

/* One run of the program with worker rings of ring_slots slots (0: the default), through the
 * daemon the environment names; checks the profile and that its capture replays to it. */
static void handoff_run(uint32_t ring_slots)
{
    char path[] = "/tmp/jp_agent_handoffXXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    struct jettprof_config c = cfg(JETTPROF_MODE_MEMORY);
    c.capabilities |= JETTPROF_CAP_RESIZE_SEQUENCE;
    c.ring_slots = ring_slots;
    c.capture_fd = fd;
    static struct ht_shared sh;
    static struct ht_thread th[HT_THREADS];
    memset(&sh, 0, sizeof sh);
    pthread_mutex_init(&sh.mu, NULL);
    pthread_cond_init(&sh.slot_free, NULL);
    int r = jettprof_start(&c, &sh.run);
    cr_assert_eq(r, 0, "%s (%s)", jettprof_strerror(r), jettprof_last_reason());
    uint32_t src;
    cr_assert_eq(jettprof_source(sh.run, JETTPROF_ORIGIN_PROJECT, "src/queue.jett", &src), 0);
    sh.f_make = frame(sh.run, src, "queue", "make", 3);
    sh.f_pass = frame(sh.run, src, "queue", "pass", 12);
    for (uint32_t i = 0; i < HT_THREADS; i++) {
        th[i] = (struct ht_thread){.sh = &sh, .index = i};
        cr_assert_eq(pthread_create(&th[i].th, NULL, ht_main, &th[i]), 0);
    }
    struct mem_model tot = {0};
    for (uint32_t i = 0; i < HT_THREADS; i++) {
        pthread_join(th[i].th, NULL);
        tot.count += th[i].m.count;
        tot.resizes += th[i].m.resizes;
        tot.allocated += th[i].m.allocated;
        tot.freed += th[i].m.freed;
    }
    uint64_t retained = 0;
    for (uint32_t k = 0; k < sh.n; k++)
        retained += sh.q[(sh.head + k) % HT_QCAP].size;
    cr_assert_eq(tot.allocated - tot.freed, retained, "the model itself is consistent");
    struct jettprof_result res = {.size = sizeof res};
    cr_assert_eq(jettprof_finish(sh.run, JETTPROF_TERM_RETURNED, &res), 0);
    pthread_mutex_destroy(&sh.mu);
    pthread_cond_destroy(&sh.slot_free);
    close(fd);
    char *j = decoded(&res);
    cr_assert_eq(jnum(j, "profile.totals.protocol_violations"), 0, "%s", res.toon);
    cr_assert_eq(jnum(j, "profile.totals.lost_records"), 0);
    cr_assert_eq(jnum(j, "profile.totals.record_count_mismatch"), 0, "%s", res.toon);
    cr_assert_eq(jnum(j, "profile.totals.allocation_count"), tot.count, "%s", res.toon);
    cr_assert_eq(jnum(j, "profile.totals.resize_count"), tot.resizes, "%s", res.toon);
    cr_assert_eq(jnum(j, "profile.totals.allocated_bytes"), tot.allocated, "%s", res.toon);
    cr_assert_eq(jnum(j, "profile.totals.freed_bytes"), tot.freed, "%s", res.toon);
    cr_assert_eq(jnum(j, "profile.totals.retained_bytes"), retained, "%s", res.toon);
    cr_assert_eq(res.status, JETTPROF_STATUS_COMPLETE, "%s: %s", res.reason, res.toon);
    free(j);
    char *replayed = replay_toon(path);
    unlink(path);
    cr_expect_str_eq(replayed, res.toon, "the capture replays to other bytes");
    free(replayed);
    jettprof_result_release(&res);
}

/* How many runs of each configuration: JETT_TEST_HANDOFF_RUNS, else 2. */
static unsigned handoff_runs(void)
{
    const char *e = getenv("JETT_TEST_HANDOFF_RUNS");
    unsigned n = e ? (unsigned)strtoul(e, NULL, 10) : 0;
    return n ? n : 2u;
}

Test(e2e, a_hundred_threads_handing_blocks_around_are_exact_on_a_private_daemon,
     .timeout = 600)
{
    need_daemon();
    pid_t hog[2];
    hogs_start(hog);
    for (unsigned i = 0; i < handoff_runs(); i++) {
        handoff_run(8192);
        handoff_run(0);
    }
    hogs_stop(hog);
}

/* The serving daemon's --max-run-ring-bytes (20 MiB) holds a main ring and 64 worker rings of
 * 8192 slots, but beside the default 16 MiB main ring no 16 MiB worker ring: there every thread
 * shares the main ring. */
Test(e2e, a_hundred_threads_handing_blocks_around_are_exact_on_a_serving_daemon,
     .timeout = 600)
{
    need_daemon();
    char dir[] = "/tmp/jp_agent_serveXXXXXX";
    char sock[128];
    pid_t d = spawn_serve_capped(dir, sock, sizeof sock, "20971520");
    setenv("JETTPROFD_SOCKET", sock, 1);
    pid_t hog[2];
    hogs_start(hog);
    for (unsigned i = 0; i < handoff_runs(); i++) {
        handoff_run(8192);
        handoff_run(0);
    }
    hogs_stop(hog);
    unsetenv("JETTPROFD_SOCKET");
    kill(d, SIGTERM);
    int status;
    cr_assert_eq(waitpid(d, &status, 0), d);
    unlink(sock);
    rmdir(dir);
}
