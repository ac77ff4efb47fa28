#include "stream.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void ta_stream_open(struct stream *s, jettprof_run *run)
{
    memset(s, 0, sizeof *s);
    int fd = dup(jp_agent_ring_fd(run));
    cr_assert(fd >= 0);
    cr_assert_eq(jp_ring_map(fd, &s->ring), 0, "the agent's ring does not map as a consumer");
}

static void append(struct stream *s, const uint8_t *p, uint32_t len)
{
    /* Each copy starts 8-byte aligned, as the records' 64-bit fields need. */
    uint32_t room = (len + 7u) & ~7u;
    if (s->len + room > s->cap) {
        size_t cap = s->cap ? s->cap * 2 : 1 << 16;
        while (cap < s->len + room)
            cap *= 2;
        s->buf = realloc(s->buf, cap);
        cr_assert(s->buf);
        s->cap = cap;
    }
    memcpy(s->buf + s->len, p, len);
    if (s->n == s->rcap) {
        s->rcap = s->rcap ? s->rcap * 2 : 1024;
        s->recs = realloc(s->recs, s->rcap * sizeof *s->recs);
        cr_assert(s->recs);
    }
    struct jp_rec_hdr h;
    memcpy(&h, p, sizeof h);
    /* An offset, not a pointer: buf may move as it grows. */
    s->recs[s->n++] = (struct rec){h.type, h.size, s->len};
    s->len += room;
}

static size_t drain_upto(struct stream *s, size_t most)
{
    size_t before = s->n;
    const uint8_t *first;
    uint64_t n;
    while (s->n - before < most && (n = jp_ring_peek(&s->ring, &first)) > 0) {
        uint64_t used = 0;
        while (used < n && s->n - before < most) {
            const uint8_t *p = first + used * JP_SLOT_SIZE;
            struct jp_rec_hdr h;
            memcpy(&h, p, sizeof h);
            uint32_t slots = jp_rec_slots(h.size);
            cr_assert(h.size >= sizeof h && slots <= n - used, "record %u of %u bytes overruns",
                      h.type, h.size);
            if (h.type != JP_REC_PAD) {
                const char *why = NULL;
                cr_assert_eq(jp_rec_validate(p, h.size, &why), 0, "invalid %s record: %s",
                             jp_rec_type_name(h.type), why ? why : "?");
                append(s, p, h.size);
            }
            used += slots;
        }
        jp_ring_release(&s->ring, used);
    }
    return s->n - before;
}

size_t ta_stream_drain(struct stream *s)
{
    return drain_upto(s, SIZE_MAX);
}

size_t ta_stream_drain_one(struct stream *s)
{
    return drain_upto(s, 1);
}

const void *ta_rec_at(const struct stream *s, size_t i)
{
    cr_assert(i < s->n);
    return s->buf + s->recs[i].off;
}

void ta_stream_free(struct stream *s)
{
    jp_ring_unmap(&s->ring);
    free(s->buf);
    free(s->recs);
    memset(s, 0, sizeof *s);
}

size_t ta_stream_count(const struct stream *s, uint16_t type)
{
    size_t c = 0;
    for (size_t i = 0; i < s->n; i++)
        c += s->recs[i].type == type;
    return c;
}

const void *ta_stream_nth(const struct stream *s, uint16_t type, size_t i)
{
    for (size_t k = 0; k < s->n; k++)
        if (s->recs[k].type == type && i-- == 0)
            return ta_rec_at(s, k);
    cr_assert_fail("no %s record #%zu", jp_rec_type_name(type), i);
    return NULL;
}

struct jettprof_config ta_config(uint32_t mode)
{
    struct jettprof_config c = {
        .size = sizeof c,
        .mode = mode,
        .rate_hz = mode == JETTPROF_MODE_CPU ? 1000 : 0,
        .threshold_bp = 500,
        .limit = 10,
        .outputs = JETTPROF_OUT_TOON | JETTPROF_OUT_HUMAN,
        .capabilities = 0xffu,
        .capture_fd = -1,
        .ring_slots = 1u << 12,
    };
    return c;
}

uint32_t ta_frame(jettprof_run *run, const char *ns, const char *fn, uint32_t decl_line)
{
    uint32_t src = 0, id = 0;
    cr_assert_eq(jettprof_source(run, JETTPROF_ORIGIN_PROJECT, "src/main.jett", &src), 0);
    struct jettprof_frame_desc d = {
        .size = sizeof d, .kind = JETTPROF_FRAME_FUNCTION, .ns = ns, .function = fn,
        .source_id = src, .decl_start = decl_line * 100, .decl_end = decl_line * 100 + 50,
        .decl_line = decl_line, .decl_col = 1};
    cr_assert_eq(jettprof_frame(run, &d, &id), 0, "%s", jettprof_last_reason());
    return id;
}

const void *ta_stream_last(const struct stream *s, uint16_t type)
{
    size_t n = ta_stream_count(s, type);
    cr_assert(n > 0, "no %s record", jp_rec_type_name(type));
    return ta_stream_nth(s, type, n - 1);
}

jettprof_run *ta_local_run(uint32_t mode, struct stream *s)
{
    struct jettprof_config c = ta_config(mode);
    jettprof_run *run = NULL;
    cr_assert_eq(jp_agent_start_local(&c, 0, &run), 0, "%s", jettprof_last_reason());
    ta_stream_open(s, run);
    return run;
}

uint32_t ta_node_now(jettprof_thread *t, struct stream *s)
{
    uint64_t id;
    cr_assert_eq(jettprof_alloc(t, 1, &id), 0);
    ta_stream_drain(s);
    const struct jp_rec_alloc *a =
        ta_stream_nth(s, JP_REC_ALLOC, ta_stream_count(s, JP_REC_ALLOC) - 1);
    return a->node;
}
