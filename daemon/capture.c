/* A session's capture writers: the client's capture fd and a file in the daemon's capture
 * directory (capdir.c, the server's), opened when the ring is, written with every record the
 * engine takes, and what happens when one cannot be written (it stops alone; the run and its
 * profile go on).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "compress.h"
#include "session.h"

/* The waits of a stream about to go, kept in the session's totals. */
static void capture_waits_keep(struct jpd_session *s, int i)
{
    if (!s->cap_out[i])
        return;
    uint64_t w, ns;
    jpd_cstream_waits(s->cap_out[i], &w, &ns);
    s->cap_waits_done += w;
    s->cap_wait_ns_done += ns;
}

void jpd_capture_waits(struct jpd_session *s, uint64_t *waits, uint64_t *wait_ns)
{
    *waits = s->cap_waits_done;
    *wait_ns = s->cap_wait_ns_done;
    for (int i = 0; i < 2; i++) {
        if (!s->cap_out[i])
            continue;
        uint64_t w, ns;
        jpd_cstream_waits(s->cap_out[i], &w, &ns);
        *waits += w;
        *wait_ns += ns;
    }
}

/* A capture could not be written (err < 0): it stops here and the run goes on. The client's
 * capture is reported to it in RESULT; a capture-dir file is removed rather than left empty
 * or cut short, and the log says so. */
static void capture_failed(struct jpd_session *s, int i, int err)
{
    if (s->cap[i]) {
        jp_capture_writer_free(s->cap[i]);
        s->cap[i] = NULL;
    }
    capture_waits_keep(s, i);
    jpd_cstream_free(s->cap_out[i]); /* before the fd closes: a block may be being written */
    s->cap_out[i] = NULL;
    if (s->cap_fd[i] >= 0) {
        close(s->cap_fd[i]);
        s->cap_fd[i] = -1;
    }
    if (i == 0) {
        if (!s->cap_errno)
            s->cap_errno = -err;
        if (!s->d->private_mode)
            jpd_log_at(JPD_LOG_WARNING,
                       "run %llu: the client's capture failed (%s); profiling goes on",
                    (unsigned long long)s->run_id, strerror(-err));
        return;
    }
    int gone = jpd_capture_dir_remove(s->d, s->cap_name) == 0;
    jpd_log_at(JPD_LOG_WARNING, "run %llu: its capture failed (%s); %s",
               (unsigned long long)s->run_id, strerror(-err),
               gone ? "removed the capture file" : "cannot remove the capture file");
}

void jpd_capture_open(struct jpd_session *s)
{
    struct jp_capture_meta meta = {.mode = s->mode, .pid = (uint32_t)s->peer.pid,
                                   .run_id = s->run_id};
    int cap_fd = s->cap_fd[0];
    if (cap_fd >= 0) {
        /* Only a regular file: writing to a pipe, socket or terminal could block the loop.
         * A capture that cannot be had is reported with the result; the run goes on. */
        struct stat st;
        int fl = fcntl(cap_fd, F_GETFL);
        if (fstat(cap_fd, &st) < 0 || !S_ISREG(st.st_mode) || fl < 0 ||
            (fl & O_ACCMODE) == O_RDONLY) {
            capture_failed(s, 0, -EINVAL);
        } else {
            int w = jpd_cstream_new(cap_fd, &meta, &s->cap_out[0], &s->cap[0]);
            if (w < 0)
                capture_failed(s, 0, w);
        }
    }
    int fd = -1;
    int r = jpd_capture_dir_create(s->d, s->run_id, &fd, s->cap_name, sizeof s->cap_name);
    if (r > 0) {
        /* The lock marks the file as being written until its fd closes: the caps never
         * remove it (jpd_capture_prune). The file is new (O_EXCL), so nobody holds it. */
        (void)flock(fd, LOCK_EX | LOCK_NB);
        s->cap_fd[1] = fd;
        int w = jpd_cstream_new(fd, &meta, &s->cap_out[1], &s->cap[1]);
        if (w < 0)
            capture_failed(s, 1, w);
    } else if (r < 0) {
        jpd_log_at(JPD_LOG_WARNING, "run %llu: cannot create its capture file (%s)",
                   (unsigned long long)s->run_id, strerror(-r));
    }
}

void jpd_capture_write(struct jpd_session *s, const void *rec, uint32_t len)
{
    for (int i = 0; i < 2; i++) {
        if (!s->cap[i])
            continue;
        int w = jp_capture_write(s->cap[i], rec, len);
        if (w < 0)
            capture_failed(s, i, w);
    }
}

int jpd_capture_feed_slots(struct jpd_session *s, const uint8_t *q, uint64_t n, uint64_t *fed)
{
    *fed = 0;
    int i = s->cap[0] ? 0 : 1;
    uint32_t m = n > JPD_RELEASE_SLOTS ? JPD_RELEASE_SLOTS : (uint32_t)n;
    int err = 0;
    uint8_t *dst = jp_capture_slots_begin(s->cap[i], &m, &err);
    if (!dst) {
        capture_failed(s, i, err);
        return 2;
    }
    /* The run's one copy of these slots: the engine reads it, the capture keeps it. */
    memcpy(dst, q, (size_t)m * JP_SLOT_SIZE);
    int r = jp_engine_feed_slots(s->eng, dst, m, fed);
    int w = jp_capture_slots_commit(s->cap[i], (uint32_t)*fed);
    if (w < 0)
        capture_failed(s, i, w);
    if (i == 0 && s->cap[1]) {
        /* the capture directory's copy: the same bytes, appended in runs */
        const uint8_t *p = dst;
        for (uint32_t left = (uint32_t)*fed; left && s->cap[1];) {
            uint32_t k = left;
            uint8_t *d = jp_capture_slots_begin(s->cap[1], &k, &err);
            if (!d || (memcpy(d, p, (size_t)k * JP_SLOT_SIZE),
                       (err = jp_capture_slots_commit(s->cap[1], k)) < 0)) {
                capture_failed(s, 1, err);
                break;
            }
            p += (size_t)k * JP_SLOT_SIZE;
            left -= k;
        }
    }
    return r;
}

void jpd_capture_close(struct jpd_session *s)
{
    int had_dir_capture = s->cap_fd[1] >= 0;
    for (int i = 0; i < 2; i++) {
        if (s->cap[i]) {
            /* a stream without RUN_STOP reads as missing_stop_event */
            int r = jp_capture_flush(s->cap[i]);
            if (r == 0) {
                jp_capture_writer_free(s->cap[i]);
                s->cap[i] = NULL;
                r = jpd_cstream_finish(s->cap_out[i]); /* every block on disk */
            }
            if (r < 0) {
                capture_failed(s, i, r);
                continue;
            }
            capture_waits_keep(s, i);
            jpd_cstream_free(s->cap_out[i]);
            s->cap_out[i] = NULL;
        }
        if (s->cap_fd[i] >= 0) {
            close(s->cap_fd[i]);
            s->cap_fd[i] = -1;
        }
    }
    if (had_dir_capture)
        jpd_capture_prune(s->d);
}
