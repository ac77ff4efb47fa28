/* A session's capture writers: the client's capture fd and the daemon's capture directory,
 * opened when the ring is, written with every record the engine takes, and what happens when
 * one cannot be written (it stops alone; the run and its profile go on). And the capture
 * directory's caps (--capture-max-bytes, --capture-max-age).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
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

/* ---- the capture directory: its files and its caps ---- */

int jpd_capture_dir_open(struct jpd_daemon *d, const char *dir)
{
    if (!dir)
        return 0;
    /* O_NOFOLLOW: a symlink planted as the directory would send captures elsewhere. */
    d->capture_dir_fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (d->capture_dir_fd >= 0)
        return 0;
    int e = errno;
    struct stat st;
    if (e == ENOTDIR && lstat(dir, &st) == 0 && S_ISLNK(st.st_mode))
        fprintf(stderr, "jettprofd: --capture-dir: %s is a symbolic link; name the directory "
                        "itself\n", dir);
    else
        fprintf(stderr, "jettprofd: --capture-dir: cannot open %s: %s\n", dir, strerror(e));
    return -e;
}

int jpd_capture_dir_create(struct jpd_daemon *d, uint64_t run_id, int *fd, char *name,
                           size_t cap)
{
    if (d->capture_dir_fd < 0)
        return 0;
    /* Names the daemon chooses, never one a client names; O_EXCL|O_NOFOLLOW so a planted file
     * or link is never written through. */
    long long now = (long long)time(NULL);
    for (int attempt = 0; attempt < 100; attempt++) {
        if (attempt == 0)
            snprintf(name, cap, "run-%lld-%llu.jpcap", now, (unsigned long long)run_id);
        else
            snprintf(name, cap, "run-%lld-%llu-%d.jpcap", now, (unsigned long long)run_id,
                     attempt);
        *fd = openat(d->capture_dir_fd, name,
                     O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (*fd >= 0)
            return 1;
        if (errno != EEXIST)
            return -errno;
    }
    return -EEXIST;
}

int jpd_capture_dir_remove(struct jpd_daemon *d, const char *name)
{
    return unlinkat(d->capture_dir_fd, name, 0) == 0 ? 0 : -errno;
}

struct capfile {
    char name[96]; /* the daemon's own names (jpd_capture_dir_create) fit */
    uint64_t size;
    struct timespec mtime;
};

static int older_first(const void *a, const void *b)
{
    const struct capfile *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec)
        return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    if (x->mtime.tv_nsec != y->mtime.tv_nsec)
        return x->mtime.tv_nsec < y->mtime.tv_nsec ? -1 : 1;
    return strcmp(x->name, y->name);
}

/* A capture file by the daemon's naming: run-*.jpcap. Nothing else in the directory is ever
 * counted or removed. */
static int capture_name(const char *n)
{
    size_t len = strlen(n);
    return len > 10 && len < sizeof((struct capfile *)0)->name && !strncmp(n, "run-", 4) &&
           !strcmp(n + len - 6, ".jpcap");
}

/* 1 when some open file description holds the file's lock: a capture being written (this
 * daemon's or another's sharing the directory). */
static int being_written(int dir_fd, const char *name)
{
    int fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return 1; /* gone or unreadable: leave it */
    int busy = flock(fd, LOCK_SH | LOCK_NB) < 0;
    close(fd);
    return busy;
}

/* Lists the directory's captures into a malloc'ed array. The count, or -errno. */
static int list_captures(int dir_fd, struct capfile **out, uint64_t *total)
{
    int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    DIR *dir = fdopendir(fd);
    if (!dir) {
        int e = errno;
        close(fd);
        return -e;
    }
    struct capfile *v = NULL;
    size_t n = 0, cap = 0;
    int err = 0;
    struct dirent *e;
    *total = 0;
    while ((e = readdir(dir))) {
        struct stat st;
        if (!capture_name(e->d_name) ||
            fstatat(dir_fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
            continue;
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 64;
            struct capfile *nv = n < INT32_MAX / 2 ? realloc(v, ncap * sizeof *v) : NULL;
            if (!nv) {
                err = -ENOMEM;
                break;
            }
            v = nv;
            cap = ncap;
        }
        strcpy(v[n].name, e->d_name); /* capture_name bounds its length */
        v[n].size = (uint64_t)st.st_size;
        v[n].mtime = st.st_mtim;
        *total += v[n].size;
        n++;
    }
    closedir(dir);
    if (err < 0) {
        free(v);
        return err;
    }
    *out = v;
    return (int)n;
}

void jpd_capture_prune(struct jpd_daemon *d)
{
    const struct jpd_config *c = d->cfg;
    if (d->capture_dir_fd < 0 || (!c->capture_max_bytes && !c->capture_max_age_s))
        return;
    struct capfile *v = NULL;
    uint64_t total = 0;
    int n = list_captures(d->capture_dir_fd, &v, &total);
    if (n < 0) {
        jpd_log_at(n == -ENOMEM ? JPD_LOG_ERR : JPD_LOG_WARNING,
                   "%s the capture directory to apply its caps (%s)",
                   n == -ENOMEM ? "out of memory listing" : "cannot list", strerror(-n));
        return;
    }
    if (n > 1) /* qsort's array must not be NULL, even for none */
        qsort(v, (size_t)n, sizeof *v, older_first);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    for (int i = 0; i < n; i++) {
        int too_old = c->capture_max_age_s && now.tv_sec > v[i].mtime.tv_sec &&
                      (uint64_t)(now.tv_sec - v[i].mtime.tv_sec) > c->capture_max_age_s;
        int too_big = c->capture_max_bytes && total > c->capture_max_bytes;
        if (!too_old && !too_big)
            break; /* oldest first: every later one is younger, and the bytes fit */
        if (being_written(d->capture_dir_fd, v[i].name))
            continue;
        if (unlinkat(d->capture_dir_fd, v[i].name, 0) < 0) {
            jpd_log_at(JPD_LOG_WARNING, "cannot remove capture %s: %s", v[i].name,
                       strerror(errno));
            continue;
        }
        total -= v[i].size;
        if (too_old)
            jpd_log("removed capture %s (%llu bytes): older than --capture-max-age %llus",
                    v[i].name, (unsigned long long)v[i].size,
                    (unsigned long long)c->capture_max_age_s);
        else
            jpd_log("removed capture %s (%llu bytes): the captures took more than "
                    "--capture-max-bytes %llu", v[i].name, (unsigned long long)v[i].size,
                    (unsigned long long)c->capture_max_bytes);
    }
    free(v);
}
