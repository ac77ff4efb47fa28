/* Offline commands: `replay` rebuilds a profile from a capture with the same engine a live run
 * uses, and `summarize` writes one repetition row per execution.
 *
 * replay FILE [--format human|toon] [--verbose] [--profile-threshold P] [--profile-limit N]
 *   --verbose (human only) ends the text with every total under its TOON name, as
 *   `jett run --profile-verbose` does
 *   complete capture            -> the profile on stdout, byte-identical to the live RESULT with
 *                                  the same threshold and limit; exit 0
 *   missing_stop_event          -> a partial profile of what precedes the truncation on stdout,
 *                                  a caveat naming the reason and byte offset on stderr; exit 0
 *   invalid after some records  -> the partial profile of every complete block before the
 *                                  damage on stdout (missing_stop_event ending), a caveat naming
 *                                  the reason and byte offset on stderr; exit 0
 *   invalid before any record   -> an error naming the reason and offset; exit 1, no profile
 *   out of memory               -> "out of memory" on stderr; exit 1, no profile
 *   missing file                -> an error naming the file; exit 1
 *
 * summarize [--repetitions OUT.jsonl] [--execution-index N] [--exit-code C] CAPTURE...
 *   One row per CAPTURE, in command-line order. Execution indexes: the first CAPTURE gets N
 *   (default 1) and each next one the index after it. Exit codes: --exit-code C applies to the
 *   CAPTUREs after it until the next --exit-code (default 0), so a driver that repeats a
 *   workload calls `summarize --repetitions R --execution-index K --exit-code $? cap` once per
 *   execution. A row with execution_index 1 starts OUT afresh; any other row is appended, so
 *   rows accumulate across executions. Without --repetitions the rows go to stdout.
 *   Row (one line of JSON):
 *     {"schema":"jettprof.capture-repetition/v1","execution_index":K,"exit_code":C,
 *      "state":"summary_written|capture_missing|summary_invalid|workload_failed",
 *      "summary":{"mode":..,"records":..,"violations":..,[cpu totals,]"allocations":..,
 *                 "resizes":..,"bytes":..,"freed":..,"peak":..,"retained":..,
 *                 "integrity":{"status":"complete|missing_stop_event","caveat":null|
 *                              {"kind":..,"message":..}}} | null,
 *      "caveat":null|{"kind":..,"message":..}}
 *   A non-zero exit code means the workload failed: its capture is not read (it may be half
 *   written by a crashed program) and the row says workload_failed.
 *   Out of memory while reading a capture or building its row is no row state: "out of
 *   memory" on stderr, exit 1, and no row for that capture or any after it.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "jpd.h"
#include "commands.h"
#include "util.h"

#define REPETITION_SCHEMA "jettprof.capture-repetition/v1"

void jpd_loaded_free(struct jpd_loaded *l)
{
    jp_engine_free(l->eng);
    l->eng = NULL;
}

/* One record into the loaded engine: 0; 1 when the file is structurally sound but the stream
 * is not a run (out is then INVALID with the engine's reason); -ENOMEM. */
static int feed_one(struct jpd_loaded *out, const void *rec, uint32_t len, int *stop_fed)
{
    const char *why = NULL;
    int r = jp_engine_feed(out->eng, rec, len, &why);
    if (r == -EPROTO) {
        out->integrity = JP_CAPI_INVALID;
        out->reason = why ? why : "the record stream is not valid";
        out->offset = UINT64_MAX;
        return 1;
    }
    if (r < 0)
        return r;
    struct jp_rec_hdr h;
    memcpy(&h, rec, sizeof h);
    *stop_fed = h.type == JP_REC_RUN_STOP;
    out->records++;
    return 0;
}

/* Verdicts and recovery. The reader hands out the records of verified blocks only, so when it
 * stops at damage (a flipped byte, a bad length, a cut) every record fed so far is exactly the
 * stream the run produced up to the start of the damaged block: the engine then holds the
 * profile of every complete block before the damage, rendered as a truncated stream's ending
 * (missing_stop_event) unless the stop record itself was among them. Damage before any record
 * leaves nothing to render. On return 0, l->eng is non-NULL exactly when there is a profile to
 * render: always for COMPLETE and MISSING_STOP_EVENT, for INVALID only when records were
 * recovered before the damage. Out of memory anywhere is -ENOMEM, never a verdict: a capture
 * that could not be read for want of memory says nothing about the capture. */
int jpd_load_capture(const char *path, struct jpd_loaded *out)
{
    return jpd_load_capture_until(path, UINT64_MAX, out);
}

int jpd_load_capture_until(const char *path, uint64_t until, struct jpd_loaded *out)
{
    memset(out, 0, sizeof *out);
    struct jp_capture_reader *rd = NULL;
    int r = jp_capture_open(path, &rd);
    if (r == -ENOENT) {
        out->integrity = JP_CAPI_MISSING;
        out->reason = "the capture file does not exist";
        return 0;
    }
    if (r == -EPROTO || r == -EBADMSG || r == -EINVAL) {
        out->integrity = JP_CAPI_INVALID;
        out->reason = "the capture header is not valid";
        return 0;
    }
    if (r < 0)
        return r;
    r = jp_engine_new(&out->eng);
    if (r < 0) {
        jp_capture_close(rd);
        return r;
    }
    int stop_fed = 0;
    while (out->records < until) {
        /* A run of events goes to the engine a run at a time, as the drain feeds them; an
         * event the engine declines, and every other record, one at a time. */
        const void *run;
        uint32_t nrun;
        if (jp_capture_next_run(rd, &run, &nrun) == 1) {
            const uint8_t *q = run;
            if (nrun > until - out->records) /* the rest of this run stays unread */
                nrun = (uint32_t)(until - out->records);
            while (nrun && r == 0) {
                uint64_t fed = 0;
                r = jp_engine_feed_slots(out->eng, q, nrun, &fed);
                out->records += fed;
                q += fed * JP_SLOT_SIZE;
                nrun -= (uint32_t)fed;
                stop_fed = 0;
                if (r == 1) {
                    r = feed_one(out, q, JP_SLOT_SIZE, &stop_fed);
                    q += JP_SLOT_SIZE;
                    nrun--;
                }
            }
        } else {
            const void *rec;
            uint32_t len;
            r = jp_capture_next(rd, &rec, &len);
            if (r == 0)
                break;
            if (r > 0)
                r = feed_one(out, rec, len, &stop_fed);
        }
        if (r != 0) {
            /* out of memory or an I/O error (< 0), or a stream that is not a run (1) */
            jp_capture_close(rd);
            jpd_loaded_free(out);
            return r < 0 ? r : 0;
        }
    }
    if (out->records == until && until != UINT64_MAX) {
        /* A point of the stream (--until-record): the profile of its first records, taken as
         * a live snapshot is; what follows is not read, so nothing is said of it. */
        jp_capture_close(rd);
        out->integrity = JP_CAPI_COMPLETE;
        out->reason = "";
        out->ending = JP_END_RUNNING;
        return 0;
    }
    const char *reason = NULL;
    uint64_t off = 0;
    out->integrity = jp_capture_verdict(rd, &reason, &off);
    out->reason = reason ? reason : "";
    out->offset = off;
    jp_capture_close(rd);
    out->ending = stop_fed ? JP_END_STOP : JP_END_TRUNCATED;
    if (out->integrity != JP_CAPI_COMPLETE && out->integrity != JP_CAPI_MISSING_STOP_EVENT)
        out->integrity = JP_CAPI_INVALID;
    if (out->integrity != JP_CAPI_COMPLETE && out->records == 0) {
        /* Damaged or cut before the run's first record: there is no run to give a partial
         * profile of, so the capture is invalid. */
        if (out->integrity == JP_CAPI_MISSING_STOP_EVENT)
            out->reason = "no record precedes the truncation";
        out->integrity = JP_CAPI_INVALID;
        jpd_loaded_free(out);
    }
    return 0;
}

void jpd_loaded_describe(char *buf, size_t cap, const struct jpd_loaded *l)
{
    if (l->offset == UINT64_MAX || l->integrity == JP_CAPI_MISSING)
        snprintf(buf, cap, "%s", l->reason);
    else
        snprintf(buf, cap, "%s at byte %llu", l->reason, (unsigned long long)l->offset);
}

static int usage_error(const char *cmd, const char *what, const char *arg)
{
    fprintf(stderr, "jettprofd %s: %s%s%s\n", cmd, what, arg ? ": " : "", arg ? arg : "");
    return 2;
}

int jpd_cmd_replay(int argc, char **argv)
{
    const char *file = NULL;
    uint32_t outputs = JP_OUT_HUMAN;
    int32_t threshold = -1, limit = -1;
    uint64_t until = UINT64_MAX;
    bool verbose = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--verbose")) {
            verbose = true;
        } else if (!strcmp(a, "--format") || !strcmp(a, "--profile-threshold") ||
            !strcmp(a, "--profile-limit") || !strcmp(a, "--until-record")) {
            if (i + 1 >= argc)
                return usage_error("replay", "missing value for", a);
            const char *v = argv[++i];
            if (!strcmp(a, "--format")) {
                if (!strcmp(v, "human"))
                    outputs = JP_OUT_HUMAN;
                else if (!strcmp(v, "toon"))
                    outputs = JP_OUT_TOON;
                else
                    return usage_error("replay", "--format must be human or toon, not", v);
            } else if (!strcmp(a, "--until-record")) {
                if (until != UINT64_MAX)
                    return usage_error("replay", "--until-record given more than once", NULL);
                if (jpd_parse_u64(v, 1, UINT64_MAX - 1u, &until) < 0)
                    return usage_error("replay", "--until-record must be a record count of at "
                                                 "least 1, not", v);
            } else if (!strcmp(a, "--profile-threshold")) {
                uint32_t bp;
                if (jp_parse_percent_bp(v, &bp) < 0)
                    return usage_error("replay", "--profile-threshold must be a percentage "
                                                 "0.." JP_STR(JP_THRESHOLD_PCT_MAX)
                                                 " with at most two decimals, not", v);
                threshold = (int32_t)bp;
            } else {
                uint64_t n;
                if (jpd_parse_u64(v, JP_LIMIT_MIN, JP_LIMIT_MAX, &n) < 0)
                    return usage_error("replay", "--profile-limit must be an integer "
                                                 JP_LIMIT_RANGE ", not", v);
                limit = (int32_t)n;
            }
        } else if (a[0] == '-' && a[1] != '\0') {
            return usage_error("replay", "unknown option", a);
        } else if (file) {
            return usage_error("replay", "more than one capture file given", a);
        } else {
            file = a;
        }
    }
    if (!file)
        return usage_error("replay", "missing capture FILE", NULL);
    if (verbose && outputs != JP_OUT_HUMAN)
        return usage_error("replay", "--verbose applies to --format human only (the TOON has "
                                     "every total)", NULL);

    struct jpd_loaded l;
    int r = jpd_load_capture_until(file, until, &l);
    if (r < 0) {
        fprintf(stderr, "jettprofd replay: cannot read %s: %s\n", file, jpd_error_text(r));
        return 1;
    }
    if (until != UINT64_MAX && l.ending != JP_END_RUNNING && l.integrity != JP_CAPI_MISSING) {
        fprintf(stderr, "jettprofd replay: --until-record %llu: %s holds %llu records\n",
                (unsigned long long)until, file, (unsigned long long)l.records);
        jpd_loaded_free(&l);
        return 1;
    }
    char why[256];
    jpd_loaded_describe(why, sizeof why, &l);
    if (l.integrity == JP_CAPI_MISSING) {
        fprintf(stderr, "jettprofd replay: capture_missing: %s: no such file\n", file);
        return 1;
    }
    if (!l.eng) {
        fprintf(stderr, "jettprofd replay: invalid capture %s: %s\n", file, why);
        return 1;
    }
    struct jp_report_opts o = {.size = sizeof o, .threshold_bp = threshold, .limit = limit,
                               .ending = l.ending,
                               .outputs = outputs | (verbose ? JP_OUT_VERBOSE : 0u),
                               .records_taken = l.records};
    struct jp_rendered out;
    memset(&out, 0, sizeof out);
    r = jp_profile_render(l.eng, &o, &out);
    jpd_loaded_free(&l);
    if (r < 0) {
        fprintf(stderr, "jettprofd replay: cannot render the profile: %s\n", jpd_error_text(r));
        return 1;
    }
    const char *text = outputs == JP_OUT_TOON ? out.toon : out.human;
    size_t len = outputs == JP_OUT_TOON ? out.toon_len : out.human_len;
    r = text ? jpd_write_all(STDOUT_FILENO, text, len) : -EIO;
    jp_rendered_free(&out);
    if (r < 0) {
        fprintf(stderr, "jettprofd replay: cannot write the profile: %s\n", jpd_error_text(r));
        return 1;
    }
    if (l.integrity == JP_CAPI_MISSING_STOP_EVENT)
        fprintf(stderr, "jettprofd replay: caveat: missing_stop_event: %s; the profile is "
                        "partial\n", why);
    else if (l.integrity == JP_CAPI_INVALID)
        fprintf(stderr, "jettprofd replay: caveat: invalid capture %s: %s; the profile is of "
                        "the %llu records before that byte\n", file, why,
                (unsigned long long)l.records);
    return 0;
}

/* A row's caveat: its kind and message, or null (kind NULL) for a complete capture. */
static void caveat_json(struct jp_buf *b, const char *kind, const char *message)
{
    if (!kind) {
        JP_BUF_LIT(b, "null");
        return;
    }
    JP_BUF_LIT(b, "{\"kind\":");
    jp_json_str(b, kind);
    JP_BUF_LIT(b, ",\"message\":");
    jp_json_str(b, message);
    JP_BUF_LIT(b, "}");
}

/* Builds one row. 0, or -errno when the capture could not be read for another reason than
 * being missing or invalid (that is an error of this command, not a row state). */
static int build_row(struct jp_buf *b, const char *path, uint64_t index, long long exit_code)
{
    jp_buf_printf(b, "{\"schema\":\"%s\",\"execution_index\":%llu,\"exit_code\":%lld,\"state\":",
                   REPETITION_SCHEMA, (unsigned long long)index, exit_code);
    if (exit_code != 0) {
        JP_BUF_LIT(b, "\"workload_failed\",\"summary\":null,\"caveat\":null}\n");
        return 0;
    }
    struct jpd_loaded l;
    int r = jpd_load_capture(path, &l);
    if (r < 0)
        return r;
    char why[256];
    jpd_loaded_describe(why, sizeof why, &l);
    if (l.integrity == JP_CAPI_MISSING) {
        JP_BUF_LIT(b, "\"capture_missing\",\"summary\":null,\"caveat\":");
        caveat_json(b, "capture_missing", "profiling was requested but produced no capture");
        JP_BUF_LIT(b, "}\n");
        return 0;
    }
    if (l.integrity == JP_CAPI_INVALID) {
        /* a repetition's evidence is the whole run: records recovered before damage are not */
        jpd_loaded_free(&l);
        JP_BUF_LIT(b, "\"summary_invalid\",\"summary\":null,\"caveat\":");
        caveat_json(b, "invalid_capture", why);
        JP_BUF_LIT(b, "}\n");
        return 0;
    }
    struct jp_engine_summary s;
    memset(&s, 0, sizeof s);
    r = jp_engine_summary(l.eng, &s);
    jpd_loaded_free(&l);
    if (r < 0)
        return r;
    JP_BUF_LIT(b, "\"summary_written\",\"summary\":");
    jpd_summary_json(b, &s);
    b->len--; /* reopen the totals object to add the integrity */
    int complete = l.integrity == JP_CAPI_COMPLETE;
    JP_BUF_LIT(b, ",\"integrity\":{\"status\":");
    jp_json_str(b, jp_capture_integrity_name(l.integrity));
    const char *kind = complete ? NULL : jp_capture_integrity_name(l.integrity);
    JP_BUF_LIT(b, ",\"caveat\":");
    caveat_json(b, kind, why);
    JP_BUF_LIT(b, "}},\"caveat\":");
    caveat_json(b, kind, why);
    JP_BUF_LIT(b, "}\n");
    return 0;
}

int jpd_cmd_summarize(int argc, char **argv)
{
    const char *reps = NULL;
    /* First pass: options that are not positional, and a syntax check of everything. */
    int ncap = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--repetitions") || !strcmp(a, "--execution-index") ||
            !strcmp(a, "--exit-code")) {
            if (i + 1 >= argc)
                return usage_error("summarize", "missing value for", a);
            const char *v = argv[++i];
            if (!strcmp(a, "--repetitions")) {
                if (reps)
                    return usage_error("summarize", "--repetitions given twice", NULL);
                reps = v;
            } else if (!strcmp(a, "--execution-index")) {
                uint64_t n;
                if (jpd_parse_u64(v, 1, UINT32_MAX, &n) < 0)
                    return usage_error("summarize", "--execution-index must be an integer >= 1, "
                                                    "not", v);
            } else {
                uint64_t n;
                const char *digits = v[0] == '-' ? v + 1 : v;
                if (jpd_parse_u64(digits, 0, INT32_MAX, &n) < 0)
                    return usage_error("summarize", "--exit-code must be an integer, not", v);
            }
        } else if (a[0] == '-' && a[1] != '\0') {
            return usage_error("summarize", "unknown option", a);
        } else {
            ncap++;
        }
    }
    if (ncap == 0)
        return usage_error("summarize", "missing CAPTURE", NULL);

    uint64_t index = 1;
    long long exit_code = 0;
    int out_fd = STDOUT_FILENO;
    int rc = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--repetitions")) {
            i++;
            continue;
        }
        if (!strcmp(a, "--execution-index")) {
            (void)jpd_parse_u64(argv[++i], 1, UINT32_MAX, &index);
            continue;
        }
        if (!strcmp(a, "--exit-code")) {
            const char *v = argv[++i];
            uint64_t n = 0;
            (void)jpd_parse_u64(v[0] == '-' ? v + 1 : v, 0, INT32_MAX, &n);
            exit_code = v[0] == '-' ? -(long long)n : (long long)n;
            continue;
        }
        struct jp_buf b = {0};
        int r = build_row(&b, a, index, exit_code);
        if (r < 0 || b.failed) {
            fprintf(stderr, "jettprofd summarize: cannot read %s: %s\n", a,
                    jpd_error_text(r < 0 ? r : -ENOMEM));
            jp_buf_free(&b);
            rc = 1;
            break;
        }
        if (reps) {
            /* Execution 1 starts the file; later executions append to it. */
            int flags = O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW |
                        (index == 1 ? O_TRUNC : O_APPEND);
            out_fd = open(reps, flags, 0644);
            if (out_fd < 0) {
                fprintf(stderr, "jettprofd summarize: --repetitions: cannot open %s: %s\n", reps,
                        strerror(errno));
                jp_buf_free(&b);
                rc = 1;
                break;
            }
        }
        r = jpd_write_all(out_fd, b.p, b.len);
        if (reps)
            close(out_fd);
        jp_buf_free(&b);
        if (r < 0) {
            fprintf(stderr, "jettprofd summarize: cannot write the row: %s\n", jpd_error_text(r));
            rc = 1;
            break;
        }
        index++;
    }
    return rc;
}
