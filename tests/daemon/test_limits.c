/* What one client may ask of a long-lived daemon: budgets it can lower but never raise, and
 * connections that cannot lock other users out or make the daemon buffer without bound. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support.h"

static void stop(pid_t d)
{
    kill(d, SIGTERM);
    int st = jpt_wait(d, 20000);
    cr_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "daemon exit %d", st);
}

static char *sock_in(char **dir)
{
    *dir = jpt_tmpdir();
    cr_assert_not_null(*dir);
    char *sock = malloc(600);
    snprintf(sock, 600, "%s/d.sock", *dir);
    return sock;
}

/* A client asking for UINT64_MAX of both budgets runs under the operator's caps: the profile is
 * the one the engine gives the same stream at the capped budgets, byte for byte. */
Test(limits, a_client_cannot_raise_the_budgets_past_the_operator_cap)
{
    char *dir, *sock = sock_in(&dir);
    const char *extra[] = {"--max-cpu-budget", "3000", "--max-retention-budget", "3000", NULL};
    pid_t d = jpt_serve(sock, extra, NULL);
    cr_assert_gt(d, 0);
    static const uint32_t modes[] = {JP_MODE_CPU, JP_MODE_MEMORY};
    for (int i = 0; i < 2; i++) {
        struct jpt_client c;
        cr_assert_eq(jpt_client_connect(&c, sock), 0);
        struct jpt_stream s;
        jpt_stream_init(&s, modes[i], 11, 20000);
        s.cpu_budget = s.retention_budget = UINT64_MAX;
        struct jpt_result got;
        cr_assert_eq(jpt_run(&c, &s, 4096, -1, &got), 0);
        cr_assert_eq(got.error_code, 0, "%s", got.error);
        jpt_client_close(&c);

        struct jpt_result want;
        jpt_stream_init(&s, modes[i], 11, 20000);
        s.cpu_budget = s.retention_budget = 3000;
        cr_assert_eq(jpt_expected(&s, &want), 0);
        cr_assert_eq(want.status, JP_STATUS_PARTIAL, "the cap is small enough to bite");
        cr_assert_str_eq(got.reason, want.reason);
        cr_assert_str_eq(got.reason, modes[i] == JP_MODE_CPU ? "cpu_metadata_limit"
                                                             : "retention_metadata_limit");
        cr_assert_eq(got.toon_len, want.toon_len);
        cr_assert(memcmp(got.toon, want.toon, want.toon_len) == 0, "%s", got.toon);
        jpt_result_free(&got);
        jpt_result_free(&want);
    }
    stop(d);
    free(sock);
    rmdir(dir);
    free(dir);
}

/* Without an operator option the cap is the contract's 32 MiB / 64 MiB; a client asking for
 * less still gets less. */
Test(limits, default_caps_are_the_contract_budgets_and_a_client_may_lower_them)
{
    char *dir, *sock = sock_in(&dir);
    pid_t d = jpt_serve(sock, NULL, NULL);
    cr_assert_gt(d, 0);
    struct jpt_client c;
    cr_assert_eq(jpt_client_connect(&c, sock), 0);
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_CPU, 12, 5000);
    s.cpu_budget = UINT64_MAX;
    struct jpt_result got, want;
    cr_assert_eq(jpt_run(&c, &s, 4096, -1, &got), 0);
    jpt_client_close(&c);
    jpt_stream_init(&s, JP_MODE_CPU, 12, 5000);
    cr_assert_eq(jpt_expected(&s, &want), 0);
    cr_assert_str_eq(got.toon, want.toon, "UINT64_MAX runs as 33554432");
    cr_assert(strstr(got.toon, "cpu_metadata_budget_bytes: 33554432") != NULL, "%s", got.toon);
    jpt_result_free(&got);
    jpt_result_free(&want);

    cr_assert_eq(jpt_client_connect(&c, sock), 0);
    jpt_stream_init(&s, JP_MODE_CPU, 12, 5000);
    s.cpu_budget = 3000;
    cr_assert_eq(jpt_run(&c, &s, 4096, -1, &got), 0);
    jpt_client_close(&c);
    cr_assert_eq(got.status, JP_STATUS_PARTIAL);
    cr_assert_str_eq(got.reason, "cpu_metadata_limit");
    jpt_result_free(&got);
    stop(d);
    free(sock);
    rmdir(dir);
    free(dir);
}
