/* 16 concurrent runs on one long-lived daemon with three drain workers, each run streaming over a
 * million records of its own known event stream; every profile must equal the engine's result on
 * the same stream, whichever worker drained it. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support.h"

#define RUNS 16
/* The ThreadSanitizer build streams fewer (tests/daemon/meson.build): the instrumented daemon is
 * many times slower, and the races it looks for need concurrency, not volume. */
#ifndef EVENTS
#define EVENTS 1000000u
#endif

struct job {
    const char *sock;
    int index;
    int rc;
    struct jpt_result got;
};

static void *run_one(void *arg)
{
    struct job *j = arg;
    struct jpt_client c;
    j->rc = jpt_client_connect(&c, j->sock);
    if (j->rc < 0)
        return NULL;
    struct jpt_stream s;
    jpt_stream_init(&s, j->index % 2 ? JP_MODE_MEMORY : JP_MODE_CPU, 1000u + (uint32_t)j->index,
                    EVENTS);
    j->rc = jpt_run(&c, &s, 1u << 14, -1, &j->got);
    jpt_client_close(&c);
    return NULL;
}

/* Threads of pid, from /proc/PID/task. */
static int thread_count(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    cr_assert_not_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

Test(concurrent, sixteen_runs_each_get_the_engines_profile_of_their_stream)
{
    char *dir = jpt_tmpdir();
    cr_assert_not_null(dir);
    char sock[600], log[600];
    snprintf(sock, sizeof sock, "%s/d.sock", dir);
    snprintf(log, sizeof log, "%s/runs.jsonl", dir);
    const char *extra[] = {"--runs-log", log, "--workers", "3", NULL};
    pid_t d = jpt_serve(sock, extra, NULL);
    cr_assert_gt(d, 0);
    /* The socket may accept a moment before the pool is up: wait for it (generously). */
    for (int i = 0; i < 1000 && thread_count(d) < 4; i++)
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    cr_assert_geq(thread_count(d), 4, "the main loop's thread and three workers");

    static struct job jobs[RUNS];
    pthread_t th[RUNS];
    for (int i = 0; i < RUNS; i++) {
        jobs[i] = (struct job){.sock = sock, .index = i};
        cr_assert_eq(pthread_create(&th[i], NULL, run_one, &jobs[i]), 0);
    }
    for (int i = 0; i < RUNS; i++)
        pthread_join(th[i], NULL);

    uint64_t seen_ids[RUNS];
    for (int i = 0; i < RUNS; i++) {
        struct job *j = &jobs[i];
        cr_assert_eq(j->rc, 0, "run %d failed: %d", i, j->rc);
        cr_assert_eq(j->got.error_code, 0, "run %d: daemon error %s", i, j->got.error);
        struct jpt_stream s;
        jpt_stream_init(&s, i % 2 ? JP_MODE_MEMORY : JP_MODE_CPU, 1000u + (uint32_t)i, EVENTS);
        s.run_id = j->got.run_id;
        struct jpt_result want;
        cr_assert_eq(jpt_expected(&s, &want), 0);
        cr_assert_eq(j->got.status, JP_STATUS_COMPLETE, "run %d: %s", i, j->got.reason);
        cr_assert_str_eq(j->got.human, want.human, "run %d: human profile differs", i);
        cr_assert_str_eq(j->got.toon, want.toon, "run %d: toon profile differs", i);
        /* Different streams must give different profiles, or the comparison proves little. */
        if (i > 1)
            cr_assert_str_neq(j->got.toon, jobs[i - 2].got.toon);
        for (int k = 0; k < i; k++)
            cr_assert_neq(seen_ids[k], j->got.run_id, "run ids must be unique");
        seen_ids[i] = j->got.run_id;
        jpt_result_free(&want);
    }
    for (int i = 0; i < RUNS; i++)
        jpt_result_free(&jobs[i].got);

    kill(d, SIGTERM);
    int st = tl_wait(d, 10000);
    cr_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    cr_assert_eq(jpt_count_lines(log, "\"status\":\"complete\""), RUNS);
    unlink(log);
    rmdir(dir);
    free(dir);
}

/* A client that says HELLO and hangs up at once: the daemon's WELCOME finds the peer gone, the
 * session closes on the main loop, and it must not also be handed to a worker (closing handles
 * twice would end the daemon). Afterwards the daemon still serves a whole run. */
Test(concurrent, a_client_gone_before_its_welcome_is_not_handed_over)
{
    char *dir = jpt_tmpdir();
    cr_assert_not_null(dir);
    char sock[600];
    snprintf(sock, sizeof sock, "%s/d.sock", dir);
    pid_t d = jpt_serve(sock, NULL, NULL);
    cr_assert_gt(d, 0);
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_MEMORY, 5, 1000);
    /* Fewer than JPD_MAX_PREHELLO_PER_UID: the last run is not refused as one too many. */
    for (int i = 0; i < 24; i++) {
        struct jpt_client c;
        cr_assert_eq(jpt_client_connect(&c, sock), 0);
        struct jp_ctl_msg m = {.type = JP_CTL_HELLO};
        m.u.hello.version = JP_CTL_VERSION;
        m.u.hello.mode = JP_MODE_MEMORY;
        m.u.hello.limit = 10;
        m.u.hello.outputs = JP_OUT_TOON;
        m.u.hello.capabilities = 0xffu;
        cr_assert_eq(jp_ctl_send(c.fd, &m, NULL, 0), 0);
        jpt_client_close(&c);
    }
    struct jpt_client c;
    cr_assert_eq(jpt_client_connect(&c, sock), 0);
    struct jpt_result got;
    int rc = jpt_run(&c, &s, 1u << 12, -1, &got);
    cr_assert_eq(rc, 0, "run: %d (%s), daemon %s", rc, strerror(-rc),
                 waitpid(d, NULL, WNOHANG) == d ? "gone" : "alive");
    cr_assert_eq(got.status, JP_STATUS_COMPLETE, "%s %s", got.reason, got.error);
    jpt_result_free(&got);
    jpt_client_close(&c);
    kill(d, SIGTERM);
    int st = tl_wait(d, 10000);
    cr_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "daemon status %d", st);
    rmdir(dir);
    free(dir);
}
