/* The timer path allocates nothing, and neither do the hot-path calls once their call-chain
 * nodes exist. Allocations are counted by interposing malloc and friends (plain builds) or
 * through the sanitizer allocator hooks (ASan/TSan builds, whose runtime owns malloc). A
 * positive control proves the counter sees allocations before any zero is believed. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "stream.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define USE_SANITIZER_HOOKS 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define USE_SANITIZER_HOOKS 1
#endif
#endif

static pthread_t main_thread;
static int count_main;    /* 1: the main thread's allocations count too */
static int counting;      /* 0 off, 1 on */
static unsigned long allocs;

static void note(void)
{
    if (!__atomic_load_n(&counting, __ATOMIC_RELAXED))
        return;
    if (!__atomic_load_n(&count_main, __ATOMIC_RELAXED) && pthread_equal(pthread_self(), main_thread))
        return;
    __atomic_add_fetch(&allocs, 1, __ATOMIC_RELAXED);
}

#ifdef USE_SANITIZER_HOOKS
/* From the sanitizer runtime (declared here: gcc does not install its header). */
int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void *, size_t),
                                              void (*free_hook)(const volatile void *));
static void on_malloc(const volatile void *p, size_t n)
{
    (void)p;
    (void)n;
    note();
}
static void on_free(const volatile void *p)
{
    (void)p;
}
static void hooks_init(void)
{
    __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
}
#else
/* glibc's real allocator entry points, which the interposed functions forward to. */
extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

void *malloc(size_t n);
void *calloc(size_t a, size_t b);
void *realloc(void *p, size_t n);
void free(void *p);
void *aligned_alloc(size_t al, size_t n);
int posix_memalign(void **out, size_t al, size_t n);
void *memalign(size_t al, size_t n);

void *malloc(size_t n)
{
    note();
    return __libc_malloc(n);
}
void *calloc(size_t a, size_t b)
{
    note();
    return __libc_calloc(a, b);
}
void *realloc(void *p, size_t n)
{
    note();
    return __libc_realloc(p, n);
}
void free(void *p)
{
    __libc_free(p);
}
void *aligned_alloc(size_t al, size_t n)
{
    note();
    return __libc_memalign(al, n);
}
void *memalign(size_t al, size_t n)
{
    note();
    return __libc_memalign(al, n);
}
int posix_memalign(void **out, size_t al, size_t n)
{
    note();
    void *p = __libc_memalign(al, n);
    if (!p)
        return 12; /* ENOMEM */
    *out = p;
    return 0;
}
static void hooks_init(void)
{
}
#endif

static void *allocate_once(void *arg)
{
    (void)arg;
    void *volatile p = malloc(24);
    free(p);
    return NULL;
}

static void start_counting(int with_main)
{
    __atomic_store_n(&allocs, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&count_main, with_main, __ATOMIC_RELAXED);
    __atomic_store_n(&counting, 1, __ATOMIC_SEQ_CST);
}

static unsigned long stop_counting(void)
{
    __atomic_store_n(&counting, 0, __ATOMIC_SEQ_CST);
    return __atomic_load_n(&allocs, __ATOMIC_RELAXED);
}

static void setup(void)
{
    main_thread = pthread_self();
    hooks_init();
}

Test(noalloc, the_counter_sees_other_threads_allocations, .init = setup)
{
    pthread_t th;
    start_counting(0);
    pthread_create(&th, NULL, allocate_once, NULL);
    pthread_join(th, NULL);
    unsigned long n = stop_counting();
    cr_assert_geq(n, 1, "the interposed counter missed an allocation: the test would be blind");
}

Test(noalloc, timer_ticks_allocate_nothing, .init = setup)
{
    struct jettprof_config c = ta_config(JETTPROF_MODE_CPU);
    c.ring_slots = 1u << 16;
    jettprof_run *run;
    cr_assert_eq(jp_agent_start_local(&c, 1, &run), 0);
    struct stream s;
    ta_stream_open(&s, run);
    uint32_t f = ta_frame(run, "m", "f", 1);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    /* Warm up: the first ticks are behind us before counting starts. */
    while (jp_load_relaxed64(&run->tick_no) < 3)
        sched_yield();
    uint64_t ticks0 = jp_load_relaxed64(&run->tick_no);
    start_counting(0);
    /* Only the timer thread runs besides us; we do no allocating work while counting, and
     * leave ticks unanswered at first so they coalesce (that path too). */
    struct timespec ts = {0, 50000000};
    nanosleep(&ts, NULL);
    uint64_t end = jp_mono_ns() + 150000000u;
    jettprof_enter(t, f); /* interns the node while the main thread is not counted */
    while (jp_mono_ns() < end)
        jettprof_safe_point(t);
    unsigned long n = stop_counting();
    uint64_t ticks = jp_load_relaxed64(&run->tick_no) - ticks0;
    jettprof_leave(t);
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    ta_stream_drain(&s);
    cr_assert_gt(ticks, 5, "the timer barely ran (%llu ticks)", (unsigned long long)ticks);
    cr_assert_eq(n, 0, "the timer thread allocated %lu times over %llu ticks", n,
                 (unsigned long long)ticks);
    const struct jp_rec_counters *k = ta_stream_last(&s, JP_REC_COUNTERS);
    cr_assert_gt(k->coalesced_ticks, 0, "the coalescing path was not exercised");
    cr_assert_gt(ta_stream_count(&s, JP_REC_CPU_SAMPLE), 0);
    ta_stream_free(&s);
}

Test(noalloc, hot_paths_allocate_nothing_once_nodes_exist, .init = setup)
{
    struct jettprof_config c = ta_config(JETTPROF_MODE_MEMORY);
    c.ring_slots = 1u << 16;
    jettprof_run *run;
    cr_assert_eq(jp_agent_start_local(&c, 0, &run), 0);
    struct stream s;
    ta_stream_open(&s, run);
    uint32_t fa = ta_frame(run, "m", "a", 1), fb = ta_frame(run, "m", "b", 2);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    const uint32_t *pw = jettprof_pending_word(t);
    cr_assert_eq(jettprof_enter(t, fa), 0);
    cr_assert_eq(jettprof_enter(t, fb), 0);
    jettprof_leave(t);
    start_counting(1);
    for (int i = 0; i < 5000; i++) {
        jettprof_enter(t, fb);
        jettprof_stmt(t, 3, 4);
        jettprof_poll(t, pw);
        uint64_t id;
        jettprof_alloc(t, 16, &id);
        jettprof_resize(t, id, 16, 32);
        jettprof_free(t, id, 32);
        jettprof_set_task(t, (uint32_t)i, 0);
        jettprof_leave(t);
    }
    unsigned long n = stop_counting();
    jettprof_leave(t);
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    ta_stream_drain(&s);
    cr_assert_eq(n, 0, "hot-path calls allocated %lu times", n);
    cr_assert_eq(ta_stream_count(&s, JP_REC_ALLOC), 5000);
    ta_stream_free(&s);
}
