/* `jett run`: the driver. It owns the lifecycle of the contract:
 *
 *   validate the command line   -> exit 2 on a CLI error, nothing read or compiled
 *   compile                     -> exit 3 with diagnostics, no profile
 *   prepare the profiler        -> exit 4 on a setup failure, no user code runs
 *   run main on `jett-runtime`  -> 0 returned, 1 runtime error, 130 interrupted
 *   finalize the profile, then write it after the program's output (human: stderr;
 *   --agent: inside the one TOON run envelope on stdout).
 *
 * A collector failure after a normal return keeps exit 0 but the envelope says
 * error_kind: profiler_failure. The exit codes and the envelope are documented in
 * runtime/LANGUAGE.md and runtime/OUTPUT.md. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/text.h"
#include "actors.h"
#include "bytecode.h"
#include "interp.h"
#include "jett.h"
#include "jettprof.h"

#ifndef JETTPROF_VERSION
#define JETTPROF_VERSION "unknown"
#endif
#ifndef JETT_STDLIB_DIR
#define JETT_STDLIB_DIR ""
#endif
#ifndef JETT_STDLIB_INSTALLED
#define JETT_STDLIB_INSTALLED ""
#endif

/* How a run can fail: X(NAME, exit status, envelope error_kind). One list for the exit codes
 * and the words, documented in LANGUAGE.md and OUTPUT.md. A profiler failure after a normal
 * return keeps the program's status (0). */
#define JT_FAILURES(X)                                                                            \
    X(RUNTIME_ERROR, 1, "runtime_error")                                                          \
    X(CLI_ERROR, 2, "cli_error")                                                                  \
    X(COMPILE_ERROR, 3, "compile_error")                                                          \
    X(SETUP_FAILURE, 4, "profiler_setup_failure")                                                 \
    X(INTERRUPTED, 130, "interrupted")                                                            \
    X(PROFILER_FAILURE, 0, "profiler_failure")
enum {
#define JT_X(n, code, word) EXIT_##n = code,
    JT_FAILURES(JT_X)
#undef JT_X
    EXIT_RETURNED = 0
};
enum jt_failure {
#define JT_X(n, code, word) FAIL_##n,
    JT_FAILURES(JT_X)
#undef JT_X
};
static const char *const failure_word[] = {
#define JT_X(n, code, word) word,
    JT_FAILURES(JT_X)
#undef JT_X
};

/* The envelope's termination words. */
#define JT_TERMINATIONS(X)                                                                        \
    X(RETURNED, "returned") X(RUNTIME_ERROR, "runtime_error") X(INTERRUPTED, "interrupted")      \
    X(NOT_STARTED, "not_started")
enum {
#define JT_X(n, word) TERM_##n,
    JT_TERMINATIONS(JT_X)
#undef JT_X
};
static const char *const termination_word[] = {
#define JT_X(n, word) word,
    JT_TERMINATIONS(JT_X)
#undef JT_X
};

#define RUNTIME_THREAD_STACK (256u << 20) /* deep Jett recursion walks the C stack */

static int g_interrupt; /* written by the SIGINT handler, read relaxed at safe points */

static void on_sigint(int sig)
{
    (void)sig;
    __atomic_store_n(&g_interrupt, 1, __ATOMIC_RELAXED);
}

struct envelope {
    const char *status;      /* ok | error */
    const char *termination; /* returned | runtime_error | interrupted | not_started */
    int exit_code;
    const char *out; size_t out_len;
    const char *err; size_t err_len;
    uint64_t run_id; /* a long-lived daemon's id of the run, 0: none (no run_id field) */
    /* the debug rows and log records, or NULL before user code ran (empty tables) */
    const struct jt_runlog *runlog; const struct jt_program *prog;
    const char *profile; size_t profile_len; /* the `profile:` object at indent 0, or NULL */
    const char *error_kind;  /* NULL when the run succeeded */
    const char *error;
};

/* Writes the one TOON run envelope on stdout. Field order is fixed (OUTPUT.md): program
 * output, messages, keys and values are only ever quoted-or-bare escaped scalars (a table
 * cell is one too), so none of them can start a line, add a field or impersonate one. */
static void write_envelope(const struct envelope *e)
{
    static const struct jt_runlog no_rows;
    static const struct jt_program no_program;
    struct jp_buf b = {0};
    jt_buf_printf(&b, "status: %s\ntermination: %s\nexit_code: %d\nstdout: ", e->status,
                  e->termination, e->exit_code);
    jt_toon_string(&b, e->out ? e->out : "", e->out ? e->out_len : 0);
    jt_buf_puts(&b, "\nstderr: ");
    jt_toon_string(&b, e->err ? e->err : "", e->err ? e->err_len : 0);
    jt_buf_puts(&b, "\n");
    jt_runlog_tables(e->runlog ? e->runlog : &no_rows, e->runlog ? e->prog : &no_program, &b);
    if (e->run_id)
        jt_buf_printf(&b, "run_id: %llu\n", (unsigned long long)e->run_id);
    if (e->profile && e->profile_len) {
        jt_buf_put(&b, e->profile, e->profile_len);
        if (e->profile[e->profile_len - 1] != '\n')
            jt_buf_puts(&b, "\n");
    }
    if (e->error_kind) {
        jt_buf_printf(&b, "error_kind: %s\nerror: ", e->error_kind);
        jt_toon_string(&b, e->error, strlen(e->error));
        jt_buf_puts(&b, "\n");
    }
    /* TOON documents carry no trailing newline after the last line's own. */
    if (b.len && b.p[b.len - 1] == '\n')
        b.len--;
    fwrite(b.p, 1, b.len, stdout);
    fputc('\n', stdout);
    fflush(stdout);
    jp_buf_free(&b);
}

/* A message for a person on stderr, one line per line of msg, each written by the one rule
 * for human text (common/text.h): a failing program's text, a path or a daemon's reason in it
 * cannot drive the user's terminal. */
static void say_lines(const char *msg)
{
    struct jp_buf b = {0};
    for (const char *p = msg; *p;) {
        size_t n = strcspn(p, "\n");
        jp_text_safe(&b, p, n);
        jp_buf_put(&b, "\n", 1);
        p += n + (p[n] == '\n');
    }
    if (!b.len)
        jp_buf_put(&b, "\n", 1);
    if (b.failed)
        fputs("jett: out of memory writing an error message\n", stderr);
    else
        fwrite(b.p, 1, b.len, stderr);
    jp_buf_free(&b);
}

/* A failure before user code ran: CLI, compile or profiler setup. */
static int pre_exec_failure(bool agent, int code, enum jt_failure f, const char *msg)
{
    const char *kind = failure_word[f];
    if (agent) {
        char *m = jt_xstrdup(msg);
        size_t n = strlen(m);
        while (n && m[n - 1] == '\n')
            m[--n] = '\0'; /* a scalar: no trailing newline */
        struct envelope e = {.status = "error", .termination = termination_word[TERM_NOT_STARTED],
                             .exit_code = code,
                             .error_kind = kind, .error = m};
        write_envelope(&e);
        free(m);
    } else {
        say_lines(msg);
    }
    return code;
}

static bool argv_has_agent(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strcmp(argv[i], "--agent") == 0)
            return true;
    return false;
}

static const char usage[] =
    "usage: jett run FILE [--profile [--profile-rate HZ] | --profile-memory]\n"
    "                     [--profile-threshold PERCENT] [--profile-limit COUNT]\n"
    "                     [--profile-capture PATH [--profile-capture-overwrite]]\n"
    "                     [--profile-verbose] [--profile-export FORMAT:PATH]...\n"
    "                     [--workers N] [--backend interp|vm] [--agent]";

static const char usage_text[] =
    "Runs the Jett program FILE; with --profile (CPU) or --profile-memory it is profiled by\n"
    "jettprofd, and the report follows the program's output on stderr (with --agent, one TOON\n"
    "run envelope on stdout instead).\n"
    "  --profile                      sample CPU time\n"
    "  --profile-rate HZ              samples per second, 1..1000 (default 1000)\n"
    "  --profile-memory               account Jett heap allocations\n"
    "  --profile-threshold PERCENT    report entries at or above PERCENT (default 5)\n"
    "  --profile-limit COUNT          at most COUNT entries, 1..100 (default 10)\n"
    "  --profile-capture PATH         keep the record stream in a new file for `jettprofd\n"
    "                                 replay`\n"
    "  --profile-capture-overwrite    replace an existing capture file\n"
    "  --profile-verbose              end the report with every total, as the TOON names them\n"
    "  --profile-export FORMAT:PATH   also write the profile as FORMAT (folded, pprof,\n"
    "                                 speedscope, svg, html) to PATH; repeatable\n"
    "  --workers N                    run the actors on N worker threads, 1..64 (default 1)\n"
    "  --backend interp|vm            run on the tree-walking interpreter or the bytecode VM\n"
    "                                 (default vm)\n"
    "  --agent                        one TOON run envelope on stdout\n"
    "Exit status: the program's (0 returned, 1 runtime error, 130 interrupted), 2 usage\n"
    "error, 3 compile error, 4 profiler setup failure. See jett(1).\n";

struct runner {
    struct jt_rt rt;
    enum jt_outcome outcome;
    bool setup_failed;
    bool hook_heap; /* memory mode: the heap reports its events */
    uint32_t workers; /* --workers */
    int setup_err;
    jettprof_run *run;
};

static void *runtime_main(void *arg)
{
    struct runner *R = arg;
    pthread_setname_np(pthread_self(), "jett-runtime");
    /* This thread is worker 0; the scheduler starts and registers the others (actors.c). */
    struct jt_sched_config cfg = {.workers = R->workers, .run = R->run, .hook_heap = R->hook_heap};
    int err = 0;
    R->outcome = jt_sched_run(&R->rt, &cfg, &err);
    if (err < 0) {
        R->setup_failed = true;
        R->setup_err = err;
    }
    return NULL;
}

static int excerpt_cb(void *user, uint32_t source_id, uint32_t line, uint32_t col, char *buf,
                      size_t cap, int *redacted)
{
    (void)col;
    const struct jt_program *prog = user;
    for (uint32_t i = 0; i < prog->nsources; i++)
        if (prog->sources[i]->prof_id == source_id && source_id != 0)
            return jt_excerpt(prog->sources[i], line, buf, cap, redacted);
    return -ENOENT; /* not in the run manifest: unavailable */
}

static const uint32_t origin_map[] = {
    [JT_ORIGIN_PROJECT] = JETTPROF_ORIGIN_PROJECT,
    [JT_ORIGIN_DEPENDENCY] = JETTPROF_ORIGIN_DEPENDENCY,
    [JT_ORIGIN_STDLIB] = JETTPROF_ORIGIN_STDLIB,
};

static int intern_fn(jettprof_run *run, struct jt_fn *f)
{
    struct jettprof_frame_desc d = {
        .size = sizeof d, .kind = JETTPROF_FRAME_FUNCTION, .ns = f->ns, .function = f->name,
        .source_id = f->src->prof_id, .decl_start = f->decl_start, .decl_end = f->decl_end,
        .decl_line = f->decl_line, .decl_col = f->decl_col,
    };
    return jettprof_frame(run, &d, &f->prof_frame);
}

/* Announces the run manifest: every loaded source and every function's frame. */
static int intern_program(jettprof_run *run, struct jt_program *prog)
{
    for (uint32_t i = 0; i < prog->nsources; i++) {
        struct jt_source *s = prog->sources[i];
        int r = jettprof_source(run, origin_map[s->origin], s->logical, &s->prof_id);
        if (r < 0)
            return r;
    }
    for (uint32_t i = 0; i < prog->nmodules; i++) {
        struct jt_module *m = prog->modules[i];
        for (uint32_t k = 0; k < m->nfns; k++) {
            int r = intern_fn(run, m->fns[k]);
            if (r < 0)
                return r;
        }
        if (m->nglobals) {
            int r = intern_fn(run, m->init_frame);
            if (r < 0)
                return r;
        }
    }
    return 0;
}

/* Whether st is the file of one of the program's own sources (same device and inode: another
 * name for the same file is caught too). */
static bool is_own_source(const struct jt_program *prog, const struct stat *st)
{
    for (uint32_t i = 0; i < prog->nsources; i++)
        if (prog->sources[i]->dev == st->st_dev && prog->sources[i]->ino == st->st_ino)
            return true;
    return false;
}

/* The capture file of `--profile-capture PATH`, opened so that the run can only ever write a
 * file that is its own to write: a new file (O_EXCL: whatever already has the name, a planted
 * symbolic link included, is refused), or, with --profile-capture-overwrite, an existing regular
 * file that is not a symbolic link (O_NOFOLLOW) and not one of the program's own sources (the
 * same device and inode as a loaded source, under any name). O_NONBLOCK keeps a FIFO at PATH
 * from blocking the open; it is cleared once the file is known to be regular. An existing file
 * is emptied only after every check passed. 0 with *fd and *created (this run made the file),
 * or -errno with a message naming the path in err. */
static int open_capture(const struct jt_cli *cli, const struct jt_program *prog, int *fd,
                        bool *created, char *err, size_t errcap)
{
    char shown_path[200];
    jt_shown(cli->capture_path, 180, shown_path, sizeof shown_path);
    const int base = O_WRONLY | O_CLOEXEC | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK;
    *created = false;
    int f = open(cli->capture_path, base | O_CREAT | O_EXCL, 0600);
    if (f >= 0)
        *created = true;
    else if (errno == EEXIST && cli->capture_overwrite)
        f = open(cli->capture_path, base);
    if (f < 0) {
        int e = errno;
        if (e == EEXIST)
            snprintf(err, errcap, "profiler: setup failure: the capture file '%s' already exists; "
                     "pass --profile-capture-overwrite to replace it", shown_path);
        else if (e == ELOOP)
            snprintf(err, errcap, "profiler: setup failure: the capture file '%s' is a symbolic "
                     "link, which is never followed", shown_path);
        else
            snprintf(err, errcap, "profiler: setup failure: cannot open the capture file: %s",
                     strerror(e)); /* the path is not echoed: the name did not lead to a file */
        return -e;
    }
    struct stat st;
    const char *refused = NULL;
    int e = 0;
    if (fstat(f, &st) < 0) {
        e = errno;
        snprintf(err, errcap, "profiler: setup failure: cannot inspect the capture file '%s': %s",
                 shown_path, strerror(e));
    } else if (!S_ISREG(st.st_mode)) {
        refused = "is not a regular file";
    } else if (is_own_source(prog, &st)) {
        refused = "is one of the program's own source files";
    }
    if (refused) {
        e = EEXIST;
        snprintf(err, errcap, "profiler: setup failure: the capture file '%s' %s; refusing to "
                 "overwrite it", shown_path, refused);
    }
    if (!e && ((!*created && ftruncate(f, 0) < 0) ||
               fcntl(f, F_SETFL, fcntl(f, F_GETFL) & ~O_NONBLOCK) < 0)) {
        e = errno;
        snprintf(err, errcap, "profiler: setup failure: cannot prepare the capture file '%s': %s",
                 shown_path, strerror(e));
    }
    if (e) {
        close(f);
        return -e; /* a file we created is a new inode: it never fails the checks above */
    }
    *fd = f;
    return 0;
}

/* Removes the capture file this run created when the run ends before user code: only if PATH
 * still names the file we opened (someone may have replaced it meanwhile). */
static void remove_own_capture(const char *path, int fd)
{
    struct stat mine, now;
    if (fstat(fd, &mine) == 0 && lstat(path, &now) == 0 && mine.st_dev == now.st_dev &&
        mine.st_ino == now.st_ino)
        unlink(path);
}

/* A `--profile-export FORMAT:PATH` target. The daemon renders the export, this process writes
 * it: into a temporary file made beside PATH before user code runs (so an unwritable directory
 * is a setup failure, not a surprise at the end), renamed over PATH once complete, so a failed
 * run leaves no half file. PATH is never followed: a symbolic link there, anything but a
 * regular file, or one of the program's own sources is refused before user code and again
 * just before the rename. An existing regular file is replaced. */
struct export_target {
    uint32_t format; /* JETTPROF_EXPORT_* */
    const char *path;
    char shown[200];
    char tmp[4096];
    int fd; /* the temporary file, -1 once renamed or removed */
};

/* NULL when path may be replaced, else why not; errno kept for a failed lstat. */
static const char *export_refusal(const struct jt_program *prog, const char *path, int *e)
{
    struct stat st;
    *e = 0;
    if (lstat(path, &st) < 0) {
        *e = errno == ENOENT ? 0 : errno;
        return *e ? "cannot be inspected" : NULL;
    }
    if (S_ISLNK(st.st_mode))
        return "is a symbolic link, which is never followed";
    if (!S_ISREG(st.st_mode))
        return "is not a regular file";
    return is_own_source(prog, &st) ? "is one of the program's own source files" : NULL;
}

static int prepare_export(const struct jt_program *prog, struct export_target *t, char *err,
                          size_t errcap)
{
    int e;
    jt_shown(t->path, 180, t->shown, sizeof t->shown);
    const char *refused = export_refusal(prog, t->path, &e);
    if (refused) {
        snprintf(err, errcap, "profiler: setup failure: the export file '%s' %s%s%s", t->shown,
                 refused, e ? ": " : "; refusing to write it", e ? strerror(e) : "");
        return -(e ? e : EEXIST);
    }
    if ((size_t)snprintf(t->tmp, sizeof t->tmp, "%s.XXXXXX", t->path) >= sizeof t->tmp) {
        snprintf(err, errcap, "profiler: setup failure: the export file '%s': %s", t->shown,
                 strerror(ENAMETOOLONG));
        return -ENAMETOOLONG;
    }
    t->fd = mkostemp(t->tmp, O_CLOEXEC);
    if (t->fd < 0) {
        e = errno;
        snprintf(err, errcap, "profiler: setup failure: cannot create the export file '%s': %s",
                 t->shown, strerror(e));
        return -e;
    }
    return 0;
}

static void drop_export(struct export_target *t)
{
    if (t->fd < 0)
        return;
    close(t->fd);
    unlink(t->tmp);
    t->fd = -1;
}

/* Writes the export the daemon delivered (x) and renames it over the target; a failure is
 * said on stderr with the path and errno, and leaves no file behind. */
static void finish_export(const struct jt_program *prog, struct export_target *t,
                          const struct jettprof_export *x)
{
    int e = 0;
    const char *refused = NULL;
    if (!x->data) {
        fprintf(stderr, "profiler: export '%s' not written: %s\n", t->shown,
                x->error == EFBIG ? "export_too_large: it passes the daemon's cap on the "
                                    "export bytes of one run (jettprofd --max-export-bytes)"
                : x->error ? strerror(x->error) : "the daemon delivered none with the profile");
        drop_export(t);
        return;
    }
    for (size_t off = 0; off < x->len && !e;) {
        ssize_t n = write(t->fd, x->data + off, x->len - off);
        if (n < 0 && errno != EINTR)
            e = errno;
        else if (n > 0)
            off += (size_t)n;
    }
    if (!e && fchmod(t->fd, 0644) < 0)
        e = errno;
    if (close(t->fd) < 0 && !e)
        e = errno;
    t->fd = -1;
    int e2 = 0;
    if (!e)
        refused = export_refusal(prog, t->path, &e2);
    if (!e && !refused && rename(t->tmp, t->path) < 0)
        e = errno;
    if (e || refused) {
        unlink(t->tmp);
        fprintf(stderr, "profiler: export failed: cannot write '%s': %s\n", t->shown,
                refused ? refused : strerror(e));
    }
}

static int run_command(int argc, char **argv)
{
    bool agent = argv_has_agent(argc, argv);
    struct jt_cli cli;
    char err[400];
    if (argc == 2 && (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "-V") == 0)) {
        printf("jett %s\n", JETTPROF_VERSION);
        return 0;
    }
    /* Help on stdout with exit 0: `jett --help`, `jett help [run]`, and `jett run --help`
     * wherever --help stands among run's arguments. */
    bool help = argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0);
    help |= argc >= 2 && strcmp(argv[1], "help") == 0 &&
            (argc == 2 || (argc == 3 && strcmp(argv[2], "run") == 0));
    for (int i = 2; argc >= 2 && strcmp(argv[1], "run") == 0 && i < argc; i++)
        help |= strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0;
    if (help) {
        printf("%s\n       jett help [run] | --help | --version\n\n%s", usage, usage_text);
        return 0;
    }
    if (argc < 2 || strcmp(argv[1], "run") != 0) {
        const char *m = argc < 2 ? "expected a command: jett run FILE [options]" : "unknown command: expected 'run'";
        char msg[700];
        snprintf(msg, sizeof msg, "jett: error: %s\n%s", m, usage);
        return pre_exec_failure(agent, EXIT_CLI_ERROR, FAIL_CLI_ERROR, msg);
    }
    if (jt_cli_parse(argc - 2, argv + 2, &cli, err, sizeof err) < 0) {
        char msg[900];
        snprintf(msg, sizeof msg, "jett: error: %s\n%s", err, usage);
        return pre_exec_failure(agent, EXIT_CLI_ERROR, FAIL_CLI_ERROR, msg);
    }

    /* $JETT_STDLIB, else the build tree's runtime/stdlib, else the installed copy */
    const char *stdlib = getenv("JETT_STDLIB");
    if (!stdlib || !*stdlib)
        stdlib = access(JETT_STDLIB_DIR, R_OK | X_OK) == 0 ? JETT_STDLIB_DIR : JETT_STDLIB_INSTALLED;
    struct jt_diags diags = {0};
    struct jt_program *prog = NULL;
    if (jt_compile(cli.file, *stdlib ? stdlib : NULL, &prog, &diags) < 0) {
        int code = pre_exec_failure(agent, EXIT_COMPILE_ERROR, FAIL_COMPILE_ERROR,
                                    diags.text.p ? diags.text.p : "error: compile failed");
        jp_buf_free(&diags.text);
        jt_program_free(prog);
        return code;
    }
    jp_buf_free(&diags.text);
    if (cli.backend == JT_BACKEND_VM)
        jt_bc_compile(prog);

    struct runner *R = jt_xcalloc(1, sizeof *R);
    jt_rt_init(&R->rt, prog, &g_interrupt);
    R->rt.capture = agent;
    R->workers = cli.workers;
    R->rt.runlog.human = agent ? NULL : stderr; /* kept for the envelope, or one line each */
    int code = 0;
    int capture_fd = -1;
    bool capture_created = false, user_code_started = false;
    struct export_target exports[JT_MAX_EXPORTS];
    uint32_t export_bits = 0;
    for (uint32_t i = 0; i < cli.nexports; i++) {
        exports[i] = (struct export_target){.format = cli.exports[i].format,
                                            .path = cli.exports[i].path, .fd = -1};
        export_bits |= 1u << cli.exports[i].format;
    }
    if (cli.mode != JT_MODE_NONE) {
        if (cli.capture_path &&
            open_capture(&cli, prog, &capture_fd, &capture_created, err, sizeof err) < 0) {
            code = pre_exec_failure(agent, EXIT_SETUP_FAILURE, FAIL_SETUP_FAILURE, err);
            goto out;
        }
        for (uint32_t i = 0; i < cli.nexports; i++)
            if (prepare_export(prog, &exports[i], err, sizeof err) < 0) {
                code = pre_exec_failure(agent, EXIT_SETUP_FAILURE, FAIL_SETUP_FAILURE, err);
                goto out;
            }
        struct jettprof_config cfg = {
            .size = sizeof cfg,
            .mode = cli.mode == JT_MODE_CPU ? JETTPROF_MODE_CPU : JETTPROF_MODE_MEMORY,
            .rate_hz = cli.mode == JT_MODE_CPU ? cli.rate_hz : 0, /* memory mode has no rate */
            .threshold_bp = cli.threshold_bp,
            .limit = cli.limit,
            /* --profile-verbose changes only the human text: the TOON has every total */
            .outputs = agent ? JETTPROF_OUT_TOON
                             : JETTPROF_OUT_HUMAN | (cli.verbose ? JETTPROF_OUT_VERBOSE : 0u),
            .capabilities = JETTPROF_CAP_CPU_TICK_SOURCE | JETTPROF_CAP_SAFE_STACK_CAPTURE |
                            JETTPROF_CAP_THREAD_REGISTRATION | JETTPROF_CAP_SOURCE_SPANS |
                            JETTPROF_CAP_TASK_ATTRIBUTION |
                            JETTPROF_CAP_PROCESS_CPU_TIME | JETTPROF_CAP_HEAP_ALLOCATION_HOOKS |
                            JETTPROF_CAP_FREE_AND_RESIZE_EVENTS,
            .capture_fd = capture_fd,
            .excerpt = excerpt_cb,
            .excerpt_user = prog,
            .exports = export_bits,
            .backend = cli.backend == JT_BACKEND_VM ? JETTPROF_BACKEND_VM
                                                    : JETTPROF_BACKEND_INTERPRETER,
        };
        int r = jettprof_start(&cfg, &R->run);
        if (r >= 0) {
            r = intern_program(R->run, prog);
#ifdef JT_TEST_TICKS
            if (r >= 0) /* before any thread registers: only injected ticks reach one */
                jt_test_ticks_start(R->run);
#endif
            if (r < 0) {
                struct jettprof_result res = {.size = sizeof res};
                jettprof_finish(R->run, JETTPROF_TERM_RETURNED, &res);
                jettprof_result_release(&res);
                R->run = NULL;
            }
        }
        if (r < 0) {
            /* The stable message first, then its cause (the paths tried, the socket, the
             * daemon's reason), so the user can act on it. */
            const char *why = jettprof_last_reason();
            char msg[1200];
            snprintf(msg, sizeof msg, "%s%s%s", jettprof_strerror(r), *why ? ": " : "", why);
            code = pre_exec_failure(agent, EXIT_SETUP_FAILURE, FAIL_SETUP_FAILURE, msg);
            goto out;
        }
        R->hook_heap = cli.mode == JT_MODE_MEMORY;
    }

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_RESTART | SA_RESETHAND; /* a second ^C ends the process at once */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);

    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, RUNTIME_THREAD_STACK);
    pthread_t th;
    int pr = pthread_create(&th, &attr, runtime_main, R);
    pthread_attr_destroy(&attr);
    if (pr != 0) {
        R->setup_failed = true;
        R->setup_err = -pr;
    } else {
        pthread_join(th, NULL);
    }
    fflush(stdout);
    fflush(stderr);

    if (R->setup_failed) {
        const char *m = "profiler: setup failure: cannot start the jett-runtime thread";
        if (R->run) {
            m = jettprof_strerror(R->setup_err);
            struct jettprof_result res = {.size = sizeof res};
            jettprof_finish(R->run, JETTPROF_TERM_RETURNED, &res);
            jettprof_result_release(&res);
            R->run = NULL;
        }
        code = pre_exec_failure(agent, EXIT_SETUP_FAILURE, FAIL_SETUP_FAILURE, m);
        goto out;
    }
    user_code_started = true;

    const char *termination = termination_word[TERM_RETURNED], *error_kind = NULL, *error = NULL;
    switch (R->outcome) {
    case JT_OUT_RETURNED: code = EXIT_RETURNED; break;
    case JT_OUT_RUNTIME_ERROR:
        code = EXIT_RUNTIME_ERROR;
        termination = termination_word[TERM_RUNTIME_ERROR];
        error_kind = failure_word[FAIL_RUNTIME_ERROR];
        error = R->rt.errmsg.p ? R->rt.errmsg.p : "runtime error";
        break;
    case JT_OUT_INTERRUPTED:
        code = EXIT_INTERRUPTED;
        termination = termination_word[TERM_INTERRUPTED];
        error_kind = failure_word[FAIL_INTERRUPTED];
        error = "interrupted";
        break;
    }

    char *profile = NULL;
    size_t profile_len = 0;
    bool collector_failed = false;
    int capture_errno = 0;
    struct jettprof_result res = {.size = sizeof res};
    bool have_res = false;
    if (R->run) {
        uint32_t term = R->outcome == JT_OUT_RETURNED ? JETTPROF_TERM_RETURNED :
                        R->outcome == JT_OUT_RUNTIME_ERROR ? JETTPROF_TERM_RUNTIME_ERROR :
                        JETTPROF_TERM_INTERRUPTED;
        int r = jettprof_finish(R->run, term, &res);
        R->run = NULL;
        have_res = true;
        collector_failed = res.collector_failed != 0 || r < 0;
        capture_errno = res.capture_errno;
        if (agent && res.toon) {
            profile = res.toon;
            profile_len = res.toon_len;
        } else if (!agent && res.human) {
            profile = res.human;
            profile_len = res.human_len;
        }
    }
    if (collector_failed && R->outcome == JT_OUT_RETURNED) {
        /* the program's status stands; the run reports the profiler's failure */
        error_kind = failure_word[FAIL_PROFILER_FAILURE];
        error = "profiler: collector failure";
    }
    if (agent) {
        struct envelope e = {
            .status = error_kind ? "error" : "ok", .termination = termination, .exit_code = code,
            .out = R->rt.out.p, .out_len = R->rt.out.len, .err = R->rt.err.p,
            .err_len = R->rt.err.len, .runlog = &R->rt.runlog, .prog = prog,
            .run_id = have_res ? res.run_id : 0,
            .profile = profile, .profile_len = profile_len,
            .error_kind = error_kind, .error = error,
        };
        write_envelope(&e);
    } else {
        if (R->outcome == JT_OUT_RUNTIME_ERROR)
            say_lines(error);
        else if (R->outcome == JT_OUT_INTERRUPTED)
            fputs("jett: interrupted\n", stderr);
        if (profile && profile_len) {
            fwrite(profile, 1, profile_len, stderr);
            if (profile[profile_len - 1] != '\n')
                fputc('\n', stderr);
        }
        if (collector_failed && R->outcome == JT_OUT_RETURNED)
            fputs("profiler: collector failure\n", stderr);
        fflush(stderr);
    }
    /* The capture is an extra the user asked for, not part of the run's result: its failure
     * changes neither the profile (still the live one) nor the exit status, but is never
     * silent. Written to stderr in both modes, after the envelope or the report. */
    if (capture_errno) {
        fprintf(stderr, "profiler: capture failed: %s; the capture file holds only what was "
                "written before the failure, the profile is unaffected\n", strerror(capture_errno));
        fflush(stderr);
    }
    /* The exports likewise: extras, written after the report, each failure said. */
    for (uint32_t i = 0; i < cli.nexports; i++)
        if (exports[i].fd >= 0)
            finish_export(prog, &exports[i], &res.exports[exports[i].format]);
    fflush(stderr);
    if (have_res)
        jettprof_result_release(&res);
out:
    for (uint32_t i = 0; i < cli.nexports; i++)
        drop_export(&exports[i]); /* a run that never ended: no export of it */
    if (capture_fd >= 0) {
        /* a setup failure: no run happened, so no capture of it is left behind */
        if (capture_created && !user_code_started)
            remove_own_capture(cli.capture_path, capture_fd);
        close(capture_fd);
    }
    jt_rt_fini(&R->rt);
    free(R);
    jt_program_free(prog);
    return code;
}

int main(int argc, char **argv)
{
    return run_command(argc, argv);
}
