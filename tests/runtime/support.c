#include "support.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tests/lib/spawn.h"

const char *jtt_build_root(void)
{
    const char *p = getenv("JETTPROF_BUILD_ROOT");
    cr_assert(p && *p, "JETTPROF_BUILD_ROOT is not set (run through meson test)");
    return p;
}

const char *jtt_source_root(void)
{
    const char *p = getenv("JETTPROF_SOURCE_ROOT");
    cr_assert(p && *p, "JETTPROF_SOURCE_ROOT is not set (run through meson test)");
    return p;
}

const char *jtt_jett(void)
{
    static char path[4096];
    snprintf(path, sizeof path, "%s/runtime/jett", jtt_build_root());
    return path;
}

static long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000L;
}

static void append(char **buf, size_t *len, size_t *cap, const char *p, size_t n)
{
    if (*len + n + 1 > *cap) {
        *cap = (*len + n + 1) * 2;
        *buf = realloc(*buf, *cap);
        cr_assert(*buf);
    }
    memcpy(*buf + *len, p, n);
    *len += n;
    (*buf)[*len] = '\0';
}

/* In the child before exec: SIGINT as the program would get it from a terminal. */
static void sigint_default(void *arg)
{
    (void)arg;
    signal(SIGINT, SIG_DFL);
}

const char *jtt_backend(void)
{
    const char *b = getenv("JETT_TEST_BACKEND");
    return b && *b ? b : NULL;
}

/* Under JETT_TEST_BACKEND every `jett run` gets that --backend unless it chose one itself. And
 * unless it chose one, what any child prints has the backend word as the interpreter's,
 * whichever backend ran: the one field a backend changes, so every other byte the suite
 * compares (goldens included) must be the same on both. */
static bool g_raw; /* jtt_run_raw: neither */

static bool chose_backend(const char *const *argv)
{
    if (g_raw)
        return true;
    for (size_t i = 0; argv[i]; i++)
        if (!strncmp(argv[i], "--backend", 9))
            return true;
    return false;
}

static void interpreter_words(char *s, size_t *len)
{
    static const struct { const char *from, *to; } words[] = {
        {"vm_safe_point", "interpreter_safe_point"}, {"vm_alloc_hooks", "interpreter_alloc_hooks"},
    };
    for (size_t w = 0; w < sizeof words / sizeof words[0]; w++) {
        size_t fl = strlen(words[w].from), tl = strlen(words[w].to);
        char *p;
        while ((p = strstr(s, words[w].from))) {
            /* the output buffer has room: append() doubles, and the words are few */
            memmove(p + tl, p + fl, *len - (size_t)(p - s) - fl + 1);
            memcpy(p, words[w].to, tl);
            *len += tl - fl;
        }
    }
}

static void (*g_hook)(int pid, void *user);
static void *g_hook_user;

static void run_child(const char *cwd, const char *const *argv, const char *stdin_text,
                      size_t stdin_len, const char *exe, const char *sync, int after_ms,
                      struct jt_run *r)
{
    int po[2], pe[2], pi[2];
    cr_assert(pipe2(po, O_CLOEXEC) == 0 && pipe2(pe, O_CLOEXEC) == 0 && pipe2(pi, O_CLOEXEC) == 0);
    size_t argc = 0;
    while (argv[argc])
        argc++;
    const char **av = calloc(argc + 3, sizeof *av);
    char backend_opt[64];
    bool normalise = !chose_backend(argv);
    size_t na = 0;
    av[na++] = exe;
    for (size_t i = 0; i < argc; i++) {
        av[na++] = argv[i];
        if (i == 0 && normalise && jtt_backend() && !strcmp(exe, jtt_jett()) &&
            !strcmp(argv[0], "run")) {
            snprintf(backend_opt, sizeof backend_opt, "--backend=%s", jtt_backend());
            av[na++] = backend_opt;
        }
    }
    struct tl_spawn_opts o = TL_SPAWN_OPTS_INIT;
    o.cwd = cwd;
    o.in_fd = pi[0];
    o.out_fd = po[1];
    o.err_fd = pe[1];
    o.setup = sigint_default;
    pid_t pid = tl_spawn(exe, (char *const *)av, &o); /* dies with the test */
    cr_assert(pid > 0, "could not start %s: %s", exe, strerror((int)-pid));
    free(av);
    close(po[1]);
    close(pe[1]);
    close(pi[0]);
    if (stdin_text) {
        size_t off = 0;
        while (off < stdin_len) {
            ssize_t w = write(pi[1], stdin_text + off, stdin_len - off);
            if (w < 0 && errno == EINTR)
                continue;
            cr_assert(w > 0, "writing the child's stdin failed");
            off += (size_t)w;
        }
    }
    close(pi[1]);
    size_t ocap = 0, ecap = 0;
    r->out = r->err = NULL;
    r->out_len = r->err_len = 0;
    append(&r->out, &r->out_len, &ocap, "", 0);
    append(&r->err, &r->err_len, &ecap, "", 0);
    long start = now_ms(), synced_at = sync ? -1 : start;
    bool sent = after_ms < 0;
    int open_fds = 2;
    struct pollfd fds[2] = {{po[0], POLLIN, 0}, {pe[0], POLLIN, 0}};
    while (open_fds > 0) {
        int timeout = 200;
        if (!sent && synced_at >= 0) {
            long left = synced_at + after_ms - now_ms();
            timeout = left > 0 ? (int)left : 0;
        }
        int n = poll(fds, 2, timeout);
        if (n < 0 && errno == EINTR)
            continue;
        cr_assert(n >= 0);
        cr_assert(now_ms() - start < 60000, "jett did not finish within 60 s");
        for (int i = 0; i < 2; i++) {
            if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
                continue;
            char buf[65536];
            ssize_t k = read(fds[i].fd, buf, sizeof buf);
            if (k <= 0) {
                close(fds[i].fd);
                fds[i].fd = -1;
                open_fds--;
                continue;
            }
            if (i == 0)
                append(&r->out, &r->out_len, &ocap, buf, (size_t)k);
            else
                append(&r->err, &r->err_len, &ecap, buf, (size_t)k);
        }
        if (!sent && synced_at < 0 && sync && strstr(r->err, sync))
            synced_at = now_ms();
        if (!sent && synced_at >= 0 && now_ms() >= synced_at + after_ms) {
            if (g_hook)
                g_hook(pid, g_hook_user);
            else
                kill(pid, SIGINT);
            sent = true;
        }
    }
    int st = tl_wait(pid, -1);
    cr_assert(st >= 0, "waiting for %s: %s", exe, strerror(-st));
    if (normalise) {
        size_t need = (r->out_len + 1) * 2, neede = (r->err_len + 1) * 2;
        r->out = realloc(r->out, need);
        r->err = realloc(r->err, neede);
        cr_assert(r->out && r->err);
        interpreter_words(r->out, &r->out_len);
        interpreter_words(r->err, &r->err_len);
    }
    r->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

void jtt_run(const char *cwd, const char *const *argv, struct jt_run *r)
{
    run_child(cwd, argv, NULL, 0, jtt_jett(), NULL, -1, r);
}

void jtt_run_file(const char *cwd, const char *file, const char *const *opts, struct jt_run *r)
{
    const char *argv[32] = {"run", file};
    size_t n = 2;
    for (size_t i = 0; opts && opts[i]; i++) {
        cr_assert_lt(n, sizeof argv / sizeof argv[0] - 1, "too many options");
        argv[n++] = opts[i];
    }
    argv[n] = NULL;
    jtt_run(cwd, argv, r);
}

struct jt_run jtt_run_src(const char *src, const char *const *opts)
{
    char *dir = jtt_tmpdir();
    jtt_write(dir, "main.jett", src);
    struct jt_run r;
    jtt_run_file(dir, "main.jett", opts, &r);
    jtt_rmtree(dir);
    free(dir);
    return r;
}

void jtt_run_sigint(const char *cwd, const char *const *argv, const char *sync, int after_ms,
                    struct jt_run *r)
{
    run_child(cwd, argv, NULL, 0, jtt_jett(), sync, after_ms, r);
}

void jtt_run_hook(const char *cwd, const char *const *argv, const char *sync, int after_ms,
                  void (*hook)(int pid, void *user), void *user, struct jt_run *r)
{
    g_hook = hook;
    g_hook_user = user;
    run_child(cwd, argv, NULL, 0, jtt_jett(), sync, after_ms, r);
    g_hook = NULL;
    g_hook_user = NULL;
}

void jtt_run_exe(const char *exe, const char *cwd, const char *const *argv, struct jt_run *r)
{
    run_child(cwd, argv, NULL, 0, exe, NULL, -1, r);
}

void jtt_run_raw(const char *cwd, const char *const *argv, struct jt_run *r)
{
    g_raw = true;
    run_child(cwd, argv, NULL, 0, jtt_jett(), NULL, -1, r);
    g_raw = false;
}

void jtt_run_free(struct jt_run *r)
{
    free(r->out);
    free(r->err);
    r->out = r->err = NULL;
}

char *jtt_tmpdir(void)
{
    char *t = strdup("/tmp/jett-test-XXXXXX");
    cr_assert(mkdtemp(t));
    return t;
}

void jtt_write(const char *dir, const char *rel, const char *text)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, rel);
    for (char *s = path + strlen(dir) + 1; (s = strchr(s, '/')); s++) {
        *s = '\0';
        mkdir(path, 0700);
        *s = '/';
    }
    FILE *f = fopen(path, "wb");
    cr_assert(f, "cannot write %s", path);
    fwrite(text, 1, strlen(text), f);
    fclose(f);
}

void jtt_rmtree(const char *dir)
{
    char cmd[4200];
    if (strncmp(dir, "/tmp/jett-test-", 15) != 0)
        return;
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    cr_assert(system(cmd) == 0);
}

void jtt_expect_replay_is_live(const char *cap, const char *out)
{
    const char *p = strstr(out, "\nprofile:\n");
    cr_assert(p, "no profile in the envelope:\n%s", out);
    p++;
    const char *e = strstr(p, "\nerror_kind:");
    size_t live_len = e ? (size_t)(e - p) + 1 : strlen(p);
    const char *argv[] = {"replay", cap, "--format", "toon", NULL};
    struct jt_run rep;
    jtt_run_exe(getenv("JETTPROFD"), NULL, argv, &rep);
    cr_assert_eq(rep.status, 0, "replay: %s", rep.err);
    cr_expect_eq(rep.out_len, live_len, "replay %zu bytes, live %zu", rep.out_len, live_len);
    cr_expect_eq(memcmp(rep.out, p, live_len < rep.out_len ? live_len : rep.out_len), 0,
                 "live:\n%.*s\nreplay:\n%s", (int)live_len, p, rep.out);
    jtt_run_free(&rep);
}

size_t jtt_count(const char *hay, const char *needle)
{
    size_t n = 0, k = strlen(needle);
    for (const char *p = hay; (p = strstr(p, needle)); p += k)
        n++;
    return n;
}

/* Kills the private jettprofd (a child of the jett process) while the program runs. */
static void kill_daemon_once(int jett_pid, int *killed)
{
    DIR *d = opendir("/proc");
    cr_assert(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        int pid = atoi(e->d_name);
        if (pid <= 0)
            continue;
        char path[64], buf[512];
        snprintf(path, sizeof path, "/proc/%d/stat", pid);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[n] = '\0';
        char *rp = strrchr(buf, ')');
        int ppid = 0;
        char state;
        if (rp && sscanf(rp + 2, "%c %d", &state, &ppid) == 2 && ppid == jett_pid &&
            strstr(buf, "(jettprofd)")) {
            kill(pid, SIGKILL);
            (*killed)++;
        }
    }
    closedir(d);
}

/* Whether process pid has a thread named name (its /proc task comm). */
static int has_thread(int pid, const char *name)
{
    char path[320];
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *d = opendir(path);
    if (!d)
        return 0;
    struct dirent *e;
    int found = 0;
    while (!found && (e = readdir(d))) {
        char comm[64] = "";
        snprintf(path, sizeof path, "/proc/%d/task/%s/comm", pid, e->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        found = fgets(comm, sizeof comm, f) && strncmp(comm, name, strlen(name)) == 0;
        fclose(f);
    }
    closedir(d);
    return found;
}

void jtt_kill_private_daemon(int jett_pid, void *killed)
{
    int *n = killed;
    /* The run must be past its handshake, or the kill is a setup failure instead of the
     * collector failure the callers test: jett starts its jett-runtime thread only after the
     * profiler has started. A slow (sanitized) build on a busy machine gets up to 10 s. */
    for (int i = 0; i < 1000 && !has_thread(jett_pid, "jett-runtime"); i++)
        usleep(10000);
    /* the agent spawns its daemon at start-up: give a slow (sanitized) build up to 5 s */
    for (int i = 0; i < 500 && *n == 0; i++) {
        kill_daemon_once(jett_pid, n);
        if (*n == 0)
            usleep(10000);
    }
}
