/* jettprofd benchmarks. Prints figures (median of several runs, with units) and ratios against a
 * baseline measured in the same run; asserts nothing.
 *
 *   aggregate: records/s summed over concurrent runs on one long-lived daemon (target >= 20M/s)
 *              baseline: the engine alone fed the same records in this process
 *   replay:    records/s of `jettprofd replay` on a capture (target >= 50M/s), process start
 *              and rendering included; same baseline
 *   idle RSS:  a long-lived daemon with no run, before and after serving runs (target <= 4 MiB)
 *
 * Usage: daemon_bench [runs] [records-per-run]   (defaults 4 and 4000000)
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../tests/daemon/support.h"

#define REPS 3
#define MAX_RUNS 16

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

/* A pre-generated stream: the producer only copies, so the figure is the daemon's. */
struct pregen {
    uint8_t *bytes;
    size_t len;
    uint64_t records;
    uint32_t mode;
};

static void pregen_make(struct pregen *p, uint32_t mode, uint32_t seed, uint64_t events)
{
    struct jpt_stream s;
    jpt_stream_init(&s, mode, seed, events);
    size_t cap = (size_t)(events + 64) * 64;
    p->bytes = malloc(cap);
    p->len = 0;
    p->records = 0;
    p->mode = mode;
    for (uint32_t n; (n = jpt_stream_next(&s, p->bytes + p->len));) {
        p->len += (n + 3u) & ~3u;
        p->records++;
        if (p->len + JP_REC_MAX_SIZE > cap) {
            fprintf(stderr, "pregen overflow\n");
            exit(1);
        }
    }
}

static double engine_rate(const struct pregen *p)
{
    struct jp_engine *e;
    jp_engine_new(&e);
    const char *why;
    double t0 = now_s();
    for (size_t off = 0; off < p->len;) {
        struct jp_rec_hdr h;
        memcpy(&h, p->bytes + off, sizeof h);
        jp_engine_feed(e, p->bytes + off, h.size, &why);
        off += (h.size + 3u) & ~3u;
    }
    double dt = now_s() - t0;
    jp_engine_free(e);
    return (double)p->records / dt;
}

struct job {
    const char *sock;
    const struct pregen *p;
    int rc;
};

static void *produce(void *arg)
{
    struct job *j = arg;
    struct jpt_client c;
    j->rc = jpt_client_connect(&c, j->sock);
    if (j->rc < 0)
        return NULL;
    struct jpt_stream s;
    jpt_stream_init(&s, j->p->mode, 1, 0);
    uint64_t id;
    struct jp_ring ring;
    j->rc = jpt_start_run(&c, &s, 1u << 16, -1, 0, &ring, &id);
    if (j->rc < 0)
        return NULL;
    /* Copy records in, committing in batches. */
    unsigned batch = 0;
    for (size_t off = 0; off < j->p->len;) {
        struct jp_rec_hdr h;
        memcpy(&h, j->p->bytes + off, sizeof h);
        void *dst = jp_ring_reserve(&ring, h.size);
        if (!dst) {
            /* Full: nap like the agent does instead of spinning, so the producers do not take
             * the cores the daemon needs. */
            jp_ring_commit(&ring);
            batch = 0;
            struct timespec nap = {0, 50000};
            nanosleep(&nap, NULL);
            continue;
        }
        memcpy(dst, j->p->bytes + off, h.size);
        off += (h.size + 3u) & ~3u;
        if (++batch == 256) {
            jp_ring_commit(&ring);
            batch = 0;
        }
    }
    jp_ring_commit(&ring);
    jp_ring_close(&ring);
    struct jp_ctl_msg f = {.type = JP_CTL_FINALIZE};
    f.u.finalize.termination = JP_TERM_RETURNED;
    jp_ctl_send(c.fd, &f, NULL, 0);
    struct jpt_result r;
    memset(&r, 0, sizeof r);
    j->rc = jpt_finish(&c, &r, 120000);
    if (j->rc == 0 && (r.error_code || r.status != JP_STATUS_COMPLETE))
        j->rc = -EPROTO;
    jpt_result_free(&r);
    jp_ring_unmap(&ring);
    jpt_client_close(&c);
    return NULL;
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 4;
    uint64_t per_run = argc > 2 ? strtoull(argv[2], NULL, 10) : 4000000u;
    if (runs < 1 || runs > MAX_RUNS || per_run < 1000) {
        fprintf(stderr, "usage: daemon_bench [runs 1..16] [records-per-run >= 1000]\n");
        return 2;
    }
    char dir[] = "/tmp/jpd-bench-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char sock[128];
    snprintf(sock, sizeof sock, "%s/d.sock", dir);

    static struct pregen streams[MAX_RUNS];
    for (int i = 0; i < runs; i++)
        pregen_make(&streams[i], i % 2 ? JP_MODE_MEMORY : JP_MODE_CPU, 500u + (uint32_t)i,
                    per_run);
    double base[REPS];
    for (int k = 0; k < REPS; k++)
        base[k] = engine_rate(&streams[0]);
    double engine = median(base, REPS);

    pid_t d = jpt_serve(sock, NULL, NULL);
    if (d < 0) {
        fprintf(stderr, "cannot start the daemon: %d\n", (int)d);
        return 1;
    }
    struct timespec ts = {0, 200000000};
    nanosleep(&ts, NULL);
    long idle0 = jpt_rss_kib(d);

    double agg[REPS];
    for (int k = 0; k < REPS; k++) {
        struct job jobs[MAX_RUNS];
        pthread_t th[MAX_RUNS];
        uint64_t total = 0;
        double t0 = now_s();
        for (int i = 0; i < runs; i++) {
            jobs[i] = (struct job){.sock = sock, .p = &streams[i]};
            pthread_create(&th[i], NULL, produce, &jobs[i]);
            total += streams[i].records;
        }
        for (int i = 0; i < runs; i++) {
            pthread_join(th[i], NULL);
            if (jobs[i].rc < 0)
                fprintf(stderr, "run %d failed: %d\n", i, jobs[i].rc);
        }
        agg[k] = (double)total / (now_s() - t0);
    }
    nanosleep(&ts, NULL);
    long idle1 = jpt_rss_kib(d);
    kill(d, SIGTERM);
    jpt_wait(d, 10000);

    /* Replay: one capture of the first stream, through a private daemon. */
    char cap[160];
    snprintf(cap, sizeof cap, "%s/bench.jpcap", dir);
    int fd = open(cap, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int sv[2];
    socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv);
    char num[16];
    snprintf(num, sizeof num, "%d", sv[1]);
    char *pargv[] = {(char *)jpt_daemon_bin(), "--session-fd", num, NULL};
    pid_t p = jpt_spawn(pargv, sv[1], NULL);
    close(sv[1]);
    struct jpt_client c;
    jpt_client_open_fd(&c, sv[0]);
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_CPU, 500u, per_run);
    struct jpt_result r;
    int rc = jpt_run(&c, &s, 1u << 16, fd, &r);
    jpt_result_free(&r);
    jpt_client_close(&c);
    jpt_wait(p, 60000);
    close(fd);
    double rep[REPS];
    for (int k = 0; k < REPS && rc == 0; k++) {
        char *argv2[] = {(char *)jpt_daemon_bin(), "replay", cap, "--format", "toon", NULL};
        double t0 = now_s();
        char *out = NULL, *err = NULL;
        int st = jpt_capture_cmd(argv2, &out, NULL, &err);
        double dt = now_s() - t0;
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
            fprintf(stderr, "replay failed: %s\n", err);
        free(out);
        free(err);
        rep[k] = (double)streams[0].records / dt;
    }
    unlink(cap);
    rmdir(dir);

    printf("daemon_bench: %d concurrent runs x %llu records, median of %d\n", runs,
           (unsigned long long)per_run, REPS);
    printf("  engine alone (baseline):     %8.2f M records/s\n", engine / 1e6);
    printf("  daemon, summed over runs:    %8.2f M records/s  (%.2fx engine; target >= 20)\n",
           median(agg, REPS) / 1e6, median(agg, REPS) / engine);
    if (rc == 0)
        printf("  replay from a capture:       %8.2f M records/s  (%.2fx engine; target >= 50)\n",
               median(rep, REPS) / 1e6, median(rep, REPS) / engine);
    else
        printf("  replay: capture run failed (%d)\n", rc);
    printf("  idle RSS before runs:        %8.2f MiB (target <= 4)\n", (double)idle0 / 1024.0);
    printf("  idle RSS after runs:         %8.2f MiB\n", (double)idle1 / 1024.0);
    for (int i = 0; i < runs; i++)
        free(streams[i].bytes);
    return 0;
}
