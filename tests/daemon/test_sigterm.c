/* SIGTERM on a long-lived daemon with runs in flight: it stops accepting, delivers each run as
 * a partial `interrupted` profile (whichever worker drains it), logs them, and exits 0. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support.h"

#define INFLIGHT 6

/* workers: the --workers value, NULL for the default. */
static void runs_in_flight_are_delivered_interrupted(const char *workers)
{
    char *dir = jpt_tmpdir();
    char sock[600], log[600];
    snprintf(sock, sizeof sock, "%s/d.sock", dir);
    snprintf(log, sizeof log, "%s/runs.jsonl", dir);
    const char *extra[] = {"--runs-log", log, workers ? "--workers" : NULL, workers, NULL};
    int errfd;
    pid_t d = jpt_serve(sock, extra, &errfd);
    cr_assert_gt(d, 0);

    struct jpt_client c[INFLIGHT];
    struct jp_ring ring[INFLIGHT];
    for (int i = 0; i < INFLIGHT; i++) {
        cr_assert_eq(jpt_client_connect(&c[i], sock), 0);
        struct jpt_stream s;
        jpt_stream_init(&s, i % 2 ? JP_MODE_MEMORY : JP_MODE_CPU, 70u + (uint32_t)i, 1000000);
        uint64_t id;
        cr_assert_eq(jpt_start_run(&c[i], &s, 4096, -1, 2000u + 500u * (uint32_t)i, &ring[i],
                                   &id), 0);
    }
    /* One connection that has not said hello yet. */
    struct jpt_client idle;
    cr_assert_eq(jpt_client_connect(&idle, sock), 0);
    struct timespec ts = {0, 50000000};
    nanosleep(&ts, NULL);

    kill(d, SIGTERM);
    for (int i = 0; i < INFLIGHT; i++) {
        struct jpt_result r;
        memset(&r, 0, sizeof r);
        cr_assert_eq(jpt_finish(&c[i], &r, 10000), 0, "run %d got no answer", i);
        cr_assert_eq(r.error_code, 0, "run %d: %s", i, r.error);
        cr_assert_eq(r.status, JP_STATUS_PARTIAL);
        cr_assert_str_eq(r.reason, "interrupted");
        cr_assert(strstr(r.toon, "interrupted") != NULL);
        jpt_result_free(&r);
        jp_ring_unmap(&ring[i]);
        jpt_client_close(&c[i]);
    }
    struct jp_ctl_msg m;
    cr_assert_eq(jpt_client_recv(&idle, &m, 10000), 1);
    cr_assert_eq(m.type, JP_CTL_ERROR);
    cr_assert_eq(m.u.error.code, JP_CTLE_SHUTTING_DOWN);
    jpt_client_close(&idle);

    int st = tl_wait(d, 10000);
    cr_assert(st >= 0 && WIFEXITED(st), "daemon did not exit");
    cr_assert_eq(WEXITSTATUS(st), 0);
    /* It stopped accepting and removed its socket. */
    struct jpt_client late;
    cr_assert_lt(jpt_client_connect(&late, sock), 0);
    cr_assert_eq(jpt_count_lines(log, "\"ending\":\"shutdown\""), INFLIGHT);
    cr_assert_eq(jpt_count_lines(log, "\"reason\":\"interrupted\""), INFLIGHT);

    /* stderr: one line per run start and finish, nothing naming paths but the start line's
     * socket (the operator's own, given on the command line). */
    char *err = jpt_slurp_fd(errfd);
    close(errfd);
    int starts = 0, finishes = 0;
    for (char *p = err; (p = strstr(p, " started: ")); p++)
        starts++;
    for (char *p = err; (p = strstr(p, " finished: ")); p++)
        finishes++;
    cr_assert_eq(starts, INFLIGHT, "%s", err);
    cr_assert_eq(finishes, INFLIGHT, "%s", err);
    /* Only the operator's own socket is named, once, in the serving line; no run names a path
     * (the runs log's, a capture's, a client's). */
    const char *after = strstr(err, "serving on ");
    cr_assert_not_null(after, "%s", err);
    after = strchr(after, '\n');
    cr_assert(after && strstr(after, dir) == NULL, "the log must not name paths: %s", err);
    free(err);
    unlink(log);
    rmdir(dir);
    free(dir);
}

Test(sigterm, runs_in_flight_are_delivered_interrupted_and_the_daemon_exits_0)
{
    runs_in_flight_are_delivered_interrupted(NULL);
}

/* Six runs over four workers (the fewest-runs worker takes each): every worker's loop is told,
 * shuts its own runs down, and ends; the daemon exits once all are delivered. */
Test(sigterm, every_worker_delivers_its_runs_and_the_daemon_exits_0)
{
    runs_in_flight_are_delivered_interrupted("4");
}
