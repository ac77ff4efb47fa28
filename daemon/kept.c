/* The long-lived daemon's record of finished runs, all of it the main loop's: the `show` store
 * (the most recent runs, bounded in count and bytes, persisted under --state-dir by state.c) and
 * the runs log (--runs-log FILE): one JSON object per line and per finished run, written with a
 * single write() on an O_APPEND file (SIGHUP reopens it by name, signals.c):
 *   {"run_id":N,"pid":N,"uid":N,
 *    "ending":"stop|producer_lost|shutdown|truncated|collector_failure",
 *    "mode":"cpu|memory"|null,"termination":"returned|runtime_error|interrupted"|null,
 *    "status":"complete|partial|unavailable|error","reason":"...",
 *    "start":"2026-12-01T22:33:14Z"|null,"duration_ms":N,"program":"src/main.jett"|null,
 *    "totals":{...}}
 * pid and uid come from SO_PEERCRED, not from what the client says. No paths, no user values.
 */
#include <errno.h>
#include <stddef.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "jpd.h"
#include "server.h"
#include "util.h"
#include "systemd.h"

/* ---- kept runs and the runs log ---- */

void jpd_kept_clear(struct jpd_kept *k)
{
    free(k->human);
    free(k->toon);
    memset(k, 0, sizeof *k);
}

static char *text_copy(const char *t, size_t len)
{
    char *c = malloc(len + 1);
    if (c) {
        memcpy(c, t, len);
        c[len] = '\0';
    }
    return c;
}

int jpd_rendered_copy(const struct jp_rendered *r, struct jp_rendered *out)
{
    memset(out, 0, sizeof *out);
    out->status = r->status;
    memcpy(out->reason, r->reason, sizeof out->reason);
    out->reason[sizeof out->reason - 1] = '\0';
    if ((r->human && !(out->human = text_copy(r->human, r->human_len))) ||
        (r->toon && !(out->toon = text_copy(r->toon, r->toon_len)))) {
        jp_rendered_free(out);
        return -ENOMEM;
    }
    out->human_len = r->human ? r->human_len : 0;
    out->toon_len = r->toon ? r->toon_len : 0;
    return 0;
}

/* An evicted kept run: gone from memory and from the state directory. */
static void kept_evict(struct jpd_daemon *d, struct jpd_kept *k)
{
    jpd_state_forget(d, k->run_id);
    jpd_kept_clear(k);
}

/* Keeps a run for `show`, taking its texts (*in is left holding none); persist: also write it
 * to the state directory (not for a run loaded from there). */
static void keep_store(struct jpd_daemon *d, struct jpd_kept *in, int persist)
{
    /* A ring of the most recent runs, also bounded in bytes: a stream of killed clients must
     * not grow the daemon. */
    size_t total = 0;
    for (uint32_t i = 0; i < JPD_KEEP_RUNS; i++)
        total += d->kept[i].human_len + d->kept[i].toon_len;
    size_t add = in->human_len + in->toon_len;
    if (add > JPD_KEEP_BYTES) {
        jpd_kept_clear(in);
        return;
    }
    struct jpd_kept *k = &d->kept[d->kept_next];
    total -= k->human_len + k->toon_len;
    kept_evict(d, k);
    for (uint32_t step = 1; total + add > JPD_KEEP_BYTES && step < JPD_KEEP_RUNS; step++) {
        struct jpd_kept *old = &d->kept[(d->kept_next + step) % JPD_KEEP_RUNS];
        total -= old->human_len + old->toon_len;
        kept_evict(d, old);
    }
    *k = *in;
    memset(in, 0, sizeof *in);
    d->kept_next = (d->kept_next + 1) % JPD_KEEP_RUNS;
    if (persist)
        jpd_state_save_kept(d, k);
}

void jpd_kept_load(struct jpd_daemon *d, struct jpd_kept *k)
{
    keep_store(d, k, 0);
}

/* Keeps a run's profile for `show`, taking the texts of *r (it is left holding none). */
static void keep_owned(struct jpd_daemon *d, uint64_t run_id, uid_t uid, struct jp_rendered *r)
{
    struct jpd_kept k = {.run_id = run_id, .uid = uid, .status = r->status,
                         .human = r->human, .human_len = r->human_len,
                         .toon = r->toon, .toon_len = r->toon_len};
    memcpy(k.reason, r->reason, sizeof k.reason);
    k.reason[sizeof k.reason - 1] = '\0';
    r->human = r->toon = NULL;
    r->human_len = r->toon_len = 0;
    keep_store(d, &k, 1);
}

/* A kept profile on its way from a worker to the main loop. */
struct keep_post {
    uint64_t run_id;
    uid_t uid;
    struct jp_rendered r; /* the copy, owned by the post */
};

static void keep_posted(struct jpd_daemon *d, void *payload)
{
    struct keep_post *k = payload;
    keep_owned(d, k->run_id, k->uid, &k->r); /* takes the texts */
}

/* The kept store is the main loop's: a worker's profile is posted there, copied. A profile that
 * cannot be copied is not kept. */
void jpd_keep_run(struct jpd_daemon *d, uint64_t run_id, uid_t uid, const struct jp_rendered *r)
{
    struct jp_rendered copy;
    if (jpd_rendered_copy(r, &copy) < 0)
        return;
    if (jpd_on_main(d)) {
        keep_owned(d, run_id, uid, &copy);
        return;
    }
    struct keep_post k = {.run_id = run_id, .uid = uid, .r = copy};
    if (jpd_post(d, keep_posted, &k, sizeof k) < 0)
        jp_rendered_free(&copy); /* as keeping does: a profile that cannot be had is not kept */
}

const struct jpd_kept *jpd_find_kept(struct jpd_daemon *d, uint64_t run_id)
{
    for (uint32_t i = 0; i < JPD_KEEP_RUNS; i++)
        if (d->kept[i].run_id == run_id && run_id != 0)
            return &d->kept[i];
    return NULL;
}

/* Appends one whole line or nothing: one write() of the line, and on a short write or an
 * error (a full disk, a file size limit) the file is cut back to where it was, so a reader
 * never sees half a row or two rows glued together. The daemon is the only writer. */
static void append_row(int fd, const char *line, size_t len)
{
    off_t before = lseek(fd, 0, SEEK_END);
    ssize_t n;
    do
        n = write(fd, line, len);
    while (n < 0 && errno == EINTR);
    if (n == (ssize_t)len)
        return;
    int e = n < 0 ? errno : ENOSPC;
    int cut = before >= 0 && ftruncate(fd, before) == 0;
    jpd_log("cannot append to the runs log (%s); %s", strerror(e),
            cut ? "the row is left out" : "a partial row may remain");
}

static void log_row(struct jpd_daemon *d, const struct jpd_run_row *row)
{
    d->recent[d->nrecent++ % JPD_KEEP_RUNS] = *row; /* for `jettprofd runs` */
    if (d->runs_log_fd < 0)
        return;
    struct jp_buf b = {0};
    jp_buf_printf(&b, "{\"run_id\":%llu,\"pid\":%ld,\"uid\":%lu,\"ending\":",
                   (unsigned long long)row->run_id, (long)row->pid, (unsigned long)row->uid);
    jp_json_str(&b, jpd_ending_word(row->ending));
    /* The run's own mode (its HELLO's) when the engine never saw RUN_START. */
    const char *mode = jp_mode_name(row->sum.mode);
    JP_BUF_LIT(&b, ",\"mode\":");
    jp_json_str_or_null(&b, mode);
    JP_BUF_LIT(&b, ",\"termination\":");
    jp_json_str_or_null(&b, jp_termination_name(row->sum.termination));
    JP_BUF_LIT(&b, ",\"status\":");
    jp_json_str(&b, jpd_status_word(row->status));
    JP_BUF_LIT(&b, ",\"reason\":");
    jp_json_str(&b, row->reason);
    JP_BUF_LIT(&b, ",\"start\":");
    char when[32];
    jp_json_str_or_null(&b, jpd_rfc3339(row->start_unix_s, when, sizeof when) == 0 ? when : NULL);
    jp_buf_printf(&b, ",\"duration_ms\":%llu,\"program\":",
                  (unsigned long long)row->duration_ms);
    jp_json_str_or_null(&b, row->program);
    JP_BUF_LIT(&b, ",\"totals\":");
    jpd_summary_json(&b, &row->sum);
    JP_BUF_LIT(&b, "}\n");
    if (b.failed)
        jpd_log("run %llu: out of memory writing its runs log row",
                (unsigned long long)row->run_id);
    else
        append_row(d->runs_log_fd, b.p, b.len);
    jp_buf_free(&b);
}

static void log_posted(struct jpd_daemon *d, void *payload)
{
    log_row(d, payload);
}

/* The runs log and the recent runs are the main loop's: a worker's row is posted there, in
 * order. */
void jpd_log_run(struct jpd_daemon *d, const struct jpd_run_row *row)
{
    if (d->private_mode && d->runs_log_fd < 0)
        return; /* one run, nobody to ask for it */
    if (jpd_on_main(d)) {
        log_row(d, row);
        return;
    }
    if (jpd_post(d, log_posted, row, sizeof *row) < 0)
        jpd_log("run %llu: out of memory writing its runs log row",
                (unsigned long long)row->run_id);
}
