/* The daemon suites' processes: the daemon spawned and served, commands run with their output
 * captured, temporary directories and /proc figures (see support.h). */
#include "support.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void jpt_become(uid_t uid, gid_t gid)
{
    gid_t only[1] = {gid};
    if (setgroups(1, only) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
        _exit(99);
    tl_rearm(); /* a credential change clears the parent-death signal */
}

const char *jpt_daemon_bin(void)
{
    const char *p = getenv("JETTPROFD_BIN");
    return p ? p : "jettprofd";
}

pid_t jpt_spawn(char *const argv[], int keep_fd, int *err_fd)
{
    int ep[2] = {-1, -1};
    if (err_fd && pipe2(ep, O_CLOEXEC) < 0)
        return -errno;
    struct tl_spawn_opts o = TL_SPAWN_OPTS_INIT;
    o.keep_fd = keep_fd;
    o.err_fd = ep[1];
    pid_t pid = tl_spawn(argv[0], argv, &o);
    if (err_fd) {
        close(ep[1]);
        if (pid < 0)
            close(ep[0]);
        else
            *err_fd = ep[0];
    }
    return pid;
}

pid_t jpt_private(struct jpt_client *c, int *err_fd)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return -errno;
    char num[16];
    snprintf(num, sizeof num, "%d", sv[1]);
    char *argv[] = {(char *)jpt_daemon_bin(), "--session-fd", num, NULL};
    pid_t pid = jpt_spawn(argv, sv[1], err_fd);
    close(sv[1]);
    int r = pid < 0 ? (int)pid : jpt_client_open_fd(c, sv[0]);
    if (r < 0) {
        close(sv[0]);
        if (pid > 0) {
            kill(pid, SIGKILL);
            tl_wait(pid, 10000);
        }
        return r;
    }
    return pid;
}

pid_t jpt_serve(const char *sock, const char *const extra[], int *err_fd)
{
    char *argv[32];
    int n = 0;
    argv[n++] = (char *)jpt_daemon_bin();
    argv[n++] = (char *)"serve";
    argv[n++] = (char *)"--socket";
    argv[n++] = (char *)sock;
    for (int i = 0; extra && extra[i] && n < 31; i++)
        argv[n++] = (char *)extra[i];
    argv[n] = NULL;
    pid_t pid = jpt_spawn(argv, -1, err_fd);
    if (pid < 0)
        return pid;
    for (int i = 0; i < 500; i++) {
        struct jpt_client c;
        if (jpt_client_connect(&c, sock) == 0) {
            jpt_client_close(&c);
            return pid;
        }
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid)
            return -ECHILD;
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    kill(pid, SIGKILL);
    tl_wait(pid, -1);
    return -ETIMEDOUT;
}

char *jpt_slurp_fd(int fd)
{
    size_t cap = 4096, len = 0;
    char *p = malloc(cap);
    for (;;) {
        if (len + 1 >= cap)
            p = realloc(p, cap *= 2);
        ssize_t n = read(fd, p + len, cap - len - 1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        len += (size_t)n;
    }
    p[len] = '\0';
    return p;
}

char *jpt_slurp_file(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    char *p = jpt_slurp_fd(fd);
    close(fd);
    if (len)
        *len = strlen(p);
    return p;
}

int jpt_capture_cmd(char *const argv[], char **out, size_t *out_len, char **err)
{
    int op[2], ep[2];
    if (pipe2(op, O_CLOEXEC) < 0 || pipe2(ep, O_CLOEXEC) < 0)
        return -errno;
    struct tl_spawn_opts o = TL_SPAWN_OPTS_INIT;
    o.out_fd = op[1];
    o.err_fd = ep[1];
    pid_t pid = tl_spawn(argv[0], argv, &o);
    close(op[1]);
    close(ep[1]);
    if (pid < 0) {
        close(op[0]);
        close(ep[0]);
        return pid;
    }
    size_t cap[2] = {4096, 4096}, len[2] = {0, 0};
    char *buf[2] = {malloc(cap[0]), malloc(cap[1])};
    struct pollfd p[2] = {{.fd = op[0], .events = POLLIN}, {.fd = ep[0], .events = POLLIN}};
    int open_n = 2;
    while (open_n > 0) {
        if (poll(p, 2, 30000) <= 0)
            break;
        for (int i = 0; i < 2; i++) {
            if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            if (len[i] + 1 >= cap[i])
                buf[i] = realloc(buf[i], cap[i] *= 2);
            ssize_t n = read(p[i].fd, buf[i] + len[i], cap[i] - len[i] - 1);
            if (n <= 0) {
                close(p[i].fd);
                p[i].fd = -1;
                open_n--;
            } else {
                len[i] += (size_t)n;
            }
        }
    }
    for (int i = 0; i < 2; i++) {
        if (p[i].fd >= 0)
            close(p[i].fd);
        buf[i][len[i]] = '\0';
    }
    int st = tl_wait(pid, 30000);
    if (out) {
        *out = buf[0];
        if (out_len)
            *out_len = len[0];
    } else {
        free(buf[0]);
    }
    if (err)
        *err = buf[1];
    else
        free(buf[1]);
    return st;
}

int jpt_serve_tmp(struct jpt_served *s, const char *const extra[], int *err_fd)
{
    if (!(s->dir = jpt_tmpdir()))
        return -errno;
    snprintf(s->sock, sizeof s->sock, "%s/d.sock", s->dir);
    s->pid = jpt_serve(s->sock, extra, err_fd);
    if (s->pid < 0) {
        int e = (int)s->pid;
        jpt_served_clean(s);
        return e;
    }
    return 0;
}

void jpt_served_clean(struct jpt_served *s)
{
    unlink(s->sock);
    rmdir(s->dir);
    free(s->dir);
    s->dir = NULL;
}

char *jpt_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    char tmpl[512];
    snprintf(tmpl, sizeof tmpl, "%s/jpd-test-XXXXXX", base && *base ? base : "/tmp");
    char *d = mkdtemp(tmpl);
    return d ? strdup(d) : NULL;
}

int jpt_fd_count(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    return jpt_count_entries(path);
}

int jpt_count_entries(const char *path)
{
    DIR *d = opendir(path);
    if (!d)
        return -errno;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

long jpt_rss_kib(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    char line[256];
    long v = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &v) == 1)
            break;
    fclose(f);
    return v;
}

int jpt_count_lines(const char *path, const char *needle)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return 0;
    char *line = NULL;
    size_t cap = 0;
    int n = 0;
    while (getline(&line, &cap, f) > 0)
        if (strstr(line, needle))
            n++;
    free(line);
    fclose(f);
    return n;
}
