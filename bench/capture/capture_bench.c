/* capture_bench: what a capture's encoding costs and gives, on a real capture file.
 *
 *   capture_bench recode IN OUT VERSION [LEVEL [TARGET]]
 *       reads IN (any version) and writes its records to OUT as VERSION (1, 2 or 3) with the
 *       zstd LEVEL (0: the version's default) and blocks ending near TARGET raw bytes (0: the
 *       version's default), through the writer the daemon uses; prints one line:
 *       `recode: version=V level=L target=T records=N bytes=B bytes_per_record=X
 *        write_cpu_ns=C write_ns_per_record=Y read_cpu_ns=R`
 *       where write_cpu_ns is the CPU time of the writer alone (the records are read first)
 *       and read_cpu_ns the CPU time of reading IN (decoding and checking, no engine).
 *
 *   capture_bench feed IN [RUNS]
 *       reads IN's records into ring slots (each record padded to its slots, as in a ring), then
 *       feeds them to a fresh engine RUNS times (default 5) the way the drain does (runs of
 *       event slots through jp_engine_feed_slots, up to 4096 slots a call, anything else through
 *       jp_engine_feed); prints one line:
 *       `feed: records=N runs=R ns_per_record=M min=A max=B`
 *       with the median, minimum and maximum of the engine's CPU time a record over the runs:
 *       the daemon's per-record cost on that run's records without the ring, the scheduler or
 *       the producer on the other core.
 *
 * Prints figures only; asserts nothing about speed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine/engine.h"
#include "protocol/capture.h"
#include "protocol/records.h"

static uint64_t cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* capture_bench feed: the engine alone over a capture's records laid out as ring slots. */
static int feed(const char *path, int runs)
{
    struct jp_capture_reader *rd;
    int r = jp_capture_open(path, &rd);
    if (r < 0 || !jp_capture_meta(rd)) {
        fprintf(stderr, "capture_bench: %s: %s\n", path, r < 0 ? strerror(-r) : "not a capture");
        return 1;
    }
    size_t cap = 1u << 24, len = 0;
    uint8_t *slots = calloc(1, cap);
    uint64_t n = 0;
    const void *rec;
    uint32_t rl;
    while (slots && (r = jp_capture_next(rd, &rec, &rl)) == 1) {
        size_t need = (size_t)jp_rec_slots(rl) * JP_SLOT_SIZE;
        if (len + need > cap) {
            uint8_t *p = realloc(slots, cap * 2);
            if (!p) {
                free(slots);
                slots = NULL;
                break;
            }
            memset(p + cap, 0, cap);
            slots = p;
            cap *= 2;
        }
        memcpy(slots + len, rec, rl);
        len += need;
        n++;
    }
    jp_capture_close(rd);
    /* a ring's slots are cache-line aligned: so are these (one line a slot, as the drain
     * reads them) */
    uint8_t *aligned = NULL;
    if (slots && r >= 0 && (aligned = aligned_alloc(64, len ? len : 64)) != NULL)
        memcpy(aligned, slots, len);
    free(slots);
    slots = aligned;
    if (!slots || r < 0) {
        fprintf(stderr, "capture_bench: %s\n", r < 0 ? strerror(-r) : "out of memory");
        free(slots);
        return 1;
    }
    uint64_t t[16];
    for (int i = 0; i < runs; i++) {
        struct jp_engine *e;
        if (jp_engine_new(&e) < 0) {
            fprintf(stderr, "capture_bench: out of memory\n");
            return 1;
        }
        uint64_t c0 = cpu_ns();
        for (size_t at = 0; at < len;) {
            uint64_t avail = (len - at) / JP_SLOT_SIZE, k = 0;
            if (avail > 4096u)
                avail = 4096u;
            int rc = jp_engine_feed_slots(e, slots + at, avail, &k);
            at += k * JP_SLOT_SIZE;
            if (rc == 0)
                continue;
            if (rc < 0) {
                fprintf(stderr, "capture_bench: the engine failed: %s\n", strerror(-rc));
                return 1;
            }
            struct jp_rec_hdr h;
            memcpy(&h, slots + at, sizeof h);
            const char *why = NULL;
            if (jp_engine_feed(e, slots + at, h.size, &why) < 0) {
                fprintf(stderr, "capture_bench: a record was refused: %s\n", why ? why : "?");
                return 1;
            }
            at += (size_t)jp_rec_slots(h.size) * JP_SLOT_SIZE;
        }
        t[i] = cpu_ns() - c0;
        jp_engine_free(e);
    }
    qsort(t, (size_t)runs, sizeof t[0], cmp_u64);
    printf("feed: records=%llu runs=%d ns_per_record=%.2f min=%.2f max=%.2f\n",
           (unsigned long long)n, runs, (double)t[runs / 2] / (double)n, (double)t[0] / (double)n,
           (double)t[runs - 1] / (double)n);
    free(slots);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "feed") == 0) {
        int runs = argc > 3 ? atoi(argv[3]) : 5;
        if (runs < 1 || runs > 16) {
            fprintf(stderr, "capture_bench: feed wants 1 to 16 runs\n");
            return 2;
        }
        return feed(argv[2], runs);
    }
    if (argc < 5 || strcmp(argv[1], "recode") != 0) {
        fprintf(stderr, "usage: capture_bench recode IN OUT VERSION [LEVEL [TARGET]]\n"
                        "       capture_bench feed IN [RUNS]\n");
        return 2;
    }
    uint32_t version = (uint32_t)strtoul(argv[4], NULL, 10);
    int level = argc > 5 ? atoi(argv[5]) : 0;
    uint32_t target = argc > 6 ? (uint32_t)strtoul(argv[6], NULL, 10) : 0;
    struct jp_capture_reader *rd;
    int r = jp_capture_open(argv[2], &rd);
    if (r < 0) {
        fprintf(stderr, "capture_bench: %s: %s\n", argv[2], strerror(-r));
        return 1;
    }
    const struct jp_capture_meta *m = jp_capture_meta(rd);
    if (!m) {
        fprintf(stderr, "capture_bench: %s: not a readable capture\n", argv[2]);
        return 1;
    }
    struct jp_capture_meta meta = *m;
    meta.format = version;
    /* the records, read first so the write is timed alone */
    size_t cap = 1u << 24, len = 0;
    uint8_t *all = malloc(cap);
    uint64_t n = 0, c0 = cpu_ns();
    const void *rec;
    uint32_t rl;
    while (all && (r = jp_capture_next(rd, &rec, &rl)) == 1) {
        if (len + rl > cap) {
            uint8_t *p = realloc(all, cap *= 2);
            if (!p) {
                free(all);
                all = NULL;
                break;
            }
            all = p;
        }
        memcpy(all + len, rec, rl);
        len += rl;
        n++;
    }
    uint64_t read_cpu = cpu_ns() - c0;
    if (!all || r < 0) {
        fprintf(stderr, "capture_bench: %s\n", all ? strerror(-r) : "out of memory");
        return 1;
    }
    const char *why;
    uint32_t v = jp_capture_verdict(rd, &why, NULL);
    if (v != JP_CAPI_COMPLETE)
        fprintf(stderr, "capture_bench: %s is %s (%s): its records only\n", argv[2],
                jp_capture_integrity_name(v), why ? why : "");
    jp_capture_close(rd);
    int fd = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        fprintf(stderr, "capture_bench: %s: %s\n", argv[3], strerror(errno));
        return 1;
    }
    struct jp_capture_options opt = {.level = level, .block_target = target};
    struct jp_capture_writer *w;
    c0 = cpu_ns();
    r = jp_capture_writer_new_opts(fd, &meta, &opt, &w);
    for (size_t at = 0; r == 0 && at < len;) {
        struct jp_rec_hdr h;
        memcpy(&h, all + at, sizeof h);
        r = jp_capture_write(w, all + at, h.size);
        at += h.size;
    }
    if (r == 0)
        r = jp_capture_flush(w);
    if (r == 0)
        jp_capture_writer_free(w);
    uint64_t write_cpu = cpu_ns() - c0;
    if (r < 0) {
        fprintf(stderr, "capture_bench: writing %s: %s\n", argv[3], strerror(-r));
        return 1;
    }
    struct stat st;
    fstat(fd, &st);
    close(fd);
    printf("recode: version=%u level=%d target=%u records=%llu bytes=%lld bytes_per_record=%.4f "
           "write_cpu_ns=%llu write_ns_per_record=%.2f read_cpu_ns=%llu\n",
           version, level, target, (unsigned long long)n, (long long)st.st_size,
           n ? (double)st.st_size / (double)n : 0.0, (unsigned long long)write_cpu,
           n ? (double)write_cpu / (double)n : 0.0, (unsigned long long)read_cpu);
    free(all);
    return 0;
}
