/* libFuzzer harness: the control decoder fed arbitrary bytes in arbitrary splits.
 *
 * Input layout: byte 0 picks the decoder's frame limit (bits 0-2: 2^(6+n) bytes, or the
 * production JP_CTL_MAX_FRAME when bit 3 is set) and the number of split points (bits 4-7,
 * 0..15); then one byte per split point giving that chunk's length; the rest is the stream.
 * Chunks past the end of the stream are simply shorter; the last chunk is whatever remains.
 *
 * Invariants: feed returns 0 or -EMSGSIZE; next returns 1, 0 or -EPROTO, a refusal names a
 * non-empty reason and is final (asking again gives the same reason); pending never exceeds
 * what was fed; a decoded message is within the ranges control.h promises and survives
 * encode -> decode unchanged. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_check.h"
#include "protocol/control.h"
#include "protocol/records.h"
#include "protocol/ring.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int same_str(const char *a, size_t al, const char *b, size_t bl)
{
    return al == bl && (al == 0 || memcmp(a, b, al) == 0);
}

static int same_msg(const struct jp_ctl_msg *a, const struct jp_ctl_msg *b)
{
    if (a->type != b->type)
        return 0;
    switch (a->type) {
    case JP_CTL_HELLO:
        return a->u.hello.version == b->u.hello.version && a->u.hello.pid == b->u.hello.pid &&
               a->u.hello.mode == b->u.hello.mode && a->u.hello.rate_hz == b->u.hello.rate_hz &&
               a->u.hello.threshold_bp == b->u.hello.threshold_bp &&
               a->u.hello.limit == b->u.hello.limit && a->u.hello.outputs == b->u.hello.outputs &&
               a->u.hello.capabilities == b->u.hello.capabilities;
    case JP_CTL_WELCOME:
        return a->u.welcome.run_id == b->u.welcome.run_id &&
               a->u.welcome.ring_bytes == b->u.welcome.ring_bytes;
    case JP_CTL_SHOW:
        return a->u.show.run_id == b->u.show.run_id && a->u.show.outputs == b->u.show.outputs;
    case JP_CTL_STATUS:
        return a->u.status.format == b->u.status.format;
    case JP_CTL_RUNS:
        return a->u.runs.format == b->u.runs.format && a->u.runs.limit == b->u.runs.limit;
    case JP_CTL_STATUS_REPLY:
        return same_str(a->u.status_reply.text, a->u.status_reply.text_len,
                        b->u.status_reply.text, b->u.status_reply.text_len);
    case JP_CTL_RING:
        return a->u.ring.slot_count == b->u.ring.slot_count &&
               a->u.ring.has_capture == b->u.ring.has_capture;
    case JP_CTL_WORKER_RING:
        return a->u.worker_ring.slot_count == b->u.worker_ring.slot_count;
    case JP_CTL_FINALIZE:
        return a->u.finalize.termination == b->u.finalize.termination;
    case JP_CTL_EXCERPT_REQUEST:
        if (a->u.excerpt_request.count != b->u.excerpt_request.count)
            return 0;
        for (uint32_t i = 0; i < a->u.excerpt_request.count; i++) {
            const struct jp_ctl_excerpt_key *x = &a->u.excerpt_request.keys[i];
            const struct jp_ctl_excerpt_key *y = &b->u.excerpt_request.keys[i];
            if (x->source_id != y->source_id || x->line != y->line || x->col != y->col)
                return 0;
        }
        return 1;
    case JP_CTL_EXCERPTS:
        if (a->u.excerpts.count != b->u.excerpts.count)
            return 0;
        for (uint32_t i = 0; i < a->u.excerpts.count; i++) {
            const struct jp_ctl_excerpt *x = &a->u.excerpts.items[i];
            const struct jp_ctl_excerpt *y = &b->u.excerpts.items[i];
            if (x->source_id != y->source_id || x->line != y->line || x->col != y->col ||
                x->flags != y->flags || !same_str(x->text, x->text_len, y->text, y->text_len))
                return 0;
        }
        return 1;
    case JP_CTL_RESULT:
        return a->u.result.status == b->u.result.status &&
               same_str(a->u.result.reason, a->u.result.reason_len, b->u.result.reason,
                        b->u.result.reason_len) &&
               same_str(a->u.result.human, a->u.result.human_len, b->u.result.human,
                        b->u.result.human_len) &&
               same_str(a->u.result.toon, a->u.result.toon_len, b->u.result.toon,
                        b->u.result.toon_len);
    case JP_CTL_ERROR:
        return a->u.error.code == b->u.error.code &&
               same_str(a->u.error.message, a->u.error.message_len, b->u.error.message,
                        b->u.error.message_len);
    case JP_CTL_TOP:
        return a->u.top.run_id == b->u.top.run_id && a->u.top.rows == b->u.top.rows;
    case JP_CTL_TOP_FRAME: {
        const __typeof__(a->u.top_frame) *x = &a->u.top_frame, *y = &b->u.top_frame;
        if (x->run_id != y->run_id || x->mode != y->mode || x->elapsed_ns != y->elapsed_ns ||
            x->records != y->records || x->fill != y->fill || x->slots != y->slots ||
            x->lost != y->lost || x->violations != y->violations ||
            x->stretch_ns != y->stretch_ns || x->nfigures != y->nfigures ||
            x->npoints != y->npoints || x->nrows != y->nrows ||
            !same_str(x->program, x->program_len, y->program, y->program_len))
            return 0;
        for (uint32_t i = 0; i < x->nfigures; i++)
            if (x->figures[i] != y->figures[i])
                return 0;
        for (uint32_t i = 0; i < x->npoints; i++)
            if (x->timeline[i] != y->timeline[i])
                return 0;
        for (uint32_t i = 0; i < x->nrows; i++)
            if (!same_str(x->rows[i].name, x->rows[i].name_len, y->rows[i].name,
                          y->rows[i].name_len) ||
                !same_str(x->rows[i].path, x->rows[i].path_len, y->rows[i].path,
                          y->rows[i].path_len) ||
                x->rows[i].line != y->rows[i].line ||
                memcmp(x->rows[i].v, y->rows[i].v, sizeof x->rows[i].v))
                return 0;
        return 1;
    }
    default:
        return 0;
    }
}

/* Every string the decoder hands out is readable for its length (ASan checks the reads). */
static size_t touch(const char *s, size_t len)
{
    size_t sum = 0;
    FUZZ_CHECK(len == 0 || s != NULL, "a string of %zu bytes at NULL", len);
    for (size_t i = 0; i < len; i++)
        sum += (unsigned char)s[i];
    return sum;
}

static void check_ranges(const struct jp_ctl_msg *m)
{
    FUZZ_CHECK(m->type > JP_CTL_NONE && m->type < JP_CTL_TYPE_LIMIT, "type %u", m->type);
    FUZZ_CHECK(jp_ctl_type_name(m->type) != NULL, "type %u has no name", m->type);
    volatile size_t sink = 0;
    switch (m->type) {
    case JP_CTL_HELLO:
        FUZZ_CHECK(jp_mode_name(m->u.hello.mode) != NULL, "hello.mode %u", m->u.hello.mode);
        FUZZ_CHECK((m->u.hello.outputs & ~JP_OUT_ALL) == 0, "hello.outputs");
        break;
    case JP_CTL_SHOW:
        FUZZ_CHECK((m->u.show.outputs & ~(JP_OUT_HUMAN | JP_OUT_TOON)) == 0, "show.outputs");
        break;
    case JP_CTL_RING:
        FUZZ_CHECK(m->u.ring.slot_count >= JP_RING_MIN_SLOTS &&
                       m->u.ring.slot_count <= JP_RING_MAX_SLOTS,
                   "ring.slot_count %u", m->u.ring.slot_count);
        FUZZ_CHECK(m->u.ring.has_capture <= 1, "ring.has_capture %u", m->u.ring.has_capture);
        break;
    case JP_CTL_WORKER_RING:
        FUZZ_CHECK(m->u.worker_ring.slot_count >= JP_RING_MIN_SLOTS &&
                       m->u.worker_ring.slot_count <= JP_RING_MAX_SLOTS,
                   "worker_ring.slot_count %u", m->u.worker_ring.slot_count);
        break;
    case JP_CTL_FINALIZE:
        FUZZ_CHECK(jp_termination_name(m->u.finalize.termination) != NULL, "termination");
        break;
    case JP_CTL_EXCERPT_REQUEST:
        FUZZ_CHECK(m->u.excerpt_request.count <= JP_CTL_MAX_EXCERPT_KEYS, "too many keys");
        FUZZ_CHECK(m->u.excerpt_request.count == 0 || m->u.excerpt_request.keys, "keys NULL");
        for (uint32_t i = 0; i < m->u.excerpt_request.count; i++)
            sink += m->u.excerpt_request.keys[i].line;
        break;
    case JP_CTL_EXCERPTS:
        FUZZ_CHECK(m->u.excerpts.count <= JP_CTL_MAX_EXCERPT_KEYS, "too many items");
        FUZZ_CHECK(m->u.excerpts.count == 0 || m->u.excerpts.items, "items NULL");
        for (uint32_t i = 0; i < m->u.excerpts.count; i++) {
            const struct jp_ctl_excerpt *it = &m->u.excerpts.items[i];
            FUZZ_CHECK(it->text_len <= JP_EXCERPT_MAX, "excerpt of %zu bytes", it->text_len);
            FUZZ_CHECK((it->flags & ~(uint32_t)(JP_EXCERPT_REDACTED | JP_EXCERPT_UNAVAILABLE)) ==
                           0,
                       "excerpt flags %#x", it->flags);
            sink += touch(it->text, it->text_len);
        }
        break;
    case JP_CTL_RESULT:
        FUZZ_CHECK(m->u.result.status >= 1 && m->u.result.status <= 3, "result.status");
        sink += touch(m->u.result.reason, m->u.result.reason_len);
        sink += touch(m->u.result.human, m->u.result.human_len);
        sink += touch(m->u.result.toon, m->u.result.toon_len);
        break;
    case JP_CTL_STATUS:
        FUZZ_CHECK(m->u.status.format <= 2, "status.format %u", m->u.status.format);
        break;
    case JP_CTL_RUNS:
        FUZZ_CHECK(m->u.runs.format <= 1 && m->u.runs.limit >= 1 && m->u.runs.limit <= 1000,
                   "runs.format %u limit %u", m->u.runs.format, m->u.runs.limit);
        break;
    case JP_CTL_STATUS_REPLY:
        sink += touch(m->u.status_reply.text, m->u.status_reply.text_len);
        break;
    case JP_CTL_ERROR:
        FUZZ_CHECK(m->u.error.code > JP_CTLE_NONE && m->u.error.code < JP_CTLE_LIMIT,
                   "error.code %u", m->u.error.code);
        sink += touch(m->u.error.message, m->u.error.message_len);
        break;
    case JP_CTL_TOP_FRAME:
        sink += touch(m->u.top_frame.program, m->u.top_frame.program_len);
        for (uint32_t i = 0; i < m->u.top_frame.nrows; i++)
            sink += touch(m->u.top_frame.rows[i].name, m->u.top_frame.rows[i].name_len) +
                    touch(m->u.top_frame.rows[i].path, m->u.top_frame.rows[i].path_len);
        for (uint32_t i = 0; i < m->u.top_frame.npoints; i++)
            sink += (size_t)m->u.top_frame.timeline[i];
        for (uint32_t i = 0; i < m->u.top_frame.nfigures; i++)
            sink += (size_t)m->u.top_frame.figures[i];
        break;
    default:
        break;
    }
    (void)sink;
}

/* encode(m) decodes back to m, as one whole frame and nothing else. */
static void roundtrip(const struct jp_ctl_msg *m)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    int r = jp_ctl_encode(m, &buf, &len);
    FUZZ_CHECK(r == 0, "a decoded %s message does not encode: %d", jp_ctl_type_name(m->type), r);
    struct jp_ctl_decoder *d = NULL;
    FUZZ_CHECK(jp_ctl_decoder_new(JP_CTL_MAX_FRAME, &d) == 0, "decoder_new");
    FUZZ_CHECK(jp_ctl_decoder_feed(d, buf, len) == 0, "re-feed");
    struct jp_ctl_msg back;
    const char *why = NULL;
    r = jp_ctl_decoder_next(d, &back, &why);
    FUZZ_CHECK(r == 1, "the re-encoded %s does not decode: %s", jp_ctl_type_name(m->type),
               why ? why : "(incomplete)");
    FUZZ_CHECK(same_msg(m, &back), "the %s message changed through encode/decode",
               jp_ctl_type_name(m->type));
    FUZZ_CHECK(jp_ctl_decoder_next(d, &back, &why) == 0, "more than one message re-encoded");
    FUZZ_CHECK(jp_ctl_decoder_pending(d) == 0, "bytes left after the re-encoded frame");
    jp_ctl_decoder_free(d);
    free(buf);
}

/* Takes every message now complete. Returns -1 once the stream is refused. */
static int drain(struct jp_ctl_decoder *d, size_t fed)
{
    for (;;) {
        struct jp_ctl_msg m;
        const char *why = NULL;
        int r = jp_ctl_decoder_next(d, &m, &why);
        FUZZ_CHECK(r == 1 || r == 0 || r == -EPROTO, "next returned %d", r);
        FUZZ_CHECK(jp_ctl_decoder_pending(d) <= fed, "pending %zu of %zu fed",
                   jp_ctl_decoder_pending(d), fed);
        if (r == 0)
            return 0;
        if (r < 0) {
            FUZZ_CHECK(why != NULL && why[0] != '\0', "a refusal without a reason");
            const char *again = NULL;
            struct jp_ctl_msg m2;
            FUZZ_CHECK(jp_ctl_decoder_next(d, &m2, &again) == -EPROTO, "the error is not final");
            FUZZ_CHECK(again != NULL && strcmp(again, why) == 0, "the reason changed: %s / %s",
                       why, again ? again : "(null)");
            return -1;
        }
        check_ranges(&m);
        roundtrip(&m);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    uint8_t ctl = data[0];
    uint32_t max_frame = (ctl & 0x08u) ? JP_CTL_MAX_FRAME : 1u << (6 + (ctl & 0x07u));
    size_t nsplit = ctl >> 4;
    if (size < 1 + nsplit)
        return 0;
    const uint8_t *splits = data + 1;
    const uint8_t *stream = data + 1 + nsplit;
    size_t left = size - 1 - nsplit, fed = 0;

    struct jp_ctl_decoder *d = NULL;
    FUZZ_CHECK(jp_ctl_decoder_new(max_frame, &d) == 0, "decoder_new");
    for (size_t i = 0; i <= nsplit && left > 0; i++) {
        size_t n = i < nsplit ? splits[i] : left;
        if (n > left)
            n = left;
        int r = jp_ctl_decoder_feed(d, stream, n);
        FUZZ_CHECK(r == 0 || r == -EMSGSIZE, "feed returned %d", r);
        stream += n;
        left -= n;
        fed += n;
        if (r < 0)
            break;
        if (drain(d, fed) < 0)
            break;
    }
    jp_ctl_decoder_free(d);
    return 0;
}
