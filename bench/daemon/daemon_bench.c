/* jettprofd benchmarks. Prints figures (median of several runs, with units) and ratios against a
 * baseline measured in the same run; asserts nothing.
 *
 *   aggregate: records/s summed over concurrent runs on one long-lived daemon (target >= 20M/s)
 *              baseline: the engine alone fed the same records in this process; and the
 *              daemon's CPU time per record over all of them (from /proc), which the load of
 *              the producers and of other processes on the machine disturbs least
 *   replay, three figures on the same captures (one CPU run, one memory run, written here
 *   with the capture writer), each with wall and CPU time, since this 2-core machine is shared:
 *     read:    jp_capture_next over the whole file: reading, checksumming and validating every
 *              record, as replay does before aggregating (the target: >= 50M/s)
 *     engine:  read + jp_engine_feed of each record + render, in this process: what replay
 *              does, without process start
 *     replay:  `jettprofd replay FILE --format toon`, process start and output included
 *   idle RSS:  a long-lived daemon with no run, before and after serving runs (target <= 4 MiB)
 *   merge:     one memory run whose allocation events come over 4 worker rings (as from 4
 *              runtime threads), each allocation freed right away on its own ring, then the
 *              same with every free on the next ring (an object that moved to another
 *              thread); events per second of the daemon's CPU time (the target:
 *              >= 40 M) and per second of wall time, against the same events on one worker ring
 *
 * Usage: daemon_bench [runs] [records-per-run] [replay|aggregate]   (defaults 4, 4000000;
 * "replay" skips the aggregate and RSS parts, "aggregate" the replay part)
 *        daemon_bench merge [events]   (default 8000000)
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench/lib/stats.h"
#include "protocol/capture.h"
#include "tests/daemon/support.h"
#include "tests/lib/clock.h"
#include "tests/lib/recbuild.h"

#define REPS 3
#define REPLAY_REPS 5
#define MAX_RUNS 16

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
    double t0 = tl_now_s();
    for (size_t off = 0; off < p->len;) {
        struct jp_rec_hdr h;
        memcpy(&h, p->bytes + off, sizeof h);
        jp_engine_feed(e, p->bytes + off, h.size, &why);
        off += (h.size + 3u) & ~3u;
    }
    double dt = tl_now_s() - t0;
    jp_engine_free(e);
    return (double)p->records / dt;
}

/* The 1-minute load average: figures on a shared machine mean little without it. */
static double loadavg1(void)
{
    double l = -1;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1)
            l = -1;
        fclose(f);
    }
    return l;
}

/* CPU seconds (user + system) another process has used so far, from /proc/PID/stat. */
static double proc_cpu_s(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    unsigned long long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return -1;
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ---- replay ---- */

/* Writes the pregenerated stream as a capture, record by record, as a session would. */
static int write_capture(const struct pregen *p, const char *path)
{
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    struct jp_capture_meta meta = {.mode = p->mode, .pid = 4242, .run_id = 1};
    struct jp_capture_writer *w;
    int r = jp_capture_writer_new(fd, &meta, &w);
    for (size_t off = 0; r == 0 && off < p->len;) {
        struct jp_rec_hdr h;
        memcpy(&h, p->bytes + off, sizeof h);
        r = jp_capture_write(w, p->bytes + off, h.size);
        off += (h.size + 3u) & ~3u;
    }
    if (r == 0)
        jp_capture_writer_free(w);
    close(fd);
    return r;
}

struct timing {
    double wall, cpu; /* seconds */
};

/* Reads every record (the reader checksums and validates them); the records are touched so
 * nothing can be skipped. *records: how many came out. */
static int time_read(const char *path, uint64_t *records, struct timing *t)
{
    double w0 = tl_now_s(), c0 = cpu_s();
    struct jp_capture_reader *rd;
    int r = jp_capture_open(path, &rd);
    if (r < 0)
        return r;
    const void *rec;
    uint32_t len;
    uint64_t n = 0, sum = 0;
    while ((r = jp_capture_next(rd, &rec, &len)) == 1) {
        n++;
        sum += ((const uint8_t *)rec)[len - 1];
    }
    uint32_t v = jp_capture_verdict(rd, NULL, NULL);
    jp_capture_close(rd);
    t->wall = tl_now_s() - w0;
    t->cpu = cpu_s() - c0;
    *records = n + (sum & 0); /* sum keeps the loads */
    return r < 0 ? r : v == JP_CAPI_COMPLETE ? 0 : -EPROTO;
}

/* What replay does in its own process: read, feed every record, render TOON. */
static int time_engine(const char *path, struct timing *t)
{
    double w0 = tl_now_s(), c0 = cpu_s();
    struct jp_capture_reader *rd;
    int r = jp_capture_open(path, &rd);
    if (r < 0)
        return r;
    struct jp_engine *e;
    if (jp_engine_new(&e) < 0) {
        jp_capture_close(rd);
        return -ENOMEM;
    }
    const void *rec;
    uint32_t len;
    const char *why;
    while ((r = jp_capture_next(rd, &rec, &len)) == 1)
        if (jp_engine_feed(e, rec, len, &why) < 0) {
            r = -EPROTO;
            break;
        }
    jp_capture_close(rd);
    if (r == 0) {
        struct jp_report_opts o = {.size = sizeof o, .threshold_bp = -1, .limit = -1,
                                   .ending = JP_END_STOP, .outputs = JP_OUT_TOON};
        struct jp_rendered out;
        memset(&out, 0, sizeof out);
        r = jp_profile_render(e, &o, &out);
        jp_rendered_free(&out);
    }
    jp_engine_free(e);
    t->wall = tl_now_s() - w0;
    t->cpu = cpu_s() - c0;
    return r;
}

/* `jettprofd replay FILE --format toon` with stdout discarded; CPU from the child's rusage. */
static int time_replay_cmd(const char *path, struct timing *t)
{
    char *argv[] = {(char *)jpt_daemon_bin(), "replay", (char *)path, "--format", "toon", NULL};
    double w0 = tl_now_s();
    pid_t pid = fork();
    if (pid < 0)
        return -errno;
    if (pid == 0) {
        int nul = open("/dev/null", O_WRONLY);
        dup2(nul, STDOUT_FILENO);
        execv(argv[0], argv);
        _exit(127);
    }
    int st;
    struct rusage ru;
    if (wait4(pid, &st, 0, &ru) < 0)
        return -errno;
    t->wall = tl_now_s() - w0;
    t->cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
             (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -EIO;
}

enum { T_READ, T_ENGINE, T_REPLAY, T_KINDS };
static const char *const t_names[T_KINDS] = {"read + validate", "read + engine + render",
                                             "jettprofd replay"};

/* Median wall and CPU rates of each kind on one capture, alternating the kinds within each
 * repetition so drift of the machine's load hits them alike. */
static int bench_replay(const char *path, uint64_t records, double rate[T_KINDS][2])
{
    double w[T_KINDS][REPLAY_REPS], c[T_KINDS][REPLAY_REPS];
    for (int k = 0; k < REPLAY_REPS; k++) {
        for (int i = 0; i < T_KINDS; i++) {
            struct timing t;
            uint64_t n = records;
            int r = i == T_READ ? time_read(path, &n, &t)
                    : i == T_ENGINE ? time_engine(path, &t)
                                    : time_replay_cmd(path, &t);
            if (r < 0 || n != records) {
                fprintf(stderr, "%s failed on %s: %d\n", t_names[i], path, r);
                return -1;
            }
            w[i][k] = (double)records / t.wall;
            c[i][k] = (double)records / (t.cpu > 0 ? t.cpu : 1e-9);
        }
    }
    for (int i = 0; i < T_KINDS; i++) {
        rate[i][0] = bench_median(w[i], REPLAY_REPS);
        rate[i][1] = bench_median(c[i], REPLAY_REPS);
    }
    return 0;
}

struct job {
    const char *sock;
    const struct pregen *p;
    int rc;
    unsigned long long lost; /* the profile's lost_records */
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
    const char *lost = r.toon ? strstr(r.toon, "lost_records: ") : NULL;
    j->lost = lost ? strtoull(lost + strlen("lost_records: "), NULL, 10) : 0;
    jpt_result_free(&r);
    jp_ring_unmap(&ring);
    jpt_client_close(&c);
    return NULL;
}

/* ---- merge ---- */

#define MERGE_SLOTS (1u << 16)
#define MERGE_CHUNK 256u /* events pushed to one ring before the next ring's turn */

static void merge_push(struct jp_ring *r, const void *rec, uint32_t len)
{
    if (jpt_push(r, rec, len) < 0) {
        fprintf(stderr, "daemon_bench merge: the daemon stopped taking records\n");
        exit(1);
    }
}

/* One private run: `events` allocation events (alloc + free pairs) over `rings` worker rings,
 * frees on the next ring when `cross`. Returns the daemon's CPU seconds; *wall the run's. */
static double merge_run(uint32_t rings, int cross, uint64_t events, double *wall)
{
    struct jpt_client c;
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_MEMORY, 1, 0);
    uint64_t run_id;
    pid_t pid = jpt_private(&c, NULL);
    if (pid < 0 || jpt_client_hello(&c, &s, JP_OUT_TOON, &run_id, NULL) < 0) {
        fprintf(stderr, "daemon_bench merge: no private daemon\n");
        exit(1);
    }
    static struct jp_ring ring[5];
    for (uint32_t i = 0; i <= rings; i++) {
        struct jp_ctl_msg m = {.type = i ? JP_CTL_WORKER_RING : JP_CTL_RING};
        uint32_t slots = i ? MERGE_SLOTS : 1024u;
        if (jp_ring_create(slots, &ring[i]) < 0)
            exit(1);
        if (i)
            m.u.worker_ring.slot_count = slots;
        else
            m.u.ring.slot_count = slots;
        if (jp_ctl_send(c.fd, &m, &ring[i].fd, 1) < 0)
            exit(1);
    }
    double t0 = tl_now_s(), cpu0 = proc_cpu_s(pid);
    uint8_t buf[JP_REC_MAX_SIZE];
    struct jp_rec_run_start rs = tl_rec_run_start(JP_MODE_MEMORY);
    rs.threshold_bp = 500;
    rs.cpu_budget_bytes = JP_DEFAULT_CPU_BUDGET;
    rs.retention_budget_bytes = JP_DEFAULT_RETENTION_BUDGET;
    merge_push(&ring[0], &rs, sizeof rs);
    struct jp_rec_source_def sd = {.source_id = 1, .origin = JP_ORIGIN_PROJECT};
    merge_push(&ring[0], buf, tl_rec_source(buf, &sd, "src/m.jett", 10));
    struct jp_rec_frame_def fd = {.frame_id = 1, .source_id = 1, .decl_end = 5, .decl_line = 1,
                                  .decl_col = 1};
    merge_push(&ring[0], buf, tl_rec_frame(buf, &fd, "m", 1, "f", 1));
    struct jp_rec_node_def nd = {.h = {JP_REC_NODE_DEF, sizeof nd}, .node_id = 1, .frame_id = 1};
    merge_push(&ring[0], &nd, sizeof nd);
    uint64_t count = 4;
    for (uint32_t i = 1; i <= rings; i++) {
        struct jp_rec_exec e = {.h = {JP_REC_EXEC, sizeof e}, .runtime_thread_id = i,
                                .task_id = i, .actor_id = i};
        merge_push(&ring[i], &e, sizeof e);
        count++;
    }
    /* ring k's ids: a block of its own below 2^32, as the agent gives each thread (blocks of
     * 2^20 drawn in turn; here one block of 2^26 each, the most 64 M events need) */
    uint64_t next[5] = {0};
    for (uint32_t i = 1; i <= rings; i++)
        next[i] = (uint64_t)(i - 1u) << 26;
    uint64_t pairs = events / 2 / rings;
    for (uint64_t done = 0; done < pairs; done += MERGE_CHUNK)
        for (uint32_t i = 1; i <= rings; i++) {
            uint32_t to = cross ? i % rings + 1u : i;
            for (uint64_t k = 0; k < MERGE_CHUNK && done + k < pairs; k++) {
                uint64_t id = ++next[i], size = 16u + (id & 63u);
                struct jp_rec_alloc a = {.h = {JP_REC_ALLOC, 32}, .node = 1,
                                         .allocation_id = id, .size = size};
                struct jp_rec_free f = {.h = {JP_REC_FREE, 32}, .node = 1,
                                        .allocation_id = id, .old_size = size};
                merge_push(&ring[i], &a, sizeof a);
                merge_push(&ring[to], &f, sizeof f);
                count += 2;
            }
        }
    struct jp_rec_run_stop st = {.h = {JP_REC_RUN_STOP, sizeof st},
                                 .termination = JP_TERM_RETURNED, .wall_ns = 1,
                                 .process_cpu_ns = JP_NS_UNAVAILABLE, .record_count = count};
    merge_push(&ring[0], &st, sizeof st);
    struct jp_ctl_msg m = {.type = JP_CTL_FINALIZE};
    m.u.finalize.termination = JP_TERM_RETURNED;
    struct jpt_result res;
    memset(&res, 0, sizeof res);
    if (jp_ctl_send(c.fd, &m, NULL, 0) < 0 || jpt_finish(&c, &res, 60000) < 0 ||
        res.status != JP_STATUS_COMPLETE || !strstr(res.toon, "protocol_violations: 0\n")) {
        fprintf(stderr, "daemon_bench merge: the run is not complete and exact:\n%s\n%s\n",
                res.toon ? res.toon : "", res.error);
        exit(1);
    }
    double cpu = proc_cpu_s(pid) - cpu0;
    *wall = tl_now_s() - t0;
    jpt_result_free(&res);
    jpt_client_close(&c);
    tl_wait(pid, 10000);
    for (uint32_t i = 0; i <= rings; i++)
        jp_ring_unmap(&ring[i]);
    return cpu;
}

static int merge_bench(uint64_t events)
{
    enum { N = 5 };
    printf("daemon_bench merge: one memory run, %llu allocation events (alloc + free), "
           "%u-slot worker rings, private daemon; load average %.2f\n",
           (unsigned long long)events, MERGE_SLOTS, loadavg1());
    double base = 0;
    for (int v = 0; v < 3; v++) {
        uint32_t rings = v ? 4 : 1;
        int cross = v == 2;
        double cpu_rate[N], wall_rate[N];
        for (int k = 0; k < N; k++) {
            double wall;
            double cpu = merge_run(rings, cross, events, &wall);
            cpu_rate[k] = (double)events / (cpu > 0 ? cpu : 1e-9) / 1e6;
            wall_rate[k] = (double)events / wall / 1e6;
        }
        double lo = cpu_rate[0], hi = cpu_rate[0];
        for (int k = 1; k < N; k++) {
            lo = cpu_rate[k] < lo ? cpu_rate[k] : lo;
            hi = cpu_rate[k] > hi ? cpu_rate[k] : hi;
        }
        double m = bench_median(cpu_rate, N);
        if (v == 0)
            base = m;
        printf("%s: %.1f M events per daemon CPU second (%.1f - %.1f), %.2fx one ring; "
               "%.1f M events/s wall%s\n",
               v == 0 ? "1 worker ring" : v == 1 ? "4 worker rings, frees on their own ring"
                                                 : "4 worker rings, frees on the next ring",
               m, lo, hi, m / base, bench_median(wall_rate, N),
               v ? "; target >= 40 M per CPU second" : "");
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "merge"))
        return merge_bench(argc > 2 ? strtoull(argv[2], NULL, 10) : 8000000u);
    int runs = argc > 1 ? atoi(argv[1]) : 4;
    uint64_t per_run = argc > 2 ? strtoull(argv[2], NULL, 10) : 4000000u;
    int replay_only = argc > 3 && !strcmp(argv[3], "replay");
    int aggregate_only = argc > 3 && !strcmp(argv[3], "aggregate");
    if (runs < 1 || runs > MAX_RUNS || per_run < 1000 ||
        (argc > 3 && !replay_only && !aggregate_only)) {
        fprintf(stderr,
                "usage: daemon_bench [runs 1..16] [records-per-run >= 1000] [replay|aggregate]\n");
        return 2;
    }
    char dir[] = "/tmp/jpd-bench-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char sock[128];
    snprintf(sock, sizeof sock, "%s/d.sock", dir);

    static struct pregen streams[MAX_RUNS];
    int nstreams = runs < 2 ? 2 : runs; /* the replay part wants a CPU and a memory stream */
    for (int i = 0; i < nstreams; i++)
        pregen_make(&streams[i], i % 2 ? JP_MODE_MEMORY : JP_MODE_CPU, 500u + (uint32_t)i,
                    per_run);
    double base[REPS];
    for (int k = 0; k < REPS; k++)
        base[k] = engine_rate(&streams[0]);
    double engine = bench_median(base, REPS);
    printf("daemon_bench: %d concurrent runs x %llu records; load average %.2f\n", runs,
           (unsigned long long)per_run, loadavg1());
    printf("  engine alone (baseline):     %8.2f M records/s\n", engine / 1e6);

    if (!replay_only) {
        pid_t d = jpt_serve(sock, NULL, NULL);
        if (d < 0) {
            fprintf(stderr, "cannot start the daemon: %d\n", (int)d);
            return 1;
        }
        struct timespec ts = {0, 200000000};
        nanosleep(&ts, NULL);
        long idle0 = jpt_rss_kib(d);

        double agg[REPS];
        uint64_t all = 0;
        unsigned long long lost = 0;
        int failed = 0;
        double dcpu0 = proc_cpu_s(d);
        for (int k = 0; k < REPS; k++) {
            struct job jobs[MAX_RUNS];
            pthread_t th[MAX_RUNS];
            uint64_t total = 0;
            double t0 = tl_now_s();
            for (int i = 0; i < runs; i++) {
                jobs[i] = (struct job){.sock = sock, .p = &streams[i]};
                pthread_create(&th[i], NULL, produce, &jobs[i]);
                total += streams[i].records;
            }
            for (int i = 0; i < runs; i++) {
                pthread_join(th[i], NULL);
                if (jobs[i].rc < 0) {
                    fprintf(stderr, "run %d failed: %d\n", i, jobs[i].rc);
                    failed++;
                }
                lost += jobs[i].lost;
            }
            agg[k] = (double)total / (tl_now_s() - t0);
            all += total;
        }
        double dcpu = proc_cpu_s(d) - dcpu0;
        nanosleep(&ts, NULL);
        long idle1 = jpt_rss_kib(d);
        kill(d, SIGTERM);
        tl_wait(d, 10000);
        printf("  daemon, summed over runs:    %8.2f M records/s  (%.2fx engine; median of %d; "
               "target >= 20)\n",
               bench_median(agg, REPS) / 1e6, bench_median(agg, REPS) / engine, REPS);
        printf("  daemon CPU time:             %8.1f ns per record (%.2f M records per CPU "
               "second; the daemon's own cost, which the shared machine's load disturbs least)\n",
               dcpu * 1e9 / (double)all, (double)all / dcpu / 1e6);
        printf("  lost records, summed:        %8llu over %d runs of %d rounds (%d failed)\n",
               lost, runs * REPS, REPS, failed);
        printf("  idle RSS before runs:        %8.2f MiB (target <= 4)\n", (double)idle0 / 1024.0);
        printf("  idle RSS after runs:         %8.2f MiB\n", (double)idle1 / 1024.0);
    }

    /* Replay: a CPU and a memory capture of the first two streams. */
    for (int m = 0; m < 2 && !aggregate_only; m++) {
        char cap[160];
        snprintf(cap, sizeof cap, "%s/bench-%d.jpcap", dir, m);
        int r = write_capture(&streams[m], cap);
        double rate[T_KINDS][2];
        if (r == 0)
            r = bench_replay(cap, streams[m].records, rate);
        unlink(cap);
        if (r < 0) {
            printf("  replay (%s): failed (%d)\n", jp_mode_name(streams[m].mode), r);
            continue;
        }
        printf("  replay of a %s capture, median of %d (M records/s by wall, by CPU time):\n",
               jp_mode_name(streams[m].mode), REPLAY_REPS);
        for (int i = 0; i < T_KINDS; i++)
            printf("    %-24s %8.2f wall %8.2f cpu  (%.2fx engine)%s\n", t_names[i],
                   rate[i][0] / 1e6, rate[i][1] / 1e6, rate[i][0] / engine,
                   i == T_READ ? "  target >= 50" : "");
    }
    printf("  load average after:          %.2f\n", loadavg1());
    rmdir(dir);
    for (int i = 0; i < nstreams; i++)
        free(streams[i].bytes);
    return 0;
}
