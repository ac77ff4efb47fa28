/* `jettprofd summarize`: one repetition row per execution, appended across executions, with
 * each state (summary_written, capture_missing, summary_invalid, workload_failed). */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support.h"

static void capture_run(const char *path, uint32_t mode, uint32_t seed, uint64_t events,
                        int finish)
{
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    cr_assert_geq(fd, 0);
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    char num[16];
    snprintf(num, sizeof num, "%d", sv[1]);
    char *argv[] = {(char *)jpt_daemon_bin(), "--session-fd", num, NULL};
    int errfd;
    pid_t pid = jpt_spawn(argv, sv[1], &errfd);
    close(sv[1]);
    struct jpt_client c;
    cr_assert_eq(jpt_client_open_fd(&c, sv[0]), 0);
    struct jpt_stream s;
    jpt_stream_init(&s, mode, seed, events);
    if (finish) {
        struct jpt_result r;
        cr_assert_eq(jpt_run(&c, &s, 1024, fd, &r), 0);
        jpt_result_free(&r);
    } else {
        struct jp_ring ring;
        uint64_t id;
        cr_assert_eq(jpt_start_run(&c, &s, 1024, fd, events / 2, &ring, &id), 0);
        jp_ring_unmap(&ring);
    }
    close(fd);
    jpt_client_close(&c);
    free(jpt_slurp_fd(errfd));
    close(errfd);
    int st = tl_wait(pid, 10000);
    cr_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

/* The memory totals the engine gives for the same stream. */
static struct jp_engine_summary engine_totals(uint32_t seed, uint64_t events)
{
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_MEMORY, seed, events);
    struct jp_engine *e;
    cr_assert_eq(jp_engine_new(&e), 0);
    uint8_t buf[JP_REC_MAX_SIZE];
    const char *why;
    for (uint32_t len; (len = jpt_stream_next(&s, buf));)
        cr_assert_eq(jp_engine_feed(e, buf, len, &why), 0);
    struct jp_engine_summary sum;
    cr_assert_eq(jp_engine_summary(e, &sum), 0);
    jp_engine_free(e);
    return sum;
}

static int summarize(char *const extra[], char **out, char **err)
{
    char *argv[32];
    int n = 0;
    argv[n++] = (char *)jpt_daemon_bin();
    argv[n++] = "summarize";
    for (int i = 0; extra[i]; i++)
        argv[n++] = extra[i];
    argv[n] = NULL;
    int st = jpt_capture_cmd(argv, out, NULL, err);
    cr_assert(WIFEXITED(st));
    return WEXITSTATUS(st);
}

Test(summarize, rows_accumulate_across_executions_with_every_state)
{
    char *dir = jpt_tmpdir();
    char good[600], cut[600], bad[600], missing[600], reps[600];
    snprintf(good, sizeof good, "%s/good.jpcap", dir);
    snprintf(cut, sizeof cut, "%s/cut.jpcap", dir);
    snprintf(bad, sizeof bad, "%s/bad.jpcap", dir);
    snprintf(missing, sizeof missing, "%s/missing.jpcap", dir);
    snprintf(reps, sizeof reps, "%s/reps.jsonl", dir);
    capture_run(good, JP_MODE_MEMORY, 90, 20000, 1);
    capture_run(cut, JP_MODE_MEMORY, 91, 20000, 0);
    int fd = open(bad, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    cr_assert_eq(write(fd, "JPCAPT\r\nnot really", 18), 18);
    close(fd);

    /* Execution 1 starts the file; each later execution appends its row. */
    char *out, *err;
    cr_assert_eq(summarize((char *[]){"--repetitions", reps, "--execution-index", "1", good,
                                      NULL}, &out, &err), 0, "%s", err);
    free(out);
    free(err);
    cr_assert_eq(summarize((char *[]){"--repetitions", reps, "--execution-index", "2", cut,
                                      missing, bad, "--exit-code", "3", good, NULL},
                           &out, &err), 0, "%s", err);
    free(out);
    free(err);
    size_t len;
    char *rows = jpt_slurp_file(reps, &len);
    cr_assert_not_null(rows);
    char *line[8];
    int n = 0;
    for (char *save = NULL, *l = strtok_r(rows, "\n", &save); l && n < 8;
         l = strtok_r(NULL, "\n", &save))
        line[n++] = l;
    cr_assert_eq(n, 5, "rows: %s", rows);
    for (int i = 0; i < n; i++) {
        char want[64];
        snprintf(want, sizeof want, "\"execution_index\":%d,", i + 1);
        cr_assert(strstr(line[i], "\"schema\":\"jettprof.capture-repetition/v1\"") != NULL);
        cr_assert(strstr(line[i], want) != NULL, "row %d: %s", i, line[i]);
    }
    struct jp_engine_summary sum = engine_totals(90, 20000);
    char want[256];
    cr_assert(strstr(line[0], "\"state\":\"summary_written\"") != NULL, "%s", line[0]);
    cr_assert(strstr(line[0], "\"exit_code\":0") != NULL);
    snprintf(want, sizeof want, "\"allocations\":%llu,\"resizes\":%llu,\"bytes\":%llu",
             (unsigned long long)sum.allocation_count, (unsigned long long)sum.resize_count,
             (unsigned long long)sum.allocated_bytes);
    cr_assert(strstr(line[0], want) != NULL, "want %s in %s", want, line[0]);
    snprintf(want, sizeof want, "\"peak\":%llu", (unsigned long long)sum.peak_live_bytes);
    cr_assert(strstr(line[0], want) != NULL, "want %s in %s", want, line[0]);
    cr_assert(strstr(line[0], "\"integrity\":{\"status\":\"complete\",\"caveat\":null}") != NULL,
              "%s", line[0]);
    cr_assert(strstr(line[1], "\"state\":\"summary_written\"") != NULL, "%s", line[1]);
    cr_assert(strstr(line[1], "\"status\":\"missing_stop_event\",\"caveat\":{\"kind\":"
                              "\"missing_stop_event\"") != NULL, "%s", line[1]);
    cr_assert(strstr(line[2], "\"state\":\"capture_missing\",\"summary\":null") != NULL, "%s",
              line[2]);
    cr_assert(strstr(line[3], "\"state\":\"summary_invalid\",\"summary\":null") != NULL, "%s",
              line[3]);
    cr_assert(strstr(line[3], "\"kind\":\"invalid_capture\"") != NULL, "%s", line[3]);
    cr_assert(strstr(line[4], "\"exit_code\":3,\"state\":\"workload_failed\",\"summary\":null") !=
              NULL, "%s", line[4]);
    free(rows);

    /* A new execution 1 starts the file over. */
    cr_assert_eq(summarize((char *[]){"--repetitions", reps, good, NULL}, &out, &err), 0);
    free(out);
    free(err);
    cr_assert_eq(jpt_count_lines(reps, "jettprof.capture-repetition/v1"), 1);

    /* Without --repetitions the rows go to stdout. */
    cr_assert_eq(summarize((char *[]){"--execution-index", "7", good, NULL}, &out, &err), 0);
    cr_assert(strstr(out, "\"execution_index\":7,") != NULL, "%s", out);
    free(out);
    free(err);
    unlink(good);
    unlink(cut);
    unlink(bad);
    unlink(reps);
    rmdir(dir);
    free(dir);
}
