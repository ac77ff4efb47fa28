/* What an operator sees of a serve daemon: the runs log's row of each finished run. */
#include <criterion/criterion.h>
#include <regex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "support.h"

/* 1 when s matches the extended regular expression re. */
static int matches(const char *s, const char *re)
{
    regex_t rx;
    cr_assert_eq(regcomp(&rx, re, REG_EXTENDED | REG_NOSUB), 0, "%s", re);
    int ok = regexec(&rx, s, 0, NULL, 0) == 0;
    regfree(&rx);
    return ok;
}

Test(status, runs_log_row_names_start_duration_program_mode_status)
{
    char *dir = jpt_tmpdir();
    char sock[600], log[600];
    snprintf(sock, sizeof sock, "%s/d.sock", dir);
    snprintf(log, sizeof log, "%s/runs.jsonl", dir);
    const char *extra[] = {"--runs-log", log, NULL};
    int errfd;
    pid_t d = jpt_serve(sock, extra, &errfd);
    cr_assert_gt(d, 0);

    time_t before = time(NULL);
    struct jpt_client c;
    cr_assert_eq(jpt_client_connect(&c, sock), 0);
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_MEMORY, 12, 2000);
    struct jpt_result res;
    cr_assert_eq(jpt_run(&c, &s, 1024, -1, &res), 0);
    cr_assert_eq(res.error_code, 0, "%s", res.error);
    jpt_client_close(&c);
    jpt_result_free(&res);

    kill(d, SIGTERM);
    cr_assert_eq(tl_wait(d, 10000), 0);
    close(errfd);
    char *row = jpt_slurp_file(log, NULL);
    cr_assert(row && row[0], "no runs log row");
    /* the existing fields stay */
    cr_expect(matches(row, "^\\{\"run_id\":1,\"pid\":[0-9]+,\"uid\":0,\"ending\":\"stop\","), "%s",
              row);
    cr_expect(strstr(row, "\"mode\":\"memory\""), "%s", row);
    cr_expect(strstr(row, "\"status\":\"complete\""), "%s", row);
    cr_expect(strstr(row, "\"totals\":{"), "%s", row);
    /* the new ones: the program is the stream's first project source (support.c) */
    cr_expect(matches(row, "\"start\":\"[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}:"
                           "[0-9]{2}Z\""), "%s", row);
    cr_expect(matches(row, "\"duration_ms\":[0-9]+,"), "%s", row);
    cr_expect(strstr(row, "\"program\":\"src/mod5_0.jett\""), "%s", row);
    /* the start is this run's: between the second before it and the one after the daemon ended */
    time_t after = time(NULL);
    int found = 0;
    for (time_t t = before; t <= after && !found; t++) {
        char when[48];
        struct tm tm;
        gmtime_r(&t, &tm);
        strftime(when, sizeof when, "\"start\":\"%Y-%m-%dT%H:%M:%SZ\"", &tm);
        found = strstr(row, when) != NULL;
    }
    cr_expect(found, "no start between %lld and %lld in %s", (long long)before,
              (long long)after, row);
    free(row);
    free(dir);
}
