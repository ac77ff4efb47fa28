/* What an operator sees of a serving daemon: the runs in flight (listed by the loop each run
 * lives on), the daemon's totals, and the texts `jettprofd status` and `jettprofd runs` get
 * (the commands themselves are show.c's).
 * Every figure here is guarded by d->live_mu (see struct jpd_live). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/text.h"
#include "jpd.h"
#include "status.h"
#include "util.h"
#include "push.h"

void jpd_live_begin(struct jpd_daemon *d, struct jpd_live *l)
{
    pthread_mutex_lock(&d->live_mu);
    l->prev = NULL;
    l->next = d->live;
    if (d->live)
        d->live->prev = l;
    d->live = l;
    l->listed = 1;
    d->runs_started++;
    pthread_mutex_unlock(&d->live_mu);
}

void jpd_live_update(struct jpd_daemon *d, struct jpd_live *l, uint64_t records, uint64_t fill,
                     uint64_t slots, const struct jp_ring *const *rings, uint32_t nrings,
                     const struct jp_engine *eng)
{
    uint64_t lost = 0, wait_ns = 0, wakes = 0;
    for (uint32_t i = 0; i < nrings; i++) {
        uint64_t a, b;
        jp_ring_gauges(rings[i], &a, &b);
        lost += a;
        wait_ns += b;
        wakes += rings[i]->c_wakes;
    }
    char program[JPD_PROGRAM_MAX];
    /* outside the lock: the engine is this loop's; only the copy below is shared */
    int named = !l->program[0] && eng && jpd_program_of(eng, &l->sources_seen, program) == 0;
    struct jp_engine_summary sum = {0};
    if (eng)
        (void)jp_engine_summary(eng, &sum);
    pthread_mutex_lock(&d->live_mu);
    l->records = records;
    l->fill = fill;
    l->slots = slots;
    l->waits = wakes;
    l->lost = lost;
    l->wait_ns = wait_ns;
    l->live_bytes = sum.retained_bytes; /* live now, while the run goes on */
    l->allocations = sum.allocation_count;
    l->samples = sum.recorded_samples;
    if (named)
        memcpy(l->program, program, sizeof program);
    pthread_mutex_unlock(&d->live_mu);
}

void jpd_live_capture(struct jpd_daemon *d, struct jpd_live *l, uint64_t waits, uint64_t wait_ns)
{
    pthread_mutex_lock(&d->live_mu);
    l->cap_waits = waits;
    l->cap_wait_ns = wait_ns;
    pthread_mutex_unlock(&d->live_mu);
}

void jpd_live_end(struct jpd_daemon *d, struct jpd_live *l)
{
    pthread_mutex_lock(&d->live_mu);
    if (l->listed) {
        if (l->prev)
            l->prev->next = l->next;
        else
            d->live = l->next;
        if (l->next)
            l->next->prev = l->prev;
        l->listed = 0;
        d->runs_finished++;
        d->records_total += l->records;
    }
    pthread_mutex_unlock(&d->live_mu);
}

void jpd_live_refused(struct jpd_daemon *d)
{
    pthread_mutex_lock(&d->live_mu);
    d->runs_refused++;
    pthread_mutex_unlock(&d->live_mu);
}

/* Resident set in bytes (/proc/self/statm's second field), 0 when it cannot be read. */
static uint64_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "re");
    unsigned long long size = 0, res = 0;
    int ok = f && fscanf(f, "%llu %llu", &size, &res) == 2;
    if (f)
        fclose(f);
    long page = sysconf(_SC_PAGESIZE);
    return ok && page > 0 ? res * (uint64_t)page : 0;
}

struct snap {
    uint64_t run_id;
    uid_t uid;
    pid_t pid;
    uint32_t mode; /* its HELLO's, which the daemon checked: always a JP_MODE_* */
    uint64_t age_ms, records, fill, slots;
    uint64_t waits, lost, wait_ns;
    char program[JPD_PROGRAM_MAX];
    uint64_t cap_waits, cap_wait_ns;
    uint64_t live_bytes, allocations, samples;
};

/* records per second over the run's age, whole */
static uint64_t rate(const struct snap *r)
{
    return r->age_ms ? r->records * 1000u / r->age_ms : 0;
}

/* ring fill in per mille of its slots */
static uint64_t fill_pm(const struct snap *r)
{
    return r->slots ? r->fill * 1000u / r->slots : 0;
}

/* serve --push (ps NULL without): what the push thread did, among the daemon's totals. The
 * target is the URL without user:password or query; the last error is a receiver's or
 * libcurl's text, cleaned (push.c). */
static void push_human(struct jp_buf *b, const struct jpd_push_stats *ps)
{
    if (!ps)
        return;
    jp_buf_printf(b, "push: %llu pushed, %llu failed, %llu retried, %llu dropped, %u queued, "
                  "%llu samples cut to the receiver's limits; to ",
                  (unsigned long long)ps->pushed, (unsigned long long)ps->failed,
                  (unsigned long long)ps->retried, (unsigned long long)ps->dropped,
                  (unsigned)ps->queued, (unsigned long long)ps->cut);
    jp_text_safe_str(b, ps->target);
    JP_BUF_LIT(b, "\n");
    if (ps->last_error[0]) {
        JP_BUF_LIT(b, "push last error: ");
        jp_text_safe_str(b, ps->last_error);
        JP_BUF_LIT(b, "\n");
    }
}

static void push_json(struct jp_buf *b, const struct jpd_push_stats *ps)
{
    if (!ps)
        return;
    JP_BUF_LIT(b, ",\"push\":{\"target\":");
    jp_json_str(b, ps->target);
    jp_buf_printf(b, ",\"pushed\":%llu,\"failed\":%llu,\"retried\":%llu,\"dropped\":%llu,"
                  "\"queued\":%u,\"cut_samples\":%llu,\"last_error\":",
                  (unsigned long long)ps->pushed, (unsigned long long)ps->failed,
                  (unsigned long long)ps->retried, (unsigned long long)ps->dropped,
                  (unsigned)ps->queued, (unsigned long long)ps->cut);
    jp_json_str_or_null(b, ps->last_error);
    JP_BUF_LIT(b, "}");
}

static void render_human(struct jp_buf *b, uint64_t up_ms, uint32_t workers, uint64_t rss,
                         const uint64_t tot[4], const struct snap *v, uint32_t nv,
                         uint32_t hidden, const struct jpd_push_stats *ps)
{
    jp_buf_printf(b, "uptime %llus, %u worker(s), RSS %llu KiB\n",
                  (unsigned long long)(up_ms / 1000u), (unsigned)workers,
                  (unsigned long long)(rss >> 10));
    jp_buf_printf(b, "runs: %llu started, %llu finished, %llu refused; %llu records\n",
                  (unsigned long long)tot[0], (unsigned long long)tot[1],
                  (unsigned long long)tot[2], (unsigned long long)tot[3]);
    push_human(b, ps);
    jp_buf_printf(b, "live runs: %u", (unsigned)(nv + hidden));
    if (hidden)
        jp_buf_printf(b, " (%u of other users, not shown)", (unsigned)hidden);
    JP_BUF_LIT(b, "\n");
    if (nv)
        JP_BUF_LIT(b, "  RUN_ID UID PID MODE AGE_S RECORDS RECORDS/S RING_FILL WAITS WAIT_MS LOST"
                      " CAPTURE_WAITS CAPTURE_WAIT_MS PROGRAM\n");
    for (uint32_t i = 0; i < nv; i++) {
        jp_buf_printf(b, "  %llu %lu %ld %s %llu %llu %llu %llu.%llu%% %llu %llu %llu %llu %llu ",
                      (unsigned long long)v[i].run_id, (unsigned long)v[i].uid,
                      (long)v[i].pid, jp_mode_name(v[i].mode),
                      (unsigned long long)(v[i].age_ms / 1000u),
                      (unsigned long long)v[i].records, (unsigned long long)rate(&v[i]),
                      (unsigned long long)(fill_pm(&v[i]) / 10u),
                      (unsigned long long)(fill_pm(&v[i]) % 10u),
                      (unsigned long long)v[i].waits,
                      (unsigned long long)(v[i].wait_ns / 1000000u),
                      (unsigned long long)v[i].lost, (unsigned long long)v[i].cap_waits,
                      (unsigned long long)(v[i].cap_wait_ns / 1000000u));
        /* the program is a client's bytes: written by the one rule for human text */
        if (v[i].program[0])
            jp_text_quoted(b, v[i].program, strlen(v[i].program));
        else
            JP_BUF_LIT(b, "-");
        JP_BUF_LIT(b, "\n");
    }
}

static void render_json(struct jp_buf *b, uint64_t up_ms, uint32_t workers, uint64_t rss,
                        const uint64_t tot[4], const struct snap *v, uint32_t nv,
                        uint32_t hidden, const struct jpd_push_stats *ps)
{
    jp_buf_printf(b, "{\"uptime_ms\":%llu,\"workers\":%u,\"rss_bytes\":%llu,"
                  "\"totals\":{\"runs_started\":%llu,\"runs_finished\":%llu,"
                  "\"runs_refused\":%llu,\"records\":%llu},\"live\":[",
                  (unsigned long long)up_ms, (unsigned)workers, (unsigned long long)rss,
                  (unsigned long long)tot[0], (unsigned long long)tot[1],
                  (unsigned long long)tot[2], (unsigned long long)tot[3]);
    for (uint32_t i = 0; i < nv; i++) {
        jp_buf_printf(b, "%s{\"run_id\":%llu,\"uid\":%lu,\"pid\":%ld,\"mode\":", i ? "," : "",
                      (unsigned long long)v[i].run_id, (unsigned long)v[i].uid,
                      (long)v[i].pid);
        jp_json_str(b, jp_mode_name(v[i].mode));
        jp_buf_printf(b, ",\"age_ms\":%llu,\"records\":%llu,\"records_per_s\":%llu,"
                      "\"ring_fill\":%llu,\"ring_slots\":%llu,\"waits\":%llu,"
                      "\"wait_ns\":%llu,\"lost\":%llu,\"capture_waits\":%llu,"
                      "\"capture_wait_ns\":%llu,\"program\":",
                      (unsigned long long)v[i].age_ms, (unsigned long long)v[i].records,
                      (unsigned long long)rate(&v[i]), (unsigned long long)v[i].fill,
                      (unsigned long long)v[i].slots, (unsigned long long)v[i].waits,
                      (unsigned long long)v[i].wait_ns, (unsigned long long)v[i].lost,
                      (unsigned long long)v[i].cap_waits, (unsigned long long)v[i].cap_wait_ns);
        jp_json_str_or_null(b, v[i].program);
        JP_BUF_LIT(b, "}");
    }
    jp_buf_printf(b, "],\"live_hidden\":%u", (unsigned)hidden);
    push_json(b, ps);
    JP_BUF_LIT(b, "}\n");
}

/* One metric family's HELP and TYPE lines (the Prometheus text exposition format). */
static void prom_family(struct jp_buf *b, const char *name, const char *type, const char *help)
{
    jp_buf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* serve --push's figures as counters and a gauge (ps NULL: none). */
static void push_prometheus(struct jp_buf *b, const struct jpd_push_stats *ps)
{
    if (!ps)
        return;
    const struct {
        const char *name, *help;
        uint64_t v;
    } c[] = {
        {"jettprofd_push_pushed_total", "Profiles the push endpoint accepted.", ps->pushed},
        {"jettprofd_push_failed_total", "Profiles given up after every push attempt.",
         ps->failed},
        {"jettprofd_push_retried_total", "Push attempts after a failed one.", ps->retried},
        {"jettprofd_push_dropped_total", "Profiles dropped unpushed (queue full, shutdown).",
         ps->dropped},
        {"jettprofd_push_cut_samples_total",
         "Samples merged into a <cut> sample to keep within the receiver's limits.", ps->cut},
    };
    for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
        prom_family(b, c[i].name, "counter", c[i].help);
        jp_buf_printf(b, "%s %llu\n", c[i].name, (unsigned long long)c[i].v);
    }
    prom_family(b, "jettprofd_push_queued", "gauge", "Profiles waiting or being pushed.");
    jp_buf_printf(b, "jettprofd_push_queued %u\n", (unsigned)ps->queued);
}

/* A label value in the text format: backslash, double quote and line feed escaped. */
static void prom_label_value(struct jp_buf *b, const char *s)
{
    for (; *s; s++) {
        if (*s == '\\' || *s == '"')
            jp_buf_put(b, "\\", 1);
        if (*s == '\n')
            JP_BUF_LIT(b, "\\n");
        else
            jp_buf_put(b, s, 1);
    }
}

/* A fixed-point figure with `decimals` decimals, then the line's end. */
static void prom_fixed(struct jp_buf *b, uint64_t v, unsigned decimals)
{
    uint64_t unit = 1;
    for (unsigned k = 0; k < decimals; k++)
        unit *= 10u;
    if (decimals)
        jp_buf_printf(b, "%llu.%0*llu\n", (unsigned long long)(v / unit), (int)decimals,
                      (unsigned long long)(v % unit));
    else
        jp_buf_printf(b, "%llu\n", (unsigned long long)v);
}

/* The Prometheus text format, for node_exporter's textfile collector: counters end in _total;
 * per-run gauges carry {run_id,uid,mode,program}, the program (a client's path, well-formed
 * UTF-8 as every string of a stream) escaped as the format says; the first JPD_PROM_MAX_RUNS
 * runs each, the rest added up in run_id="other" (the figures that add up). */
static void render_prometheus(struct jp_buf *b, uint64_t up_ms, uint32_t workers, uint64_t rss,
                              const uint64_t tot[4], const struct snap *v, uint32_t nv,
                              uint32_t hidden, const struct jpd_push_stats *ps)
{
    prom_family(b, "jettprofd_uptime_seconds", "gauge", "Seconds since the daemon started.");
    jp_buf_printf(b, "jettprofd_uptime_seconds %llu.%03llu\n",
                  (unsigned long long)(up_ms / 1000u), (unsigned long long)(up_ms % 1000u));
    prom_family(b, "jettprofd_workers", "gauge", "Worker threads draining runs.");
    jp_buf_printf(b, "jettprofd_workers %u\n", (unsigned)workers);
    prom_family(b, "jettprofd_resident_memory_bytes", "gauge", "Resident set of the daemon.");
    jp_buf_printf(b, "jettprofd_resident_memory_bytes %llu\n", (unsigned long long)rss);
    static const char *const counters[4][2] = {
        {"jettprofd_runs_started_total", "Runs whose ring the daemon mapped."},
        {"jettprofd_runs_finished_total", "Runs that ended, however they ended."},
        {"jettprofd_runs_refused_total", "Connections refused (permission, limits)."},
        {"jettprofd_records_total", "Records fed to the engines of finished runs."},
    };
    for (int i = 0; i < 4; i++) {
        prom_family(b, counters[i][0], "counter", counters[i][1]);
        jp_buf_printf(b, "%s %llu\n", counters[i][0], (unsigned long long)tot[i]);
    }
    push_prometheus(b, ps);
    prom_family(b, "jettprofd_live_runs", "gauge", "Runs in flight, of every user.");
    jp_buf_printf(b, "jettprofd_live_runs %u\n", (unsigned)(nv + hidden));
    prom_family(b, "jettprofd_live_runs_hidden", "gauge",
                "Runs in flight of other users, not listed for this caller.");
    jp_buf_printf(b, "jettprofd_live_runs_hidden %u\n", (unsigned)hidden);
    /* each per-run gauge: its name, help, the decimals of its value (a fixed-point figure:
     * milliseconds, per mille, nanoseconds shown in seconds or as a ratio), and whether the
     * runs past JPD_PROM_MAX_RUNS add up in it (run_id="other") */
    static const struct {
        const char *name, *help;
        unsigned decimals;
        int sums;
    } per_run[] = {
        {"jettprofd_run_age_seconds", "Seconds since the run started.", 3, 0},
        {"jettprofd_run_records", "Records fed to the run's engine so far.", 0, 1},
        {"jettprofd_run_records_per_second", "Records per second over the run's age.", 0, 1},
        {"jettprofd_run_ring_fill_ratio", "Fill of the run's ring at its last drain.", 3, 0},
        {"jettprofd_run_producer_waits",
         "Times the daemon woke the run's producer waiting for room.", 0, 1},
        {"jettprofd_run_producer_wait_seconds", "Time the run's program waited for ring room.",
         9, 1},
        {"jettprofd_run_lost_records", "Records the run's producer could not push.", 0, 1},
        {"jettprofd_run_capture_waits",
         "Times the drain waited for the capture compressor (all its blocks in flight).", 0, 1},
        {"jettprofd_run_capture_wait_seconds", "Time the drain waited for the compressor.", 9, 1},
        {"jettprofd_run_live_bytes", "Memory runs: bytes live now.", 0, 1},
        {"jettprofd_run_allocations", "Memory runs: allocations made so far.", 0, 1},
        {"jettprofd_run_allocations_per_second", "Memory runs: allocations a second over the "
         "run's age.", 0, 1},
        {"jettprofd_run_samples", "CPU runs: samples recorded so far.", 0, 1},
        {"jettprofd_run_samples_per_second", "CPU runs: samples a second over the run's age.", 0,
         1},
    };
    enum { NFIG = sizeof per_run / sizeof per_run[0] };
    uint32_t listed = nv < JPD_PROM_MAX_RUNS ? nv : JPD_PROM_MAX_RUNS;
    for (size_t f = 0; nv && f < NFIG; f++) {
        prom_family(b, per_run[f].name, "gauge", per_run[f].help);
        uint64_t other = 0;
        for (uint32_t i = 0; i < nv; i++) {
            const struct snap *r = &v[i];
            const uint64_t per_s = r->age_ms ? 1000u : 0u;
            const uint64_t fig[NFIG] = {
                r->age_ms, r->records, rate(r), fill_pm(r), r->waits, r->wait_ns, r->lost,
                r->cap_waits, r->cap_wait_ns, r->live_bytes, r->allocations,
                r->age_ms ? r->allocations * per_s / r->age_ms : 0, r->samples,
                r->age_ms ? r->samples * per_s / r->age_ms : 0};
            if (i >= listed) {
                other += fig[f];
                continue;
            }
            jp_buf_printf(b, "%s{run_id=\"%llu\",uid=\"%lu\",mode=\"%s\",program=\"",
                          per_run[f].name, (unsigned long long)r->run_id, (unsigned long)r->uid,
                          jp_mode_name(r->mode));
            prom_label_value(b, r->program);
            JP_BUF_LIT(b, "\"} ");
            prom_fixed(b, fig[f], per_run[f].decimals);
        }
        if (nv > listed && per_run[f].sums) {
            jp_buf_printf(b, "%s{run_id=\"other\",uid=\"\",mode=\"\",program=\"\"} ",
                          per_run[f].name);
            prom_fixed(b, other, per_run[f].decimals);
        }
    }
}

void jpd_status_text(struct jpd_daemon *d, uid_t viewer, uint32_t format, struct jp_buf *b)
{
    int all = viewer == 0 || viewer == geteuid();
    uint64_t now = uv_hrtime();
    uint32_t cap = 0, nv = 0, hidden = 0;
    struct snap *v = NULL;
    uint64_t tot[4];
    pthread_mutex_lock(&d->live_mu);
    for (struct jpd_live *l = d->live; l; l = l->next)
        cap++;
    v = cap ? calloc(cap, sizeof *v) : NULL;
    for (struct jpd_live *l = d->live; l && (v || !cap); l = l->next) {
        if (!all && l->uid != viewer) {
            hidden++;
            continue;
        }
        struct snap *r = &v[nv++];
        *r = (struct snap){l->run_id, l->uid, l->pid, l->mode,
                           (now - l->start_ns) / 1000000u, l->records, l->fill, l->slots,
                           l->waits, l->lost, l->wait_ns, "", l->cap_waits, l->cap_wait_ns,
                           l->live_bytes, l->allocations, l->samples};
        memcpy(r->program, l->program, sizeof r->program);
    }
    tot[0] = d->runs_started;
    tot[1] = d->runs_finished;
    tot[2] = d->runs_refused;
    tot[3] = d->records_total;
    pthread_mutex_unlock(&d->live_mu);
    if (cap && !v) {
        b->failed = 1; /* out of memory: the caller answers so */
        return;
    }
    uint64_t up_ms = (now - d->start_ns) / 1000000u;
    struct jpd_push_stats pst;
    const struct jpd_push_stats *ps = jpd_push_stats(d->push, &pst) ? &pst : NULL;
    if (format == JP_STATUS_FMT_JSON)
        render_json(b, up_ms, d->nworkers, rss_bytes(), tot, v, nv, hidden, ps);
    else if (format == JP_STATUS_FMT_PROMETHEUS)
        render_prometheus(b, up_ms, d->nworkers, rss_bytes(), tot, v, nv, hidden, ps);
    else
        render_human(b, up_ms, d->nworkers, rss_bytes(), tot, v, nv, hidden, ps);
    free(v);
}

void jpd_runs_text(struct jpd_daemon *d, uid_t viewer, uint32_t format, uint32_t limit,
                   struct jp_buf *b)
{
    int all = viewer == 0 || viewer == geteuid();
    uint64_t have = d->nrecent < JPD_KEEP_RUNS ? d->nrecent : JPD_KEEP_RUNS;
    if (format == JP_STATUS_FMT_JSON)
        JP_BUF_LIT(b, "[");
    else
        JP_BUF_LIT(b, "RUN_ID START DURATION_MS PROGRAM MODE STATUS REASON\n");
    uint32_t n = 0;
    for (uint64_t i = 0; i < have && n < limit; i++) {
        const struct jpd_run_row *r = &d->recent[(d->nrecent - 1 - i) % JPD_KEEP_RUNS];
        if (!all && r->uid != viewer)
            continue;
        char when[32];
        int known = jpd_rfc3339(r->start_unix_s, when, sizeof when) == 0;
        const char *mode = jp_mode_name(r->sum.mode);
        if (format == JP_STATUS_FMT_JSON) {
            jp_buf_printf(b, "%s{\"run_id\":%llu,\"uid\":%lu,\"start\":", n ? "," : "",
                          (unsigned long long)r->run_id, (unsigned long)r->uid);
            jp_json_str_or_null(b, known ? when : NULL);
            jp_buf_printf(b, ",\"duration_ms\":%llu,\"program\":",
                          (unsigned long long)r->duration_ms);
            jp_json_str_or_null(b, r->program);
            JP_BUF_LIT(b, ",\"mode\":");
            jp_json_str(b, mode);
            JP_BUF_LIT(b, ",\"status\":");
            jp_json_str(b, jpd_status_word(r->status));
            JP_BUF_LIT(b, ",\"reason\":");
            jp_json_str(b, r->reason);
            JP_BUF_LIT(b, "}");
        } else {
            /* the program is a client's bytes: written by the one rule for human text */
            jp_buf_printf(b, "%llu %s %llu ", (unsigned long long)r->run_id,
                          known ? when : "-", (unsigned long long)r->duration_ms);
            if (r->program[0])
                jp_text_quoted(b, r->program, strlen(r->program));
            else
                JP_BUF_LIT(b, "-");
            jp_buf_printf(b, " %s %s ", mode, jpd_status_word(r->status));
            jp_text_safe_str(b, r->reason[0] ? r->reason : "-");
            JP_BUF_LIT(b, "\n");
        }
        n++;
    }
    if (format == JP_STATUS_FMT_JSON)
        JP_BUF_LIT(b, "]\n");
}
