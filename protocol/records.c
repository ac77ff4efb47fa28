/* Record type names, structural validation of records copied out of untrusted memory, and the
 * contract's threshold grammar. */
#include "protocol/records.h"

#include <errno.h>
#include <pthread.h>
#include <string.h>

/* The record list carries upper-case identifiers only; the lower-case names are derived from it
 * once, so the enum and the names cannot drift. */
static const char *const rec_upper[JP_REC_TYPE_LIMIT] = {
#define JP_X(name, value, size) [value] = #name,
    JP_RECORD_TYPES(JP_X)
#undef JP_X
};
static char rec_lower[JP_REC_TYPE_LIMIT][24];
static pthread_once_t rec_lower_once = PTHREAD_ONCE_INIT;

static void rec_lower_init(void)
{
    for (unsigned t = 0; t < JP_REC_TYPE_LIMIT; t++) {
        const char *s = rec_upper[t];
        if (!s)
            continue;
        size_t i = 0;
        for (; s[i] && i + 1 < sizeof rec_lower[t]; i++)
            rec_lower[t][i] = (char)(s[i] >= 'A' && s[i] <= 'Z' ? s[i] - 'A' + 'a' : s[i]);
        rec_lower[t][i] = '\0';
    }
}

const char *jp_rec_type_name(uint32_t type)
{
    if (type >= JP_REC_TYPE_LIMIT || !rec_upper[type])
        return NULL;
    pthread_once(&rec_lower_once, rec_lower_init);
    return rec_lower[type];
}

#define JP_NAME_FN(fn, LIST, prefix)                                                              \
    const char *fn(uint32_t v)                                                                    \
    {                                                                                             \
        switch (v) {                                                                              \
            LIST(prefix)                                                                          \
        default:                                                                                  \
            return NULL;                                                                          \
        }                                                                                         \
    }
#define JP_X_CASE(n, v, s)                                                                        \
    case v:                                                                                       \
        return s;
JP_NAME_FN(jp_mode_name, JP_MODES, JP_X_CASE)
JP_NAME_FN(jp_backend_name, JP_BACKENDS, JP_X_CASE)
JP_NAME_FN(jp_status_word, JP_STATUSES, JP_X_CASE)
JP_NAME_FN(jp_ending_word, JP_ENDINGS, JP_X_CASE)
JP_NAME_FN(jp_origin_name, JP_ORIGINS, JP_X_CASE)
JP_NAME_FN(jp_state_name, JP_STATES, JP_X_CASE)
JP_NAME_FN(jp_termination_name, JP_TERMINATIONS, JP_X_CASE)
JP_NAME_FN(jp_frame_kind_name, JP_FRAME_KINDS, JP_X_CASE)
#undef JP_X_CASE
#undef JP_NAME_FN

/* Fixed part of each type: the exact size of fixed-size records, the header + fixed fields of
 * variable-length ones (PAD is just a header). */
static const uint16_t rec_fixed[JP_REC_TYPE_LIMIT] = {
    [JP_REC_PAD] = sizeof(struct jp_rec_hdr),
    [JP_REC_RUN_START] = sizeof(struct jp_rec_run_start),
    [JP_REC_SOURCE_DEF] = sizeof(struct jp_rec_source_def),
    [JP_REC_FRAME_DEF] = sizeof(struct jp_rec_frame_def),
    [JP_REC_NODE_DEF] = sizeof(struct jp_rec_node_def),
    [JP_REC_EXEC] = sizeof(struct jp_rec_exec),
    [JP_REC_CPU_SAMPLE] = sizeof(struct jp_rec_cpu_sample),
    [JP_REC_ALLOC] = sizeof(struct jp_rec_alloc),
    [JP_REC_RESIZE] = sizeof(struct jp_rec_resize),
    [JP_REC_FREE] = sizeof(struct jp_rec_free),
    [JP_REC_COUNTERS] = sizeof(struct jp_rec_counters),
    [JP_REC_EXCERPT] = sizeof(struct jp_rec_excerpt),
    [JP_REC_RUN_STOP] = sizeof(struct jp_rec_run_stop),
    [JP_REC_RESIZE_SEQ] = sizeof(struct jp_rec_resize_seq),
    [JP_REC_TIME] = sizeof(struct jp_rec_time),
};
/* The list's fixed_size column must agree with the structs. */
#define JP_FIXED(name) (rec_list_size_##name)
enum {
#define JP_X(name, value, size) rec_list_size_##name = size,
    JP_RECORD_TYPES(JP_X)
#undef JP_X
};
_Static_assert(JP_FIXED(RUN_START) == sizeof(struct jp_rec_run_start), "RUN_START size");
_Static_assert(JP_FIXED(NODE_DEF) == sizeof(struct jp_rec_node_def), "NODE_DEF size");
_Static_assert(JP_FIXED(EXEC) == sizeof(struct jp_rec_exec), "EXEC size");
_Static_assert(JP_FIXED(CPU_SAMPLE) == sizeof(struct jp_rec_cpu_sample), "CPU_SAMPLE size");
_Static_assert(JP_FIXED(ALLOC) == sizeof(struct jp_rec_alloc), "ALLOC size");
_Static_assert(JP_FIXED(RESIZE) == sizeof(struct jp_rec_resize), "RESIZE size");
_Static_assert(JP_FIXED(FREE) == sizeof(struct jp_rec_free), "FREE size");
_Static_assert(JP_FIXED(COUNTERS) == sizeof(struct jp_rec_counters), "COUNTERS size");
_Static_assert(JP_FIXED(RUN_STOP) == sizeof(struct jp_rec_run_stop), "RUN_STOP size");
_Static_assert(JP_FIXED(RESIZE_SEQ) == sizeof(struct jp_rec_resize_seq), "RESIZE_SEQ size");
_Static_assert(JP_FIXED(TIME) == sizeof(struct jp_rec_time), "TIME size");
_Static_assert(JP_FIXED(PAD) == 0 && JP_FIXED(SOURCE_DEF) == 0 && JP_FIXED(FRAME_DEF) == 0 &&
                   JP_FIXED(EXCERPT) == 0,
               "variable-length records");
#undef JP_FIXED

static const uint8_t rec_is_fixed[JP_REC_TYPE_LIMIT] = {
#define JP_X(name, value, size) [value] = (size) != 0,
    JP_RECORD_TYPES(JP_X)
#undef JP_X
};

static int fail(const char **why, const char *reason)
{
    if (why)
        *why = reason;
    return -EPROTO;
}

int jp_rec_validate(const void *rec, uint32_t len, const char **why)
{
    struct jp_rec_hdr h;
    if (!rec || len < sizeof h)
        return fail(why, "record shorter than its header");
    memcpy(&h, rec, sizeof h);
    if (h.type >= JP_REC_TYPE_LIMIT || !rec_upper[h.type])
        return fail(why, "unknown record type");
    if (h.size > len)
        return fail(why, "size past end");
    if (h.size > JP_REC_MAX_SIZE)
        return fail(why, "record larger than JP_REC_MAX_SIZE");
    if (h.size < rec_fixed[h.type])
        return fail(why, "record smaller than its fixed part");
    if (rec_is_fixed[h.type] && h.size != rec_fixed[h.type])
        return fail(why, "fixed-size record has the wrong size");

    /* Copy each fixed part out: the caller's buffer need not be aligned. */
    switch (h.type) {
    case JP_REC_RUN_START: {
        struct jp_rec_run_start r;
        memcpy(&r, rec, sizeof r);
        if (r.format_version != JP_FORMAT_VERSION && r.format_version != JP_FORMAT_VERSION_SEQ)
            return fail(why, "unsupported record format version");
        if (!jp_mode_name(r.mode))
            return fail(why, "unknown mode");
        if (!jp_backend_name(r.backend))
            return fail(why, "unknown backend");
        /* The run's own parameters: a report cannot be built from values outside them, so a
         * start carrying them is refused here rather than failing at render time. */
        if (r.mode == JP_MODE_CPU ? r.rate_hz < JP_RATE_HZ_MIN || r.rate_hz > JP_RATE_HZ_MAX
                                  : r.rate_hz != 0)
            return fail(why, "run_start rate_hz out of range for its mode");
        if (r.threshold_bp > JP_THRESHOLD_BP_MAX)
            return fail(why, "run_start threshold_bp above " JP_STR(JP_THRESHOLD_BP_MAX));
        if (r.limit < JP_LIMIT_MIN || r.limit > JP_LIMIT_MAX)
            return fail(why, "run_start limit outside " JP_LIMIT_RANGE);
        return 0;
    }
    case JP_REC_SOURCE_DEF: {
        struct jp_rec_source_def r;
        memcpy(&r, rec, sizeof r);
        if (!jp_origin_name(r.origin))
            return fail(why, "unknown source origin");
        if (r.path_len < 1 || r.path_len > JP_PATH_MAX)
            return fail(why, "source path length out of range");
        if ((uint32_t)sizeof r + r.path_len != h.size)
            return fail(why, "source path does not match record size");
        if (jp_utf8_validate((const uint8_t *)rec + sizeof r, r.path_len, NULL) < 0)
            return fail(why, "source path is not valid UTF-8");
        return 0;
    }
    case JP_REC_FRAME_DEF: {
        struct jp_rec_frame_def r;
        memcpy(&r, rec, sizeof r);
        if (r.kind >= JP_FRAME_KIND_LIMIT)
            return fail(why, "unknown frame kind");
        if (r.ns_len < 1 || r.ns_len > JP_NAME_MAX)
            return fail(why, "frame namespace length out of range");
        if (r.fn_len < 1 || r.fn_len > JP_NAME_MAX)
            return fail(why, "frame function name length out of range");
        if ((uint32_t)sizeof r + r.ns_len + r.fn_len != h.size)
            return fail(why, "frame names do not match record size");
        /* Checked apart: a sequence split across the two names is two bad names. */
        const uint8_t *names = (const uint8_t *)rec + sizeof r;
        if (jp_utf8_validate(names, r.ns_len, NULL) < 0)
            return fail(why, "frame namespace is not valid UTF-8");
        if (jp_utf8_validate(names + r.ns_len, r.fn_len, NULL) < 0)
            return fail(why, "frame function name is not valid UTF-8");
        return 0;
    }
    case JP_REC_CPU_SAMPLE: {
        struct jp_rec_cpu_sample r;
        memcpy(&r, rec, sizeof r);
        const char *fault = jp_rec_sample_fault(&r);
        return fault ? fail(why, fault) : 0;
    }
    case JP_REC_EXCERPT: {
        struct jp_rec_excerpt r;
        memcpy(&r, rec, sizeof r);
        if (r.flags & ~(JP_EXCERPT_REDACTED | JP_EXCERPT_UNAVAILABLE))
            return fail(why, "unknown excerpt flags");
        if (r.text_len > JP_EXCERPT_MAX)
            return fail(why, "excerpt text length out of range");
        if ((r.flags & JP_EXCERPT_UNAVAILABLE) && r.text_len != 0)
            return fail(why, "unavailable excerpt with text");
        if ((uint32_t)sizeof r + r.text_len != h.size)
            return fail(why, "excerpt text does not match record size");
        if (jp_utf8_validate((const uint8_t *)rec + sizeof r, r.text_len, NULL) < 0)
            return fail(why, "excerpt text is not valid UTF-8");
        return 0;
    }
    case JP_REC_RUN_STOP: {
        struct jp_rec_run_stop r;
        memcpy(&r, rec, sizeof r);
        if (!jp_termination_name(r.termination))
            return fail(why, "unknown termination");
        return 0;
    }
    default:
        /* PAD, NODE_DEF, EXEC, ALLOC, RESIZE, RESIZE_SEQ, FREE, COUNTERS: size is all there is
         * to check (whether the stream's format allows RESIZE_SEQ is the engine's to say). */
        return 0;
    }
}

int jp_parse_percent_bp(const char *s, uint32_t *bp)
{
    /* The contract's grammar: digits, optionally '.' and one or two digits; 0..100. No sign,
     * no exponent, no spaces: anything else is a CLI error, never silently rounded. */
    uint64_t whole = 0, frac = 0;
    unsigned nwhole = 0, nfrac = 0;
    const char *p = s;
    if (!s || !*s)
        return -EINVAL;
    for (; *p >= '0' && *p <= '9'; p++) {
        if (++nwhole > 3)
            return -ERANGE;
        whole = whole * 10 + (uint64_t)(*p - '0');
    }
    if (nwhole == 0)
        return -EINVAL;
    if (*p == '.') {
        p++;
        for (; *p >= '0' && *p <= '9'; p++) {
            if (++nfrac > 2)
                return -EINVAL;
            frac = frac * 10 + (uint64_t)(*p - '0');
        }
        if (nfrac == 0)
            return -EINVAL;
        if (nfrac == 1)
            frac *= 10;
    }
    if (*p)
        return -EINVAL;
    uint64_t v = whole * 100 + frac;
    if (v > JP_THRESHOLD_BP_MAX)
        return -ERANGE;
    *bp = (uint32_t)v;
    return 0;
}
