#include "helpers.h"
#include "tests/lib/recbuild.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static uint64_t fed; /* records that count toward RUN_STOP.record_count */

uint64_t t_records_fed(void)
{
    return fed;
}

struct jp_engine *t_engine(void)
{
    struct jp_engine *e;
    cr_assert_eq(jp_engine_new(&e), 0);
    return e;
}

void t_simple_cpu(struct jp_engine *e)
{
    t_start(e, JP_MODE_CPU, 100, 0, 10, 32 * MiB, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/s.jett");
    t_frame(e, 1, 1, "<root>", "main", 0, 9, 1, JP_FRAME_FUNCTION);
    t_node(e, 1, 0, 1);
    t_sample(e, JP_STATE_JETT, 1, 2, 1);
}

static struct t_tap *tap;

void t_tap_set(struct t_tap *t)
{
    tap = t;
}

static void tap_put(const void *rec, uint32_t len)
{
    uint32_t span = jp_rec_slots(len) * JP_SLOT_SIZE;
    if (tap->len + span > tap->cap) {
        tap->cap = (tap->len + span) * 2u;
        tap->buf = realloc(tap->buf, tap->cap);
        cr_assert(tap->buf != NULL);
    }
    memset(tap->buf + tap->len, 0, span);
    memcpy(tap->buf + tap->len, rec, len);
    tap->len += span;
}

int t_feed_raw(struct jp_engine *e, const void *rec, uint32_t len, const char **why)
{
    if (tap)
        tap_put(rec, len);
    const char *w = NULL;
    int r = jp_engine_feed(e, rec, len, &w);
    if (why)
        *why = w;
    struct jp_rec_hdr h;
    memcpy(&h, rec, sizeof h);
    if (r == 0 && h.type != JP_REC_PAD && h.type != JP_REC_EXCERPT && h.type != JP_REC_RUN_STOP)
        fed++;
    return r;
}

static void feed_ok(struct jp_engine *e, const void *rec, uint32_t len)
{
    const char *why = NULL;
    int r = t_feed_raw(e, rec, len, &why);
    cr_assert_eq(r, 0, "feed failed: %d %s", r, why ? why : "");
}

void t_start(struct jp_engine *e, uint32_t mode, uint32_t rate, uint32_t thr, uint32_t limit,
             uint64_t cpu_budget, uint64_t retention_budget)
{
    fed = 0;
    struct jp_rec_run_start r = tl_rec_run_start(mode);
    r.rate_hz = rate;
    r.threshold_bp = thr;
    r.limit = limit;
    r.capabilities = mode == JP_MODE_CPU ? JP_CAPS_CPU_REQUIRED : JP_CAPS_MEMORY_REQUIRED;
    r.cpu_budget_bytes = cpu_budget;
    r.retention_budget_bytes = retention_budget;
    feed_ok(e, &r, sizeof r);
}

void t_source(struct jp_engine *e, uint32_t id, uint32_t origin, const char *path)
{
    uint8_t buf[JP_REC_MAX_SIZE];
    struct jp_rec_source_def r = {.source_id = id, .origin = (uint8_t)origin};
    feed_ok(e, buf, tl_rec_source(buf, &r, path, strlen(path)));
}

void t_frame(struct jp_engine *e, uint32_t id, uint32_t source, const char *ns, const char *fn,
             uint32_t decl_start, uint32_t decl_end, uint32_t line, uint32_t kind)
{
    uint8_t buf[JP_REC_MAX_SIZE];
    struct jp_rec_frame_def r = {.frame_id = id, .source_id = source, .decl_start = decl_start,
                                 .decl_end = decl_end, .decl_line = line,
                                 .decl_col = source ? 1 : 0, .kind = (uint8_t)kind};
    feed_ok(e, buf, tl_rec_frame(buf, &r, ns, strlen(ns), fn, strlen(fn)));
}

void t_node(struct jp_engine *e, uint32_t id, uint32_t parent, uint32_t frame)
{
    struct jp_rec_node_def r = {{JP_REC_NODE_DEF, sizeof r}, id, parent, frame};
    feed_ok(e, &r, sizeof r);
}

void t_sample(struct jp_engine *e, uint32_t state, uint32_t node, uint32_t line, uint32_t col)
{
    struct jp_rec_cpu_sample r = {.h = {JP_REC_CPU_SAMPLE, sizeof r}, .state = (uint8_t)state,
                                  .flags = line ? JP_SAMPLE_HAS_STMT : 0, .node = node,
                                  .stmt_line = line, .stmt_col = col};
    feed_ok(e, &r, sizeof r);
}

void t_alloc(struct jp_engine *e, uint32_t node, uint64_t id, uint64_t size)
{
    struct jp_rec_alloc r = {.h = {JP_REC_ALLOC, sizeof r}, .node = node, .allocation_id = id,
                             .size = size};
    feed_ok(e, &r, sizeof r);
}

void t_resize(struct jp_engine *e, uint32_t node, uint64_t id, uint64_t old_size,
              uint64_t new_size)
{
    struct jp_rec_resize r = {{JP_REC_RESIZE, sizeof r}, node, id, old_size, new_size};
    feed_ok(e, &r, sizeof r);
}

void t_free(struct jp_engine *e, uint32_t node, uint64_t id, uint64_t old_size)
{
    struct jp_rec_free r = {.h = {JP_REC_FREE, sizeof r}, .node = node, .allocation_id = id,
                            .old_size = old_size};
    feed_ok(e, &r, sizeof r);
}

void t_counters(struct jp_engine *e, uint64_t requested, uint64_t coalesced, uint64_t dropped,
                uint64_t waiting, uint64_t runtime, uint64_t lost)
{
    struct jp_rec_counters r = {.h = {JP_REC_COUNTERS, sizeof r}, .requested_ticks = requested,
                                .coalesced_ticks = coalesced, .dropped_ticks = dropped,
                                .waiting_ticks = waiting, .runtime_ticks = runtime,
                                .lost_records = lost};
    feed_ok(e, &r, sizeof r);
}

void t_excerpt(struct jp_engine *e, uint32_t source, uint32_t line, uint32_t col, uint32_t flags,
               const char *text)
{
    uint8_t buf[JP_REC_MAX_SIZE];
    struct jp_rec_excerpt r = {.source_id = source, .line = line, .col = col,
                               .flags = (uint8_t)flags};
    feed_ok(e, buf, tl_rec_excerpt(buf, &r, text, text ? strlen(text) : 0));
}

void t_stop(struct jp_engine *e, uint32_t term, uint64_t wall_ns, uint64_t cpu_ns,
            int64_t count_delta)
{
    struct jp_rec_run_stop r = {.h = {JP_REC_RUN_STOP, sizeof r}, .termination = (uint8_t)term,
                                .wall_ns = wall_ns, .process_cpu_ns = cpu_ns,
                                .record_count = (uint64_t)((int64_t)fed + count_delta)};
    feed_ok(e, &r, sizeof r);
}

/* The golden CPU program (source 1):   main -> work -> leaf
 *                main -> rec -> rec -> leaf   (recursion)
 *                main -> leaf
 * Frames 1 main, 2 app.work, 3 app.leaf, 4 app.rec. Nodes:
 *   1 main, 2 main>work, 3 main>work>leaf, 4 main>rec, 5 main>rec>rec, 6 main>rec>rec>leaf,
 *   7 main>leaf. */
void t_golden_cpu_program(struct jp_engine *e)
{
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/app.jett");
    t_frame(e, 1, 1, "<root>", "main", 0, 100, 1, JP_FRAME_FUNCTION);
    t_frame(e, 2, 1, "app", "work", 100, 200, 10, JP_FRAME_FUNCTION);
    t_frame(e, 3, 1, "app", "leaf", 200, 300, 20, JP_FRAME_FUNCTION);
    t_frame(e, 4, 1, "app", "rec", 300, 400, 30, JP_FRAME_FUNCTION);
    t_node(e, 1, 0, 1);
    t_node(e, 2, 1, 2);
    t_node(e, 3, 2, 3);
    t_node(e, 4, 1, 4);
    t_node(e, 5, 4, 4);
    t_node(e, 6, 5, 3);
    t_node(e, 7, 1, 3);
}

/* The golden CPU stream's samples and counters (tests/render/golden/README.md). */
void t_golden_cpu_samples(struct jp_engine *e)
{
    for (int i = 0; i < 4; i++)
        t_sample(e, JP_STATE_JETT, 3, 21, 5);
    for (int i = 0; i < 2; i++)
        t_sample(e, JP_STATE_JETT, 3, 22, 3);
    for (int i = 0; i < 3; i++)
        t_sample(e, JP_STATE_JETT, 2, 11, 1);
    for (int i = 0; i < 2; i++)
        t_sample(e, JP_STATE_JETT, 6, 21, 5);
    t_sample(e, JP_STATE_JETT, 5, 0, 0); /* no statement: self, no hot line (READINGS.md #6) */
    t_sample(e, JP_STATE_JETT, 7, 23, 1);
    t_sample(e, JP_STATE_RUNTIME, 0, 0, 0);
    /* READINGS.md #8: a stack on a non-jett sample is ignored */
    t_sample(e, JP_STATE_RUNTIME, 3, 0, 0);
    t_sample(e, JP_STATE_WAITING, 0, 0, 0);
    t_sample(e, JP_STATE_UNAVAILABLE, 0, 0, 0);
    t_counters(e, 10, 1, 0, 0, 0, 0);
    t_counters(e, 30, 5, 0, 2, 1, 0); /* cumulative: this one wins */
}

/* ---- a small JSON reader for the decoder's output --------------------------------------- */

static const char *ws(const char *p)
{
    while (*p == ' ' || *p == '\n' || *p == '\r' || *p == '\t')
        p++;
    return p;
}

static const char *skip_string(const char *p)
{
    for (p++; *p && *p != '"'; p++)
        if (*p == '\\')
            p++;
    return *p ? p + 1 : p;
}

static const char *skip_value(const char *p)
{
    p = ws(p);
    if (*p == '"')
        return skip_string(p);
    if (*p == '{' || *p == '[') {
        int depth = 0;
        for (; *p; p++) {
            if (*p == '"') {
                p = skip_string(p) - 1;
                continue;
            }
            if (*p == '{' || *p == '[')
                depth++;
            else if (*p == '}' || *p == ']') {
                if (--depth == 0)
                    return p + 1;
            }
        }
        return p;
    }
    while (*p && *p != ',' && *p != '}' && *p != ']')
        p++;
    return p;
}

/* Descends one path segment; NULL when absent. */
static const char *step(const char *p, const char *seg, size_t n)
{
    p = ws(p);
    if (*p == '{') {
        p = ws(p + 1);
        while (*p == '"') {
            const char *k = p + 1, *ke = skip_string(p) - 1;
            p = ws(ws(ke + 1) + 1); /* past ':' */
            if ((size_t)(ke - k) == n && !memcmp(k, seg, n))
                return p;
            p = ws(skip_value(p));
            if (*p == ',')
                p = ws(p + 1);
        }
        return NULL;
    }
    if (*p == '[') {
        long idx = strtol(seg, NULL, 10);
        p = ws(p + 1);
        for (long i = 0; *p && *p != ']'; i++) {
            if (i == idx)
                return p;
            p = ws(skip_value(p));
            if (*p == ',')
                p = ws(p + 1);
        }
    }
    return NULL;
}

static const char *locate(const char *json, const char *path)
{
    const char *p = json;
    while (p && *path) {
        const char *dot = strchr(path, '.');
        size_t n = dot ? (size_t)(dot - path) : strlen(path);
        p = step(p, path, n);
        path += n + (dot ? 1 : 0);
    }
    return p ? ws(p) : NULL;
}

char *t_json_get(const char *json, const char *path)
{
    const char *p = locate(json, path);
    if (!p || !*p)
        return NULL;
    const char *end = skip_value(p);
    if (*p != '"') {
        size_t n = (size_t)(end - p);
        char *s = malloc(n + 1);
        memcpy(s, p, n);
        s[n] = 0;
        return s;
    }
    char *s = malloc((size_t)(end - p) + 1), *o = s;
    for (p++; *p && *p != '"'; p++) {
        if (*p != '\\') {
            *o++ = *p;
            continue;
        }
        p++;
        switch (*p) {
        case 'n': *o++ = '\n'; break;
        case 't': *o++ = '\t'; break;
        case 'r': *o++ = '\r'; break;
        case 'u': {
            char hex[5] = {p[1], p[2], p[3], p[4], 0};
            *o++ = (char)strtol(hex, NULL, 16); /* the tests only meet ASCII escapes */
            p += 4;
            break;
        }
        default: *o++ = *p;
        }
    }
    *o = 0;
    return s;
}

int t_json_len(const char *json, const char *path)
{
    const char *p = locate(json, path);
    if (!p || *p != '[')
        return -1;
    int n = 0;
    p = ws(p + 1);
    while (*p && *p != ']') {
        n++;
        p = ws(skip_value(p));
        if (*p == ',')
            p = ws(p + 1);
    }
    return n;
}

/* ---- rendering --------------------------------------------------------------------------- */

void t_render_opts(struct jp_engine *e, const struct jp_report_opts *o, char **toon,
                   char **human, char **json, uint32_t *status)
{
    struct jp_rendered r;
    int rc = jp_profile_render(e, o, &r);
    cr_assert_eq(rc, 0, "render failed: %d", rc);
    cr_assert(r.toon != NULL && r.human != NULL);
    cr_assert_eq(strlen(r.toon), r.toon_len);
    char *err = NULL;
    char *j = tl_toon_decode(r.toon, r.toon_len, &err);
    cr_assert(j != NULL, "the official decoder rejects our TOON: %s\n%s", err ? err : "", r.toon);
    /* Determinism: the same engine state renders the same bytes again. */
    struct jp_rendered again;
    cr_assert_eq(jp_profile_render(e, o, &again), 0);
    cr_assert_str_eq(again.toon, r.toon);
    cr_assert_str_eq(again.human, r.human);
    jp_rendered_free(&again);
    if (getenv("JP_TEST_DUMP")) /* for reviewing output by eye */
        fprintf(stderr, "----- toon\n%s----- human\n%s-----\n", r.toon, r.human);
    if (status)
        *status = r.status;
    if (toon)
        *toon = r.toon;
    else
        free(r.toon);
    if (human)
        *human = r.human;
    else
        free(r.human);
    if (json)
        *json = j;
    else
        free(j);
}

void t_render(struct jp_engine *e, uint32_t ending, char **toon, char **human, char **json,
              uint32_t *status)
{
    struct jp_report_opts o = {sizeof o, -1, -1, ending, JP_OUT_HUMAN | JP_OUT_TOON, 0, 0, 0};
    t_render_opts(e, &o, toon, human, json, status);
}

/* ---- the human text carries the TOON totals ---------------------------------------------- */

/* How render/human.c words each total (runtime/OUTPUT.md): the fragment around the value, and
 * the one it prints instead when the value is unavailable (NULL: `unavailable` in place of the
 * value). Value kinds: N plain, B bytes (the streams of these tests stay below 1024 B, which
 * print exact), R hundredths with two decimals, S nanoseconds as seconds. */
static const struct {
    const char *key, *fmt, *unavailable;
    char kind;
} human_words[] = {
    {"requested_ticks", "\nticks: requested %s", NULL, 'N'},
    {"recorded_samples", "\nsamples: %s at ", NULL, 'N'},
    {"attributed_samples", " requested): %s jett, ", NULL, 'N'},
    {"runtime_samples", " jett, %s runtime, ", NULL, 'N'},
    {"waiting_samples", " runtime, %s waiting, ", NULL, 'N'},
    {"unavailable_samples", " waiting, %s unavailable\n", NULL, 'N'},
    {"coalesced_ticks", ", coalesced %s, ", NULL, 'N'},
    {"dropped_ticks", ", dropped %s\n", NULL, 'N'},
    {"attributed_stacks", "\nstacks: attributed %s, ", NULL, 'N'},
    {"unavailable_stacks", ", unavailable %s, ", NULL, 'N'},
    {"truncated_stacks", "truncated %s\n", NULL, 'N'},
    {"requested_rate_hz", " Hz (%s Hz requested)", NULL, 'N'},
    {"observed_rate_hz", " at %s Hz (", NULL, 'R'},
    {"wall_duration_ns", " after %s", ", duration unavailable", 'S'},
    {"process_cpu_duration_ns", " (%s CPU)\n", " (CPU time unavailable)\n", 'S'},
    {"allocation_count", "\nevents: %s allocation", NULL, 'N'},
    {"resize_count", ", %s resize", NULL, 'N'},
    {"allocated_bytes", "\nbytes: %s allocated (", NULL, 'B'},
    {"attributed_allocated_bytes", " allocated (%s to sites), ", NULL, 'B'},
    {"freed_bytes", " to sites), %s freed, ", " freed, peak and retained unavailable\n", 'B'},
    {"peak_live_bytes", " freed, %s at peak, ", " freed, peak and retained unavailable\n", 'B'},
    {"retained_bytes", " at peak, %s retained\n", " freed, peak and retained unavailable\n", 'B'},
    /* the live total at the end is the retained bytes: printed once */
    {"live_bytes", " at peak, %s retained\n", " freed, peak and retained unavailable\n", 'B'},
    {"lost_records", "\nrecords: lost %s, ", NULL, 'N'},
    {"record_count_mismatch", ", miscounted %s, ", NULL, 'N'},
    {"protocol_violations", ", protocol violations %s\n", NULL, 'N'},
    {"producer_wait_ns", "\nring waits: %s\n", NULL, 'S'},
    {"eligible_bottlenecks", "\nbottlenecks: %s eligible at or above ", NULL, 'N'},
    {"emitted_bottlenecks", ", %s shown, ", NULL, 'N'},
    {"truncated_bottlenecks", " shown, %s past the limit of ", NULL, 'N'},
    {"runtime_threads", "\nruntime threads: %s\n", NULL, 'N'},
};

static void human_value(char kind, const char *toon, char *out, size_t cap)
{
    if (kind == 'R') {
        snprintf(out, cap, "%.2f", strtod(toon, NULL));
    } else if (kind == 'S') {
        unsigned long long ns = strtoull(toon, NULL, 10);
        unsigned long long ms = ns / 1000000u + (ns % 1000000u >= 500000u);
        if (ns && !ms)
            snprintf(out, cap, "< 0.001 s");
        else
            snprintf(out, cap, "%llu.%03llu s", ms / 1000u, ms % 1000u);
    } else if (kind == 'B') {
        unsigned long long b = strtoull(toon, NULL, 10);
        cr_assert_lt(b, 1024u, "keep these streams below 1024 B: %s", toon);
        snprintf(out, cap, "%llu B", b);
    } else {
        snprintf(out, cap, "%s", toon);
    }
}

void t_human_has_totals(const char *human, const char *json)
{
    cr_assert_null(strstr(human, "\ntotals:\n"), "the totals block is --profile-verbose's");
    char *totals = t_json_get(json, "profile.totals");
    cr_assert(totals != NULL && totals[0] == '{', "%s", json);
    int checked = 0;
    for (const char *p = totals + 1; *p == '"';) {
        const char *kend = strchr(p + 1, '"');
        cr_assert(kend && kend[1] == ':', "%s", totals);
        char key[64], val[64], frag[160], shown[64];
        snprintf(key, sizeof key, "%.*s", (int)(kend - p - 1), p + 1);
        const char *v = kend + 2, *vend = v + strcspn(v, ",}");
        if (*v == '"')
            snprintf(val, sizeof val, "%.*s", (int)(vend - v - 2), v + 1);
        else
            snprintf(val, sizeof val, "%.*s", (int)(vend - v), v);
        unsigned w = 0;
        while (w < sizeof human_words / sizeof human_words[0] && strcmp(human_words[w].key, key))
            w++;
        bool avail = strcmp(val, "unavailable") != 0;
        if (w == sizeof human_words / sizeof human_words[0]) {
            /* a total the human writer has no words for: under its TOON key */
            const char *more = strstr(human, "\nmore totals: ");
            cr_assert(more != NULL, "%s has no words and no `more totals` line: %s", key, human);
            snprintf(frag, sizeof frag, "%s %s", key, val);
            const char *at = strstr(more, frag);
            cr_assert(at != NULL && !memchr(more + 1, '\n', (size_t)(at - more - 1)),
                      "%s missing from `more totals`: %s", frag, human);
        } else if (!avail && human_words[w].unavailable) {
            cr_assert(strstr(human, human_words[w].unavailable) != NULL, "%s: want '%s' in %s",
                      key, human_words[w].unavailable, human);
        } else {
            if (avail)
                human_value(human_words[w].kind, val, shown, sizeof shown);
            else
                snprintf(shown, sizeof shown, "unavailable");
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
            snprintf(frag, sizeof frag, human_words[w].fmt, shown);
#pragma GCC diagnostic pop
            cr_assert(strstr(human, frag) != NULL, "%s = %s: want '%s' in %s", key, val, frag,
                      human);
        }
        checked++;
        p = *vend == ',' ? vend + 1 : vend;
    }
    cr_assert_gt(checked, 10, "%s", totals);
    free(totals);
}
