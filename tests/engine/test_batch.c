/* jp_engine_feed_batch: the same stream fed as batches (split anywhere, even inside a
 * record or a header) gives the same bytes as feeding it record by record, on streams that
 * exercise what the batch prefetches (frees far outside the young-id ring, evictions, resizes,
 * definitions between events); and its stop/error contract (*consumed). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

static uint64_t rs = 0x243F6A8885A308D3u;
static uint64_t rnd(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return rs;
}

static char *render_toon(struct jp_engine *e)
{
    struct jp_report_opts o = {sizeof o, -1, -1, JP_END_STOP, JP_OUT_TOON | JP_OUT_HUMAN, 0};
    struct jp_rendered r;
    cr_assert_eq(jp_profile_render(e, &o, &r), 0);
    size_t n = r.toon_len + r.human_len + 1;
    char *both = malloc(n);
    snprintf(both, n, "%s%s", r.toon, r.human);
    jp_rendered_free(&r);
    return both;
}

/* A memory stream: 20000 allocations over 40 sites, lifetimes up to 8192 allocations (past
 * the 4096-id ring), resizes, frees, a few violations (double free, unknown id). */
static void memory_stream(struct jp_engine *e)
{
    t_start(e, JP_MODE_MEMORY, 0, 100, 20, 32 * MiB, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/m.jett");
    char fn[16];
    for (uint32_t i = 1; i <= 40; i++) {
        snprintf(fn, sizeof fn, "f%u", i);
        t_frame(e, i, 1, "m", fn, i * 10, i * 10 + 5, i, JP_FRAME_FUNCTION);
        t_node(e, i, 0, i);
    }
    enum { W = 8192 };
    static uint64_t ids[W], sizes[W];
    uint32_t n = 0;
    for (uint64_t id = 1; id <= 20000; id++) {
        uint64_t x = rnd();
        uint64_t size = (x >> 8) % 300u;
        t_alloc(e, 1 + (uint32_t)(x % 40u), id, size);
        if (n < W) {
            ids[n] = id;
            sizes[n++] = size;
            continue;
        }
        uint32_t i = (uint32_t)((x >> 20) % W);
        if ((x >> 40) % 7u == 0) {
            t_resize(e, 1 + (uint32_t)((x >> 44) % 40u), ids[i], sizes[i], sizes[i] * 3u);
            sizes[i] *= 3u;
        }
        if ((x >> 48) % 3u) {
            t_free(e, 0, ids[i], sizes[i]);
            if ((x >> 52) % 50u == 0) {
                struct jp_rec_free f = {.h = {JP_REC_FREE, sizeof f}, .allocation_id = ids[i],
                                        .old_size = sizes[i]};
                cr_assert_eq(feed_raw(e, &f, sizeof f, NULL), 0); /* double free: counted */
            }
            ids[i] = id;
            sizes[i] = size;
        }
    }
    t_stop(e, JP_TERM_RETURNED, 1000, 0, 0);
}

/* Feeds buf into e in batches whose ends fall at random byte offsets. */
static void feed_split(struct jp_engine *e, const uint8_t *buf, uint32_t len)
{
    uint32_t off = 0;
    while (off < len) {
        uint32_t want = 1 + (uint32_t)(rnd() % 3000u);
        uint32_t end = off + want < len ? off + want : len;
        uint32_t used = UINT32_MAX;
        const char *why = NULL;
        int rc = jp_engine_feed_batch(e, buf + off, end - off, &used, &why);
        cr_assert_eq(rc, 0, "batch at %u failed: %d %s", off, rc, why ? why : "");
        cr_assert(used <= end - off);
        cr_assert(used % JP_SLOT_SIZE == 0 || off + used == len, "stops on a slot boundary");
        off += used;
    }
}

Test(batch, split_anywhere_renders_the_same_bytes_as_record_by_record)
{
    struct t_tap tap = {0};
    struct jp_engine *a, *b, *c;
    cr_assert_eq(jp_engine_new(&a), 0);
    cr_assert_eq(jp_engine_new(&b), 0);
    cr_assert_eq(jp_engine_new(&c), 0);
    t_tap_set(&tap);
    memory_stream(a);
    t_tap_set(NULL);
    char *want = render_toon(a);
    /* the stream is the kind the batch prefetches for, and not trivial */
    cr_assert(strstr(want, "protocol_violations: 0") == NULL, "%s", want);
    cr_assert(strstr(want, "resize_count: 0\n  ") == NULL);

    feed_split(b, tap.buf, tap.len);
    char *got = render_toon(b);
    cr_assert_str_eq(got, want);
    free(got);

    /* one batch holding the whole stream */
    uint32_t used = 0;
    cr_assert_eq(jp_engine_feed_batch(c, tap.buf, tap.len, &used, NULL), 0);
    cr_assert_eq(used, tap.len);
    got = render_toon(c);
    cr_assert_str_eq(got, want);
    free(got);
    free(want);
    jp_engine_free(a);
    jp_engine_free(b);
    jp_engine_free(c);
    free(tap.buf);
}

/* A CPU stream with multi-slot definitions and PAD records between the samples. */
Test(batch, cpu_stream_with_pads_matches)
{
    struct t_tap tap = {0};
    struct jp_engine *a, *b;
    cr_assert_eq(jp_engine_new(&a), 0);
    cr_assert_eq(jp_engine_new(&b), 0);
    t_tap_set(&tap);
    t_start(a, JP_MODE_CPU, 100, 0, 10, 32 * MiB, 64 * MiB);
    t_source(a, 1, JP_ORIGIN_PROJECT, "src/a/very/long/path/to/make/a/record/span/slots.jett");
    t_frame(a, 1, 1, "app", "main", 0, 10, 1, JP_FRAME_FUNCTION);
    t_frame(a, 2, 1, "app", "work_with_a_long_name_spanning_two_slots", 10, 20, 2,
            JP_FRAME_FUNCTION);
    t_node(a, 1, 0, 1);
    t_node(a, 2, 1, 2);
    struct jp_rec_hdr pad = {JP_REC_PAD, 3 * JP_SLOT_SIZE};
    uint8_t padrec[3 * JP_SLOT_SIZE] = {0};
    memcpy(padrec, &pad, sizeof pad);
    for (uint32_t i = 0; i < 500; i++) {
        t_sample(a, JP_STATE_JETT, 1 + i % 2u, 3 + i % 5u, 1);
        if (i % 97u == 0)
            cr_assert_eq(feed_raw(a, padrec, sizeof padrec, NULL), 0);
    }
    t_stop(a, JP_TERM_RETURNED, 5000000, 1000, 0);
    t_tap_set(NULL);
    char *want = render_toon(a);
    feed_split(b, tap.buf, tap.len);
    char *got = render_toon(b);
    cr_assert_str_eq(got, want);
    free(got);
    free(want);
    jp_engine_free(a);
    jp_engine_free(b);
    free(tap.buf);
}

Test(batch, stops_at_a_partial_record_and_names_a_bad_one)
{
    struct t_tap tap = {0};
    struct jp_engine *a, *b;
    cr_assert_eq(jp_engine_new(&a), 0);
    cr_assert_eq(jp_engine_new(&b), 0);
    t_tap_set(&tap);
    t_start(a, JP_MODE_MEMORY, 0, 0, 10, 32 * MiB, 64 * MiB);
    t_alloc(a, 0, 1, 10);
    t_alloc(a, 0, 2, 20);
    t_tap_set(NULL);
    cr_assert_eq(tap.len, 4u * JP_SLOT_SIZE); /* RUN_START takes two slots */

    /* everything but the last 5 bytes: the last allocation is left for the next call */
    uint32_t used = 0;
    cr_assert_eq(jp_engine_feed_batch(b, tap.buf, tap.len - 5, &used, NULL), 0);
    cr_assert_eq(used, 3u * JP_SLOT_SIZE);
    /* two bytes of a header are not a record either */
    cr_assert_eq(jp_engine_feed_batch(b, tap.buf + used, 2, &used, NULL), 0);
    cr_assert_eq(used, 0u);
    cr_assert_eq(jp_engine_feed_batch(b, tap.buf + 3u * JP_SLOT_SIZE, JP_SLOT_SIZE, &used,
                                      NULL),
                 0);
    cr_assert_eq(used, JP_SLOT_SIZE);
    struct jp_engine_summary sa, sb;
    cr_assert_eq(jp_engine_summary(a, &sa), 0);
    cr_assert_eq(jp_engine_summary(b, &sb), 0);
    cr_assert_eq(sb.allocation_count, 2);
    cr_assert_eq(sb.allocated_bytes, sa.allocated_bytes);

    /* a header claiming size 2, after one good record: that record is fed, the bad one named */
    uint8_t bad[2 * JP_SLOT_SIZE] = {0};
    struct jp_rec_alloc al = {.h = {JP_REC_ALLOC, sizeof al}, .allocation_id = 3, .size = 5};
    memcpy(bad, &al, sizeof al);
    struct jp_rec_hdr h = {JP_REC_ALLOC, 2};
    memcpy(bad + JP_SLOT_SIZE, &h, sizeof h);
    const char *why = NULL;
    cr_assert_eq(jp_engine_feed_batch(b, bad, sizeof bad, &used, &why), -EPROTO);
    cr_assert_eq(used, JP_SLOT_SIZE);
    cr_assert_str_eq(why, "record smaller than its fixed part", "as feeding it alone says");
    cr_assert_eq(jp_engine_summary(b, &sb), 0);
    cr_assert_eq(sb.allocation_count, 3);

    /* a record the engine refuses (second RUN_START) stops the batch at that record */
    cr_assert_eq(jp_engine_feed_batch(b, tap.buf, tap.len, &used, &why), -EPROTO);
    cr_assert_eq(used, 0u);
    cr_assert_str_eq(why, "second RUN_START");
    jp_engine_free(a);
    jp_engine_free(b);
    free(tap.buf);
}

/* A header the batch cannot even step over is refused with the reason jp_engine_feed gives for
 * the same bytes, so a session's error text does not depend on which path it drained with. */
Test(batch, a_bad_header_gets_the_same_reason_as_feeding_it_alone)
{
    static const struct {
        uint16_t type, size;
        const char *reason;
    } cases[] = {
        {JP_REC_PAD, JP_REC_MAX_SIZE + 4, "record larger than JP_REC_MAX_SIZE"},
        {99, JP_REC_MAX_SIZE + 4, "unknown record type"},
        {JP_REC_PAD, 2, "record smaller than its fixed part"},
        {JP_REC_CPU_SAMPLE, 2, "record smaller than its fixed part"},
    };
    static uint8_t buf[JP_REC_MAX_SIZE + 64];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct jp_engine *one, *batch;
        cr_assert_eq(jp_engine_new(&one), 0);
        cr_assert_eq(jp_engine_new(&batch), 0);
        memset(buf, 0, sizeof buf);
        struct jp_rec_hdr h = {cases[i].type, cases[i].size};
        memcpy(buf, &h, sizeof h);
        const char *why_one = NULL, *why_batch = NULL;
        uint32_t used = 1;
        uint32_t len = cases[i].size > sizeof h ? cases[i].size : JP_SLOT_SIZE;
        cr_assert_eq(jp_engine_feed(one, buf, len, &why_one), -EPROTO);
        cr_assert_eq(jp_engine_feed_batch(batch, buf, sizeof buf, &used, &why_batch), -EPROTO);
        cr_assert_eq(used, 0u);
        cr_assert_str_eq(why_one, cases[i].reason, "case %zu", i);
        cr_assert_str_eq(why_batch, why_one, "case %zu", i);
        jp_engine_free(one);
        jp_engine_free(batch);
    }
}
