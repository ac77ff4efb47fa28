/* The human writer: the report a person reads on stderr, from the same built report and the
 * same totals list as the TOON writer (render/writers.h), so both carry the same status,
 * reasons, totals and bottleneck order; only the wording and the units differ. Layout
 * (runtime/OUTPUT.md has it with an example):
 *
 *   heading        `CPU profile` / `Memory profile`
 *   header         status with its reasons in words, the run id of a long-lived daemon's run,
 *                  termination and duration in seconds, samples and rates (CPU) or events and
 *                  bytes in B/KiB/MiB/GiB (memory), the bottleneck counts, coverage; a note
 *                  when a CPU profile rests on fewer than JP_HUMAN_FEW_SAMPLES Jett samples
 *   table          one aligned row per emitted bottleneck, in rank order
 *   top sites      memory: the largest sites by retained and by live-at-peak bytes, over
 *                  every site (a site below the threshold shows too)
 *   details        per bottleneck: hot lines, call chains (repetitions collapsed),
 *                  execution identity, suggestions
 *   other totals   the rest of the totals list, `label value`; any total this file has no
 *                  words for is printed with its TOON key, so none can go missing
 *   verbose        with JP_OUT_VERBOSE: every total as `  key: value`, TOON names and order
 *
 * Every number is an integer computation (no floating point), so the text is deterministic.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/text.h"
#include "report.h"
#include "writers.h"

/* Under this many Jett samples (the denominator of every CPU percentage) the header says the
 * profile says little. */
#define JP_HUMAN_FEW_SAMPLES 100u
/* Sites in each memory top list. */
#define JP_HUMAN_TOP_SITES 5u

__extension__ typedef unsigned __int128 h_u128;

/* ---- text pieces ------------------------------------------------------------------------ */

static void h_qualified(struct jp_buf *s, struct jp_buf *tmp, const struct jp_func *f)
{
    tmp->len = 0;
    jp_wr_qualified(tmp, f);
    jp_text_safe(s, tmp->p ? tmp->p : "", tmp->len);
    s->failed |= tmp->failed;
}

/* hundredths of a percent with two fixed decimals: 6923 -> 69.23% */
static void h_pct(struct jp_buf *s, uint64_t h)
{
    jp_buf_printf(s, "%" PRIu64 ".%02" PRIu64 "%%", h / 100u, h % 100u);
}

/* Bytes for a person: below 1024 exact (`1023 B`), else one decimal of the largest binary unit
 * the value reaches, rounded half up (`1.0 KiB`, `1.5 MiB`, `722.9 MiB`); a value that rounds
 * up to 1024.0 of a unit is shown as 1.0 of the next. */
static void h_bytes(struct jp_buf *s, uint64_t b)
{
    static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    const unsigned nunit = sizeof unit / sizeof unit[0];
    if (b < 1024u) {
        jp_buf_printf(s, "%" PRIu64 " B", b);
        return;
    }
    unsigned u = 0;
    h_u128 base = 1024u;
    while (u + 1u < nunit && (h_u128)b >= base * 1024u) {
        base *= 1024u;
        u++;
    }
    h_u128 tenths = ((h_u128)b * 10u + base / 2u) / base;
    if (tenths >= 10240u && u + 1u < nunit) {
        base *= 1024u;
        u++;
        tenths = ((h_u128)b * 10u + base / 2u) / base;
    }
    jp_buf_printf(s, "%" PRIu64 ".%" PRIu64 " %s", (uint64_t)(tenths / 10u),
                  (uint64_t)(tenths % 10u), unit[u]);
}

void jp_report_bytes(struct jp_buf *s, uint64_t b)
{
    h_bytes(s, b);
}

/* Nanoseconds as seconds with millisecond precision, rounded half up: `1.612 s`; a non-zero
 * duration under half a millisecond is `< 0.001 s`, not a misleading zero. */
static void h_secs(struct jp_buf *s, uint64_t ns)
{
    uint64_t ms = ns / 1000000u + (ns % 1000000u >= 500000u);
    if (ns && !ms)
        jp_buf_puts(s, "< 0.001 s");
    else
        jp_buf_printf(s, "%" PRIu64 ".%03" PRIu64 " s", ms / 1000u, ms % 1000u);
}

static void h_count(struct jp_buf *s, uint64_t n, const char *one, const char *many)
{
    jp_buf_printf(s, "%" PRIu64 " %s", n, n == 1 ? one : many);
}

/* ---- the totals, taken from the one list ------------------------------------------------ */

struct h_totals {
    struct jp_wr_item it[JP_WR_MAX_ITEMS];
    bool used[JP_WR_MAX_ITEMS];
    unsigned n;
};

/* The item with TOON key k, marked as printed; NULL when the list has none (a mode's key). */
static const struct jp_wr_item *h_take(struct h_totals *t, const char *k)
{
    for (unsigned i = 0; i < t->n; i++)
        if (!strcmp(t->it[i].k, k)) {
            t->used[i] = true;
            return &t->it[i];
        }
    return NULL;
}

static bool h_avail(const struct jp_wr_item *it)
{
    return it && it->kind != JP_WR_UNAVAILABLE;
}

/* An item's value as a plain number: integer, hundredths with two decimals, or the word. */
static void h_value(struct jp_buf *s, const struct jp_wr_item *it)
{
    if (!h_avail(it))
        jp_buf_puts(s, "unavailable");
    else if (it->kind == JP_WR_HUNDREDTHS)
        jp_buf_printf(s, "%" PRIu64 ".%02" PRIu64, it->v / 100u, it->v % 100u);
    else
        jp_buf_printf(s, "%" PRIu64, it->v);
}

static void h_value_bytes(struct jp_buf *s, const struct jp_wr_item *it)
{
    if (h_avail(it) && it->kind == JP_WR_U64)
        h_bytes(s, it->v);
    else
        h_value(s, it);
}

/* `label value` pairs of one line, after `head: `; keys missing from the list are skipped. */
static void h_pairs(struct jp_buf *s, struct h_totals *t, const char *head,
                    const char *const (*pairs)[2], unsigned npairs)
{
    bool first = true;
    for (unsigned i = 0; i < npairs; i++) {
        const struct jp_wr_item *it = h_take(t, pairs[i][0]);
        if (!it)
            continue;
        jp_buf_puts(s, first ? head : ", ");
        if (first)
            jp_buf_puts(s, ": ");
        first = false;
        jp_buf_printf(s, "%s ", pairs[i][1]);
        h_value(s, it);
    }
    if (!first)
        jp_buf_puts(s, "\n");
}

/* ---- an aligned table ------------------------------------------------------------------- */

#define H_MAXCOL 6u

struct h_table {
    unsigned ncol;
    const char *align; /* per column: 'r' right-aligned (numbers), 'l' left */
    uint32_t nrow;
    struct jp_buf *cells; /* nrow * ncol, row-major */
};

static int h_table_new(struct h_table *t, unsigned ncol, const char *align, uint32_t nrow)
{
    t->ncol = ncol;
    t->align = align;
    t->nrow = nrow;
    t->cells = calloc((size_t)nrow * ncol, sizeof *t->cells);
    return t->cells ? 0 : -ENOMEM;
}

static struct jp_buf *h_cell(struct h_table *t, uint32_t row, unsigned col)
{
    return &t->cells[(size_t)row * t->ncol + col];
}

/* Display width: code points (the escapes of jp_text_safe are ASCII). */
static size_t h_width(const struct jp_buf *b)
{
    size_t w = 0;
    for (size_t i = 0; i < b->len; i++)
        w += ((unsigned char)b->p[i] & 0xc0u) != 0x80u;
    return w;
}

static void h_pad(struct jp_buf *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        jp_buf_put(s, " ", 1);
}

/* Prints the rows with two spaces between columns and `indent` spaces before each; the last
 * column gets no trailing padding. Frees the cells. */
static void h_table_print(struct jp_buf *s, struct h_table *t, size_t indent)
{
    size_t w[H_MAXCOL] = {0};
    for (uint32_t r = 0; r < t->nrow; r++)
        for (unsigned c = 0; c < t->ncol; c++) {
            size_t cw = h_width(h_cell(t, r, c));
            w[c] = cw > w[c] ? cw : w[c];
        }
    for (uint32_t r = 0; r < t->nrow; r++) {
        h_pad(s, indent);
        for (unsigned c = 0; c < t->ncol; c++) {
            struct jp_buf *b = h_cell(t, r, c);
            size_t gap = w[c] - h_width(b);
            if (c)
                jp_buf_puts(s, "  ");
            if (t->align[c] == 'r')
                h_pad(s, gap);
            jp_buf_put(s, b->p ? b->p : "", b->len);
            if (t->align[c] != 'r' && c + 1u < t->ncol)
                h_pad(s, gap);
            s->failed |= b->failed;
        }
        jp_buf_puts(s, "\n");
    }
    for (size_t i = 0; i < (size_t)t->nrow * t->ncol; i++)
        jp_buf_free(&t->cells[i]);
    free(t->cells);
    t->cells = NULL;
}

/* `path:line`, or `unavailable` for a function without a source */
static void h_location(struct jp_buf *s, const struct jp_engine_view *v, const struct jp_func *f)
{
    if (!f->source) {
        jp_buf_puts(s, "unavailable");
        return;
    }
    const struct jp_source *src = &v->sources[f->source];
    jp_text_safe(s, src->path, src->path_len);
    jp_buf_printf(s, ":%" PRIu32, f->decl_line);
}

/* ---- header ----------------------------------------------------------------------------- */

/* Each partial/unavailable reason in words, by JP_REASON_BIT_*. */
static const char *const reason_words[JP_REASON_COUNT] = {
    [JP_REASON_BIT_COLLECTOR_FAILURE] = "the collector failed, so what it gathered is incomplete",
    [JP_REASON_BIT_PRODUCER_LOST] = "the program went away without finishing the run",
    [JP_REASON_BIT_INTERRUPTED] = "the run was interrupted before it finished",
    [JP_REASON_BIT_MISSING_STOP_EVENT] = "the record stream ends before the run's stop record",
    [JP_REASON_BIT_RECORDS_DROPPED] = "records were lost between the program and the daemon",
    [JP_REASON_BIT_RETENTION_METADATA_LIMIT] =
        "the retention metadata budget ran out, so live figures are not exact",
    [JP_REASON_BIT_CPU_METADATA_LIMIT] = "the CPU metadata budget ran out, so detail stopped",
    [JP_REASON_BIT_STACK_CAPTURE_LIMIT] = "a call stack deeper than 128 frames was cut",
    [JP_REASON_BIT_IN_PROGRESS] = "the run goes on; this is a live snapshot of it",
};

static void h_reason(struct jp_buf *s, const char *word)
{
    jp_buf_puts(s, word);
    for (unsigned b = 0; b < JP_REASON_COUNT; b++)
        if (!strcmp(jp_reason_name(b), word) && reason_words[b]) {
            jp_buf_printf(s, ": %s", reason_words[b]);
            break;
        }
}

static void h_status(struct jp_buf *s, const struct jp_report *r, const struct jp_report_opts *o)
{
    const struct jp_engine_view *v = r->v;
    jp_buf_printf(s, "status: %s", jp_status_word(r->status));
    if (r->status != JP_STATUS_COMPLETE) {
        jp_buf_puts(s, " (");
        h_reason(s, r->reason);
        jp_buf_puts(s, ")");
    }
    jp_buf_puts(s, "\n");
    /* the other reasons that apply, in priority order; the first one is the status's */
    for (unsigned b = 0; b < JP_REASON_COUNT; b++)
        if ((r->reasons & (1u << b)) && strcmp(jp_reason_name(b), r->reason)) {
            jp_buf_puts(s, "also: ");
            h_reason(s, jp_reason_name(b));
            jp_buf_puts(s, "\n");
        }
    if (r->record_mismatch)
        jp_buf_printf(s, "records lost in transit: the stream announced %" PRIu64
                         " records and %" PRIu64 " arrived\n",
                      v->stop_record_count, v->records_counted);
    if (o->run_id)
        jp_buf_printf(s, "run id: %" PRIu64 "\n", o->run_id);
    if (r->snapshot) {
        jp_buf_printf(s, "live snapshot: the first %" PRIu64 " records of the run", r->records_taken);
        if (r->elapsed_ns)
            jp_buf_printf(s, ", %" PRIu64 ".%03" PRIu64 " s into it",
                          r->elapsed_ns / 1000000000u, r->elapsed_ns / 1000000u % 1000u);
        jp_buf_puts(s, "\n");
    }
}

static void h_termination(struct jp_buf *s, struct h_totals *t, const struct jp_report *r)
{
    const struct jp_wr_item *wall = h_take(t, "wall_duration_ns");
    const struct jp_wr_item *cpu = h_take(t, "process_cpu_duration_ns");
    jp_buf_printf(s, "termination: %s", r->termination);
    if (h_avail(wall)) {
        jp_buf_puts(s, " after ");
        h_secs(s, wall->v);
    } else {
        jp_buf_puts(s, ", duration unavailable");
    }
    if (cpu && h_avail(cpu)) {
        jp_buf_puts(s, " (");
        h_secs(s, cpu->v);
        jp_buf_puts(s, " CPU)");
    } else if (cpu) {
        jp_buf_puts(s, " (CPU time unavailable)");
    }
    jp_buf_puts(s, "\n");
}

static void h_samples(struct jp_buf *s, struct h_totals *t, const struct jp_report *r)
{
    const struct jp_wr_item *rec = h_take(t, "recorded_samples");
    const struct jp_wr_item *obs = h_take(t, "observed_rate_hz");
    const struct jp_wr_item *req = h_take(t, "requested_rate_hz");
    jp_buf_puts(s, "samples: ");
    h_value(s, rec);
    jp_buf_puts(s, " at ");
    h_value(s, obs);
    jp_buf_puts(s, " Hz (");
    h_value(s, req);
    jp_buf_puts(s, " Hz requested): ");
    static const char *const states[][2] = {
        {"attributed_samples", "jett"}, {"runtime_samples", "runtime"},
        {"waiting_samples", "waiting"}, {"unavailable_samples", "unavailable"},
    };
    for (unsigned i = 0; i < sizeof states / sizeof states[0]; i++) {
        if (i)
            jp_buf_puts(s, ", ");
        h_value(s, h_take(t, states[i][0]));
        jp_buf_printf(s, " %s", states[i][1]);
    }
    jp_buf_puts(s, "\n");
    if (r->denominator < JP_HUMAN_FEW_SAMPLES)
        jp_buf_printf(s, "note: only %" PRIu64 " samples in Jett code (fewer than %u): this "
                         "profile says little\n",
                      r->denominator, JP_HUMAN_FEW_SAMPLES);
}

static void h_memory_totals(struct jp_buf *s, struct h_totals *t, const struct jp_report *r)
{
    const struct jp_wr_item *allocs = h_take(t, "allocation_count");
    const struct jp_wr_item *resizes = h_take(t, "resize_count");
    jp_buf_puts(s, "events: ");
    if (h_avail(allocs))
        h_count(s, allocs->v, "allocation", "allocations");
    jp_buf_puts(s, ", ");
    if (h_avail(resizes))
        h_count(s, resizes->v, "resize", "resizes");
    jp_buf_puts(s, "\nbytes: ");
    h_value_bytes(s, h_take(t, "allocated_bytes"));
    jp_buf_puts(s, " allocated (");
    h_value_bytes(s, h_take(t, "attributed_allocated_bytes"));
    jp_buf_puts(s, " to sites), ");
    const struct jp_wr_item *freed = h_take(t, "freed_bytes");
    const struct jp_wr_item *peak = h_take(t, "peak_live_bytes");
    const struct jp_wr_item *kept = h_take(t, "retained_bytes");
    const struct jp_wr_item *live = h_take(t, "live_bytes");
    if (!h_avail(freed) && !h_avail(peak) && !h_avail(kept)) {
        jp_buf_puts(s, "freed, peak and retained unavailable\n");
        return;
    }
    h_value_bytes(s, freed);
    jp_buf_puts(s, " freed, ");
    h_value_bytes(s, peak);
    jp_buf_puts(s, " at peak, ");
    if (r->snapshot) { /* nothing is retained before the run ends: what is live now */
        h_value_bytes(s, live);
        jp_buf_puts(s, " live now\n");
        return;
    }
    h_value_bytes(s, kept);
    jp_buf_puts(s, " retained");
    /* live_bytes is the live total at the end, the retained bytes by definition: shown once
     * unless the two ever differ */
    if (live && kept && (live->kind != kept->kind || live->v != kept->v)) {
        jp_buf_puts(s, ", ");
        h_value_bytes(s, live);
        jp_buf_puts(s, " live");
    }
    jp_buf_puts(s, "\n");
}

static void h_bottleneck_counts(struct jp_buf *s, struct h_totals *t, const struct jp_report *r,
                                bool cpu)
{
    jp_buf_puts(s, "bottlenecks: ");
    h_value(s, h_take(t, "eligible_bottlenecks"));
    jp_buf_puts(s, " eligible at or above ");
    h_pct(s, r->threshold_bp);
    jp_buf_puts(s, cpu ? " of jett samples, " : " of attributed bytes, ");
    h_value(s, h_take(t, "emitted_bottlenecks"));
    jp_buf_puts(s, " shown, ");
    h_value(s, h_take(t, "truncated_bottlenecks"));
    jp_buf_printf(s, " past the limit of %" PRIu32 "\n", r->limit);
    jp_buf_printf(s, "coverage: %s\n", cpu ? "jett_runtime_threads" : "jett_heap");
}

/* ---- the ranking table and the memory top lists ----------------------------------------- */

static int h_ranking(struct jp_buf *s, struct jp_buf *tmp, const struct jp_report *r, bool cpu)
{
    const struct jp_engine_view *v = r->v;
    struct h_table t;
    if (h_table_new(&t, 6, "rrrrll", r->emitted + 1u) < 0)
        return -ENOMEM;
    static const char *const head_cpu[] = {"rank", "incl%", "self%", "samples", "function",
                                           "location"};
    static const char *const head_mem[] = {"rank", "alloc%", "allocated", "allocs", "function",
                                           "location"};
    for (unsigned c = 0; c < 6; c++)
        jp_buf_puts(h_cell(&t, 0, c), cpu ? head_cpu[c] : head_mem[c]);
    for (uint32_t i = 0; i < r->emitted; i++) {
        const struct jp_entry *en = &r->entries[i];
        const struct jp_func *f = &v->funcs[en->func];
        uint32_t row = i + 1u;
        jp_buf_printf(h_cell(&t, row, 0), "%" PRIu32, row);
        h_pct(h_cell(&t, row, 1), jp_percent_hundredths(en->impact, r->denominator));
        if (cpu) {
            h_pct(h_cell(&t, row, 2), jp_percent_hundredths(f->cpu.self, r->denominator));
            jp_buf_printf(h_cell(&t, row, 3), "%" PRIu64, f->cpu.inclusive);
        } else {
            h_bytes(h_cell(&t, row, 2), f->mem.allocated);
            jp_buf_printf(h_cell(&t, row, 3), "%" PRIu64, f->mem.count);
        }
        h_qualified(h_cell(&t, row, 4), tmp, f);
        h_location(h_cell(&t, row, 5), v, f);
    }
    h_table_print(s, &t, 0);
    return 0;
}

/* The largest JP_HUMAN_TOP_SITES sites by retained (peak = false) or live-at-peak bytes, over
 * every site of the run, not only the ranked ones: the site that keeps memory alive matters
 * even when it allocated little. Ties: the site defined first. */
static int h_top_sites(struct jp_buf *s, struct jp_buf *tmp, const struct jp_report *r,
                       bool peak)
{
    const struct jp_engine_view *v = r->v;
    jp_buf_puts(s, peak ? "live at the peak, largest sites"
                        : r->snapshot ? "live now, largest sites" : "retained at the end, largest sites");
    if (!r->live_exact) {
        jp_buf_puts(s, ": unavailable (the live figures of this profile are not exact)\n");
        return 0;
    }
    uint32_t top[JP_HUMAN_TOP_SITES];
    uint64_t val[JP_HUMAN_TOP_SITES];
    uint32_t ntop = 0, nsites = 0;
    for (uint32_t i = 0; i < v->nfuncs; i++) {
        const struct jp_func *f = &v->funcs[i];
        uint64_t b = peak ? jp_func_live_at_peak(f, v->peak_epoch) : f->live;
        if (!b)
            continue;
        nsites++;
        uint32_t at = ntop;
        while (at > 0 && val[at - 1u] < b)
            at--;
        if (at >= JP_HUMAN_TOP_SITES)
            continue;
        uint32_t last = ntop < JP_HUMAN_TOP_SITES ? ntop : JP_HUMAN_TOP_SITES - 1u;
        memmove(&top[at + 1u], &top[at], (last - at) * sizeof top[0]);
        memmove(&val[at + 1u], &val[at], (last - at) * sizeof val[0]);
        top[at] = i;
        val[at] = b;
        ntop += ntop < JP_HUMAN_TOP_SITES;
    }
    if (!ntop) {
        jp_buf_puts(s, ": none\n");
        return 0;
    }
    jp_buf_printf(s, " (%" PRIu32 " of %" PRIu32 "):\n", ntop, nsites);
    struct h_table t;
    if (h_table_new(&t, 3, "rll", ntop) < 0)
        return -ENOMEM;
    for (uint32_t i = 0; i < ntop; i++) {
        h_bytes(h_cell(&t, i, 0), val[i]);
        h_qualified(h_cell(&t, i, 1), tmp, &v->funcs[top[i]]);
        h_location(h_cell(&t, i, 2), v, &v->funcs[top[i]]);
    }
    h_table_print(s, &t, 3);
    return 0;
}

/* ---- details ---------------------------------------------------------------------------- */

/* Longest repeating unit of frames a chain collapses (mutual recursion of up to 4 functions). */
#define H_MAX_PERIOD 4u

/* root > ... > function, each repetition shown once with its count: a run of one frame as
 * `down ×126`, a repeated sequence of up to H_MAX_PERIOD frames as `(ping > pong) ×63`. At
 * each position the unit covering the most frames wins, the shorter unit on a tie, so the
 * text is a pure function of the chain. */
static void h_chain_frames(struct jp_buf *s, struct jp_buf *tmp, const struct jp_engine_view *v,
                           uint32_t chain)
{
    uint32_t seq[JP_MAX_DEPTH], d = v->chains[chain].depth;
    if (d > JP_MAX_DEPTH)
        d = JP_MAX_DEPTH;
    uint32_t k = d;
    for (uint32_t ci = chain + 1u; ci && k; ci = v->chains[ci - 1u].parent)
        seq[--k] = v->chains[ci - 1u].func;
    for (uint32_t i = k; i < d;) {
        uint32_t unit = 1, times = 1;
        for (uint32_t p = 1; p <= H_MAX_PERIOD && i + 2u * p <= d; p++) {
            uint32_t n = 1;
            while (i + (n + 1u) * p <= d &&
                   !memcmp(&seq[i + n * p], &seq[i], p * sizeof seq[0]))
                n++;
            if (n > 1u && n * p > unit * times) {
                unit = p;
                times = n;
            }
        }
        if (i > k)
            jp_buf_puts(s, " > ");
        bool group = unit > 1u && times > 1u;
        if (group)
            jp_buf_puts(s, "(");
        for (uint32_t q = 0; q < unit; q++) {
            if (q)
                jp_buf_puts(s, " > ");
            h_qualified(s, tmp, &v->funcs[seq[i + q]]);
        }
        if (group)
            jp_buf_puts(s, ")");
        if (times > 1u)
            jp_buf_printf(s, " \xc3\x97%" PRIu32, times);
        i += unit * times;
    }
}

static void h_hot_lines(struct jp_buf *s, const struct jp_engine_view *v,
                        const struct jp_entry *en)
{
    const struct jp_func *f = &v->funcs[en->func];
    const struct jp_source *src = f->source ? &v->sources[f->source] : NULL;
    for (uint32_t j = 0; j < en->nhot; j++) {
        const struct jp_hot *h = &v->hots[en->hot[j]];
        if (src) {
            jp_buf_puts(s, "   hot line ");
            jp_text_safe(s, src->path, src->path_len);
            jp_buf_printf(s, ":%" PRIu32 ":%" PRIu32, h->line, h->col);
        } else {
            jp_buf_puts(s, "   hot line unavailable");
        }
        jp_buf_printf(s, ", self %" PRIu64, h->samples);
        const struct jp_excerpt_ent *x =
            src ? jp_wr_find_excerpt(v, f->source, h->line, h->col) : NULL;
        if (x && x->text && !(x->flags & JP_EXCERPT_UNAVAILABLE)) {
            jp_buf_puts(s, ": ");
            jp_text_safe(s, x->text, x->text_len);
            if (x->flags & JP_EXCERPT_REDACTED)
                jp_buf_puts(s, " (redacted)");
        }
        jp_buf_puts(s, "\n");
    }
}

static void h_entry(struct jp_buf *s, struct jp_buf *tmp, const struct jp_report *r, uint32_t i,
                    bool cpu)
{
    const struct jp_engine_view *v = r->v;
    const struct jp_entry *en = &r->entries[i];
    const struct jp_func *f = &v->funcs[en->func];
    jp_buf_printf(s, "#%" PRIu32 " ", i + 1u);
    h_qualified(s, tmp, f);
    if (f->source) {
        jp_buf_puts(s, " (");
        h_location(s, v, f);
        jp_buf_puts(s, ")\n");
    } else {
        jp_buf_puts(s, " (source unavailable)\n");
    }
    if (cpu) {
        h_hot_lines(s, v, en);
        for (uint32_t j = 0; j < en->nchains; j++) {
            jp_buf_printf(s, "   chain %" PRIu64 " samples: ", v->chains[en->chain[j]].samples);
            h_chain_frames(s, tmp, v, en->chain[j]);
            jp_buf_puts(s, "\n");
        }
    } else {
        jp_buf_puts(s, "   ");
        h_count(s, f->mem.count, "allocation", "allocations");
        jp_buf_puts(s, ", ");
        h_count(s, f->resize_count, "resize", "resizes");
        if (r->live_exact) {
            jp_buf_puts(s, "; freed ");
            h_bytes(s, f->freed);
            jp_buf_puts(s, r->snapshot ? ", live now " : ", retained ");
            h_bytes(s, f->live);
            jp_buf_puts(s, ", live at peak ");
            h_bytes(s, jp_func_live_at_peak(f, v->peak_epoch));
            jp_buf_puts(s, "\n");
        } else {
            jp_buf_puts(s, "; freed, retained and live at peak unavailable\n");
        }
        /* the creation chains (READINGS.md #18), as the TOON's `chains` */
        for (uint32_t j = 0; j < en->nchains; j++) {
            const struct jp_chain *c = &v->chains[en->chain[j]];
            jp_buf_puts(s, "   chain ");
            h_bytes(s, c->allocated);
            jp_buf_puts(s, ", ");
            h_count(s, c->count, "allocation", "allocations");
            if (r->live_exact) {
                jp_buf_puts(s, r->snapshot ? ", live now " : ", retained ");
                h_bytes(s, c->live);
            }
            jp_buf_puts(s, ": ");
            h_chain_frames(s, tmp, v, en->chain[j]);
            jp_buf_puts(s, "\n");
        }
    }
    jp_buf_puts(s, "   runtime threads: ");
    if (en->threads)
        jp_buf_printf(s, "%" PRIu32, en->threads);
    else
        jp_buf_puts(s, "unavailable");
    jp_buf_puts(s, ", tasks: ");
    if (en->tasks)
        jp_buf_printf(s, "%" PRIu32 "\n", en->tasks);
    else
        jp_buf_puts(s, "unavailable\n");
    if (en->sugg_unavailable)
        jp_buf_puts(s, "   suggestions: unavailable\n");
    for (uint32_t j = 0; j < en->nsugg; j++) {
        tmp->len = 0;
        jp_wr_suggestion_text(tmp, r, en, en->sugg[j]);
        jp_buf_printf(s, "   suggestion %s: ", jp_wr_rule_names[en->sugg[j]]);
        jp_text_safe(s, tmp->p ? tmp->p : "", tmp->len);
        jp_buf_puts(s, "\n");
    }
}

/* ---- the writer ------------------------------------------------------------------------- */

/* The totals not in the header, `label value`, then any the list has that this file does not
 * name (under their TOON keys). */
static void h_other_totals(struct jp_buf *s, struct h_totals *t)
{
    static const char *const ticks[][2] = {
        {"requested_ticks", "requested"}, {"coalesced_ticks", "coalesced"},
        {"dropped_ticks", "dropped"},
    };
    static const char *const stacks[][2] = {
        {"attributed_stacks", "attributed"}, {"unavailable_stacks", "unavailable"},
        {"truncated_stacks", "truncated"},
    };
    static const char *const records[][2] = {
        {"lost_records", "lost"}, {"record_count_mismatch", "miscounted"},
        {"protocol_violations", "protocol violations"},
    };
    h_pairs(s, t, "ticks", ticks, 3);
    h_pairs(s, t, "stacks", stacks, 3);
    h_pairs(s, t, "records", records, 3);
    /* producer_wait_ns, the time the program waited for ring room (COUNTERS), in seconds */
    const struct jp_wr_item *wait = h_take(t, "producer_wait_ns");
    if (wait) {
        jp_buf_puts(s, "ring waits: ");
        if (h_avail(wait))
            h_secs(s, wait->v);
        else
            jp_buf_puts(s, "unavailable");
        jp_buf_puts(s, "\n");
    }
    const struct jp_wr_item *threads = h_take(t, "runtime_threads");
    if (threads) {
        jp_buf_puts(s, "runtime threads: ");
        h_value(s, threads);
        jp_buf_puts(s, "\n");
    }
    bool first = true;
    for (unsigned i = 0; i < t->n; i++) {
        if (t->used[i])
            continue;
        jp_buf_puts(s, first ? "more totals: " : ", ");
        first = false;
        jp_buf_printf(s, "%s ", t->it[i].k);
        h_value(s, &t->it[i]);
    }
    if (!first)
        jp_buf_puts(s, "\n");
}

int jp_write_human(const struct jp_report *r, const struct jp_report_opts *o, char **out,
                   size_t *len)
{
    const struct jp_engine_view *v = r->v;
    bool cpu = v->mode == JP_MODE_CPU;
    struct jp_buf s = {0}, tmp = {0};
    struct h_totals t = {0};
    t.n = jp_wr_totals(r, t.it);
    int rc = 0;

    jp_buf_puts(&s, cpu ? "CPU profile\n" : "Memory profile\n");
    h_status(&s, r, o);
    h_termination(&s, &t, r);
    if (cpu)
        h_samples(&s, &t, r);
    else
        h_memory_totals(&s, &t, r);
    h_bottleneck_counts(&s, &t, r, cpu);

    if (r->emitted) {
        jp_buf_puts(&s, "\n");
        rc = h_ranking(&s, &tmp, r, cpu);
    }
    if (rc == 0 && !cpu) {
        jp_buf_puts(&s, "\n");
        rc = h_top_sites(&s, &tmp, r, false);
        if (rc == 0)
            rc = h_top_sites(&s, &tmp, r, true);
    }
    if (rc == 0 && r->emitted) {
        jp_buf_puts(&s, "\n");
        for (uint32_t i = 0; i < r->emitted; i++)
            h_entry(&s, &tmp, r, i, cpu);
    }
    if (rc == 0) {
        jp_buf_puts(&s, "\n");
        h_other_totals(&s, &t);
    }
    if (rc == 0 && (o->outputs & JP_OUT_VERBOSE)) {
        jp_buf_puts(&s, "\ntotals:\n");
        for (unsigned i = 0; i < t.n; i++) {
            jp_buf_printf(&s, "  %s: ", t.it[i].k);
            h_value(&s, &t.it[i]);
            jp_buf_puts(&s, "\n");
        }
    }
    s.failed |= tmp.failed;
    jp_buf_free(&tmp);
    if (rc < 0) {
        jp_buf_free(&s);
        return rc;
    }
    return jp_buf_finish(&s, out, len);
}
