/* tests/lib/spawn.h: children of a test that cannot outlive it.
 *
 * A test that starts a daemon and then fails an assertion dies on the spot (Criterion aborts
 * its process); a child left running holds the runner's pipes, so the suite hangs until meson
 * times it out instead of reporting the failure. Every child made here therefore gets
 * PR_SET_PDEATHSIG(SIGKILL) before it runs anything else: the kernel kills it when the test
 * process dies, however it dies. And it is recorded, so that tl_kill_children (registered with
 * atexit on the first use) kills and reaps whatever is still running when the test ends.
 *
 * The death signal is tied to the thread that forked, not to the process: call these from the
 * test's main thread, or from a thread that outlives the child.
 *
 * Nothing here calls Criterion: the benches use it too. Errors are negative errno. */
#ifndef JETTPROF_TESTS_LIB_SPAWN_H
#define JETTPROF_TESTS_LIB_SPAWN_H

#include <sys/types.h>

/* How tl_spawn sets up the child; zero-initialised fields mean "as the parent". */
struct tl_spawn_opts {
    const char *cwd;            /* directory to run in; NULL: inherit */
    int in_fd, out_fd, err_fd;  /* made the child's 0, 1, 2; a negative value: inherit */
    int keep_fd;                /* inherited although close-on-exec; negative: none */
    /* runs in the child after the descriptors are set, just before exec (e.g. dropping
     * privileges); it must exit with _exit, not exit, on failure */
    void (*setup)(void *arg);
    void *arg;
};
#define TL_SPAWN_OPTS_INIT {NULL, -1, -1, -1, -1, NULL, NULL}

/* fork() whose child gets the death signal and is recorded. Returns the pid in the parent and
 * 0 in the child (which owns no recorded children), or -errno. A child whose parent died
 * before the signal was armed _exits at once with status 125. */
pid_t tl_fork(void);
/* In a child of tl_fork, after changing its credentials (setresuid, setresgid...), which
 * clears the death signal: arms it again (and _exits 125 if the parent is already gone). */
void tl_rearm(void);
/* Forks and execs path with argv (o may be NULL). Returns the pid, or -errno: a failure to set
 * up or exec the child is reported here (its errno, passed back over a close-on-exec pipe),
 * and that child is already reaped. */
pid_t tl_spawn(const char *path, char *const argv[], const struct tl_spawn_opts *o);
/* Reaps a recorded child: waits for it at most timeout_ms (< 0: without a bound) and returns
 * its wait status; past the bound it is killed, reaped and -ETIMEDOUT returned. -ECHILD when
 * pid is not a child of this process. */
int tl_wait(pid_t pid, int timeout_ms);
/* SIGKILLs and reaps every recorded child that has not been reaped. Children already reaped
 * with a plain waitpid are skipped: only a pid that is still our child is signalled. */
void tl_kill_children(void);

#endif
