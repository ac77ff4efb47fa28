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

/* The figure `key` of a profile's totals (TOON). */
static uint64_t total_of(const char *toon, const char *key)
{
    char pat[96];
    snprintf(pat, sizeof pat, "\n    %s: ", key);
    const char *p = strstr(toon, pat);
    cr_assert_not_null(p, "no %s in:\n%s", key, toon);
    return strtoull(p + strlen(pat), NULL, 10);
}

/* One TOP on the watcher's connection: the answer, valid until the next receive. */
static void ask_top(struct jpt_client *w, uint64_t run_id, uint32_t rows, struct jp_ctl_msg *a)
{
    struct jp_ctl_msg q = {.type = JP_CTL_TOP};
    q.u.top.run_id = run_id;
    q.u.top.rows = rows;
    cr_assert_eq(jp_ctl_send(w->fd, &q, NULL, 0), 0);
    cr_assert_eq(jpt_client_recv(w, a, 10000), 1, "no answer to TOP");
}

/* `jettprofd top`'s frames on one connection: a frame is the run's figures now (once the
 * daemon has taken every record pushed, its memory figures are the final profile's: the stop
 * adds no allocation), its rows hold every site with what the run charged to it, and when the
 * run ends the watcher gets the final profile unasked, the very text the run's client got. */
Test(top, a_frame_is_the_runs_figures_and_its_end_is_the_final_profile, .timeout = 120)
{
    struct jpt_served sv;
    cr_assert_eq(jpt_serve_tmp(&sv, NULL, NULL), 0);
    struct jpt_client c;
    cr_assert_eq(jpt_client_connect(&c, sv.sock), 0);
    struct jpt_stream s, again;
    jpt_stream_init(&s, JP_MODE_MEMORY, 43, 6000);
    again = s;
    struct jp_ring ring;
    uint64_t run_id;
    cr_assert_eq(jpt_start_run(&c, &s, 4096, -1, 0, &ring, &run_id), 0);
    uint8_t buf[JP_REC_MAX_SIZE];
    for (uint32_t len; (len = jpt_stream_next(&s, buf)) != 0;)
        cr_assert_eq(jpt_push(&ring, buf, len), 0);
    struct jpt_result want;
    again.run_id = run_id;
    cr_assert_eq(jpt_expected(&again, &want), 0);
    const uint64_t retained = total_of(want.toon, "retained_bytes"),
                   peak = total_of(want.toon, "peak_live_bytes"),
                   allocated = total_of(want.toon, "allocated_bytes"),
                   count = total_of(want.toon, "allocation_count");

    struct jpt_client w;
    cr_assert_eq(jpt_client_connect(&w, sv.sock), 0);
    struct jp_ctl_msg a;
    /* until the daemon has taken all that was pushed (the first TOPs may find the run not yet
     * live on its worker: no_such_run, on a new connection each) */
    for (int i = 0;; i++) {
        cr_assert_lt(i, 1000, "the frames never reached the pushed records");
        ask_top(&w, run_id, JP_CTL_MAX_TOP_ROWS, &a);
        if (a.type == JP_CTL_ERROR) {
            cr_assert_eq(a.u.error.code, JP_CTLE_NO_SUCH_RUN, "%.*s",
                         (int)a.u.error.message_len, a.u.error.message);
            jpt_client_close(&w);
            cr_assert_eq(jpt_client_connect(&w, sv.sock), 0);
        } else {
            cr_assert_eq(a.type, JP_CTL_TOP_FRAME);
            cr_assert_eq(a.u.top_frame.nfigures, 4u);
            if (a.u.top_frame.figures[3] == count)
                break;
        }
        usleep(10000);
    }
    const __typeof__(a.u.top_frame) *f = &a.u.top_frame;
    cr_assert_eq(f->run_id, run_id);
    cr_assert_eq(f->mode, JP_MODE_MEMORY);
    cr_assert_eq(f->figures[0], retained, "live now is what the run retains");
    cr_assert_eq(f->figures[1], peak);
    cr_assert_eq(f->figures[2], allocated);
    cr_assert_geq(f->records, 6000u, "records taken: the stream's and the daemon's marks");
    cr_assert_eq(f->violations, 0u);
    cr_assert_gt(f->nrows, 0u);
    uint64_t live = 0, alloc = 0, n = 0;
    for (uint32_t i = 0; i < f->nrows; i++) {
        live += f->rows[i].v[0];
        alloc += f->rows[i].v[1];
        n += f->rows[i].v[2];
        cr_assert_gt(f->rows[i].name_len, 0u);
        for (uint32_t j = 0; j < i; j++)
            cr_assert(f->rows[j].name_len != f->rows[i].name_len ||
                          memcmp(f->rows[j].name, f->rows[i].name, f->rows[i].name_len) ||
                          f->rows[j].line != f->rows[i].line,
                      "row %u twice", i);
    }
    cr_assert_eq(live, retained, "the sites' live bytes add up to the run's");
    cr_assert_eq(alloc, total_of(want.toon, "attributed_allocated_bytes"));
    cr_assert_eq(n, count, "every allocation is a site's");
    cr_assert_leq(f->npoints, JP_CTL_MAX_TOP_POINTS);
    for (uint32_t i = 0; i < f->npoints; i++)
        cr_assert_leq(f->timeline[i], peak, "a point's live bytes are at most the peak");

    /* Fewer rows asked: the leaders of each value among them. */
    ask_top(&w, run_id, 2, &a);
    cr_assert_eq(a.type, JP_CTL_TOP_FRAME);
    cr_assert_eq(a.u.top_frame.nrows, 2u);
    /* a TOP connection asks for its own run only */
    struct jpt_client x;
    cr_assert_eq(jpt_client_connect(&x, sv.sock), 0);
    ask_top(&x, run_id, 5, &a);
    cr_assert_eq(a.type, JP_CTL_TOP_FRAME);
    ask_top(&x, run_id + 1, 5, &a);
    cr_assert_eq(a.type, JP_CTL_ERROR);
    cr_assert_eq(a.u.error.code, JP_CTLE_BAD_MESSAGE);
    jpt_client_close(&x);

    /* The run ends: the watcher gets its final profile without asking. */
    uint32_t len = jpt_stream_stop(&s, buf);
    cr_assert_eq(jpt_push(&ring, buf, len), 0);
    struct jp_ctl_msg m = {.type = JP_CTL_FINALIZE};
    m.u.finalize.termination = JP_TERM_RETURNED;
    cr_assert_eq(jp_ctl_send(c.fd, &m, NULL, 0), 0);
    struct jpt_result got;
    cr_assert_eq(jpt_finish(&c, &got, 60000), 0);
    cr_assert_eq(got.error_code, 0, "%s", got.error);
    cr_assert_eq(jpt_client_recv(&w, &a, 10000), 1, "the watcher was not told of the end");
    cr_assert_eq(a.type, JP_CTL_RESULT);
    cr_assert_eq(a.u.result.human_len, got.human_len);
    cr_assert(!memcmp(a.u.result.human, got.human, got.human_len), "the final profile");
    cr_assert_eq(a.u.result.status, got.status);
    jpt_client_close(&w);
    /* and a TOP of the ended run is its final profile too (the kept copy) */
    cr_assert_eq(jpt_client_connect(&w, sv.sock), 0);
    ask_top(&w, run_id, 10, &a);
    cr_assert_eq(a.type, JP_CTL_RESULT);
    cr_assert_eq(a.u.result.human_len, got.human_len);
    jpt_client_close(&w);
    jpt_client_close(&c);
    jp_ring_unmap(&ring);
    jpt_result_free(&want);
    jpt_result_free(&got);
    tl_stop(sv.pid, 20000);
    jpt_served_clean(&sv);
}
