/* The state directory (serve --state-dir): the kept runs `show` answers from, one file per run,
 * and the next run id, so both survive a restart. Main loop only.
 *
 * A kept run's file, run-<id>.kept: the header below, then human_len bytes of human text and
 * toon_len bytes of TOON. Files are written whole under a temporary name (O_EXCL|O_NOFOLLOW,
 * 0600), fsynced, then renamed, so a reader sees the old file or the new one, never half of
 * one. At start every file is checked before anything is trusted: its name, a regular file
 * opened without following links, the magic, its size against the header's lengths and against
 * JPD_KEEP_BYTES, the id in the name against the header's. A file that fails is skipped with a
 * log line naming it. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jpd.h"
#include "server.h"
#include "util.h"

#define KEPT_MAGIC "JPDKEPT1"

struct kept_header {
    char magic[8];
    uint64_t run_id;
    uint32_t uid, status;
    char reason[40];
    uint64_t human_len, toon_len;
};

/* Writes len bytes as dir/name atomically (temp + rename). 0 or -errno. */
static int write_file(int dir, const char *name, const void *a, size_t alen, const void *b,
                      size_t blen, const void *c, size_t clen)
{
    char tmp[96];
    snprintf(tmp, sizeof tmp, ".%s.tmp", name);
    (void)unlinkat(dir, tmp, 0); /* a leftover of a crash: ours, by its name */
    int fd = openat(dir, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    int r = jpd_write_all(fd, a, alen);
    if (r == 0 && blen)
        r = jpd_write_all(fd, b, blen);
    if (r == 0 && clen)
        r = jpd_write_all(fd, c, clen);
    if (r == 0 && fsync(fd) < 0)
        r = -errno;
    if (close(fd) < 0 && r == 0)
        r = -errno;
    if (r == 0 && renameat(dir, tmp, dir, name) < 0)
        r = -errno;
    if (r < 0)
        (void)unlinkat(dir, tmp, 0);
    return r;
}

/* Ids handed out between two saves of next-run-id at most. */
#define RUN_ID_BLOCK 64u

static void save_next_id(struct jpd_daemon *d, uint64_t next)
{
    char num[32];
    int n = snprintf(num, sizeof num, "%llu\n", (unsigned long long)next);
    int r = write_file(d->state_dir_fd, "next-run-id", num, (size_t)n, NULL, 0, NULL, 0);
    if (r < 0)
        jpd_log("cannot save the next run id in the state directory: %s", jpd_error_text(r));
}

/* Saves the lowest id no run may have had: next_run_id once no run is in flight (at exit),
 * the block's end while runs may be. */
void jpd_state_save_next_id(struct jpd_daemon *d)
{
    if (d->state_dir_fd < 0)
        return;
    save_next_id(d, d->run_id_saved > d->next_run_id ? d->run_id_saved : d->next_run_id);
}

uint64_t jpd_state_take_run_id(struct jpd_daemon *d)
{
    uint64_t id = d->next_run_id++;
    if (d->state_dir_fd >= 0 && id >= d->run_id_saved) {
        d->run_id_saved = id + RUN_ID_BLOCK;
        save_next_id(d, d->run_id_saved);
    }
    return id;
}

void jpd_state_save_kept(struct jpd_daemon *d, const struct jpd_kept *k)
{
    if (d->state_dir_fd < 0)
        return;
    struct kept_header h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, KEPT_MAGIC, sizeof h.magic);
    h.run_id = k->run_id;
    h.uid = (uint32_t)k->uid;
    h.status = k->status;
    memcpy(h.reason, k->reason, sizeof h.reason);
    h.human_len = k->human_len;
    h.toon_len = k->toon_len;
    char name[64];
    snprintf(name, sizeof name, "run-%llu.kept", (unsigned long long)k->run_id);
    int r = write_file(d->state_dir_fd, name, &h, sizeof h, k->human, k->human_len, k->toon,
                       k->toon_len);
    if (r < 0)
        jpd_log("run %llu: cannot keep it in the state directory: %s",
                (unsigned long long)k->run_id, jpd_error_text(r));
    jpd_state_save_next_id(d);
}

void jpd_state_forget(struct jpd_daemon *d, uint64_t run_id)
{
    if (d->state_dir_fd < 0 || run_id == 0)
        return;
    char name[64];
    snprintf(name, sizeof name, "run-%llu.kept", (unsigned long long)run_id);
    if (unlinkat(d->state_dir_fd, name, 0) < 0 && errno != ENOENT)
        jpd_log("cannot remove %s from the state directory: %s", name, strerror(errno));
}

/* Reads all of fd (exactly size bytes) into a new buffer. 0 or -errno. */
static int read_exact(int fd, void *buf, size_t len)
{
    size_t got = 0;
    while (got < len) {
        ssize_t n = read(fd, (char *)buf + got, len - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n < 0 ? -errno : -EPROTO;
        got += (size_t)n;
    }
    return 0;
}

/* One file: 0 with *out filled (its texts malloc'ed), or why it is not trusted. */
static int load_one(int dir, const char *name, uint64_t id, struct jpd_kept *out,
                    const char **why)
{
    *why = "cannot be opened";
    int fd = openat(dir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return -errno;
    struct stat st;
    struct kept_header h;
    int r = -EPROTO;
    memset(out, 0, sizeof *out);
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        *why = "is not a regular file";
        goto out;
    }
    if ((uint64_t)st.st_size < sizeof h ||
        (uint64_t)st.st_size - sizeof h > JPD_KEEP_BYTES) {
        *why = "has a size no kept run has";
        goto out;
    }
    if (read_exact(fd, &h, sizeof h) < 0 || memcmp(h.magic, KEPT_MAGIC, sizeof h.magic)) {
        *why = "is not a kept run";
        goto out;
    }
    if (h.run_id != id || h.human_len > JPD_KEEP_BYTES || h.toon_len > JPD_KEEP_BYTES ||
        h.human_len + h.toon_len != (uint64_t)st.st_size - sizeof h || h.status > 3 ||
        memchr(h.reason, '\0', sizeof h.reason) == NULL) {
        *why = "is corrupt";
        goto out;
    }
    out->human = malloc(h.human_len + 1);
    out->toon = malloc(h.toon_len + 1);
    if (!out->human || !out->toon) {
        *why = "cannot be read: out of memory";
        r = -ENOMEM;
        goto out;
    }
    if (read_exact(fd, out->human, h.human_len) < 0 ||
        read_exact(fd, out->toon, h.toon_len) < 0) {
        *why = "is cut short";
        goto out;
    }
    out->human[h.human_len] = out->toon[h.toon_len] = '\0';
    out->human_len = h.human_len;
    out->toon_len = h.toon_len;
    out->run_id = h.run_id;
    out->uid = (uid_t)h.uid;
    out->status = h.status;
    memcpy(out->reason, h.reason, sizeof out->reason);
    r = 0;
out:
    if (r < 0) {
        free(out->human);
        free(out->toon);
        memset(out, 0, sizeof *out);
    }
    close(fd);
    return r;
}

static int by_id(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

void jpd_state_load(struct jpd_daemon *d, void (*keep)(struct jpd_daemon *d, struct jpd_kept *k))
{
    if (d->state_dir_fd < 0)
        return;
    int fd = openat(d->state_dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *dir = fd >= 0 ? fdopendir(fd) : NULL;
    if (!dir) {
        if (fd >= 0)
            close(fd);
        jpd_log("cannot read the state directory: %s", strerror(errno));
        return;
    }
    uint64_t *ids = NULL, next = 0;
    size_t n = 0, cap = 0;
    for (struct dirent *e; (e = readdir(dir));) {
        unsigned long long id;
        char tail[8];
        if (sscanf(e->d_name, "run-%llu.%7s", &id, tail) != 2 || strcmp(tail, "kept") ||
            id == 0)
            continue;
        if (n == cap) {
            uint64_t *g = realloc(ids, (cap ? cap * 2 : 64) * sizeof *ids);
            if (!g) {
                jpd_log("out of memory reading the state directory");
                break;
            }
            ids = g;
            cap = cap ? cap * 2 : 64;
        }
        ids[n++] = id;
    }
    closedir(dir);
    /* Oldest first: keeping them in order leaves the newest, within the count and bytes. */
    if (n > 1) /* qsort's array must not be NULL, even for none (an empty directory) */
        qsort(ids, n, sizeof *ids, by_id);
    for (size_t i = 0; i < n; i++) {
        char name[64];
        snprintf(name, sizeof name, "run-%llu.kept", (unsigned long long)ids[i]);
        struct jpd_kept k;
        const char *why;
        if (load_one(d->state_dir_fd, name, ids[i], &k, &why) < 0) {
            jpd_log_at(JPD_LOG_WARNING, "state directory: %s %s; skipped", name, why);
            continue;
        }
        if (k.run_id >= next)
            next = k.run_id + 1;
        keep(d, &k);
    }
    free(ids);
    /* The next id: the saved one, never below a kept run's. */
    int nf = openat(d->state_dir_fd, "next-run-id", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (nf >= 0) {
        char num[32] = "";
        ssize_t got = read(nf, num, sizeof num - 1);
        close(nf);
        uint64_t v;
        char *nl = got > 0 ? memchr(num, '\n', (size_t)got) : NULL;
        if (nl)
            *nl = '\0';
        if (got > 0 && nl && jpd_parse_u64(num, 1, UINT64_MAX / 2, &v) == 0) {
            if (v > next)
                next = v;
        } else {
            jpd_log_at(JPD_LOG_WARNING, "state directory: next-run-id is corrupt; skipped");
        }
    }
    if (next > d->next_run_id)
        d->next_run_id = next;
}
