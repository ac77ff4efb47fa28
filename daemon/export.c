/* Export commands: profiles of captures in the formats of the usual profile tools, and the
 * diff of two captures (render/export/export.h). Each capture is replayed into an engine the
 * way `replay` does (jpd_load_capture), and its report built once; the export reads that
 * report, so its totals are the replayed profile's.
 *
 * export CAPTURE [--format folded|pprof|speedscope|svg|html] [--value V] [-o FILE|-]
 *   V: samples (CPU), alloc_bytes (memory default), alloc_count, retained_bytes, peak_bytes,
 *      retained_count.
 * export CAPTURE --push URL [--label K=V]...
 *   the pprof export (default value) sent as `serve --push` sends a run's (push.c), waiting
 *   for the answer: exit 0 once accepted, 1 naming the HTTP status or the transfer's error.
 *   A capture holds no wall-clock time: until is the capture file's modification time (its
 *   last write, the run's end), from is until less the run's duration from its RUN_STOP
 *   (until itself when the capture has none).
 * diff BASE NEW [--format human|toon|folded|svg|html] [-o FILE|-]
 *
 *   complete capture        -> the document on stdout or in FILE; exit 0
 *   truncated or damaged    -> the document of what replay recovers, and the same caveat on
 *     after some records       stderr as replay's; exit 0
 *   missing, or invalid     -> an error naming the file and what is wrong; exit 1
 *     before any record
 *   captures of two modes   -> (diff) an error naming both modes; exit 1
 *   a value the capture     -> an error naming the value and why; exit 1
 *     cannot give
 *   -o FILE                 -> written to a temporary file beside FILE, renamed over it when
 *                              complete: a failure leaves FILE as it was. FILE must be a
 *                              regular file or absent (never a symbolic link, a device, a
 *                              directory); errors name FILE and the errno text.
 *   out of memory           -> "out of memory"; exit 1
 *   bad command line        -> the flag or value named; exit 2
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "engine/view.h"
#include "jpd.h"
#include "commands.h"
#include "util.h"
#include "push.h"
#include "render/export/export.h"

static int usage_error(const char *cmd, const char *what, const char *arg)
{
    fprintf(stderr, "jettprofd %s: %s%s%s\n", cmd, what, arg ? ": " : "", arg ? arg : "");
    return 2;
}

/* A capture replayed and its report built, or 1 after the message (nothing to free). */
struct loaded_run {
    struct jpd_loaded l;
    struct jp_engine_view v;
    struct jp_report *r;
};

/* A capture, or a point of one (diff's `CAPTURE@N`: its first N records, as `replay
 * --until-record N` takes them) when no file has that whole name and what follows the last '@'
 * is a record count. */
static int load_run(const char *cmd, const char *file, struct loaded_run *run)
{
    memset(run, 0, sizeof *run);
    char path[4096];
    uint64_t until = UINT64_MAX;
    const char *at = strrchr(file, '@');
    if (at && !strcmp(cmd, "diff") && access(file, F_OK) != 0 &&
        (size_t)(at - file) < sizeof path && jpd_parse_u64(at + 1, 1, UINT64_MAX - 1u, &until) == 0) {
        memcpy(path, file, (size_t)(at - file));
        path[at - file] = '\0';
        file = path;
    }
    int rc = jpd_load_capture_until(file, until, &run->l);
    if (rc == 0 && until != UINT64_MAX && run->l.ending != JP_END_RUNNING &&
        run->l.integrity != JP_CAPI_MISSING) {
        fprintf(stderr, "jettprofd %s: %s@%llu: the capture holds %llu records\n", cmd, file,
                (unsigned long long)until, (unsigned long long)run->l.records);
        jpd_loaded_free(&run->l);
        return 1;
    }
    if (rc < 0) {
        fprintf(stderr, "jettprofd %s: cannot read %s: %s\n", cmd, file, jpd_error_text(rc));
        return 1;
    }
    char why[256];
    jpd_loaded_describe(why, sizeof why, &run->l);
    if (run->l.integrity == JP_CAPI_MISSING) {
        fprintf(stderr, "jettprofd %s: capture_missing: %s: no such file\n", cmd, file);
        return 1;
    }
    if (!run->l.eng) {
        fprintf(stderr, "jettprofd %s: invalid capture %s: %s\n", cmd, file, why);
        return 1;
    }
    struct jp_report_opts o = {.size = sizeof o, .threshold_bp = -1, .limit = -1,
                               .ending = run->l.ending, .outputs = 0,
                               .records_taken = run->l.records};
    rc = jp_engine_view(run->l.eng, &run->v);
    if (rc == 0)
        rc = jp_report_build(&run->v, &o, &run->r);
    if (rc < 0) {
        fprintf(stderr, "jettprofd %s: cannot build the profile of %s: %s\n", cmd, file,
                rc == -ENODATA ? "the capture holds no run start" : jpd_error_text(rc));
        jpd_loaded_free(&run->l);
        return 1;
    }
    if (run->l.integrity == JP_CAPI_MISSING_STOP_EVENT)
        fprintf(stderr, "jettprofd %s: caveat: %s: missing_stop_event: %s; the profile is "
                        "partial\n", cmd, file, why);
    else if (run->l.integrity == JP_CAPI_INVALID)
        fprintf(stderr, "jettprofd %s: caveat: invalid capture %s: %s; the profile is of the "
                        "%llu records before that byte\n", cmd, file, why,
                (unsigned long long)run->l.records);
    return 0;
}

static void free_run(struct loaded_run *run)
{
    jp_report_free(run->r);
    jpd_loaded_free(&run->l);
}

/* Writes doc to path ("-": stdout) through a temporary file in the same directory, renamed
 * over path once complete. 0, or 1 after the message. */
static int write_out(const char *cmd, const char *path, const char *doc, size_t len)
{
    if (!strcmp(path, "-")) {
        int rc = jpd_write_all(STDOUT_FILENO, doc, len);
        if (rc < 0)
            fprintf(stderr, "jettprofd %s: cannot write to stdout: %s\n", cmd, strerror(-rc));
        return rc < 0;
    }
    struct stat st;
    if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        fprintf(stderr, "jettprofd %s: -o %s: %s\n", cmd, path,
                S_ISLNK(st.st_mode) ? "is a symbolic link; not following it"
                                    : "is not a regular file");
        return 1;
    }
    char tmp[PATH_MAX];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.XXXXXX", path) >= sizeof tmp) {
        fprintf(stderr, "jettprofd %s: -o %s: %s\n", cmd, path, strerror(ENAMETOOLONG));
        return 1;
    }
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "jettprofd %s: -o %s: cannot create a file beside it: %s\n", cmd, path,
                strerror(errno));
        return 1;
    }
    int rc = jpd_write_all(fd, doc, len);
    if (rc == 0 && fchmod(fd, 0644) < 0)
        rc = -errno;
    if (close(fd) < 0 && rc == 0)
        rc = -errno;
    if (rc == 0 && rename(tmp, path) < 0)
        rc = -errno;
    if (rc < 0) {
        unlink(tmp);
        fprintf(stderr, "jettprofd %s: -o %s: %s\n", cmd, path, strerror(-rc));
        return 1;
    }
    return 0;
}

/* export --push: the capture's pprof with the labels and times the capture gives (see the
 * top). Frees run. The exit status. */
static int push_capture(const char *file, struct loaded_run *run,
                        const struct jpd_push_opts *push)
{
    struct jp_export_opts o = {.size = sizeof o, .format = JP_EXPORT_PPROF,
                               .value = JP_XVAL_DEFAULT};
    char *doc = NULL;
    size_t len = 0;
    int rc = jp_export_write(run->r, &o, &doc, &len);
    char program[JPD_PROGRAM_MAX];
    uint32_t from = 0;
    (void)jpd_program_of(run->l.eng, &from, program);
    struct stat st;
    int64_t until = stat(file, &st) == 0 ? (int64_t)st.st_mtime : (int64_t)time(NULL);
    int64_t ran_s = run->v.have_stop ? (int64_t)(run->v.wall_ns / 1000000000u) : 0;
    struct jpd_push_meta m = {.program = program, .mode = run->v.mode,
                              .from_s = until - ran_s, .until_s = until};
    free_run(run);
    if (rc < 0) {
        fprintf(stderr, "jettprofd export: cannot render the pprof export of %s: %s\n", file,
                jpd_error_text(rc));
        return 1;
    }
    char why[256], shown[256];
    jpd_push_redact(push->url, shown, sizeof shown);
    rc = jpd_push_global_init();
    if (rc < 0) {
        fprintf(stderr, "jettprofd export: --push: libcurl cannot start: %s\n",
                jpd_error_text(rc));
        free(doc);
        return 1;
    }
    signal(SIGPIPE, SIG_IGN); /* a receiver that hangs up is an error, not the end of us */
    rc = jpd_push_now(push, &m, doc, len, why, sizeof why);
    jpd_push_global_cleanup();
    free(doc);
    if (rc == 0) {
        fprintf(stderr, "jettprofd export: pushed %s (%zu bytes of pprof) to %s\n", file, len,
                shown);
        return 0;
    }
    fprintf(stderr, "jettprofd export: --push %s: %s%s\n", shown,
            rc == -EAGAIN ? "failed after every attempt: " : "", why);
    return 1;
}

int jpd_cmd_export(int argc, char **argv)
{
    const char *file = NULL, *out = "-";
    struct jp_export_opts o = {.size = sizeof o, .format = JP_EXPORT_FOLDED,
                               .value = JP_XVAL_DEFAULT};
    struct jpd_push_opts push = {0};
    int shaped = 0; /* --format, --value or -o given: a document to write */
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--push") || !strcmp(a, "--label")) {
            if (i + 1 >= argc)
                return usage_error("export", "missing value for", a);
            char why[512];
            int r = jpd_push_opt(&push, a, argv[++i], why, sizeof why);
            if (r < 0 && r != -EINVAL) { /* out of memory, no libcurl: not the command line */
                fprintf(stderr, "jettprofd export: %s\n", why);
                return 1;
            }
            if (r < 0)
                return usage_error("export", why, NULL);
        } else if (!strcmp(a, "--format") || !strcmp(a, "--value") || !strcmp(a, "-o")) {
            if (i + 1 >= argc)
                return usage_error("export", "missing value for", a);
            const char *v = argv[++i];
            shaped = 1;
            if (!strcmp(a, "-o"))
                out = v;
            else if (!strcmp(a, "--format") && jp_export_format_parse(v, &o.format) < 0)
                return usage_error("export", "--format must be folded, pprof, speedscope, "
                                             "svg or html, not", v);
            else if (!strcmp(a, "--value") && jp_export_value_parse(v, &o.value) < 0)
                return usage_error("export", "--value must be samples, alloc_bytes, "
                                             "alloc_count, retained_bytes, peak_bytes, "
                                             "retained_count or live_bytes, not", v);
        } else if (a[0] == '-' && a[1] != '\0') {
            return usage_error("export", "unknown option", a);
        } else if (file) {
            return usage_error("export", "more than one capture file given", a);
        } else {
            file = a;
        }
    }
    if (!file)
        return usage_error("export", "missing CAPTURE", NULL);
    if (push.nlabels && !push.url)
        return usage_error("export", "--label needs --push", push.labels[0]);
    if (push.url && shaped)
        return usage_error("export", "--push sends the pprof export with its default value; "
                                     "it takes no --format, --value or -o", NULL);
    struct loaded_run run;
    if (load_run("export", file, &run))
        return 1;
    if (push.url)
        return push_capture(file, &run, &push);
    char *doc = NULL;
    size_t len = 0;
    int rc = jp_export_write(run.r, &o, &doc, &len);
    bool cpu = run.v.mode == JP_MODE_CPU;
    free_run(&run);
    if (rc == -EINVAL) {
        fprintf(stderr, "jettprofd export: --value %s does not apply to %s: a %s capture has "
                        "%s\n", jp_export_value_name(o.value), file, cpu ? "CPU" : "memory",
                cpu ? "samples only"
                    : "alloc_bytes, alloc_count, retained_bytes, peak_bytes, retained_count");
        return 1;
    }
    if (rc == -ENODATA) {
        fprintf(stderr, "jettprofd export: --value %s: %s has no exact live figures (the run "
                        "lost events or its retention budget ran out); alloc_bytes and "
                        "alloc_count remain\n", jp_export_value_name(o.value), file);
        return 1;
    }
    if (rc < 0) {
        fprintf(stderr, "jettprofd export: cannot render the %s export of %s: %s\n",
                jp_export_format_name(o.format), file, jpd_error_text(rc));
        return 1;
    }
    rc = write_out("export", out, doc, len);
    free(doc);
    return rc;
}

int jpd_cmd_diff(int argc, char **argv)
{
    const char *files[2] = {NULL, NULL}, *out = "-";
    uint32_t format = JP_DIFF_HUMAN, value = JP_XVAL_DEFAULT;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--format") || !strcmp(a, "-o") || !strcmp(a, "--value")) {
            if (i + 1 >= argc)
                return usage_error("diff", "missing value for", a);
            const char *v = argv[++i];
            if (!strcmp(a, "-o"))
                out = v;
            else if (!strcmp(a, "--value")) {
                if (jp_export_value_parse(v, &value) < 0 || value == JP_XVAL_RETAINED_COUNT)
                    return usage_error("diff", "--value must be samples, alloc_bytes, "
                                               "alloc_count, live_bytes, retained_bytes or "
                                               "peak_bytes, not", v);
            } else if (jp_diff_format_parse(v, &format) < 0)
                return usage_error("diff", "--format must be human, toon, folded, svg or html, not",
                                   v);
        } else if (a[0] == '-' && a[1] != '\0') {
            return usage_error("diff", "unknown option", a);
        } else if (files[1]) {
            return usage_error("diff", "more than two captures given", a);
        } else {
            files[files[0] ? 1 : 0] = a;
        }
    }
    if (!files[1])
        return usage_error("diff", files[0] ? "missing NEW capture" : "missing BASE and NEW "
                                                                     "captures", NULL);
    struct loaded_run run[2];
    if (load_run("diff", files[0], &run[0]))
        return 1;
    if (load_run("diff", files[1], &run[1])) {
        free_run(&run[0]);
        return 1;
    }
    char *doc = NULL;
    size_t len = 0;
    int rc = jp_diff_write(run[0].r, run[1].r, format, value, &doc, &len);
    if (rc == -EDOM)
        fprintf(stderr, "jettprofd diff: %s is a %s capture and %s a %s capture: captures of "
                        "different modes do not compare\n", files[0],
                run[0].v.mode == JP_MODE_CPU ? "CPU" : "memory", files[1],
                run[1].v.mode == JP_MODE_CPU ? "CPU" : "memory");
    else if (rc == -EINVAL)
        fprintf(stderr, "jettprofd diff: --value %s does not apply to %s captures\n",
                jp_export_value_name(value), run[0].v.mode == JP_MODE_CPU ? "CPU" : "memory");
    else if (rc == -ENODATA)
        fprintf(stderr, "jettprofd diff: --value %s: a run compared has no exact live figures "
                        "(its retention budget ran out or records were lost)\n",
                jp_export_value_name(value));
    else if (rc < 0)
        fprintf(stderr, "jettprofd diff: cannot render the diff: %s\n", jpd_error_text(rc));
    free_run(&run[0]);
    free_run(&run[1]);
    if (rc < 0)
        return 1;
    rc = write_out("diff", out, doc, len);
    free(doc);
    return rc;
}
