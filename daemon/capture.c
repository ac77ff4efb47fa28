/* A session's capture writers: the client's capture fd and the daemon's capture directory,
 * opened when the ring is, written with every record the engine takes, and what happens when
 * one cannot be written (it stops alone; the run and its profile go on).
 */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "session.h"

/* A capture could not be written (err < 0): it stops here and the run goes on. The client's
 * capture is reported to it in RESULT; a capture-dir file is removed rather than left empty
 * or cut short, and the log says so. */
static void capture_failed(struct jpd_session *s, int i, int err)
{
    if (s->cap[i]) {
        jp_capture_writer_free(s->cap[i]);
        s->cap[i] = NULL;
    }
    if (s->cap_fd[i] >= 0) {
        close(s->cap_fd[i]);
        s->cap_fd[i] = -1;
    }
    if (i == 0) {
        if (!s->cap_errno)
            s->cap_errno = -err;
        if (!s->d->private_mode)
            jpd_log("run %llu: the client's capture failed (%s); profiling goes on",
                    (unsigned long long)s->run_id, strerror(-err));
        return;
    }
    int gone = s->d->ops->remove_capture(s->d, s->cap_name) == 0;
    jpd_log("run %llu: its capture failed (%s); %s", (unsigned long long)s->run_id,
            strerror(-err), gone ? "removed the capture file" : "cannot remove the capture file");
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
            int w = jp_capture_writer_new(cap_fd, &meta, &s->cap[0]);
            if (w < 0)
                capture_failed(s, 0, w);
        }
    }
    int fd = -1;
    int r = s->d->ops->open_capture(s->d, s->run_id, &fd, s->cap_name, sizeof s->cap_name);
    if (r > 0) {
        s->cap_fd[1] = fd;
        int w = jp_capture_writer_new(fd, &meta, &s->cap[1]);
        if (w < 0)
            capture_failed(s, 1, w);
    } else if (r < 0) {
        jpd_log("run %llu: cannot create its capture file (%s)", (unsigned long long)s->run_id,
                strerror(-r));
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

void jpd_capture_close(struct jpd_session *s)
{
    for (int i = 0; i < 2; i++) {
        if (s->cap[i]) {
            /* a stream without RUN_STOP reads as missing_stop_event */
            int r = jp_capture_flush(s->cap[i]);
            if (r < 0) {
                capture_failed(s, i, r);
                continue;
            }
            jp_capture_writer_free(s->cap[i]);
            s->cap[i] = NULL;
        }
        if (s->cap_fd[i] >= 0) {
            close(s->cap_fd[i]);
            s->cap_fd[i] = -1;
        }
    }
}
