/* `jett run` argument validation, complete before anything is read or compiled (the
 * contract's CLI section): the two modes are exclusive, every profile control needs its
 * mode, and values are strict decimal numbers within their ranges. Options may come in any
 * order, before or after FILE. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/text.h"
#include "jett.h"
#include "protocol/control.h"
#include "protocol/records.h"

int jt_parse_uint(const char *s, uint32_t lo, uint32_t hi, uint32_t *out)
{
    uint64_t v = 0;
    size_t i = 0;
    for (; s[i] >= '0' && s[i] <= '9'; i++) {
        if (i >= 10)
            return -ERANGE;
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    if (i == 0 || s[i] != '\0')
        return -EINVAL;
    if (v < lo || v > hi)
        return -ERANGE;
    *out = (uint32_t)v;
    return 0;
}

enum opt {
    O_PROFILE, O_MEMORY, O_AGENT, O_THRESHOLD, O_LIMIT, O_RATE, O_CAPTURE, O_OVERWRITE, O_VERBOSE,
    O_EXPORT, O_WORKERS, O_BACKEND,
    O_COUNT
};
static const struct {
    const char *name;
    bool takes_value;
} opts[O_COUNT] = {
    [O_PROFILE] = {"--profile", false},        [O_MEMORY] = {"--profile-memory", false},
    [O_AGENT] = {"--agent", false},            [O_THRESHOLD] = {"--profile-threshold", true},
    [O_LIMIT] = {"--profile-limit", true},     [O_RATE] = {"--profile-rate", true},
    [O_CAPTURE] = {"--profile-capture", true},
    [O_OVERWRITE] = {"--profile-capture-overwrite", false},
    [O_VERBOSE] = {"--profile-verbose", false},
    [O_EXPORT] = {"--profile-export", true},
    [O_WORKERS] = {"--workers", true},
    [O_BACKEND] = {"--backend", true},
};

/* `--profile-export FORMAT:PATH`: a known format word, a non-empty path. */
static int parse_export(const char *val, struct jt_cli *c, char *err, size_t errcap)
{
    static const char *const words[] = {
#define JP_X(n, w) w,
        JP_EXPORT_FORMATS(JP_X)
#undef JP_X
    };
    char v[64];
    const char *colon = strchr(val, ':');
    if (c->nexports == JT_MAX_EXPORTS) {
        snprintf(err, errcap, "--profile-export given more than %u times", JT_MAX_EXPORTS);
        return -EINVAL;
    }
    for (uint32_t f = 0; colon && f < JP_EXPORT_FORMAT_COUNT; f++)
        if (strlen(words[f]) == (size_t)(colon - val) && !strncmp(val, words[f], colon - val)) {
            if (!colon[1])
                break;
            c->exports[c->nexports++] = (struct jt_export){f, colon + 1};
            return 0;
        }
    jt_shown(val, 40, v, sizeof v);
    snprintf(err, errcap, "--profile-export expects FORMAT:PATH with FORMAT folded, pprof, "
             "speedscope, svg or html, got '%s'", v);
    return -EINVAL;
}

void jt_shown(const char *v, size_t max, char *out, size_t cap)
{
    /* The first max bytes by the one rule for human text (common/text.h), cut to fit cap
     * (never inside a UTF-8 sequence), "..." after a value that was cut. */
    size_t len = strlen(v);
    struct jp_buf b = {0};
    jp_text_safe(&b, v, len < max ? len : max);
    size_t n = b.failed ? 0 : b.len;
    if (n + 4 > cap) {
        n = cap > 4 ? cap - 4 : 0;
        while (n && ((unsigned char)b.p[n] & 0xc0u) == 0x80u)
            n--;
    }
    if (n)
        memcpy(out, b.p, n);
    if ((len > max || n < b.len) && n + 4 <= cap) {
        memcpy(out + n, "...", 3);
        n += 3;
    }
    out[n] = '\0';
    jp_buf_free(&b);
}

int jt_cli_parse(int argc, char **argv, struct jt_cli *c, char *err, size_t errcap)
{
    memset(c, 0, sizeof *c);
    c->threshold_bp = 500;
    c->limit = 10;
    c->rate_hz = JP_RATE_HZ_DEFAULT;
    c->workers = 1;
    c->backend = JT_BACKEND_VM;
    bool seen[O_COUNT] = {false};
    char v[64];
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (a[0] != '-' || a[1] == '\0') {
            if (c->file) {
                jt_shown(a, 40, v, sizeof v);
                snprintf(err, errcap, "unexpected extra argument '%s': expected one program file", v);
                return -EINVAL;
            }
            c->file = a;
            continue;
        }
        int o = -1;
        const char *val = NULL;
        for (int k = 0; k < O_COUNT; k++) {
            size_t n = strlen(opts[k].name);
            if (strncmp(a, opts[k].name, n) == 0 && (a[n] == '\0' || (a[n] == '=' && opts[k].takes_value))) {
                o = k;
                if (a[n] == '=')
                    val = a + n + 1;
                break;
            }
        }
        if (o < 0) {
            jt_shown(a, 40, v, sizeof v);
            snprintf(err, errcap, "unknown option '%s'", v);
            return -EINVAL;
        }
        if (seen[o] && o != O_EXPORT) { /* the one option that may be repeated */
            snprintf(err, errcap, "%s given more than once", opts[o].name);
            return -EINVAL;
        }
        seen[o] = true;
        if (opts[o].takes_value && !val) {
            if (i + 1 >= argc) {
                snprintf(err, errcap, "%s expects a value", opts[o].name);
                return -EINVAL;
            }
            val = argv[++i];
        }
        int r = 0;
        switch (o) {
        case O_PROFILE: c->mode = JT_MODE_CPU; break;
        case O_MEMORY: c->mode = JT_MODE_MEMORY; break;
        case O_AGENT: c->agent = true; break;
        case O_OVERWRITE: c->capture_overwrite = true; break;
        case O_VERBOSE: c->verbose = true; break;
        case O_THRESHOLD:
            r = jp_parse_percent_bp(val, &c->threshold_bp);
            if (r < 0) {
                jt_shown(val, 40, v, sizeof v);
                snprintf(err, errcap,
                         "--profile-threshold expects a percentage from 0 to " JP_STR(JP_THRESHOLD_PCT_MAX)
                         " with at most two "
                         "fractional digits, got '%s'", v);
            }
            break;
        case O_LIMIT:
            r = jt_parse_uint(val, JP_LIMIT_MIN, JP_LIMIT_MAX, &c->limit);
            if (r < 0) {
                jt_shown(val, 40, v, sizeof v);
                snprintf(err, errcap, "--profile-limit expects an integer from " JP_STR(JP_LIMIT_MIN) " to "
                         JP_STR(JP_LIMIT_MAX) ", got '%s'", v);
            }
            break;
        case O_RATE:
            r = jt_parse_uint(val, JP_RATE_HZ_MIN, JP_RATE_HZ_MAX, &c->rate_hz);
            if (r < 0) {
                jt_shown(val, 40, v, sizeof v);
                snprintf(err, errcap, "--profile-rate expects an integer from " JP_STR(JP_RATE_HZ_MIN) " to "
                         JP_STR(JP_RATE_HZ_MAX) " (hertz), got '%s'", v);
            }
            break;
        case O_CAPTURE:
            if (!*val) {
                snprintf(err, errcap, "--profile-capture expects a file path");
                r = -EINVAL;
            }
            c->capture_path = val;
            break;
        case O_EXPORT:
            r = parse_export(val, c, err, errcap);
            break;
        case O_WORKERS:
            r = jt_parse_uint(val, 1, JT_MAX_WORKERS, &c->workers);
            if (r < 0) {
                jt_shown(val, 40, v, sizeof v);
                snprintf(err, errcap, "--workers expects an integer from 1 to %u (runtime worker "
                         "threads), got '%s'", JT_MAX_WORKERS, v);
            }
            break;
        case O_BACKEND:
            if (!strcmp(val, "interp")) {
                c->backend = JT_BACKEND_INTERP;
            } else if (!strcmp(val, "vm")) {
                c->backend = JT_BACKEND_VM;
            } else {
                jt_shown(val, 40, v, sizeof v);
                snprintf(err, errcap, "--backend expects interp (the tree-walking interpreter) "
                         "or vm (the bytecode VM), got '%s'", v);
                r = -EINVAL;
            }
            break;
        default: break;
        }
        if (r < 0)
            return -EINVAL;
    }
    if (seen[O_PROFILE] && seen[O_MEMORY]) {
        snprintf(err, errcap,
                 "--profile and --profile-memory cannot be used together: choose one profiling mode");
        return -EINVAL;
    }
    if (seen[O_OVERWRITE] && !seen[O_CAPTURE]) {
        snprintf(err, errcap, "--profile-capture-overwrite requires --profile-capture PATH");
        return -EINVAL;
    }
    if (c->mode == JT_MODE_NONE) {
        static const int need_mode[] = {O_THRESHOLD, O_LIMIT, O_RATE, O_CAPTURE, O_VERBOSE,
                                        O_EXPORT};
        for (size_t k = 0; k < sizeof need_mode / sizeof need_mode[0]; k++) {
            if (seen[need_mode[k]]) {
                snprintf(err, errcap, "%s requires %s", opts[need_mode[k]].name,
                         need_mode[k] == O_RATE ? "--profile" : "--profile or --profile-memory");
                return -EINVAL;
            }
        }
    }
    if (c->mode == JT_MODE_MEMORY && seen[O_RATE]) {
        snprintf(err, errcap, "--profile-rate requires --profile: memory profiling has no sample rate");
        return -EINVAL;
    }
    if (!c->file) {
        snprintf(err, errcap, "expected a program file: jett run FILE [options]");
        return -EINVAL;
    }
    return 0;
}
