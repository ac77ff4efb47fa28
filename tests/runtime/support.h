/* Test support for the runtime suites: run build/runtime/jett as a child with pipes, write
 * throw-away projects. The official TOON decoder: tl_toon_decode (tests/lib/toon.h). */
#ifndef JETT_TESTS_RUNTIME_SUPPORT_H
#define JETT_TESTS_RUNTIME_SUPPORT_H

#include <stddef.h>

#include "tests/lib/toon.h"

struct jt_run {
    char *out, *err;       /* NUL-terminated, malloc'ed */
    size_t out_len, err_len;
    int status;            /* exit status, or 128 + signal */
};

/* Paths from the environment tests/meson.build sets (asserts when missing). */
const char *jtt_build_root(void);
const char *jtt_source_root(void);
const char *jtt_jett(void);

/* The backend the suite runs on ($JETT_TEST_BACKEND, "interp"), or NULL for jett's default (the
 * VM). With one set, every `jett run` without a --backend of its own gets it; and the output of
 * every child run without a --backend of its own shows the interpreter's backend word whichever
 * backend ran (the one field that may differ), so the suite's comparisons hold the rest byte
 * for byte on both. */
const char *jtt_backend(void);

/* Runs jett with argv (NULL-terminated, argv[0] excluded) in directory cwd (NULL: inherit).
 * If sigint_after_ms >= 0, sends SIGINT that long after the child wrote `sync` to stderr
 * (or after the delay from start when sync is NULL). Fails the test on a harness error. */
void jtt_run(const char *cwd, const char *const *argv, struct jt_run *r);
/* jtt_run without $JETT_TEST_BACKEND's option and with the output as jett printed it. */
void jtt_run_raw(const char *cwd, const char *const *argv, struct jt_run *r);
/* `jett run FILE OPTS...` in cwd: opts is NULL-terminated, or NULL for none. */
void jtt_run_file(const char *cwd, const char *file, const char *const *opts, struct jt_run *r);
/* A throw-away project holding main.jett = src, run as jtt_run_file runs it; the result. */
struct jt_run jtt_run_src(const char *src, const char *const *opts);
void jtt_run_sigint(const char *cwd, const char *const *argv, const char *sync, int after_ms,
                    struct jt_run *r);
/* Like jtt_run_sigint, but calls hook(pid, user) once instead of sending SIGINT: after_ms
 * after the child wrote `sync` to stderr (or after the delay from start when sync is NULL). */
void jtt_run_hook(const char *cwd, const char *const *argv, const char *sync, int after_ms,
                  void (*hook)(int pid, void *user), void *user, struct jt_run *r);
/* A hook for jtt_run_hook: SIGKILLs the private jettprofd the jett process started (waiting
 * up to 5 s for it to appear) and counts it in *(int *)killed: a collector failure. */
void jtt_kill_private_daemon(int jett_pid, void *killed);
/* Runs another program (e.g. jettprofd) the same way. */
void jtt_run_exe(const char *exe, const char *cwd, const char *const *argv, struct jt_run *r);
void jtt_run_free(struct jt_run *r);

/* A fresh temporary directory (removed by jtt_rmtree). */
char *jtt_tmpdir(void);
void jtt_write(const char *dir, const char *rel, const char *text); /* makes parent dirs */
void jtt_rmtree(const char *dir);

/* Replays capture `cap` with $JETTPROFD and expects its TOON to be, byte for byte, the profile
 * object of the --agent envelope `out` (from its `profile:` line up to `error_kind:`). */
void jtt_expect_replay_is_live(const char *cap, const char *out);

/* Count of non-overlapping occurrences of needle in hay. */
size_t jtt_count(const char *hay, const char *needle);

#endif
