/* Snapshots of a run in flight (docs/READINGS.md #21) on a serving daemon: `jettprofd show
 * RUN_ID` of a live run answers its snapshot, the profile of the records the daemon has taken so
 * far, built on the run's own loop; that snapshot is the replay of the run's capture up to the
 * record it names, byte for byte but for its duration; and a run snapshotted again and again
 * finalizes to the very profile it would have had unobserved. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "protocol/ring.h"
#include "support.h"
#include "tests/lib/stop.h"
#include "tests/lib/text.h"

/* `jettprofd show RUN_ID --format F` against sock: the exit status, stdout and stderr. */
static int show(const char *sock, uint64_t run_id, const char *format, char **out, char **err)
{
    char id[32];
    snprintf(id, sizeof id, "%llu", (unsigned long long)run_id);
    char *argv[] = {(char *)jpt_daemon_bin(), "show", id, "--socket", (char *)sock, "--format",
                    (char *)format, NULL};
    size_t len;
    return jpt_capture_cmd(argv, out, &len, err);
}

/* The records_taken a snapshot's TOON names. */
static uint64_t records_taken(const char *toon)
{
    const char *p = strstr(toon, "\n    records_taken: ");
    cr_assert_not_null(p, "no records_taken in a snapshot:\n%s", toon);
    return strtoull(p + strlen("\n    records_taken: "), NULL, 10);
}

/* `jettprofd replay FILE [--until-record N] --format toon`'s stdout (N 0: the whole capture). */
static char *replay_toon(const char *file, uint64_t n)
{
    char num[32];
    snprintf(num, sizeof num, "%llu", (unsigned long long)n);
    char *argv[] = {(char *)jpt_daemon_bin(), "replay", (char *)file, "--format", "toon",
                    n ? "--until-record" : NULL, num, NULL};
    char *out, *err;
    size_t len;
    int st = jpt_capture_cmd(argv, &out, &len, &err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "replay: %s", err);
    free(err);
    return out;
}

static const char *const timed[] = {"wall_duration_ns:", NULL};

Test(snapshot, a_live_run_is_snapshotted_on_its_loop_and_its_replay_agrees, .timeout = 120)
{
    struct jpt_served sv;
    cr_assert_eq(jpt_serve_tmp(&sv, NULL, NULL), 0);
    char cap[700];
    snprintf(cap, sizeof cap, "%s/run.jpcap", sv.dir);
    int fd = open(cap, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    cr_assert_geq(fd, 0);
    struct jpt_client c;
    cr_assert_eq(jpt_client_connect(&c, sv.sock), 0);
    const uint64_t events = 20000;
    struct jpt_stream s, again;
    jpt_stream_init(&s, JP_MODE_MEMORY, 41, events);
    again = s;
    struct jp_ring ring;
    uint64_t run_id;
    cr_assert_eq(jpt_start_run(&c, &s, 4096, fd, 2000, &ring, &run_id), 0);
    close(fd);
    /* The run is live once its worker has taken its ring; until then it is no run to show. */
    for (int i = 0;; i++) {
        char *out, *err;
        int st = show(sv.sock, run_id, "toon", &out, &err);
        int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
        free(out);
        free(err);
        if (ok)
            break;
        cr_assert_lt(i, 500, "the run never became visible to show");
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }

    /* Snapshots while the stream goes on: one every 500 records pushed (some 10 ms apart). */
    char *snaps[64];
    uint64_t taken[64];
    unsigned nsnaps = 0;
    uint8_t buf[JP_REC_MAX_SIZE];
    uint64_t pushed = 2000;
    for (uint32_t len; (len = jpt_stream_next(&s, buf)) != 0;) {
        cr_assert_eq(jpt_push(&ring, buf, len), 0);
        if (++pushed % 500 == 0 && nsnaps < 64) {
            char *out, *err;
            int st = show(sv.sock, run_id, "toon", &out, &err);
            cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "show of a live run: %s", err);
            cr_assert(strstr(out, "\n  termination: running\n"), "%s", out);
            cr_assert(strstr(out, "\n  status: partial\n"), "%s", out);
            taken[nsnaps] = records_taken(out); /* the run's records and the daemon's marks */
            cr_assert(nsnaps == 0 || taken[nsnaps] >= taken[nsnaps - 1u]);
            snaps[nsnaps++] = out;
            free(err);
        }
    }
    cr_assert_geq(nsnaps, 10);
    char *human, *err;
    int st = show(sv.sock, run_id, "human", &human, &err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", err);
    cr_assert(strstr(human, "live snapshot: the first "), "%s", human);
    cr_assert(strstr(human, " s into it\n"), "%s", human);
    free(human);
    free(err);
    uint32_t len = jpt_stream_stop(&s, buf);
    cr_assert_eq(jpt_push(&ring, buf, len), 0);
    jp_ring_close(&ring);
    struct jp_ctl_msg m = {.type = JP_CTL_FINALIZE};
    m.u.finalize.termination = JP_TERM_RETURNED;
    cr_assert_eq(jp_ctl_send(c.fd, &m, NULL, 0), 0);
    struct jpt_result got;
    cr_assert_eq(jpt_finish(&c, &got, 60000), 0);
    cr_assert_eq(got.error_code, 0, "%s", got.error);
    jpt_client_close(&c);
    jp_ring_unmap(&ring);

    /* The final profile is the one the run gives unobserved, and its capture's replay. */
    struct jpt_result want;
    again.run_id = got.run_id;
    cr_assert_eq(jpt_expected(&again, &want), 0);
    cr_assert_str_eq(got.toon, want.toon);
    char *whole = replay_toon(cap, 0);
    cr_assert_str_eq(whole, got.toon, "the capture replays to other bytes");
    free(whole);
    jpt_result_free(&want);
    jpt_result_free(&got);

    /* Each snapshot is the replay of the capture to the record it names, its duration aside. */
    for (unsigned i = 0; i < nsnaps; i++) {
        char *point = replay_toon(cap, taken[i]);
        char *a = tl_without_lines(snaps[i], timed), *b = tl_without_lines(point, timed);
        cr_assert_str_eq(a, b, "snapshot %u (%llu records):\n%s\nreplay:\n%s", i,
                         (unsigned long long)taken[i], a, b);
        cr_assert(strstr(snaps[i], "wall_duration_ns: ") &&
                      !strstr(snaps[i], "wall_duration_ns: unavailable"),
                  "a live snapshot knows how long the run has gone:\n%s", snaps[i]);
        free(a);
        free(b);
        free(point);
        free(snaps[i]);
    }
    tl_stop(sv.pid, 20000);
    unlink(cap);
    jpt_served_clean(&sv);
}

/* Another run's id, or one that never was, gets the same answer; a run that ended is shown as
 * its final profile. */
Test(snapshot, show_of_a_run_no_one_has_is_refused_and_an_ended_run_is_final)
{
    struct jpt_served sv;
    cr_assert_eq(jpt_serve_tmp(&sv, NULL, NULL), 0);
    char *out, *err;
    int st = show(sv.sock, 987654, "toon", &out, &err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) != 0, "%s", out);
    cr_assert(strstr(err, "no such run visible to you"), "%s", err);
    free(out);
    free(err);
    struct jpt_client c;
    cr_assert_eq(jpt_client_connect(&c, sv.sock), 0);
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_CPU, 42, 3000);
    struct jpt_result got;
    cr_assert_eq(jpt_run(&c, &s, 4096, -1, &got), 0);
    jpt_client_close(&c);
    st = show(sv.sock, got.run_id, "toon", &out, &err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", err);
    cr_assert_str_eq(out, got.toon, "a finished run shows its final profile");
    free(out);
    free(err);
    jpt_result_free(&got);
    tl_stop(sv.pid, 20000);
    jpt_served_clean(&sv);
}
