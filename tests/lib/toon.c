/* TOON documents checked with the official decoder (see toon.h). */
#include "toon.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "spawn.h"

struct sink {
    char *p;
    size_t len, cap;
};

static void sink_put(struct sink *s, const char *p, size_t n)
{
    if (s->len + n + 1 > s->cap) {
        s->cap = (s->len + n + 1) * 2;
        s->p = realloc(s->p, s->cap);
        cr_assert(s->p != NULL, "out of memory reading the TOON decoder");
    }
    memcpy(s->p + s->len, p, n);
    s->len += n;
    s->p[s->len] = '\0';
}

char *tl_toon_decode(const void *text, size_t len, char **err)
{
    const char *root = getenv("JETTPROF_SOURCE_ROOT");
    cr_assert(root && *root, "JETTPROF_SOURCE_ROOT is not set (run the suite through meson test)");
    char script[4096], mods[4096];
    snprintf(script, sizeof script, "%s/tests/toon/decode.mjs", root);
    snprintf(mods, sizeof mods, "%s/tests/toon/node_modules/@toon-format/toon", root);
    cr_assert(access(mods, F_OK) == 0,
              "the official TOON decoder is missing: run (cd %s/tests/toon && npm ci)", root);
    const char *node = getenv("JETT_TEST_NODE");
    if (!node || !*node)
        node = "/usr/bin/node";

    int in[2], out[2], er[2];
    cr_assert(pipe2(in, O_CLOEXEC) == 0 && pipe2(out, O_CLOEXEC) == 0 &&
              pipe2(er, O_CLOEXEC) == 0, "pipes for the TOON decoder: %s", strerror(errno));
    struct tl_spawn_opts o = TL_SPAWN_OPTS_INIT;
    o.in_fd = in[0];
    o.out_fd = out[1];
    o.err_fd = er[1];
    char *argv[] = {(char *)node, script, NULL};
    pid_t pid = tl_spawn(node, argv, &o);
    cr_assert(pid > 0, "could not run %s: %s", node, strerror((int)-pid));
    close(in[0]);
    close(out[1]);
    close(er[1]);
    cr_assert(fcntl(in[1], F_SETFL, O_NONBLOCK) == 0);

    /* Feed stdin while draining both outputs: a large document or answer fills a pipe. */
    void (*old_pipe)(int) = signal(SIGPIPE, SIG_IGN);
    struct sink sink[2] = {{NULL, 0, 0}, {NULL, 0, 0}};
    sink_put(&sink[0], "", 0);
    sink_put(&sink[1], "", 0);
    size_t sent = 0;
    struct pollfd p[3] = {{out[0], POLLIN, 0}, {er[0], POLLIN, 0}, {in[1], POLLOUT, 0}};
    if (len == 0) {
        close(in[1]);
        p[2].fd = -1;
    }
    while (p[0].fd >= 0 || p[1].fd >= 0) {
        int n = poll(p, 3, -1); /* meson's suite timeout bounds a decoder that hangs */
        if (n < 0 && errno == EINTR)
            continue;
        cr_assert(n > 0, "poll on the TOON decoder: %s", strerror(errno));
        if (p[2].fd >= 0 && (p[2].revents & (POLLOUT | POLLERR | POLLHUP))) {
            ssize_t w = write(p[2].fd, (const char *)text + sent, len - sent);
            if (w > 0)
                sent += (size_t)w;
            if ((w < 0 && errno != EINTR && errno != EAGAIN) || sent == len) {
                close(p[2].fd); /* EPIPE: the decoder stopped reading; its verdict follows */
                p[2].fd = -1;
            }
        }
        for (int i = 0; i < 2; i++) {
            if (p[i].fd < 0 || !(p[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            char buf[65536];
            ssize_t k = read(p[i].fd, buf, sizeof buf);
            if (k < 0 && errno == EINTR)
                continue;
            if (k <= 0) {
                close(p[i].fd);
                p[i].fd = -1;
                continue;
            }
            sink_put(&sink[i], buf, (size_t)k);
        }
    }
    if (p[2].fd >= 0)
        close(p[2].fd);
    signal(SIGPIPE, old_pipe);
    int st = tl_wait(pid, -1);
    cr_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) <= 1,
              "the TOON decoder did not run: status %d: %s", st, sink[1].p);
    if (WEXITSTATUS(st) == 0) {
        free(sink[1].p);
        return sink[0].p;
    }
    free(sink[0].p);
    if (err)
        *err = sink[1].p;
    else {
        cr_log_error("decoder: %s", sink[1].p);
        free(sink[1].p);
    }
    return NULL;
}
