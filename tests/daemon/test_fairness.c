/* Drain fairness on one long-lived daemon: while one run floods its ring, another run still
 * streams, finalizes, answers its excerpts and gets its exact profile promptly. Two floods: an
 * honest producer that outruns the daemon with real samples, and a hostile one that commits
 * nothing but PAD records (free to write, and never fed to the engine). A daemon that drained a
 * run until it ran dry, or whose re-arming starved socket I/O (a 0 ms timer re-armed from its
 * own callback runs again in the same pass in libuv before 1.48), would never finish the
 * second run. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support.h"
#include "tests/lib/clock.h"
#include "tests/lib/stop.h"

struct flood {
    const char *sock;
    int stop;           /* set by the test: end the run */
    uint64_t pushed;    /* records committed so far */
    uint64_t full;      /* times the ring was found full */
    uint64_t *tail;     /* the flood ring's consumer index, once mapped (release-stored) */
    int ended;          /* release-stored by the flood thread as it returns: rc is final */
    int rc;             /* the flood thread's; read by the test once ended, or after join */
    struct jpt_result got;
};

static void nap_us(long us)
{
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

/* The flood: a CPU run whose samples are pre-generated once and then pushed over and over, so
 * the producer only copies and outruns the daemon (samples are stateless, so repeating them
 * keeps the stream valid). */
#define FLOOD_SAMPLES 4096u

static void flood_body(struct flood *f);

static void *flood_run(void *arg)
{
    struct flood *f = arg;
    flood_body(f);
    __atomic_store_n(&f->ended, 1, __ATOMIC_RELEASE);
    return NULL;
}

static void flood_body(struct flood *f)
{
    struct jpt_client c;
    f->rc = jpt_client_connect(&c, f->sock);
    if (f->rc < 0)
        return;
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_CPU, 77, UINT64_C(1) << 40); /* never ends by itself */
    struct jp_ring ring;
    uint64_t id;
    f->rc = jpt_start_run(&c, &s, 1u << 16, -1, 0, &ring, &id);
    if (f->rc < 0)
        return;
    __atomic_store_n(&f->tail, &ring.sh->tail, __ATOMIC_RELEASE);
    static uint8_t samples[FLOOD_SAMPLES][JP_SLOT_SIZE];
    uint32_t nsamples = 0, sample_len = 0;
    uint8_t buf[JP_REC_MAX_SIZE];
    while (nsamples < FLOOD_SAMPLES && f->rc == 0) {
        uint32_t len = jpt_stream_next(&s, buf);
        struct jp_rec_hdr h;
        memcpy(&h, buf, sizeof h);
        if (h.type == JP_REC_CPU_SAMPLE && len <= JP_SLOT_SIZE) {
            memcpy(samples[nsamples++], buf, len);
            sample_len = len;
        } else {
            f->rc = jpt_push(&ring, buf, len); /* the definitions before the samples */
        }
    }
    uint64_t extra = 0; /* samples pushed beyond what the generator counted */
    unsigned batch = 0;
    for (uint32_t i = 0; f->rc == 0 && !__atomic_load_n(&f->stop, __ATOMIC_ACQUIRE);
         i = (i + 1) % FLOOD_SAMPLES) {
        void *dst;
        while (!(dst = jp_ring_reserve(&ring, sample_len))) {
            jp_ring_commit(&ring);
            batch = 0;
            __atomic_add_fetch(&f->full, 1, __ATOMIC_RELAXED);
            sched_yield();
        }
        memcpy(dst, samples[i], sample_len);
        extra++;
        if (++batch == 256) {
            jp_ring_commit(&ring);
            __atomic_add_fetch(&f->pushed, batch, __ATOMIC_RELAXED);
            batch = 0;
        }
    }
    jp_ring_commit(&ring);
    s.emitted += extra - nsamples; /* the generator counted each pre-generated sample once */
    uint32_t len = jpt_stream_stop(&s, buf);
    if (f->rc == 0)
        f->rc = jpt_push(&ring, buf, len);
    jp_ring_close(&ring);
    if (f->rc == 0) {
        struct jp_ctl_msg m = {.type = JP_CTL_FINALIZE};
        m.u.finalize.termination = JP_TERM_RETURNED;
        f->rc = jp_ctl_send(c.fd, &m, NULL, 0);
    }
    if (f->rc == 0)
        f->rc = jpt_finish(&c, &f->got, 60000);
    jp_ring_unmap(&ring);
    jpt_client_close(&c);
    return;
}

Test(fairness, a_flooding_run_does_not_keep_another_from_finishing)
{
    /* One worker: both runs share one loop, whose slicing is what is tested here. */
    static const char *const one[] = {"--workers", "1", NULL};
    struct jpt_served sv;
    cr_assert_eq(jpt_serve_tmp(&sv, one, NULL), 0);
    const char *sock = sv.sock;

    static struct flood f;
    f = (struct flood){.sock = sock};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, flood_run, &f), 0);
    /* Wait until the flood is real: the daemon has fallen behind many times. */
    for (int i = 0; i < 2000 && __atomic_load_n(&f.full, __ATOMIC_RELAXED) < 1000; i++)
        nap_us(5000);
    cr_assert_geq(__atomic_load_n(&f.full, __ATOMIC_RELAXED), 1000,
                  "the flooding run never filled its ring (it %s)",
                  __atomic_load_n(&f.ended, __ATOMIC_ACQUIRE) ? "ended" : "runs");

    /* The daemon's progress on the flood is its ring's tail (what the flood thread manages to
     * push meanwhile depends on when this machine schedules it, not on the daemon). */
    uint64_t *tail = __atomic_load_n(&f.tail, __ATOMIC_ACQUIRE);
    cr_assert_not_null(tail);
    uint64_t before = __atomic_load_n(tail, __ATOMIC_ACQUIRE);
    double t0 = tl_now_s();
    struct jpt_client c;
    cr_assert_eq(jpt_client_connect(&c, sock), 0);
    struct jpt_stream s, again;
    jpt_stream_init(&s, JP_MODE_CPU, 31, 50000);
    again = s;
    struct jpt_result got;
    cr_assert_eq(jpt_run(&c, &s, 1u << 12, -1, &got), 0);
    double took = tl_now_s() - t0;
    jpt_client_close(&c);
    uint64_t during = __atomic_load_n(tail, __ATOMIC_ACQUIRE) - before;

    /* The other run was flooding the whole time, and was drained meanwhile too. */
    int flooding = !__atomic_load_n(&f.ended, __ATOMIC_ACQUIRE);
    __atomic_store_n(&f.stop, 1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    cr_assert(flooding, "the flooding run ended early (rc %d)", f.rc);
    cr_assert_gt(during, 0, "the flooding run was not drained while the other ran");
    cr_assert_eq(got.error_code, 0, "daemon error: %s", got.error);
    cr_assert_eq(got.status, JP_STATUS_COMPLETE, "%s", got.reason);
    struct jpt_result want;
    again.run_id = got.run_id;
    cr_assert_eq(jpt_expected(&again, &want), 0);
    cr_assert_str_eq(got.human, want.human);
    cr_assert_str_eq(got.toon, want.toon);
    /* Promptly: 50000 records and three control round trips; a starved run would wait for the
     * flood to end, which it never does by itself. Generous for a loaded 2-core machine. */
    cr_assert_lt(took, 15.0, "the second run took %.1f s next to the flood", took);
    jpt_result_free(&want);
    jpt_result_free(&got);

    cr_assert_eq(f.rc, 0, "the flooding run failed: %d", f.rc);
    cr_assert_eq(f.got.error_code, 0, "flooding run: daemon error %s", f.got.error);
    cr_assert_eq(f.got.status, JP_STATUS_COMPLETE, "flooding run: %s", f.got.reason);
    jpt_result_free(&f.got);

    tl_stop(sv.pid, 10000);
    jpt_served_clean(&sv);
}

/* The hostile flood: every slot of the ring holds a one-slot PAD record, written once; from
 * then on the producer only moves head to a full ring whenever the daemon's tail moves, so it
 * commits a whole ring of records for the price of one store. */
static void *pad_flood(void *arg)
{
    struct flood *f = arg;
    struct jpt_client c;
    f->rc = jpt_client_connect(&c, f->sock);
    if (f->rc < 0)
        return NULL;
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_CPU, 78, 1);
    struct jp_ring ring;
    uint64_t id;
    f->rc = jpt_start_run(&c, &s, 1u << 16, -1, 0, &ring, &id);
    if (f->rc < 0)
        return NULL;
    __atomic_store_n(&f->tail, &ring.sh->tail, __ATOMIC_RELEASE);
    const struct jp_rec_hdr pad = {JP_REC_PAD, sizeof pad};
    for (uint32_t i = 0; i < ring.slot_count; i++)
        memcpy(ring.data + (size_t)i * JP_SLOT_SIZE, &pad, sizeof pad);
    uint64_t last = UINT64_MAX;
    while (!__atomic_load_n(&f->stop, __ATOMIC_ACQUIRE)) {
        uint64_t tail = jp_ring__load_acquire(&ring.sh->tail);
        if (tail == last) {
            sched_yield();
            continue;
        }
        jp_ring__store_release(&ring.sh->head, tail + ring.slot_count);
        __atomic_add_fetch(&f->pushed, tail - (last == UINT64_MAX ? tail : last),
                           __ATOMIC_RELAXED);
        __atomic_add_fetch(&f->full, 1, __ATOMIC_RELAXED);
        last = tail;
    }
    /* Vanish: the daemon ends this run as a lost producer. */
    jp_ring_unmap(&ring);
    jpt_client_close(&c);
    return NULL;
}

struct second {
    const char *sock;
    int done, rc;
    struct jpt_result got;
};

static void *second_run(void *arg)
{
    struct second *r = arg;
    struct jpt_client c;
    r->rc = jpt_client_connect(&c, r->sock);
    if (r->rc == 0) {
        struct jpt_stream s;
        jpt_stream_init(&s, JP_MODE_MEMORY, 32, 50000);
        r->rc = jpt_run(&c, &s, 1u << 12, -1, &r->got);
        jpt_client_close(&c);
    }
    __atomic_store_n(&r->done, 1, __ATOMIC_RELEASE);
    return NULL;
}

Test(fairness, a_producer_flooding_pad_records_cannot_stall_the_daemon)
{
    struct jpt_served sv;
    cr_assert_eq(jpt_serve_tmp(&sv, NULL, NULL), 0);
    const char *sock = sv.sock;

    static struct flood f;
    f = (struct flood){.sock = sock};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, pad_flood, &f), 0);
    for (int i = 0; i < 2000 && __atomic_load_n(&f.pushed, __ATOMIC_RELAXED) < 100000; i++)
        nap_us(5000);
    cr_assert_geq(__atomic_load_n(&f.pushed, __ATOMIC_RELAXED), 100000,
                  "the pad flood did not get going (rc %d)", f.rc);

    /* The second run in a thread, so a starved one fails the test instead of hanging it. */
    static struct second r;
    r = (struct second){.sock = sock};
    pthread_t th2;
    cr_assert_eq(pthread_create(&th2, NULL, second_run, &r), 0);
    double t0 = tl_now_s();
    while (!__atomic_load_n(&r.done, __ATOMIC_ACQUIRE) && tl_now_s() - t0 < 15.0)
        nap_us(10000);
    if (!__atomic_load_n(&r.done, __ATOMIC_ACQUIRE)) {
        kill(sv.pid, SIGKILL);
        cr_assert_fail("the second run did not finish within 15 s next to a pad flood");
    }
    pthread_join(th2, NULL);
    __atomic_store_n(&f.stop, 1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);

    cr_assert_eq(r.rc, 0, "second run failed: %d", r.rc);
    cr_assert_eq(r.got.error_code, 0, "daemon error: %s", r.got.error);
    cr_assert_eq(r.got.status, JP_STATUS_COMPLETE, "%s", r.got.reason);
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_MEMORY, 32, 50000);
    struct jpt_result want;
    cr_assert_eq(jpt_expected(&s, &want), 0);
    cr_assert_str_eq(r.got.toon, want.toon);
    jpt_result_free(&want);
    jpt_result_free(&r.got);

    /* The daemon is still responsive: SIGTERM ends it cleanly. */
    tl_stop(sv.pid, 10000);
    jpt_served_clean(&sv);
}

/* ---- held records: a run whose rings hold costs its own slice only ---- */

/* A hostile memory run with worker rings whose every record is a free of an id nobody
 * allocated: each is held (it might name an allocation on a ring not read yet) until the merge
 * takes it for the violation it is. refill: one ring of 65536 slots, whose frees are committed
 * again whenever the daemon frees room (a flood); else nrings rings of 1024 slots, each written
 * once. */
struct held_flood {
    struct flood f;
    uint32_t nrings;
    int refill;
    int ready;
    struct jp_ring wr[JP_CTL_MAX_WORKER_RINGS];
};

static void *held_flood_run(void *arg)
{
    struct held_flood *h = arg;
    struct flood *f = &h->f;
    struct jpt_client c;
    f->rc = jpt_client_connect(&c, f->sock);
    if (f->rc < 0)
        return NULL;
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_MEMORY, 79, 1);
    struct jp_ring main_ring, *wr = h->wr;
    uint64_t id;
    f->rc = jpt_start_run(&c, &s, 1024, -1, 1, &main_ring, &id); /* RUN_START */
    uint32_t slots = h->refill ? 1u << 16 : 1024u;
    for (uint32_t i = 0; f->rc == 0 && i < h->nrings; i++) {
        f->rc = jp_ring_create(slots, &wr[i]);
        if (f->rc < 0)
            break;
        struct jp_ctl_msg m = {.type = JP_CTL_WORKER_RING};
        m.u.worker_ring.slot_count = slots;
        f->rc = jp_ctl_send(c.fd, &m, &wr[i].fd, 1);
        for (uint32_t k = 0; f->rc == 0 && k < wr[i].slot_count; k++) {
            struct jp_rec_free fr = {.h = {JP_REC_FREE, sizeof fr},
                                     .allocation_id = UINT64_C(1) << 40 | (uint64_t)i << 24 | k,
                                     .old_size = 8};
            memcpy(wr[i].data + (size_t)k * JP_SLOT_SIZE, &fr, sizeof fr);
        }
        if (f->rc == 0)
            jp_ring__store_release(&wr[i].sh->head, wr[i].slot_count);
    }
    __atomic_store_n(&h->ready, 1, __ATOMIC_RELEASE);
    uint64_t last = 0;
    while (f->rc == 0 && !__atomic_load_n(&f->stop, __ATOMIC_ACQUIRE)) {
        if (h->refill) { /* the same frees again, a whole ring ahead of the daemon */
            uint64_t tail = jp_ring__load_acquire(&wr[0].sh->tail);
            if (tail != last)
                jp_ring__store_release(&wr[0].sh->head, tail + wr[0].slot_count);
            __atomic_add_fetch(&f->pushed, tail - last, __ATOMIC_RELAXED);
            last = tail;
        }
        nap_us(h->refill ? 50 : 1000);
    }
    /* Vanish: the daemon ends this run as a lost producer. */
    jpt_client_close(&c);
    jp_ring_unmap(&main_ring);
    for (uint32_t i = 0; i < h->nrings; i++)
        jp_ring_unmap(&wr[i]);
    return NULL;
}

/* `jett run examples/cpu_hotspot/src/main.jett --profile` against the serving daemon: its wall
 * time in seconds; fails the test unless the run completes. */
static double victim_run(void)
{
    const char *jett = getenv("JETT_BIN"), *root = getenv("JETTPROF_SOURCE_ROOT");
    cr_assert(jett && root, "JETT_BIN and JETTPROF_SOURCE_ROOT must be set");
    char prog[1024];
    snprintf(prog, sizeof prog, "%s/examples/cpu_hotspot/src/main.jett", root);
    char *argv[] = {(char *)jett, "run", prog, "--profile", NULL};
    struct tl_spawn_opts o = TL_SPAWN_OPTS_INIT;
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    o.out_fd = o.err_fd = null;
    double t0 = tl_now_s();
    pid_t p = tl_spawn(jett, argv, &o);
    close(null);
    cr_assert_gt(p, 0);
    int st = tl_wait(p, 120000);
    double took = tl_now_s() - t0;
    cr_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "the victim run failed (%d)",
              st);
    return took;
}

static double median3(double a, double b, double c)
{
    return a > b ? (b > c ? b : a > c ? c : a) : (a > c ? a : b > c ? c : b);
}

/* Four hostile runs on one worker's loop - two floods of frees nobody allocated, and two runs
 * of 64 worker rings of such frees written once - beside a real profiled run: the victim's wall time stays
 * near its time alone on the same daemon (generous: 3x, for a loaded 2-core machine; before
 * slices were charged for held passes it was 7.5 s against 0.55), and SIGTERM in the middle of
 * it all ends the daemon within its grace (jettprofd(8), SIGNALS). */
Test(fairness, held_records_of_other_runs_neither_starve_a_run_nor_keep_sigterm_waiting,
     .timeout = 180)
{
    static const char *const one[] = {"--workers", "1", NULL};
    struct jpt_served sv;
    cr_assert_eq(jpt_serve_tmp(&sv, one, NULL), 0);
    const char *sock = sv.sock;
    setenv("JETTPROFD_SOCKET", sock, 1);
    double alone = median3(victim_run(), victim_run(), victim_run());

    static struct held_flood h[4];
    for (int i = 0; i < 4; i++)
        h[i] = (struct held_flood){.f = {.sock = sock}, .nrings = i < 2 ? 1 : JP_CTL_MAX_WORKER_RINGS,
                                   .refill = i < 2};
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, held_flood_run, &h[i]), 0);
    for (int i = 0; i < 4; i++) {
        for (int k = 0; k < 2000 && !__atomic_load_n(&h[i].ready, __ATOMIC_ACQUIRE); k++)
            nap_us(5000);
        cr_assert(h[i].ready && h[i].f.rc == 0, "hostile run %d did not start (%d)", i,
                  h[i].f.rc);
    }
    nap_us(200000); /* the daemon is busy with them */
    double beside = median3(victim_run(), victim_run(), victim_run());
    cr_log_info("victim: %.3f s alone, %.3f s beside the held floods (%.2fx)", alone, beside,
                beside / alone);
    for (int i = 0; i < 2; i++) /* and the floods were not starved either */
        cr_assert_gt(__atomic_load_n(&h[i].f.pushed, __ATOMIC_RELAXED), 0,
                     "flood %d of held frees was never drained", i);
    cr_assert_lt(beside, 3.0 * alone + 0.5, "the victim took %.2f s beside the floods, %.2f s "
                 "alone", beside, alone);

    double t0 = tl_now_s();
    kill(sv.pid, SIGTERM);
    int st = tl_wait(sv.pid, 10000);
    double took = tl_now_s() - t0;
    cr_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "the daemon did not exit within 10 s of SIGTERM (status %d)", st);
    cr_log_info("SIGTERM to exit beside the floods: %.2f s", took);
    for (int i = 0; i < 4; i++) {
        __atomic_store_n(&h[i].f.stop, 1, __ATOMIC_RELEASE);
        pthread_join(th[i], NULL);
    }
    unsetenv("JETTPROFD_SOCKET");
    jpt_served_clean(&sv);
}
