/* Out of memory in the offline commands: `jettprofd replay` (human and TOON) and `jettprofd
 * summarize` on small valid CPU and memory captures, with the N-th allocation failing, for
 * every N from 1 to the number of allocations the command makes (tests/lib/failalloc.c). Each
 * run either exits non-zero saying "out of memory" with nothing on stdout, or exits 0 with
 * exactly the bytes of the run where nothing failed. Never exit 0 with other bytes, never a
 * crash, never a verdict about the capture (an "invalid" row or message) for want of memory. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capfile.h"
#include "support.h"

struct outcome {
    int status; /* wait status */
    char *out, *err;
    size_t out_len;
};

/* Runs jettprofd with failalloc preloaded, failing allocation `at` (0: none). */
static struct outcome run_failing(char *const argv[], uint64_t at, const char *count_file)
{
    const char *lib = getenv("JETTPROF_FAILALLOC");
    cr_assert(lib && *lib, "JETTPROF_FAILALLOC is not set (tests/daemon/meson.build)");
    char n[32];
    snprintf(n, sizeof n, "%llu", (unsigned long long)at);
    setenv("LD_PRELOAD", lib, 1);
    setenv("FAILALLOC_AT", n, 1);
    if (count_file)
        setenv("FAILALLOC_COUNT_FILE", count_file, 1);
    else
        unsetenv("FAILALLOC_COUNT_FILE");
    /* a sanitizer runtime would refuse to come second in the lookup order */
    setenv("ASAN_OPTIONS", "verify_asan_link_order=0", 1);
    struct outcome o;
    o.status = jpt_capture_cmd(argv, &o.out, &o.out_len, &o.err);
    unsetenv("LD_PRELOAD");
    unsetenv("FAILALLOC_AT");
    unsetenv("FAILALLOC_COUNT_FILE");
    return o;
}

static void outcome_free(struct outcome *o)
{
    free(o->out);
    free(o->err);
}

/* Sweeps every allocation of one command. Returns the number of allocations it makes. */
static uint64_t sweep(const char *what, char *const argv[], const char *dir)
{
    char count_file[600];
    snprintf(count_file, sizeof count_file, "%s/count", dir);
    struct outcome base = run_failing(argv, 0, count_file);
    cr_assert(WIFEXITED(base.status) && WEXITSTATUS(base.status) == 0,
              "%s without a failure: status %d: %s", what, base.status, base.err);
    cr_assert_gt(base.out_len, 0, "%s prints something", what);
    size_t clen;
    uint8_t *c = jpt_capfile_read(count_file, &clen);
    uint64_t total = strtoull((const char *)c, NULL, 10);
    free(c);
    cr_assert_gt(total, 0, "%s: failalloc counted no allocation", what);
    unsigned wrong = 0;
    for (uint64_t at = 1; at <= total; at++) {
        struct outcome o = run_failing(argv, at, NULL);
        const char *bad = NULL;
        if (!WIFEXITED(o.status))
            bad = "crashed";
        else if (strstr(o.err, "Sanitizer"))
            bad = "a sanitizer report";
        else if (WEXITSTATUS(o.status) == 0 &&
                 (o.out_len != base.out_len || memcmp(o.out, base.out, o.out_len) != 0))
            bad = "exit 0 with other bytes than the unfailed run";
        else if (WEXITSTATUS(o.status) != 0 && !strstr(o.err, "out of memory"))
            bad = "a non-zero exit that does not say out of memory";
        else if (WEXITSTATUS(o.status) != 0 && o.out_len != 0)
            bad = "a non-zero exit with output on stdout";
        else if (strstr(o.out, "summary_invalid") || strstr(o.err, "invalid"))
            bad = "the capture called invalid";
        if (bad) {
            wrong++;
            cr_expect_fail("%s, allocation %llu of %llu: %s (status %d)\n"
                           "stderr: %.300s\nstdout: %.300s",
                           what, (unsigned long long)at, (unsigned long long)total, bad,
                           o.status, o.err, o.out);
        }
        outcome_free(&o);
        if (wrong >= 100) {
            cr_expect_fail("%s: stopping after 100 wrong answers", what);
            break;
        }
    }
    outcome_free(&base);
    return total;
}

static void sweep_mode(uint32_t mode, uint32_t seed)
{
    char *dir = jpt_tmpdir();
    char cap[600];
    snprintf(cap, sizeof cap, "%s/run.jpcap", dir);
    jpt_capfile_write(cap, mode, seed, 24);
    const char *m = mode == JP_MODE_CPU ? "cpu" : "memory";
    char what[80];
    char *human[] = {(char *)jpt_daemon_bin(), "replay", cap, "--format", "human", NULL};
    char *toon[] = {(char *)jpt_daemon_bin(), "replay", cap, "--format", "toon", NULL};
    char *rows[] = {(char *)jpt_daemon_bin(), "summarize", cap, NULL};
    snprintf(what, sizeof what, "replay --format human (%s)", m);
    sweep(what, human, dir);
    snprintf(what, sizeof what, "replay --format toon (%s)", m);
    sweep(what, toon, dir);
    snprintf(what, sizeof what, "summarize (%s)", m);
    sweep(what, rows, dir);
    char count_file[600];
    snprintf(count_file, sizeof count_file, "%s/count", dir);
    unlink(count_file);
    unlink(cap);
    rmdir(dir);
    free(dir);
}

Test(oom, replay_and_summarize_of_a_cpu_capture_survive_every_allocation_failure)
{
    sweep_mode(JP_MODE_CPU, 71);
}

Test(oom, replay_and_summarize_of_a_memory_capture_survive_every_allocation_failure)
{
    sweep_mode(JP_MODE_MEMORY, 72);
}

/* `jettprofd export` in every format and `jettprofd diff`, on the same small captures. */
static void sweep_exports(uint32_t mode, uint32_t seed)
{
    char *dir = jpt_tmpdir();
    char cap[600], cap2[600];
    snprintf(cap, sizeof cap, "%s/run.jpcap", dir);
    snprintf(cap2, sizeof cap2, "%s/other.jpcap", dir);
    jpt_capfile_write(cap, mode, seed, 24);
    jpt_capfile_write(cap2, mode, seed + 1u, 24);
    static const char *const formats[] = {"folded", "pprof", "speedscope", "svg"};
    char what[80];
    for (int i = 0; i < 4; i++) {
        char *argv[] = {(char *)jpt_daemon_bin(), "export", cap, "--format",
                        (char *)formats[i], NULL};
        snprintf(what, sizeof what, "export --format %s (%s)", formats[i],
                 mode == JP_MODE_CPU ? "cpu" : "memory");
        sweep(what, argv, dir);
    }
    static const char *const diffs[] = {"human", "svg"};
    for (int i = 0; i < 2; i++) {
        char *argv[] = {(char *)jpt_daemon_bin(), "diff", cap, cap2, "--format",
                        (char *)diffs[i], NULL};
        snprintf(what, sizeof what, "diff --format %s (%s)", diffs[i],
                 mode == JP_MODE_CPU ? "cpu" : "memory");
        sweep(what, argv, dir);
    }
    char count_file[600];
    snprintf(count_file, sizeof count_file, "%s/count", dir);
    unlink(count_file);
    unlink(cap);
    unlink(cap2);
    rmdir(dir);
    free(dir);
}

Test(oom, exports_and_diffs_of_a_cpu_capture_survive_every_allocation_failure)
{
    sweep_exports(JP_MODE_CPU, 81);
}

Test(oom, exports_and_diffs_of_a_memory_capture_survive_every_allocation_failure)
{
    sweep_exports(JP_MODE_MEMORY, 82);
}

/* The injector itself: it counts, and the one failure it injects is seen, first or last. */
Test(oom, the_injector_counts_and_fails_the_chosen_allocation)
{
    char *dir = jpt_tmpdir();
    char count_file[600], cap[600];
    snprintf(count_file, sizeof count_file, "%s/count", dir);
    snprintf(cap, sizeof cap, "%s/run.jpcap", dir);
    jpt_capfile_write(cap, JP_MODE_CPU, 73, 4);
    char *argv[] = {(char *)jpt_daemon_bin(), "replay", cap, NULL};
    struct outcome o = run_failing(argv, 0, count_file);
    cr_expect(WIFEXITED(o.status) && WEXITSTATUS(o.status) == 0, "%s", o.err);
    outcome_free(&o);
    size_t clen;
    uint8_t *c = jpt_capfile_read(count_file, &clen);
    uint64_t total = strtoull((const char *)c, NULL, 10);
    free(c);
    cr_assert_gt(total, 1, "allocations counted: %llu", (unsigned long long)total);
    /* the first allocation is the reader's own: replay cannot go on without it */
    o = run_failing(argv, 1, NULL);
    cr_expect(WIFEXITED(o.status) && WEXITSTATUS(o.status) == 1, "status %d", o.status);
    cr_expect(strstr(o.err, "out of memory"), "%s", o.err);
    outcome_free(&o);
    /* past the last one nothing fails */
    o = run_failing(argv, total + 1, NULL);
    cr_expect(WIFEXITED(o.status) && WEXITSTATUS(o.status) == 0, "%s", o.err);
    outcome_free(&o);
    unlink(count_file);
    unlink(cap);
    rmdir(dir);
    free(dir);
}
