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

#include "protocol/capture.h"

static uint64_t cpu_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

int main(int argc, char **argv)
{
    if (argc < 5 || strcmp(argv[1], "recode") != 0) {
        fprintf(stderr, "usage: capture_bench recode IN OUT VERSION [LEVEL [TARGET]]\n");
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
