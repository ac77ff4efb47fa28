/* The capture directory of `serve --capture-dir`, the server's: opened at start, a file made
 * there for each run whose session asks (jpd_capture_dir_create, under a name the daemon
 * chooses), and its caps (--capture-max-bytes, --capture-max-age) applied at start and after
 * each run. The sessions only use its fd, which does not change while the daemon runs.
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

#include "jpd.h"
#include "server.h"
#include "util.h"

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
