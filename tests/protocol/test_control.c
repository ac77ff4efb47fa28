/* Control messages: round trips of every type, incremental decoding in any split, strict
 * rejection of malformed frames with stable reasons, and fd passing over a real socketpair. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <msgpack.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "protocol/control.h"
#include "protocol/ring.h"
#include "protocol/records.h"

static const struct jp_ctl_excerpt_key keys[3] = {{1, 2, 3}, {UINT32_MAX, 0, 7}, {4, 5, 6}};
static struct jp_ctl_excerpt items[2];
static char long_text[JP_EXCERPT_MAX];

#define SAMPLE_MAX 28u
/* One message of every type, with edge values. */
static unsigned sample_messages(struct jp_ctl_msg *out)
{
    memset(long_text, 'x', sizeof long_text);
    items[0] = (struct jp_ctl_excerpt){1, 10, 2, JP_EXCERPT_REDACTED, long_text, JP_EXCERPT_MAX};
    items[1] = (struct jp_ctl_excerpt){2, 1, 1, JP_EXCERPT_UNAVAILABLE, "", 0};
    unsigned n = 0;
    memset(out, 0, sizeof(struct jp_ctl_msg) * SAMPLE_MAX);
    out[n].type = JP_CTL_HELLO;
    out[n].u.hello.version = JP_CTL_VERSION;
    out[n].u.hello.pid = 4242;
    out[n].u.hello.mode = JP_MODE_CPU;
    out[n].u.hello.rate_hz = 1000;
    out[n].u.hello.threshold_bp = 500;
    out[n].u.hello.limit = 100;
    out[n].u.hello.outputs = JP_OUT_HUMAN | JP_OUT_TOON;
    out[n++].u.hello.capabilities = JP_CAPS_CPU_REQUIRED | JP_CAP_SOURCE_SPANS;
    out[n].type = JP_CTL_WELCOME;
    out[n].u.welcome.run_id = UINT64_MAX;
    out[n++].u.welcome.ring_bytes = 1u << 28;
    out[n].type = JP_CTL_RING;
    out[n].u.ring.slot_count = 1u << 16;
    out[n++].u.ring.has_capture = 1;
    out[n].type = JP_CTL_FINALIZE;
    out[n].u.finalize.exports = 1u << JP_EXPORT_SVG;
    out[n++].u.finalize.termination = JP_TERM_RUNTIME_ERROR;
    out[n].type = JP_CTL_EXPORT; /* any bytes, a NUL among them */
    out[n].u.export_piece.format = JP_EXPORT_PPROF;
    out[n].u.export_piece.total = UINT64_MAX;
    out[n].u.export_piece.offset = 3;
    out[n].u.export_piece.data = "\x1f\x8b\0\xff";
    out[n++].u.export_piece.data_len = 4;
    out[n].type = JP_CTL_EXCERPT_REQUEST;
    out[n].u.excerpt_request.keys = keys;
    out[n++].u.excerpt_request.count = 3;
    out[n].type = JP_CTL_EXCERPT_REQUEST; /* empty list */
    out[n++].u.excerpt_request.count = 0;
    out[n].type = JP_CTL_EXCERPTS;
    out[n].u.excerpts.items = items;
    out[n++].u.excerpts.count = 2;
    out[n].type = JP_CTL_RESULT;
    out[n].u.result.status = 2;
    out[n].u.result.reason = "cpu_metadata_limit";
    out[n].u.result.reason_len = strlen("cpu_metadata_limit");
    out[n].u.result.human = "CPU profile\n\xc3\xa9";
    out[n].u.result.human_len = strlen("CPU profile\n\xc3\xa9");
    out[n].u.result.toon = "";
    out[n++].u.result.toon_len = 0;
    out[n].type = JP_CTL_SHOW;
    out[n].u.show.run_id = 7;
    out[n++].u.show.outputs = JP_OUT_TOON;
    out[n].type = JP_CTL_STATUS;
    out[n++].u.status.format = 2;
    out[n].type = JP_CTL_STATUS_REPLY;
    out[n].u.status_reply.text = "live runs: 0\n";
    out[n++].u.status_reply.text_len = strlen("live runs: 0\n");
    out[n].type = JP_CTL_RUNS;
    out[n].u.runs.format = 1;
    out[n++].u.runs.limit = 20;
    out[n].type = JP_CTL_WORKER_RING;
    out[n++].u.worker_ring.slot_count = JP_RING_MAX_SLOTS;
    out[n].type = JP_CTL_TOP;
    out[n].u.top.run_id = 0;
    out[n++].u.top.rows = JP_CTL_MAX_TOP_ROWS;
    static const uint64_t figures[4] = {1u << 20, 1u << 21, UINT64_MAX, 3};
    static const uint64_t points[3] = {0, 7, UINT64_MAX};
    static const struct jp_ctl_top_row rows[2] = {
        {.name = "m.f", .name_len = 3, .path = "src/m.jett", .path_len = 10, .line = 4,
         .v = {1, 2, UINT64_MAX}},
        {.name = "\xc3\xa9.g", .name_len = 4, .path = "", .path_len = 0, .line = 0,
         .v = {0, 0, 0}},
    };
    out[n].type = JP_CTL_TOP_FRAME;
    out[n].u.top_frame.run_id = 9;
    out[n].u.top_frame.mode = JP_MODE_MEMORY;
    out[n].u.top_frame.program = "app.jett";
    out[n].u.top_frame.program_len = 8;
    out[n].u.top_frame.elapsed_ns = 1500000000u;
    out[n].u.top_frame.records = 12345;
    out[n].u.top_frame.fill = 10;
    out[n].u.top_frame.slots = 65536;
    out[n].u.top_frame.lost = 1;
    out[n].u.top_frame.violations = 2;
    out[n].u.top_frame.figures = figures;
    out[n].u.top_frame.nfigures = 4;
    out[n].u.top_frame.stretch_ns = 10000000u;
    out[n].u.top_frame.timeline = points;
    out[n].u.top_frame.npoints = 3;
    out[n].u.top_frame.rows = rows;
    out[n++].u.top_frame.nrows = 2;
    out[n].type = JP_CTL_TOP_FRAME; /* no points, no rows yet */
    out[n].u.top_frame.mode = JP_MODE_CPU;
    out[n++].u.top_frame.program_len = 0;
    out[n].type = JP_CTL_ERROR;
    out[n].u.error.code = JP_CTLE_INTERNAL;
    out[n].u.error.message = "boom";
    out[n++].u.error.message_len = 4;
    out[n].type = JP_CTL_ERROR;
    out[n].u.error.code = JP_CTLE_BAD_MESSAGE;
    out[n].u.error.message = NULL;
    out[n++].u.error.message_len = 0;
    cr_assert_leq(n, SAMPLE_MAX, "callers hold SAMPLE_MAX messages");
    return n;
}

static void assert_str(const char *a, size_t alen, const char *b, size_t blen, const char *what)
{
    cr_assert_eq(alen, blen, "%s length", what);
    cr_assert(alen == 0 || memcmp(a, b, alen) == 0, "%s bytes", what);
    cr_assert_not_null(a, "%s pointer is never NULL after decoding", what);
}

static void assert_same(const struct jp_ctl_msg *a, const struct jp_ctl_msg *b)
{
    cr_assert_eq(a->type, b->type, "type");
    switch (a->type) {
    case JP_CTL_HELLO:
        cr_assert(memcmp(&a->u.hello, &b->u.hello, sizeof a->u.hello) == 0, "hello fields");
        break;
    case JP_CTL_WELCOME:
        cr_assert_eq(a->u.welcome.run_id, b->u.welcome.run_id, "run id");
        cr_assert_eq(a->u.welcome.ring_bytes, b->u.welcome.ring_bytes, "ring bytes");
        break;
    case JP_CTL_RING:
        cr_assert_eq(a->u.ring.slot_count, b->u.ring.slot_count, "slots");
        cr_assert_eq(a->u.ring.has_capture, b->u.ring.has_capture, "capture");
        break;
    case JP_CTL_WORKER_RING:
        cr_assert_eq(a->u.worker_ring.slot_count, b->u.worker_ring.slot_count, "slots");
        break;
    case JP_CTL_FINALIZE:
        cr_assert_eq(a->u.finalize.termination, b->u.finalize.termination, "termination");
        cr_assert_eq(a->u.finalize.exports, b->u.finalize.exports, "exports");
        break;
    case JP_CTL_EXPORT:
        cr_assert_eq(a->u.export_piece.format, b->u.export_piece.format, "format");
        cr_assert_eq(a->u.export_piece.error, b->u.export_piece.error, "error");
        cr_assert_eq(a->u.export_piece.total, b->u.export_piece.total, "total");
        cr_assert_eq(a->u.export_piece.offset, b->u.export_piece.offset, "offset");
        assert_str(a->u.export_piece.data, a->u.export_piece.data_len, b->u.export_piece.data,
                   b->u.export_piece.data_len, "data");
        break;
    case JP_CTL_EXCERPT_REQUEST:
        cr_assert_eq(a->u.excerpt_request.count, b->u.excerpt_request.count, "key count");
        for (uint32_t i = 0; i < a->u.excerpt_request.count; i++)
            cr_assert(memcmp(&a->u.excerpt_request.keys[i], &b->u.excerpt_request.keys[i],
                             sizeof keys[0]) == 0, "key %u", i);
        break;
    case JP_CTL_EXCERPTS:
        cr_assert_eq(a->u.excerpts.count, b->u.excerpts.count, "item count");
        for (uint32_t i = 0; i < a->u.excerpts.count; i++) {
            const struct jp_ctl_excerpt *x = &a->u.excerpts.items[i], *y = &b->u.excerpts.items[i];
            cr_assert(x->source_id == y->source_id && x->line == y->line && x->col == y->col &&
                      x->flags == y->flags, "item %u", i);
            assert_str(x->text, x->text_len, y->text, y->text_len, "excerpt text");
        }
        break;
    case JP_CTL_RESULT:
        cr_assert_eq(a->u.result.status, b->u.result.status, "status");
        assert_str(a->u.result.reason, a->u.result.reason_len, b->u.result.reason,
                   b->u.result.reason_len, "reason");
        assert_str(a->u.result.human, a->u.result.human_len, b->u.result.human,
                   b->u.result.human_len, "human");
        assert_str(a->u.result.toon, a->u.result.toon_len, b->u.result.toon,
                   b->u.result.toon_len, "toon");
        break;
    case JP_CTL_SHOW:
        cr_assert_eq(a->u.show.run_id, b->u.show.run_id, "run id");
        cr_assert_eq(a->u.show.outputs, b->u.show.outputs, "outputs");
        break;
    case JP_CTL_STATUS:
        cr_assert_eq(a->u.status.format, b->u.status.format, "format");
        break;
    case JP_CTL_RUNS:
        cr_assert_eq(a->u.runs.format, b->u.runs.format, "format");
        cr_assert_eq(a->u.runs.limit, b->u.runs.limit, "limit");
        break;
    case JP_CTL_STATUS_REPLY:
        assert_str(a->u.status_reply.text, a->u.status_reply.text_len, b->u.status_reply.text,
                   b->u.status_reply.text_len, "text");
        break;
    case JP_CTL_TOP:
        cr_assert(a->u.top.run_id == b->u.top.run_id && a->u.top.rows == b->u.top.rows, "top");
        break;
    case JP_CTL_TOP_FRAME: {
        const __typeof__(a->u.top_frame) *x = &a->u.top_frame, *y = &b->u.top_frame;
        cr_assert(x->run_id == y->run_id && x->mode == y->mode && x->elapsed_ns == y->elapsed_ns &&
                  x->records == y->records && x->fill == y->fill && x->slots == y->slots &&
                  x->lost == y->lost && x->violations == y->violations &&
                  x->stretch_ns == y->stretch_ns, "top_frame figures");
        assert_str(x->program, x->program_len, y->program, y->program_len, "program");
        cr_assert_eq(x->nfigures, y->nfigures, "figures");
        cr_assert_eq(x->npoints, y->npoints, "points");
        cr_assert_eq(x->nrows, y->nrows, "rows");
        for (uint32_t i = 0; i < x->nfigures; i++)
            cr_assert_eq(x->figures[i], y->figures[i], "figure %u", i);
        for (uint32_t i = 0; i < x->npoints; i++)
            cr_assert_eq(x->timeline[i], y->timeline[i], "point %u", i);
        for (uint32_t i = 0; i < x->nrows; i++) {
            assert_str(x->rows[i].name, x->rows[i].name_len, y->rows[i].name, y->rows[i].name_len,
                       "row name");
            assert_str(x->rows[i].path, x->rows[i].path_len, y->rows[i].path, y->rows[i].path_len,
                       "row path");
            cr_assert(x->rows[i].line == y->rows[i].line &&
                      !memcmp(x->rows[i].v, y->rows[i].v, sizeof x->rows[i].v), "row %u", i);
        }
        break;
    }
    case JP_CTL_ERROR:
        cr_assert_eq(a->u.error.code, b->u.error.code, "code");
        assert_str(a->u.error.message, a->u.error.message_len, b->u.error.message,
                   b->u.error.message_len, "message");
        break;
    default:
        cr_assert_fail("unexpected type %u", a->type);
    }
}

Test(control, names_come_from_the_lists)
{
    cr_assert_str_eq(jp_ctl_type_name(JP_CTL_EXCERPT_REQUEST), "excerpt_request", "type");
    cr_assert_null(jp_ctl_type_name(JP_CTL_NONE), "none");
    cr_assert_null(jp_ctl_type_name(JP_CTL_TYPE_LIMIT), "limit");
    cr_assert_str_eq(jp_ctl_error_name(JP_CTLE_NO_SUCH_RUN), "no_such_run", "error");
    cr_assert_null(jp_ctl_error_name(JP_CTLE_LIMIT), "limit");
}

Test(control, round_trips_every_message_type)
{
    struct jp_ctl_msg msgs[SAMPLE_MAX];
    unsigned n = sample_messages(msgs);
    int seen[JP_CTL_TYPE_LIMIT] = {0};
    for (unsigned i = 0; i < n; i++) {
        uint8_t *buf;
        size_t len;
        cr_assert_eq(jp_ctl_encode(&msgs[i], &buf, &len), 0, "encode %s",
                     jp_ctl_type_name(msgs[i].type));
        uint32_t body = (uint32_t)buf[0] | (uint32_t)buf[1] << 8 | (uint32_t)buf[2] << 16 |
                        (uint32_t)buf[3] << 24;
        cr_assert_eq(body + 4u, len, "little-endian length prefix");
        struct jp_ctl_decoder *d;
        cr_assert_eq(jp_ctl_decoder_new(JP_CTL_MAX_FRAME, &d), 0, "decoder");
        cr_assert_eq(jp_ctl_decoder_feed(d, buf, len), 0, "feed");
        struct jp_ctl_msg got;
        const char *why = "unset";
        cr_assert_eq(jp_ctl_decoder_next(d, &got, &why), 1, "decode %s: %s",
                     jp_ctl_type_name(msgs[i].type), why ? why : "");
        cr_assert_null(why, "no reason on success");
        assert_same(&got, &msgs[i]);
        cr_assert_eq(jp_ctl_decoder_next(d, &got, &why), 0, "nothing more");
        cr_assert_eq(jp_ctl_decoder_pending(d), 0, "all consumed");
        seen[msgs[i].type] = 1;
        jp_ctl_decoder_free(d);
        free(buf);
    }
    for (unsigned t = 1; t < JP_CTL_TYPE_LIMIT; t++)
        cr_assert(seen[t], "type %s covered", jp_ctl_type_name(t));
}

/* All sample messages back to back. */
static uint8_t *sample_stream(size_t *len, unsigned *count, struct jp_ctl_msg *msgs)
{
    *count = sample_messages(msgs);
    uint8_t *all = NULL;
    *len = 0;
    for (unsigned i = 0; i < *count; i++) {
        uint8_t *buf;
        size_t l;
        cr_assert_eq(jp_ctl_encode(&msgs[i], &buf, &l), 0, "encode");
        all = realloc(all, *len + l);
        memcpy(all + *len, buf, l);
        *len += l;
        free(buf);
    }
    return all;
}

Test(control, decodes_a_stream_fed_one_byte_at_a_time)
{
    struct jp_ctl_msg msgs[SAMPLE_MAX], got;
    unsigned count;
    size_t len;
    uint8_t *all = sample_stream(&len, &count, msgs);
    struct jp_ctl_decoder *d;
    cr_assert_eq(jp_ctl_decoder_new(JP_CTL_MAX_FRAME, &d), 0, "decoder");
    unsigned next = 0;
    for (size_t i = 0; i < len; i++) {
        cr_assert_eq(jp_ctl_decoder_feed(d, all + i, 1), 0, "feed byte %zu", i);
        const char *why;
        int r = jp_ctl_decoder_next(d, &got, &why);
        cr_assert_geq(r, 0, "byte %zu: %s", i, why ? why : "");
        if (r == 1) {
            assert_same(&got, &msgs[next]);
            next++;
        }
    }
    cr_assert_eq(next, count, "every message came out as soon as it was complete");
    cr_assert_eq(jp_ctl_decoder_pending(d), 0, "nothing left");
    jp_ctl_decoder_free(d);
    free(all);
}

Test(control, decodes_a_stream_split_at_every_byte)
{
    struct jp_ctl_msg msgs[SAMPLE_MAX], got;
    unsigned count;
    size_t len;
    uint8_t *all = sample_stream(&len, &count, msgs);
    for (size_t cut = 0; cut <= len; cut++) {
        struct jp_ctl_decoder *d;
        cr_assert_eq(jp_ctl_decoder_new(JP_CTL_MAX_FRAME, &d), 0, "decoder");
        unsigned next = 0;
        const char *why;
        int r;
        cr_assert_eq(jp_ctl_decoder_feed(d, all, cut), 0, "first part");
        while ((r = jp_ctl_decoder_next(d, &got, &why)) == 1)
            assert_same(&got, &msgs[next++]);
        cr_assert_eq(r, 0, "cut %zu: %s", cut, why ? why : "");
        cr_assert_eq(jp_ctl_decoder_feed(d, all + cut, len - cut), 0, "second part");
        while ((r = jp_ctl_decoder_next(d, &got, &why)) == 1)
            assert_same(&got, &msgs[next++]);
        cr_assert_eq(r, 0, "end");
        cr_assert_eq(next, count, "cut %zu: all messages", cut);
        jp_ctl_decoder_free(d);
    }
    free(all);
}

Test(control, strings_survive_feeding_more_bytes)
{
    struct jp_ctl_msg m = {.type = JP_CTL_ERROR}, got;
    m.u.error.code = JP_CTLE_BAD_RING;
    m.u.error.message = "ring header magic";
    m.u.error.message_len = strlen(m.u.error.message);
    uint8_t *buf;
    size_t len;
    cr_assert_eq(jp_ctl_encode(&m, &buf, &len), 0, "encode");
    struct jp_ctl_decoder *d;
    cr_assert_eq(jp_ctl_decoder_new(JP_CTL_MAX_FRAME, &d), 0, "decoder");
    cr_assert_eq(jp_ctl_decoder_feed(d, buf, len), 0, "feed");
    cr_assert_eq(jp_ctl_decoder_next(d, &got, NULL), 1, "decode");
    /* Feed a lot more so the receive buffer must grow and move. */
    for (int i = 0; i < 2000; i++)
        cr_assert_eq(jp_ctl_decoder_feed(d, buf, len), 0, "feed more");
    assert_same(&got, &m);
    jp_ctl_decoder_free(d);
    free(buf);
}

/* ---- malformed frames ---------------------------------------------------------------- */

struct raw {
    msgpack_sbuffer sb;
    msgpack_packer pk;
};
static void raw_init(struct raw *r)
{
    msgpack_sbuffer_init(&r->sb);
    msgpack_packer_init(&r->pk, &r->sb, msgpack_sbuffer_write);
}
static void raw_str(struct raw *r, const char *s)
{
    msgpack_pack_str(&r->pk, strlen(s));
    msgpack_pack_str_body(&r->pk, s, strlen(s));
}

/* Decodes one frame made of `body`; returns the result and the reason. */
static int decode_body(const void *body, size_t len, const char **why)
{
    struct jp_ctl_decoder *d;
    cr_assert_eq(jp_ctl_decoder_new(JP_CTL_MAX_FRAME, &d), 0, "decoder");
    uint8_t hdr[4] = {(uint8_t)len, (uint8_t)(len >> 8), (uint8_t)(len >> 16), (uint8_t)(len >> 24)};
    cr_assert_eq(jp_ctl_decoder_feed(d, hdr, 4), 0, "header");
    cr_assert_eq(jp_ctl_decoder_feed(d, body, len), 0, "body");
    struct jp_ctl_msg m;
    int r = jp_ctl_decoder_next(d, &m, why);
    if (r == -EPROTO) {
        const char *again;
        cr_assert_eq(jp_ctl_decoder_next(d, &m, &again), -EPROTO, "error is final");
        cr_assert_str_eq(again, *why, "same reason");
        cr_assert_eq(jp_ctl_decoder_feed(d, hdr, 4), -EPROTO, "no more input after an error");
    }
    jp_ctl_decoder_free(d);
    return r;
}

static void expect_reason(struct raw *r, const char *reason)
{
    const char *why = NULL;
    cr_assert_eq(decode_body(r->sb.data, r->sb.size, &why), -EPROTO, "refused: %s", reason);
    cr_assert_str_eq(why, reason, "reason");
    msgpack_sbuffer_destroy(&r->sb);
}

/* A ring message with optional changes: drop a field, add one, change a value's type. */
static void ring_msg(struct raw *r, const char *type, int drop_slots, int extra, int slots_as_str,
                     int dup_slots)
{
    raw_init(r);
    msgpack_pack_map(&r->pk, (size_t)(3 - drop_slots + extra + dup_slots));
    raw_str(r, "t");
    raw_str(r, type);
    if (!drop_slots) {
        raw_str(r, "slot_count");
        if (slots_as_str)
            raw_str(r, "1024");
        else
            msgpack_pack_uint32(&r->pk, 1024);
    }
    if (dup_slots) {
        raw_str(r, "slot_count");
        msgpack_pack_uint32(&r->pk, 1024);
    }
    raw_str(r, "has_capture");
    msgpack_pack_uint32(&r->pk, 0);
    if (extra) {
        raw_str(r, "colour");
        msgpack_pack_uint32(&r->pk, 1);
    }
}

Test(control_strict, accepts_the_hand_made_ring_message)
{
    struct raw r;
    ring_msg(&r, "ring", 0, 0, 0, 0);
    const char *why = NULL;
    cr_assert_eq(decode_body(r.sb.data, r.sb.size, &why), 1, "baseline is valid: %s",
                 why ? why : "");
    msgpack_sbuffer_destroy(&r.sb);
}

Test(control_strict, rejects_each_schema_violation_with_its_reason)
{
    struct raw r;
    ring_msg(&r, "rung", 0, 0, 0, 0);
    expect_reason(&r, "unknown message type");
    ring_msg(&r, "ring", 1, 0, 0, 0);
    expect_reason(&r, "missing field ring.slot_count");
    ring_msg(&r, "ring", 0, 1, 0, 0);
    expect_reason(&r, "unknown field in ring message");
    ring_msg(&r, "ring", 0, 0, 1, 0);
    expect_reason(&r, "wrong type for field ring.slot_count");
    ring_msg(&r, "ring", 0, 0, 0, 1);
    expect_reason(&r, "duplicate field ring.slot_count");

    raw_init(&r); /* not a map */
    msgpack_pack_array(&r.pk, 0);
    expect_reason(&r, "message is not a map");

    raw_init(&r);
    msgpack_pack_map(&r.pk, 1);
    msgpack_pack_uint32(&r.pk, 1);
    msgpack_pack_uint32(&r.pk, 1);
    expect_reason(&r, "field name is not a string");

    raw_init(&r);
    msgpack_pack_map(&r.pk, 0);
    expect_reason(&r, "missing field t");

    raw_init(&r);
    msgpack_pack_map(&r.pk, 1);
    raw_str(&r, "t");
    msgpack_pack_uint32(&r.pk, 3);
    expect_reason(&r, "wrong type for field t");

    raw_init(&r);
    msgpack_pack_map(&r.pk, 2);
    raw_str(&r, "t");
    raw_str(&r, "finalize");
    raw_str(&r, "termination");
    msgpack_pack_uint32(&r.pk, 9);
    expect_reason(&r, "field finalize.termination out of range");

    /* No worker ring outside the ring geometry, none without its size. */
    raw_init(&r);
    msgpack_pack_map(&r.pk, 2);
    raw_str(&r, "t");
    raw_str(&r, "worker_ring");
    raw_str(&r, "slot_count");
    msgpack_pack_uint32(&r.pk, JP_RING_MAX_SLOTS * 2u);
    expect_reason(&r, "field worker_ring.slot_count out of range");

    raw_init(&r);
    msgpack_pack_map(&r.pk, 1);
    raw_str(&r, "t");
    raw_str(&r, "worker_ring");
    expect_reason(&r, "missing field worker_ring.slot_count");

    raw_init(&r); /* negative numbers are a wrong type, not a huge value */
    msgpack_pack_map(&r.pk, 2);
    raw_str(&r, "t");
    raw_str(&r, "finalize");
    raw_str(&r, "termination");
    msgpack_pack_int32(&r.pk, -1);
    expect_reason(&r, "wrong type for field finalize.termination");

    raw_init(&r);
    msgpack_pack_map(&r.pk, 2);
    raw_str(&r, "t");
    raw_str(&r, "welcome");
    raw_str(&r, "run_id");
    msgpack_pack_double(&r.pk, 1.0);
    expect_reason(&r, "wrong type for field welcome.run_id");

    raw_init(&r);
    msgpack_pack_map(&r.pk, 2);
    raw_str(&r, "t");
    raw_str(&r, "finalize");
    raw_str(&r, "termination");
    msgpack_pack_uint64(&r.pk, (uint64_t)UINT32_MAX + 2);
    expect_reason(&r, "field finalize.termination out of range");

    raw_init(&r);
    msgpack_pack_map(&r.pk, 3);
    raw_str(&r, "t");
    raw_str(&r, "error");
    raw_str(&r, "code");
    raw_str(&r, "oops");
    raw_str(&r, "message");
    raw_str(&r, "");
    expect_reason(&r, "unknown error code");

    raw_init(&r);
    msgpack_pack_map(&r.pk, 2);
    raw_str(&r, "t");
    raw_str(&r, "excerpt_request");
    raw_str(&r, "keys");
    msgpack_pack_array(&r.pk, 1);
    msgpack_pack_array(&r.pk, 2);
    msgpack_pack_uint32(&r.pk, 1);
    msgpack_pack_uint32(&r.pk, 1);
    expect_reason(&r, "wrong type for field excerpt_request.keys");

    raw_init(&r);
    msgpack_pack_map(&r.pk, 2);
    raw_str(&r, "t");
    raw_str(&r, "excerpts");
    raw_str(&r, "items");
    msgpack_pack_array(&r.pk, 1);
    msgpack_pack_array(&r.pk, 5);
    for (int i = 0; i < 4; i++)
        msgpack_pack_uint32(&r.pk, 1);
    msgpack_pack_str(&r.pk, JP_EXCERPT_MAX + 1);
    {
        char big[JP_EXCERPT_MAX + 1];
        memset(big, 'y', sizeof big);
        msgpack_sbuffer_write(&r.sb, big, sizeof big);
    }
    expect_reason(&r, "excerpt text too long");

    raw_init(&r);
    msgpack_pack_map(&r.pk, 2);
    raw_str(&r, "t");
    raw_str(&r, "excerpt_request");
    raw_str(&r, "keys");
    msgpack_pack_array(&r.pk, JP_CTL_MAX_EXCERPT_KEYS + 1);
    for (unsigned i = 0; i <= JP_CTL_MAX_EXCERPT_KEYS; i++) {
        msgpack_pack_array(&r.pk, 3);
        msgpack_pack_uint32(&r.pk, 1);
        msgpack_pack_uint32(&r.pk, 1);
        msgpack_pack_uint32(&r.pk, 1);
    }
    expect_reason(&r, "field excerpt_request.keys out of range");

    ring_msg(&r, "ring", 0, 0, 0, 0); /* trailing bytes after the map */
    msgpack_pack_nil(&r.pk);
    expect_reason(&r, "trailing bytes after message");

    const char *why;
    cr_assert_eq(decode_body("", 0, &why), -EPROTO, "empty frame");
    cr_assert_str_eq(why, "empty frame", "reason");
    uint8_t c1 = 0xc1;
    cr_assert_eq(decode_body(&c1, 1, &why), -EPROTO, "never-used byte");
    cr_assert_str_eq(why, "invalid msgpack byte", "reason");
}

Test(control_strict, huge_announced_counts_allocate_nothing)
{
    /* array32 / map32 / str32 claiming 4 G members in a 10-byte frame. */
    static const uint8_t arr[] = {0xdd, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0};
    static const uint8_t map[] = {0xdf, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0};
    static const uint8_t str[] = {0xdb, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0, 0};
    static const uint8_t nested[] = {0x81, 0xa1, 't', 0xdd, 0x7f, 0xff, 0xff, 0xff};
    const char *why;
    cr_assert_eq(decode_body(arr, sizeof arr, &why), -EPROTO, "array");
    cr_assert_str_eq(why, "truncated message", "reason");
    cr_assert_eq(decode_body(map, sizeof map, &why), -EPROTO, "map");
    cr_assert_eq(decode_body(str, sizeof str, &why), -EPROTO, "str");
    cr_assert_eq(decode_body(nested, sizeof nested, &why), -EPROTO, "nested");
    /* Many small values, each one byte: bounded by JP_CTL_MAX_ELEMENTS. */
    size_t n = JP_CTL_MAX_ELEMENTS + 10;
    uint8_t *many = malloc(n + 5);
    many[0] = 0xdd;
    many[1] = (uint8_t)(n >> 24), many[2] = (uint8_t)(n >> 16), many[3] = (uint8_t)(n >> 8);
    many[4] = (uint8_t)n;
    memset(many + 5, 0xc0, n);
    cr_assert_eq(decode_body(many, n + 5, &why), -EPROTO, "too many values");
    cr_assert_str_eq(why, "too many values in one message", "reason: %s", why);
    free(many);
}

Test(control_strict, deep_nesting_is_a_protocol_error_not_out_of_memory)
{
    /* {"t": [[[...nil...]]]}: msgpack-c's unpacker fails past 32 open containers with a
     * no-memory error; the pre-check refuses past 16 so a hostile frame reads as what it is.
     * At exactly 16 (the map and 15 arrays) the frame reaches the schema check instead. */
    uint8_t body[64];
    const char *why;
    static const unsigned depths[] = {15, 16, 40};
    for (unsigned i = 0; i < 3; i++) {
        unsigned arrays = depths[i];
        size_t n = 0;
        body[n++] = 0x81, body[n++] = 0xa1, body[n++] = 't';
        for (unsigned k = 0; k < arrays; k++)
            body[n++] = 0x91;
        body[n++] = 0xc0;
        why = NULL;
        cr_assert_eq(decode_body(body, n, &why), -EPROTO, "%u arrays deep", arrays);
        if (arrays == 15)
            cr_assert(strcmp(why, "message nested too deeply") != 0, "16 levels are allowed");
        else
            cr_assert_str_eq(why, "message nested too deeply", "%u arrays: %s", arrays, why);
    }
}

Test(control_strict, a_raised_frame_bound_admits_larger_frames_from_then_on)
{
    struct jp_ctl_decoder *d;
    cr_assert_eq(jp_ctl_decoder_new(16, &d), 0, "decoder");
    static const uint8_t hdr[4] = {100, 0, 0, 0};
    cr_assert_eq(jp_ctl_decoder_set_max_frame(d, 0), -EINVAL, "bound 0");
    cr_assert_eq(jp_ctl_decoder_set_max_frame(d, JP_CTL_MAX_FRAME + 1), -EINVAL, "above the cap");
    cr_assert_eq(jp_ctl_decoder_set_max_frame(d, 100), 0, "raise");
    cr_assert_eq(jp_ctl_decoder_feed(d, hdr, sizeof hdr), 0, "100 bytes now fit");
    cr_assert_eq(jp_ctl_decoder_set_max_frame(d, 99), 0, "lower");
    static const uint8_t more[1] = {0};
    cr_assert_eq(jp_ctl_decoder_feed(d, more, 1), -EMSGSIZE, "the buffered header is rechecked");
    jp_ctl_decoder_free(d);
}

Test(control_strict, oversize_frame_is_refused_before_buffering)
{
    struct jp_ctl_decoder *d;
    cr_assert_eq(jp_ctl_decoder_new(1000, &d), 0, "decoder");
    struct jp_ctl_msg m = {.type = JP_CTL_FINALIZE}, got;
    m.u.finalize.termination = JP_TERM_RETURNED;
    uint8_t *ok;
    size_t ok_len;
    cr_assert_eq(jp_ctl_encode(&m, &ok, &ok_len), 0, "encode");
    uint8_t big[4 + 64] = {0xe9, 0x03, 0, 0}; /* 1001 */
    uint8_t stream[256];
    memcpy(stream, ok, ok_len);
    memcpy(stream + ok_len, big, sizeof big);
    cr_assert_eq(jp_ctl_decoder_feed(d, stream, ok_len + sizeof big), -EMSGSIZE, "oversize");
    cr_assert_leq(jp_ctl_decoder_pending(d), ok_len + 4, "the body was not buffered");
    cr_assert_eq(jp_ctl_decoder_feed(d, stream, 1), -EMSGSIZE, "no more input");
    const char *why;
    cr_assert_eq(jp_ctl_decoder_next(d, &got, &why), 1, "the frame before it still decodes");
    cr_assert_eq(jp_ctl_decoder_next(d, &got, &why), -EPROTO, "then the error");
    cr_assert_str_eq(why, "frame larger than the maximum", "reason");
    jp_ctl_decoder_free(d);

    cr_assert_eq(jp_ctl_decoder_new(JP_CTL_MAX_FRAME, &d), 0, "decoder");
    static const uint8_t huge[4] = {0xff, 0xff, 0xff, 0xff};
    cr_assert_eq(jp_ctl_decoder_feed(d, huge, 4), -EMSGSIZE, "4 GiB frame");
    jp_ctl_decoder_free(d);
    cr_assert_eq(jp_ctl_decoder_new(0, &d), -EINVAL, "max_frame 0");
    cr_assert_eq(jp_ctl_decoder_new(JP_CTL_MAX_FRAME + 1, &d), -EINVAL, "above the cap");
    free(ok);
}

/* Every prefix of every sample message's body, re-framed with its own length: never a crash,
 * never a success (a msgpack map cut short is not a map). */
Test(control_fuzz, truncated_bodies_at_every_byte)
{
    struct jp_ctl_msg msgs[SAMPLE_MAX];
    unsigned n = sample_messages(msgs);
    for (unsigned i = 0; i < n; i++) {
        uint8_t *buf;
        size_t len;
        cr_assert_eq(jp_ctl_encode(&msgs[i], &buf, &len), 0, "encode");
        for (size_t cut = 0; cut < len - 4; cut++) {
            const char *why = NULL;
            cr_assert_eq(decode_body(buf + 4, cut, &why), -EPROTO, "%s cut at %zu",
                         jp_ctl_type_name(msgs[i].type), cut);
            cr_assert_not_null(why, "a reason");
        }
        free(buf);
    }
}

/* Every byte of every sample flipped (three patterns): decoding may succeed or fail, but never
 * crashes, and a failure always has a reason. */
Test(control_fuzz, flipped_bytes_never_crash)
{
    struct jp_ctl_msg msgs[SAMPLE_MAX];
    unsigned n = sample_messages(msgs);
    static const uint8_t pats[] = {0x01, 0x80, 0xff};
    unsigned failures = 0;
    for (unsigned i = 0; i < n; i++) {
        uint8_t *buf;
        size_t len;
        cr_assert_eq(jp_ctl_encode(&msgs[i], &buf, &len), 0, "encode");
        for (size_t pos = 4; pos < len; pos++)
            for (unsigned p = 0; p < 3; p++) {
                buf[pos] ^= pats[p];
                const char *why = NULL;
                int r = decode_body(buf + 4, len - 4, &why);
                cr_assert(r == 1 || (r == -EPROTO && why), "%s byte %zu ^%02x: %d",
                          jp_ctl_type_name(msgs[i].type), pos, pats[p], r);
                failures += r < 0;
                buf[pos] ^= pats[p];
            }
        free(buf);
    }
    cr_assert_gt(failures, 0, "flips were noticed");
}

Test(control_fuzz, random_garbage_with_a_fixed_seed)
{
    uint64_t s = 0x6a09e667f3bcc908ull;
    uint8_t buf[512];
    for (int round = 0; round < 3000; round++) {
        size_t len = 1 + (size_t)(s % sizeof buf);
        for (size_t i = 0; i < len; i++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            buf[i] = (uint8_t)s;
        }
        /* Half the rounds start like a map with "t" so the schema code is reached. */
        if (round & 1 && len > 8)
            memcpy(buf, "\x83\xa1t\xa4ring", 7);
        const char *why = NULL;
        int r = decode_body(buf, len, &why);
        cr_assert(r == 1 || (r == -EPROTO && why), "round %d: %d", round, r);
        /* And as a raw stream with garbage length prefixes. */
        struct jp_ctl_decoder *d;
        cr_assert_eq(jp_ctl_decoder_new(4096, &d), 0, "decoder");
        int fr = jp_ctl_decoder_feed(d, buf, len);
        cr_assert(fr == 0 || fr == -EMSGSIZE, "feed");
        struct jp_ctl_msg m;
        while ((r = jp_ctl_decoder_next(d, &m, &why)) == 1)
            cr_assert_neq(m.type, JP_CTL_NONE, "a decoded message has a type");
        cr_assert(r == 0 || (r == -EPROTO && why), "stream round %d", round);
        jp_ctl_decoder_free(d);
    }
}

Test(control, encode_refuses_messages_that_break_their_limits)
{
    uint8_t *buf;
    size_t len;
    struct jp_ctl_msg m = {0};
    cr_assert_eq(jp_ctl_encode(&m, &buf, &len), -EINVAL, "type none");
    m.type = JP_CTL_TYPE_LIMIT;
    cr_assert_eq(jp_ctl_encode(&m, &buf, &len), -EINVAL, "type limit");
    m.type = JP_CTL_HELLO;
    m.u.hello.mode = 3;
    cr_assert_eq(jp_ctl_encode(&m, &buf, &len), -EINVAL, "mode");
    m.type = JP_CTL_EXCERPT_REQUEST;
    m.u.excerpt_request.keys = keys;
    m.u.excerpt_request.count = JP_CTL_MAX_EXCERPT_KEYS + 1;
    cr_assert_eq(jp_ctl_encode(&m, &buf, &len), -EINVAL, "too many keys");
    m.u.excerpt_request.keys = NULL;
    m.u.excerpt_request.count = 1;
    cr_assert_eq(jp_ctl_encode(&m, &buf, &len), -EINVAL, "keys missing");
    struct jp_ctl_excerpt it = {1, 1, 1, 0, long_text, JP_EXCERPT_MAX + 1};
    m.type = JP_CTL_EXCERPTS;
    m.u.excerpts.items = &it;
    m.u.excerpts.count = 1;
    cr_assert_eq(jp_ctl_encode(&m, &buf, &len), -EINVAL, "excerpt too long");
    it.text_len = 1;
    it.flags = 0x10;
    cr_assert_eq(jp_ctl_encode(&m, &buf, &len), -EINVAL, "excerpt flags");
    m.type = JP_CTL_RESULT;
    memset(&m.u, 0, sizeof m.u);
    m.u.result.status = 1;
    m.u.result.human_len = 3; /* NULL pointer with a length */
    cr_assert_eq(jp_ctl_encode(&m, &buf, &len), -EINVAL, "string without bytes");
    m.u.result.human_len = 0;
    m.u.result.status = 0;
    cr_assert_eq(jp_ctl_encode(&m, &buf, &len), -EINVAL, "status 0");
    m.type = JP_CTL_ERROR;
    memset(&m.u, 0, sizeof m.u);
    cr_assert_eq(jp_ctl_encode(&m, &buf, &len), -EINVAL, "error code none");
    m.u.error.code = JP_CTLE_LIMIT;
    cr_assert_eq(jp_ctl_encode(&m, &buf, &len), -EINVAL, "error code limit");
}

/* ---- sockets ------------------------------------------------------------------------- */

static int memfd_with(const char *tag)
{
    int fd = memfd_create(tag, MFD_CLOEXEC);
    cr_assert_geq(fd, 0, "memfd");
    cr_assert_eq(write(fd, tag, strlen(tag)), (ssize_t)strlen(tag), "write");
    return fd;
}

static int same_file(int a, int b)
{
    struct stat x, y;
    cr_assert_eq(fstat(a, &x), 0, "fstat");
    cr_assert_eq(fstat(b, &y), 0, "fstat");
    return x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* Receives until one message is decoded; collects fds on the way. */
static int recv_one(int sock, struct jp_ctl_decoder *d, struct jp_ctl_msg *m, int *fds,
                    unsigned *nfds)
{
    *nfds = 0;
    for (;;) {
        const char *why;
        int r = jp_ctl_decoder_next(d, m, &why);
        if (r != 0)
            return r;
        unsigned got = 0;
        r = jp_ctl_recv(sock, d, fds + *nfds, JP_CTL_MAX_FDS - *nfds, &got);
        if (r <= 0)
            return r;
        *nfds += got;
    }
}

Test(control_socket, passes_ring_and_capture_fds)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0, "socketpair");
    int ring = memfd_with("ring"), cap = memfd_with("capture");
    struct jp_ctl_msg m = {.type = JP_CTL_RING}, got;
    m.u.ring.slot_count = 1024;
    m.u.ring.has_capture = 1;
    int fds[2] = {ring, cap};
    cr_assert_eq(jp_ctl_send(sv[0], &m, fds, 2), 0, "send");
    struct jp_ctl_decoder *d;
    cr_assert_eq(jp_ctl_decoder_new(JP_CTL_MAX_FRAME, &d), 0, "decoder");
    int rx[2] = {-1, -1};
    unsigned n;
    cr_assert_eq(recv_one(sv[1], d, &got, rx, &n), 1, "received");
    assert_same(&got, &m);
    cr_assert_eq(n, 2, "two fds");
    cr_assert(same_file(rx[0], ring), "ring fd in order");
    cr_assert(same_file(rx[1], cap), "capture fd in order");
    cr_assert(fcntl(rx[0], F_GETFD) & FD_CLOEXEC, "received with close-on-exec");
    cr_assert(fcntl(rx[1], F_GETFD) & FD_CLOEXEC, "received with close-on-exec");
    close(rx[0]);
    close(rx[1]);

    /* A message without fds, then EOF. */
    m.type = JP_CTL_FINALIZE;
    m.u.finalize.termination = JP_TERM_INTERRUPTED;
    cr_assert_eq(jp_ctl_send(sv[0], &m, NULL, 0), 0, "send");
    close(sv[0]);
    cr_assert_eq(recv_one(sv[1], d, &got, rx, &n), 1, "received");
    cr_assert_eq(n, 0, "no fds");
    cr_assert_eq(got.u.finalize.termination, JP_TERM_INTERRUPTED, "termination");
    cr_assert_eq(recv_one(sv[1], d, &got, rx, &n), 0, "EOF");
    cr_assert_eq(jp_ctl_decoder_pending(d), 0, "no partial frame at EOF");
    jp_ctl_decoder_free(d);
    close(sv[1]);
    close(ring);
    close(cap);
}

Test(control_socket, too_many_fds_are_all_closed)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0, "socketpair");
    int f[3] = {memfd_with("a"), memfd_with("b"), memfd_with("c")};
    char byte = 0;
    struct iovec iov = {&byte, 1};
    union {
        struct cmsghdr align;
        char b[CMSG_SPACE(sizeof f)];
    } ctl;
    memset(&ctl, 0, sizeof ctl);
    struct msghdr msg = {0};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl.b;
    msg.msg_controllen = sizeof ctl.b;
    struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof f);
    memcpy(CMSG_DATA(c), f, sizeof f);
    cr_assert_eq(sendmsg(sv[0], &msg, 0), 1, "raw send");
    for (int i = 0; i < 3; i++)
        close(f[i]);
    /* The received fds take the lowest free numbers; after the call they must be free again. */
    int probe = dup(0);
    close(probe);
    struct jp_ctl_decoder *d;
    cr_assert_eq(jp_ctl_decoder_new(JP_CTL_MAX_FRAME, &d), 0, "decoder");
    int rx[2];
    unsigned n = 9;
    cr_assert_eq(jp_ctl_recv(sv[1], d, rx, 2, &n), -EPROTO, "refused");
    cr_assert_eq(n, 0, "no fds handed out");
    int after = dup(0);
    cr_assert_eq(after, probe, "every received fd was closed");
    close(after);
    jp_ctl_decoder_free(d);
    close(sv[0]);
    close(sv[1]);
}

Test(control_socket, send_rejects_more_than_two_fds)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0, "socketpair");
    struct jp_ctl_msg m = {.type = JP_CTL_FINALIZE};
    m.u.finalize.termination = JP_TERM_RETURNED;
    int fds[3] = {0, 1, 2};
    cr_assert_eq(jp_ctl_send(sv[0], &m, fds, 3), -EINVAL, "three fds");
    close(sv[1]);
    cr_assert_eq(jp_ctl_send(sv[0], &m, NULL, 0), -EPIPE, "closed peer is EPIPE, no SIGPIPE");
    close(sv[0]);
}

static void on_alarm(int sig)
{
    (void)sig;
}

/* A 4 MiB result through a socket whose buffer holds far less: partial writes, a slow reader,
 * and a 1 ms interval timer interrupting the sender (no SA_RESTART). Done for a blocking and a
 * non-blocking sender. */
static void big_send(int nonblocking)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0, "socketpair");
    size_t big = 4u << 20;
    char *text = malloc(big);
    for (size_t i = 0; i < big; i++)
        text[i] = (char)('a' + i % 26);
    pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork");
    if (pid == 0) {
        close(sv[0]);
        struct jp_ctl_decoder *d;
        if (jp_ctl_decoder_new(JP_CTL_MAX_FRAME, &d) < 0)
            _exit(2);
        struct jp_ctl_msg got;
        int fds[2];
        unsigned n;
        int r;
        for (;;) {
            r = jp_ctl_decoder_next(d, &got, NULL);
            if (r != 0)
                break;
            usleep(50);
            if (jp_ctl_recv(sv[1], d, fds, 2, &n) <= 0)
                _exit(3);
        }
        int ok = r == 1 && got.type == JP_CTL_RESULT && got.u.result.human_len == big &&
                 memcmp(got.u.result.human, text, big) == 0;
        _exit(ok ? 0 : 4);
    }
    close(sv[1]);
    if (nonblocking)
        fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, 1000}, {0, 1000}};
    setitimer(ITIMER_REAL, &it, NULL);
    struct jp_ctl_msg m = {.type = JP_CTL_RESULT};
    m.u.result.status = 1;
    m.u.result.human = text;
    m.u.result.human_len = big;
    int r = jp_ctl_send(sv[0], &m, NULL, 0);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    cr_assert_eq(r, 0, "send completed");
    int status;
    while (waitpid(pid, &status, 0) < 0)
        cr_assert_eq(errno, EINTR, "waitpid");
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "receiver got it intact (%d)",
              WEXITSTATUS(status));
    close(sv[0]);
    free(text);
}

Test(control_socket, large_message_survives_partial_writes_and_signals)
{
    big_send(0);
}

Test(control_socket, large_message_on_a_nonblocking_socket)
{
    big_send(1);
}

/* A peer that never reads: without a deadline the send would wait forever; with one it gives
 * up with -ETIMEDOUT, for a non-blocking socket and for a blocking one bounded by SO_SNDTIMEO
 * (the agent's case). It asserts the outcome, not how fast it came; a send that ignored its
 * deadline would hang until the suite's meson timeout fails it. */
static void stuck_peer(int nonblocking)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0, "socketpair");
    if (nonblocking) {
        fcntl(sv[0], F_SETFL, fcntl(sv[0], F_GETFL) | O_NONBLOCK);
    } else {
        struct timeval tv = {0, 20000};
        setsockopt(sv[0], SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    }
    size_t big = 4u << 20;
    char *text = malloc(big);
    memset(text, 'x', big);
    struct jp_ctl_msg m = {.type = JP_CTL_RESULT};
    m.u.result.status = 1;
    m.u.result.human = text;
    m.u.result.human_len = big;
    cr_assert_eq(jp_ctl_send_timeout(sv[0], &m, NULL, 0, 100), -ETIMEDOUT);
    /* A frame that fits the socket buffer still goes out whole within the same deadline. */
    struct jp_ctl_msg small = {.type = JP_CTL_FINALIZE};
    small.u.finalize.termination = 1;
    int fresh[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fresh), 0);
    cr_assert_eq(jp_ctl_send_timeout(fresh[0], &small, NULL, 0, 100), 0);
    close(fresh[0]);
    close(fresh[1]);
    close(sv[0]);
    close(sv[1]);
    free(text);
}

Test(control_socket, send_timeout_gives_up_on_a_peer_that_never_reads_nonblocking)
{
    stuck_peer(1);
}

Test(control_socket, send_timeout_gives_up_on_a_peer_that_never_reads_blocking)
{
    stuck_peer(0);
}

/* The daemon's own recvmsg path: a control buffer too small for what the peer sent truncates
 * the ancillary data (MSG_CTRUNC); jp_ctl_take_fds closes what did arrive and refuses. */
Test(control_socket, take_fds_refuses_truncated_control_data)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0, "socketpair");
    int fds[2] = {memfd_with("one"), memfd_with("two")};
    struct jp_ctl_msg m = {.type = JP_CTL_RING};
    m.u.ring.slot_count = 64;
    m.u.ring.has_capture = 1;
    cr_assert_eq(jp_ctl_send(sv[0], &m, fds, 2), 0, "send");
    close(fds[0]);
    close(fds[1]);
    int probe = dup(0);
    close(probe);

    uint8_t buf[256];
    union {
        struct cmsghdr align;
        char b[CMSG_SPACE(2 * sizeof(int))];
    } ctl;
    struct iovec iov = {buf, sizeof buf};
    struct msghdr msg = {0};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl.b;
    msg.msg_controllen = CMSG_LEN(sizeof(int)); /* room for one fd only */
    cr_assert_gt(recvmsg(sv[1], &msg, MSG_CMSG_CLOEXEC), 0, "recvmsg");
    cr_assert(msg.msg_flags & MSG_CTRUNC, "the kernel truncated the fds");
    int got[2] = {-1, -1};
    unsigned n = 7;
    cr_assert_eq(jp_ctl_take_fds(&msg, got, 2, &n), -EPROTO, "refused");
    cr_assert_eq(n, 0, "nothing handed out");
    int after = dup(0);
    cr_assert_eq(after, probe, "the fd that did arrive was closed");
    close(after);

    /* And the ordinary case through the same helper. */
    int one = memfd_with("three");
    cr_assert_eq(jp_ctl_send(sv[0], &m, &one, 1), 0, "send one");
    msg.msg_controllen = sizeof ctl.b;
    msg.msg_flags = 0;
    cr_assert_gt(recvmsg(sv[1], &msg, MSG_CMSG_CLOEXEC), 0, "recvmsg");
    cr_assert_eq(jp_ctl_take_fds(&msg, got, 2, &n), 0, "taken");
    cr_assert_eq(n, 1, "one fd");
    cr_assert(same_file(got[0], one), "the right file");
    close(got[0]);
    close(one);
    close(sv[0]);
    close(sv[1]);
}
