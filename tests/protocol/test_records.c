/* Record names and jp_rec_validate: each rule at its edge. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "protocol/records.h"
#include "tests/lib/recbuild.h"

Test(records, names_come_from_the_lists)
{
    cr_assert_str_eq(jp_rec_type_name(JP_REC_PAD), "pad", "pad");
    cr_assert_str_eq(jp_rec_type_name(JP_REC_CPU_SAMPLE), "cpu_sample", "cpu_sample");
    cr_assert_str_eq(jp_rec_type_name(JP_REC_RUN_STOP), "run_stop", "run_stop");
    cr_assert_str_eq(jp_rec_type_name(JP_REC_SOURCE_DEF), "source_def", "source_def");
    cr_assert_null(jp_rec_type_name(0), "0 is no type");
    cr_assert_null(jp_rec_type_name(JP_REC_TYPE_LIMIT), "limit");
    cr_assert_null(jp_rec_type_name(UINT32_MAX), "huge");
    for (uint32_t t = 1; t < JP_REC_TYPE_LIMIT; t++)
        cr_assert_not_null(jp_rec_type_name(t), "type %u named", t);

    cr_assert_str_eq(jp_mode_name(JP_MODE_MEMORY), "memory", "mode");
    cr_assert_null(jp_mode_name(JP_MODE_NONE), "no mode");
    cr_assert_str_eq(jp_origin_name(JP_ORIGIN_STDLIB), "stdlib", "origin");
    cr_assert_null(jp_origin_name(4), "origin 4");
    cr_assert_str_eq(jp_state_name(JP_STATE_JETT), "jett", "state 0 is a real state");
    cr_assert_null(jp_state_name(JP_STATE_LIMIT), "state limit");
    cr_assert_str_eq(jp_termination_name(JP_TERM_INTERRUPTED), "interrupted", "termination");
    cr_assert_null(jp_termination_name(JP_TERM_NONE), "no termination");
    cr_assert_str_eq(jp_frame_kind_name(JP_FRAME_TRUNCATED), "truncated", "kind");
    cr_assert_null(jp_frame_kind_name(JP_FRAME_KIND_LIMIT), "kind limit");
}

static const char *why;

static int check(const void *rec, uint32_t len)
{
    why = NULL;
    int r = jp_rec_validate(rec, len, &why);
    if (r == 0)
        cr_assert_null(why, "no reason on success");
    else
        cr_assert_not_null(why, "a reason on failure");
    return r;
}

Test(records, validate_header_rules)
{
    uint8_t buf[JP_REC_MAX_SIZE + 64];
    memset(buf, 0, sizeof buf);
    struct jp_rec_node_def n = {{JP_REC_NODE_DEF, 16}, 1, 0, 1};
    memcpy(buf, &n, sizeof n);
    cr_assert_eq(check(buf, 16), 0, "valid node");
    cr_assert_eq(check(buf, 15), -EPROTO, "size past end");
    cr_assert_str_eq(why, "size past end", "reason");
    cr_assert_eq(check(buf, 3), -EPROTO, "shorter than a header");
    cr_assert_eq(check(NULL, 16), -EPROTO, "no record");

    n.h.size = 20;
    memcpy(buf, &n, sizeof n);
    cr_assert_eq(check(buf, 32), -EPROTO, "fixed-size record too long");
    n.h.size = 12;
    memcpy(buf, &n, sizeof n);
    cr_assert_eq(check(buf, 32), -EPROTO, "too short");

    struct jp_rec_hdr h = {0, 16};
    memcpy(buf, &h, sizeof h);
    cr_assert_eq(check(buf, 32), -EPROTO, "type 0");
    cr_assert_str_eq(why, "unknown record type", "reason");
    h.type = JP_REC_TYPE_LIMIT;
    memcpy(buf, &h, sizeof h);
    cr_assert_eq(check(buf, 32), -EPROTO, "type past the list");

    h = (struct jp_rec_hdr){JP_REC_PAD, 4};
    memcpy(buf, &h, sizeof h);
    cr_assert_eq(check(buf, 4), 0, "minimal PAD");
    h.size = JP_REC_MAX_SIZE;
    memcpy(buf, &h, sizeof h);
    cr_assert_eq(check(buf, sizeof buf), 0, "largest PAD");
    h.size = JP_REC_MAX_SIZE + 1;
    memcpy(buf, &h, sizeof h);
    cr_assert_eq(check(buf, sizeof buf), -EPROTO, "larger than JP_REC_MAX_SIZE");
    h.size = 3;
    memcpy(buf, &h, sizeof h);
    cr_assert_eq(check(buf, sizeof buf), -EPROTO, "PAD smaller than a header");
}

Test(records, validate_fixed_records_and_enums)
{
    struct jp_rec_run_start rs = tl_rec_run_start(JP_MODE_CPU);
    rs.rate_hz = 1;
    rs.limit = 1;
    cr_assert_eq(check(&rs, sizeof rs), 0, "run start");
    /* The run's parameters at and past each edge (a report cannot be built outside them). */
    rs.rate_hz = 1000;
    rs.threshold_bp = 10000;
    rs.limit = 100;
    cr_assert_eq(check(&rs, sizeof rs), 0, "largest parameters");
    rs.limit = 101;
    cr_assert_eq(check(&rs, sizeof rs), -EPROTO, "limit 101");
    rs.limit = 0;
    cr_assert_eq(check(&rs, sizeof rs), -EPROTO, "limit 0");
    rs.limit = 100;
    rs.threshold_bp = 10001;
    cr_assert_eq(check(&rs, sizeof rs), -EPROTO, "threshold above 100%%");
    rs.threshold_bp = 0;
    rs.rate_hz = 1001;
    cr_assert_eq(check(&rs, sizeof rs), -EPROTO, "cpu rate 1001");
    rs.rate_hz = 0;
    cr_assert_eq(check(&rs, sizeof rs), -EPROTO, "cpu rate 0");
    rs.mode = JP_MODE_MEMORY;
    cr_assert_eq(check(&rs, sizeof rs), 0, "memory runs have no rate");
    rs.rate_hz = 1;
    cr_assert_eq(check(&rs, sizeof rs), -EPROTO, "a rate in memory mode");
    rs.rate_hz = 0;
    rs.mode = 3;
    cr_assert_eq(check(&rs, sizeof rs), -EPROTO, "mode 3");
    rs.mode = JP_MODE_MEMORY;
    rs.format_version = JP_FORMAT_VERSION_SEQ;
    cr_assert_eq(check(&rs, sizeof rs), 0, "format version 2 (resize sequences)");
    rs.format_version = 3;
    cr_assert_eq(check(&rs, sizeof rs), -EPROTO, "format version 3");
    rs.format_version = 0;
    cr_assert_eq(check(&rs, sizeof rs), -EPROTO, "format version 0");

    struct jp_rec_cpu_sample s;
    memset(&s, 0, sizeof s);
    s.h = (struct jp_rec_hdr){JP_REC_CPU_SAMPLE, sizeof s};
    s.state = JP_STATE_JETT;
    s.node = 1;
    cr_assert_eq(check(&s, sizeof s), 0, "jett sample");
    s.node = JP_ID_NONE;
    cr_assert_eq(check(&s, sizeof s), -EPROTO, "jett sample without node");
    s.state = JP_STATE_RUNTIME;
    cr_assert_eq(check(&s, sizeof s), 0, "runtime sample ignores node");
    s.state = JP_STATE_LIMIT;
    cr_assert_eq(check(&s, sizeof s), -EPROTO, "state past the list");
    s.state = JP_STATE_WAITING;
    s.flags = 0x02;
    cr_assert_eq(check(&s, sizeof s), -EPROTO, "unknown flag");
    s.flags = JP_SAMPLE_HAS_STMT;
    cr_assert_eq(check(&s, sizeof s), 0, "statement flag");

    struct jp_rec_run_stop st;
    memset(&st, 0, sizeof st);
    st.h = (struct jp_rec_hdr){JP_REC_RUN_STOP, sizeof st};
    st.termination = JP_TERM_RETURNED;
    cr_assert_eq(check(&st, sizeof st), 0, "run stop");
    st.termination = JP_TERM_NONE;
    cr_assert_eq(check(&st, sizeof st), -EPROTO, "no termination");
    st.termination = 4;
    cr_assert_eq(check(&st, sizeof st), -EPROTO, "termination 4");

    uint32_t fixed[] = {JP_REC_EXEC, JP_REC_ALLOC, JP_REC_RESIZE, JP_REC_FREE, JP_REC_COUNTERS,
                        JP_REC_RESIZE_SEQ};
    uint32_t sizes[] = {16, 32, 32, 32, 64, 40};
    for (unsigned i = 0; i < 6; i++) {
        uint8_t buf[64] = {0};
        struct jp_rec_hdr h = {(uint16_t)fixed[i], (uint16_t)sizes[i]};
        memcpy(buf, &h, sizeof h);
        cr_assert_eq(check(buf, sizes[i]), 0, "%s", jp_rec_type_name(fixed[i]));
        h.size = (uint16_t)(sizes[i] + 1);
        memcpy(buf, &h, sizeof h);
        cr_assert_eq(check(buf, 64), -EPROTO, "%s one byte long", jp_rec_type_name(fixed[i]));
    }
}

Test(records, validate_strings_fit_their_record)
{
    uint8_t buf[JP_REC_MAX_SIZE];
    memset(buf, 0, sizeof buf); /* the longest path below is NULs: well-formed UTF-8 */
    struct jp_rec_source_def sd = {{JP_REC_SOURCE_DEF, 12 + 5}, 1, JP_ORIGIN_PROJECT, 0, 5};
    memcpy(buf, &sd, sizeof sd);
    memcpy(buf + sizeof sd, "a.jet", 5);
    cr_assert_eq(check(buf, 17), 0, "source def");
    sd.path_len = 6;
    memcpy(buf, &sd, sizeof sd);
    cr_assert_eq(check(buf, 17), -EPROTO, "path longer than the record");
    sd.path_len = 0;
    sd.h.size = 12;
    memcpy(buf, &sd, sizeof sd);
    cr_assert_eq(check(buf, 12), -EPROTO, "empty path");
    sd.path_len = JP_PATH_MAX + 1;
    sd.h.size = (uint16_t)(12 + JP_PATH_MAX + 1);
    memcpy(buf, &sd, sizeof sd);
    cr_assert_eq(check(buf, sizeof buf), -EPROTO, "path too long");
    sd.path_len = JP_PATH_MAX;
    sd.h.size = (uint16_t)(12 + JP_PATH_MAX);
    memcpy(buf, &sd, sizeof sd);
    cr_assert_eq(check(buf, sizeof buf), 0, "longest path");
    sd.origin = 0;
    memcpy(buf, &sd, sizeof sd);
    cr_assert_eq(check(buf, sizeof buf), -EPROTO, "no origin");

    struct jp_rec_frame_def fd;
    memset(&fd, 0, sizeof fd);
    fd.h = (struct jp_rec_hdr){JP_REC_FRAME_DEF, 36 + 6 + 4};
    fd.frame_id = 1;
    fd.kind = JP_FRAME_FUNCTION;
    fd.ns_len = 6;
    fd.fn_len = 4;
    memcpy(buf, &fd, sizeof fd);
    memcpy(buf + 36, "<root>main", 10);
    cr_assert_eq(check(buf, 46), 0, "frame def");
    fd.fn_len = 5;
    memcpy(buf, &fd, sizeof fd);
    cr_assert_eq(check(buf, 46), -EPROTO, "names past the record");
    fd.fn_len = 3;
    memcpy(buf, &fd, sizeof fd);
    cr_assert_eq(check(buf, 46), -EPROTO, "trailing bytes after the names");
    fd.fn_len = 0;
    fd.ns_len = 10;
    memcpy(buf, &fd, sizeof fd);
    cr_assert_eq(check(buf, 46), -EPROTO, "empty function name");
    fd.fn_len = 4;
    fd.ns_len = 6;
    fd.kind = JP_FRAME_KIND_LIMIT;
    memcpy(buf, &fd, sizeof fd);
    cr_assert_eq(check(buf, 46), -EPROTO, "kind past the list");
    fd.kind = JP_FRAME_TRUNCATED;
    fd.ns_len = JP_NAME_MAX + 1;
    fd.fn_len = 1;
    fd.h.size = (uint16_t)(36 + JP_NAME_MAX + 2);
    memcpy(buf, &fd, sizeof fd);
    cr_assert_eq(check(buf, sizeof buf), -EPROTO, "namespace too long");

    struct jp_rec_excerpt ex = {{JP_REC_EXCERPT, 20 + 3}, 1, 2, 3, JP_EXCERPT_REDACTED, 0, 3};
    memcpy(buf, &ex, sizeof ex);
    memcpy(buf + 20, "x+1", 3);
    cr_assert_eq(check(buf, 23), 0, "excerpt");
    ex.flags = JP_EXCERPT_UNAVAILABLE;
    memcpy(buf, &ex, sizeof ex);
    cr_assert_eq(check(buf, 23), -EPROTO, "unavailable excerpt with text");
    ex.text_len = 0;
    ex.h.size = 20;
    memcpy(buf, &ex, sizeof ex);
    cr_assert_eq(check(buf, 20), 0, "unavailable excerpt");
    ex.flags = 0x04;
    memcpy(buf, &ex, sizeof ex);
    cr_assert_eq(check(buf, 20), -EPROTO, "unknown excerpt flag");
    ex.flags = 0;
    ex.text_len = JP_EXCERPT_MAX + 1;
    ex.h.size = (uint16_t)(20 + JP_EXCERPT_MAX + 1);
    memcpy(buf, &ex, sizeof ex);
    cr_assert_eq(check(buf, sizeof buf), -EPROTO, "excerpt past 160 bytes");
}

Test(records, validate_reads_unaligned_records)
{
    uint8_t buf[64 + 1];
    struct jp_rec_cpu_sample s;
    memset(&s, 0, sizeof s);
    s.h = (struct jp_rec_hdr){JP_REC_CPU_SAMPLE, sizeof s};
    s.node = 9;
    memcpy(buf + 1, &s, sizeof s);
    cr_assert_eq(check(buf + 1, sizeof s), 0, "odd address");
}

/* One of each class of malformed UTF-8, and the well-formed edges beside it. */
static const struct { const char *bytes; size_t len; size_t bad_at; const char *what; } bad_utf8[] = {
    {"\xff\xfe", 2, 0, "0xff/0xfe are never UTF-8"},
    {"ab\x80", 3, 2, "a lone continuation byte"},
    {"\xc0\xaf", 2, 0, "overlong two-byte form of '/'"},
    {"\xc1\xbf", 2, 0, "overlong two-byte form (0xc1)"},
    {"\xe0\x80\xaf", 3, 0, "overlong three-byte form"},
    {"\xe0\x9f\xbf", 3, 0, "overlong three-byte form of U+07FF"},
    {"\xf0\x80\x80\xaf", 4, 0, "overlong four-byte form"},
    {"\xf0\x8f\xbf\xbf", 4, 0, "overlong four-byte form of U+FFFF"},
    {"\xed\xa0\x80", 3, 0, "a high surrogate U+D800"},
    {"x\xed\xbf\xbf", 4, 1, "a low surrogate U+DFFF"},
    {"\xf4\x90\x80\x80", 4, 0, "U+110000, past U+10FFFF"},
    {"\xf5\x80\x80\x80", 4, 0, "lead byte 0xf5"},
    {"\xe2\x82", 2, 0, "a three-byte sequence cut by the end"},
    {"\xf0\x9f\x98", 3, 0, "a four-byte sequence cut by the end"},
    {"\xe2\x28\xa1", 3, 0, "a bad continuation byte"},
    {"\xc3", 1, 0, "a two-byte lead at the end"},
};
static const struct { const char *bytes; size_t len; const char *what; } good_utf8[] = {
    {"main", 4, "ASCII"},
    {"\x00\x01\x1f\x7f", 4, "NUL and other control characters"},
    {"\xc2\x80\xdf\xbf", 4, "U+0080 and U+07FF"},
    {"\xe0\xa0\x80\xef\xbf\xbf", 6, "U+0800 and U+FFFF"},
    {"\xed\x9f\xbf\xee\x80\x80", 6, "U+D7FF and U+E000 beside the surrogates"},
    {"\xf0\x90\x80\x80\xf4\x8f\xbf\xbf", 8, "U+10000 and U+10FFFF"},
    {"caf\xc3\xa9", 5, "a precomposed e-acute"},
};

Test(records, utf8_validator_rejects_each_malformed_class)
{
    for (size_t i = 0; i < sizeof bad_utf8 / sizeof bad_utf8[0]; i++) {
        size_t at = 99;
        cr_assert_eq(jp_utf8_validate(bad_utf8[i].bytes, bad_utf8[i].len, &at), -EILSEQ, "%s",
                     bad_utf8[i].what);
        cr_assert_eq(at, bad_utf8[i].bad_at, "%s: at %zu", bad_utf8[i].what, at);
    }
    for (size_t i = 0; i < sizeof good_utf8 / sizeof good_utf8[0]; i++)
        cr_assert_eq(jp_utf8_validate(good_utf8[i].bytes, good_utf8[i].len, NULL), 0, "%s",
                     good_utf8[i].what);
    cr_assert_eq(jp_utf8_seq_len("\xf0\x9f\x98\x80", 4), 4);
    cr_assert_eq(jp_utf8_seq_len("\xf0\x9f\x98\x80", 3), 0, "cut");
    cr_assert_eq(jp_utf8_seq_len("\xe2\x82\xac", 3), 3);
    cr_assert_eq(jp_utf8_validate("", 0, NULL), 0, "empty");
}

/* Builds a record whose one string is s (the other, for a frame, is "ok") and validates it. */
static int check_string_record(uint32_t type, int which, const char *s, size_t n)
{
    uint8_t buf[JP_REC_MAX_SIZE];
    memset(buf, 0, sizeof buf);
    if (type == JP_REC_SOURCE_DEF) {
        struct jp_rec_source_def r = {{JP_REC_SOURCE_DEF, (uint16_t)(12 + n)}, 1,
                                      JP_ORIGIN_PROJECT, 0, (uint16_t)n};
        memcpy(buf, &r, sizeof r);
        memcpy(buf + sizeof r, s, n);
        return check(buf, r.h.size);
    }
    if (type == JP_REC_EXCERPT) {
        struct jp_rec_excerpt r = {{JP_REC_EXCERPT, (uint16_t)(20 + n)}, 1, 1, 1, 0, 0,
                                   (uint16_t)n};
        memcpy(buf, &r, sizeof r);
        memcpy(buf + sizeof r, s, n);
        return check(buf, r.h.size);
    }
    struct jp_rec_frame_def r;
    memset(&r, 0, sizeof r);
    r.frame_id = 1;
    r.kind = JP_FRAME_FUNCTION;
    r.ns_len = (uint16_t)(which == 0 ? n : 2);
    r.fn_len = (uint16_t)(which == 1 ? n : 2);
    r.h = (struct jp_rec_hdr){JP_REC_FRAME_DEF, (uint16_t)(36 + r.ns_len + r.fn_len)};
    memcpy(buf, &r, sizeof r);
    memcpy(buf + 36, which == 0 ? s : "ok", r.ns_len);
    memcpy(buf + 36 + r.ns_len, which == 1 ? s : "ok", r.fn_len);
    return check(buf, r.h.size);
}

Test(records, validate_rejects_malformed_utf8_in_every_string_field)
{
    static const struct { uint32_t type; int which; const char *reason; } fields[] = {
        {JP_REC_SOURCE_DEF, 0, "source path is not valid UTF-8"},
        {JP_REC_FRAME_DEF, 0, "frame namespace is not valid UTF-8"},
        {JP_REC_FRAME_DEF, 1, "frame function name is not valid UTF-8"},
        {JP_REC_EXCERPT, 0, "excerpt text is not valid UTF-8"},
    };
    char s[64];
    for (size_t f = 0; f < sizeof fields / sizeof fields[0]; f++) {
        for (size_t i = 0; i < sizeof bad_utf8 / sizeof bad_utf8[0]; i++) {
            /* inside a longer string too: the check covers every byte, not the first */
            for (int pos = 0; pos < 2; pos++) {
                size_t n = 0;
                if (pos)
                    n = (size_t)snprintf(s, sizeof s, "src/x");
                memcpy(s + n, bad_utf8[i].bytes, bad_utf8[i].len);
                n += bad_utf8[i].len;
                cr_assert_eq(check_string_record(fields[f].type, fields[f].which, s, n),
                             -EPROTO, "%s: %s", fields[f].reason, bad_utf8[i].what);
                cr_assert_str_eq(why, fields[f].reason, "%s", bad_utf8[i].what);
            }
        }
        for (size_t i = 0; i < sizeof good_utf8 / sizeof good_utf8[0]; i++)
            cr_assert_eq(check_string_record(fields[f].type, fields[f].which, good_utf8[i].bytes,
                                             good_utf8[i].len),
                         0, "%s: %s (%s)", fields[f].reason, good_utf8[i].what, why);
    }
    /* a sequence split across namespace and function name is two bad names */
    uint8_t buf[64];
    struct jp_rec_frame_def r;
    memset(&r, 0, sizeof r);
    r.frame_id = 1;
    r.ns_len = 2;
    r.fn_len = 2;
    r.h = (struct jp_rec_hdr){JP_REC_FRAME_DEF, 40};
    memcpy(buf, &r, sizeof r);
    memcpy(buf + 36, "a\xe2\x82\xac", 4); /* "a" + the first byte of U+20AC | its other two */
    cr_assert_eq(check(buf, 40), -EPROTO);
    cr_assert_str_eq(why, "frame namespace is not valid UTF-8");
}
