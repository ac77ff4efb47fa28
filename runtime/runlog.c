/* Debug rows and structured log records (runlog.h): the rules a `log` call must meet, the rows
 * kept for the envelope, the human lines, and the envelope's five tables. */
#include "runlog.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/text.h"
#include "common/toon.h"
#include "interp.h"
#include "protocol/records.h"

_Static_assert((int)JT_ORIGIN_PROJECT == (int)JP_ORIGIN_PROJECT &&
                   (int)JT_ORIGIN_DEPENDENCY == (int)JP_ORIGIN_DEPENDENCY &&
                   (int)JT_ORIGIN_STDLIB == (int)JP_ORIGIN_STDLIB,
               "a source's origin is named by the protocol's list");

static const char *const level_word[] = {
#define JT_X(n, w) w,
    JT_LOG_LEVELS(JT_X)
#undef JT_X
};

static const char secret_text[] = "<secret>";
static const char deep_text[] = "[...]";

static const struct jt_str *as_str(jv v)
{
    return (const struct jt_str *)v.u.o;
}

/* ---- the TOON rendering of a value ---- */

/* A list nested past what print() shows is rendered as the string `[...]`. */
static bool shown_as_scalar(jv v, int depth)
{
    return v.k != JV_LIST || depth >= MAX_PRINT_DEPTH;
}

static void scalar(struct jp_buf *b, jv v)
{
    switch (v.k) {
    case JV_NIL: JP_BUF_LIT(b, "null"); return;
    case JV_INT: jp_buf_printf(b, "%" PRId64, v.u.i); return;
    case JV_BOOL: jp_buf_puts(b, v.u.i ? "true" : "false"); return;
    case JV_STR: jp_toon_str(b, as_str(v)->data, as_str(v)->len); return;
    case JV_SECRET: jp_buf_puts(b, secret_text); return;
    default: jp_toon_str(b, deep_text, sizeof deep_text - 1); return; /* a list at the limit */
    }
}

/* The list at nesting `depth` after its `- ` (or at the root): `[N]:`, then its elements on the
 * same line when each is shown as a scalar, else one `- ` item per line at indent `level`.
 * Recursion is bounded by MAX_PRINT_DEPTH. */
static void list_body(struct jp_buf *b, const struct jt_list *l, int level, int depth)
{
    jp_buf_printf(b, "[%" PRIu64 "]:", l->len);
    bool flat = true;
    for (uint64_t i = 0; i < l->len && flat; i++)
        flat = shown_as_scalar(l->items[i], depth + 1);
    for (uint64_t i = 0; i < l->len; i++) {
        jv e = l->items[i];
        if (flat) {
            jp_buf_put(b, i ? "," : " ", 1);
            scalar(b, e);
            continue;
        }
        JP_BUF_LIT(b, "\n");
        for (int k = 0; k < level; k++)
            JP_BUF_LIT(b, "  ");
        JP_BUF_LIT(b, "- ");
        if (shown_as_scalar(e, depth + 1))
            scalar(b, e);
        else
            list_body(b, (const struct jt_list *)e.u.o, level + 1, depth + 1);
    }
}

int jt_toon_value(struct jp_buf *b, jv v)
{
    if (v.k != JV_LIST)
        scalar(b, v);
    else if (((const struct jt_list *)v.u.o)->len == 0)
        JP_BUF_LIT(b, "[]"); /* the root form of an empty list; nested ones are `[0]:` */
    else
        list_body(b, (const struct jt_list *)v.u.o, 1, 0);
    return b->failed ? -ENOMEM : 0;
}

/* ---- recording ---- */

static int broken(struct jt_runlog *rl)
{
    rl->broken = true;
    return -ENOMEM;
}

/* arr with room for `need` elements of `size` bytes: arr itself, a larger copy (*cap updated;
 * an array not yet made, NULL, is made even when need is 0), or NULL with arr untouched. */
static void *room(void *arr, uint32_t *cap, uint32_t need, size_t size)
{
    if (need <= *cap && arr)
        return arr;
    uint32_t nc = *cap ? *cap : 64u;
    while (nc < need)
        nc *= 2u;
    void *p = realloc(arr, (size_t)nc * size);
    if (p)
        *cap = nc;
    return p;
}

/* The kept bytes at off (a zero-length field may be recorded before anything else was). */
static const char *kept(const struct jt_runlog *rl, size_t off)
{
    return rl->bytes.p ? rl->bytes.p + off : "";
}

/* Ends a human line, writes it and counts its row in *count: 1, or -ENOMEM when building the
 * line ran out of memory (nothing is written then). */
static int write_line(struct jt_runlog *rl, struct jp_buf *line, uint32_t *count)
{
    JP_BUF_LIT(line, "\n");
    int r = line->failed ? broken(rl) : 1;
    if (r > 0) {
        fwrite(line->p, 1, line->len, rl->human);
        fflush(rl->human);
        (*count)++;
    }
    jp_buf_free(line);
    return r;
}

static void line_start(struct jp_buf *b, const char *word, const struct jt_source *src,
                       uint32_t line, uint32_t col)
{
    jp_buf_puts(b, word);
    JP_BUF_LIT(b, " ");
    jp_text_safe_str(b, src->logical);
    jp_buf_printf(b, ":%" PRIu32 ":%" PRIu32 ": ", line, col);
}

int jt_runlog_debug(struct jt_runlog *rl, const struct jt_source *src, uint32_t line,
                    uint32_t col, jv v)
{
    if (rl->broken)
        return -ENOMEM;
    if (rl->ndebug >= JT_RUNLOG_MAX_ROWS)
        return 0;
    if (rl->human) {
        struct jp_buf text = {0}, out = {0};
        if (jt_toon_value(&text, v) < 0)
            out.failed = true;
        line_start(&out, "debug", src, line, col);
        jp_text_safe(&out, text.p ? text.p : "", text.len);
        jp_buf_free(&text);
        return write_line(rl, &out, &rl->ndebug);
    }
    struct jt_debug_row *d = room(rl->debug, &rl->capdebug, rl->ndebug + 1, sizeof *d);
    if (!d)
        return broken(rl);
    rl->debug = d;
    size_t off = rl->bytes.len;
    if (jt_toon_value(&rl->bytes, v) < 0)
        return broken(rl);
    d[rl->ndebug++] = (struct jt_debug_row){src, line, col, off, rl->bytes.len - off};
    return 1;
}

static int level_of(jv v)
{
    if (v.k != JV_STR)
        return -1;
    for (int i = 0; i < JT_LOG_LEVEL_COUNT; i++)
        if (as_str(v)->len == strlen(level_word[i]) &&
            memcmp(as_str(v)->data, level_word[i], as_str(v)->len) == 0)
            return i;
    return -1;
}

/* [a-z_][a-z0-9_]* */
static bool key_ok(jv v)
{
    if (v.k != JV_STR || as_str(v)->len == 0)
        return false;
    for (uint64_t i = 0; i < as_str(v)->len; i++) {
        char c = as_str(v)->data[i];
        if (!(c == '_' || (c >= 'a' && c <= 'z') || (i > 0 && c >= '0' && c <= '9')))
            return false;
    }
    return true;
}

static bool same_str(jv a, jv b)
{
    return as_str(a)->len == as_str(b)->len &&
           memcmp(as_str(a)->data, as_str(b)->data, as_str(a)->len) == 0;
}

/* The bytes a value counts toward JT_LOG_MAX_BYTES: its text as written. A secret counts as
 * its `<secret>`, so its length cannot decide whether a record is accepted. */
static uint64_t value_bytes(jv v)
{
    char tmp[24];
    switch (v.k) {
    case JV_INT: return (uint64_t)snprintf(tmp, sizeof tmp, "%" PRId64, v.u.i);
    case JV_BOOL: return v.u.i ? 4u : 5u;
    case JV_STR: return as_str(v)->len;
    default: return sizeof secret_text - 1;
    }
}

/* Whether `log(a[0], ..., a[n-1])` is accepted now; its level when it is. */
static bool acceptable(const struct jt_runlog *rl, const jv *a, uint32_t n, int *level)
{
    if (n < 2 || (n - 2) % 2 != 0 || (n - 2) / 2 > JT_LOG_MAX_FIELDS ||
        rl->nlogs >= JT_RUNLOG_MAX_ROWS)
        return false;
    *level = level_of(a[0]);
    if (*level < 0 || a[1].k != JV_STR)
        return false;
    uint64_t bytes = as_str(a[1])->len;
    for (uint32_t i = 2; i < n; i += 2) {
        if (!key_ok(a[i]))
            return false;
        for (uint32_t j = 2; j < i; j += 2)
            if (same_str(a[j], a[i]))
                return false;
        uint32_t k = a[i + 1].k;
        if (k != JV_INT && k != JV_BOOL && k != JV_STR && k != JV_SECRET)
            return false;
        bytes += value_bytes(a[i + 1]);
    }
    return bytes <= JT_LOG_MAX_BYTES;
}

/* A field value as the human line shows it. */
static void human_value(struct jp_buf *b, jv v)
{
    switch (v.k) {
    case JV_INT: jp_buf_printf(b, "%" PRId64, v.u.i); return;
    case JV_BOOL: jp_buf_puts(b, v.u.i ? "true" : "false"); return;
    case JV_STR: jp_text_safe(b, as_str(v)->data, as_str(v)->len); return;
    default: jp_buf_puts(b, secret_text); return;
    }
}

static size_t keep_bytes(struct jt_runlog *rl, jv s)
{
    size_t off = rl->bytes.len;
    jp_buf_put(&rl->bytes, as_str(s)->data, as_str(s)->len);
    return off;
}

int jt_runlog_log(struct jt_runlog *rl, const struct jt_source *src, uint32_t line, uint32_t col,
                  const jv *a, uint32_t n)
{
    if (rl->broken)
        return -ENOMEM;
    uint64_t seq = ++rl->last_seq; /* a rejected call uses its number up too */
    int level;
    if (!acceptable(rl, a, n, &level))
        return 0;
    uint32_t nf = (n - 2) / 2;
    if (rl->human) {
        struct jp_buf out = {0};
        line_start(&out, level_word[level], src, line, col);
        jp_text_safe(&out, as_str(a[1])->data, as_str(a[1])->len);
        for (uint32_t i = 2; i < n; i += 2) {
            JP_BUF_LIT(&out, " ");
            jp_text_safe(&out, as_str(a[i])->data, as_str(a[i])->len);
            JP_BUF_LIT(&out, "=");
            human_value(&out, a[i + 1]);
        }
        return write_line(rl, &out, &rl->nlogs);
    }
    struct jt_log_row *lr = room(rl->logs, &rl->caplogs, rl->nlogs + 1, sizeof *lr);
    if (!lr)
        return broken(rl);
    rl->logs = lr;
    struct jt_log_field *f = room(rl->fields, &rl->capfields, rl->nfields + nf, sizeof *f);
    if (!f)
        return broken(rl);
    rl->fields = f;
    size_t msg_off = keep_bytes(rl, a[1]);
    for (uint32_t k = 0; k < nf; k++) {
        jv key = a[2 + 2 * k], v = a[3 + 2 * k];
        struct jt_log_field *x = &f[rl->nfields + k];
        *x = (struct jt_log_field){.kind = v.k, .key_off = keep_bytes(rl, key),
                                   .key_len = as_str(key)->len};
        if (v.k == JV_STR) {
            x->val_off = keep_bytes(rl, v);
            x->val_len = as_str(v)->len;
        } else if (v.k != JV_SECRET) {
            x->i = v.u.i;
        }
    }
    if (rl->bytes.failed)
        return broken(rl);
    lr[rl->nlogs++] = (struct jt_log_row){.seq = seq, .src = src, .level = (uint32_t)level,
                                          .line = line, .col = col, .msg_off = msg_off,
                                          .msg_len = as_str(a[1])->len, .field0 = rl->nfields,
                                          .nfields = nf};
    rl->nfields += nf;
    return 1;
}

void jt_runlog_free(struct jt_runlog *rl)
{
    free(rl->debug);
    free(rl->logs);
    free(rl->fields);
    jp_buf_free(&rl->bytes);
    FILE *human = rl->human;
    memset(rl, 0, sizeof *rl);
    rl->human = human;
}

/* ---- the envelope's tables ---- */

static void table(struct jp_buf *b, const char *name, uint32_t n, const char *columns)
{
    if (n)
        jt_buf_printf(b, "%s[%" PRIu32 "]{%s}:\n", name, n, columns);
    else
        jt_buf_printf(b, "%s[0]:\n", name);
}

static void cell(struct jp_buf *b, const char *s, size_t n)
{
    JP_BUF_LIT(b, ",");
    jt_toon_string(b, s, n);
}

void jt_runlog_tables(const struct jt_runlog *rl, const struct jt_program *prog,
                      struct jp_buf *b)
{
    table(b, "debug", rl->ndebug, "seq,path,line,column,value");
    for (uint32_t i = 0; i < rl->ndebug; i++) {
        const struct jt_debug_row *d = &rl->debug[i];
        jt_buf_printf(b, "  %" PRIu32, i + 1);
        cell(b, d->src->logical, strlen(d->src->logical));
        jt_buf_printf(b, ",%" PRIu32 ",%" PRIu32, d->line, d->col);
        cell(b, kept(rl, d->value_off), d->value_len);
        jt_buf_puts(b, "\n");
    }

    table(b, "logs", rl->nlogs, "seq,level,source_id,line,column,message,field_count");
    for (uint32_t i = 0; i < rl->nlogs; i++) {
        const struct jt_log_row *l = &rl->logs[i];
        jt_buf_printf(b, "  %" PRIu64 ",%s,%" PRIu32 ",%" PRIu32 ",%" PRIu32, l->seq,
                      level_word[l->level], l->src->manifest_id, l->line, l->col);
        cell(b, kept(rl, l->msg_off), l->msg_len);
        jt_buf_printf(b, ",%" PRIu32 "\n", l->nfields);
    }

    /* the sources with at least one accepted record, by manifest id (= position + 1) */
    bool *used = jt_xcalloc(prog->nsources + 1u, sizeof *used);
    uint32_t nused = 0, nsegments = 0;
    for (uint32_t i = 0; i < rl->nlogs; i++) {
        const struct jt_source *s = rl->logs[i].src;
        if (used[s->manifest_id])
            continue;
        used[s->manifest_id] = true;
        nused++;
        nsegments++;
        for (const char *p = s->logical; *p; p++)
            nsegments += *p == '/';
    }
    table(b, "log_sources", nused, "source_id,origin,path");
    for (uint32_t i = 0; i < prog->nsources; i++) {
        const struct jt_source *s = prog->sources[i];
        if (!used[s->manifest_id])
            continue;
        jt_buf_printf(b, "  %" PRIu32 ",%s", s->manifest_id, jp_origin_name(s->origin));
        cell(b, s->logical, strlen(s->logical));
        jt_buf_puts(b, "\n");
    }
    table(b, "log_source_graph_path_segments", nsegments, "source_id,index,segment");
    for (uint32_t i = 0; i < prog->nsources; i++) {
        const struct jt_source *s = prog->sources[i];
        if (!used[s->manifest_id])
            continue;
        const char *p = s->logical;
        for (uint32_t k = 0;; k++) {
            const char *slash = strchr(p, '/');
            size_t len = slash ? (size_t)(slash - p) : strlen(p);
            jt_buf_printf(b, "  %" PRIu32 ",%" PRIu32, s->manifest_id, k);
            cell(b, p, len);
            jt_buf_puts(b, "\n");
            if (!slash)
                break;
            p = slash + 1;
        }
    }
    free(used);

    table(b, "log_fields", rl->nfields, "seq,index,key,value");
    for (uint32_t i = 0; i < rl->nlogs; i++) {
        const struct jt_log_row *l = &rl->logs[i];
        for (uint32_t k = 0; k < l->nfields; k++) {
            const struct jt_log_field *f = &rl->fields[l->field0 + k];
            jt_buf_printf(b, "  %" PRIu64 ",%" PRIu32, l->seq, k);
            cell(b, kept(rl, f->key_off), f->key_len);
            switch (f->kind) {
            case JV_INT: jt_buf_printf(b, ",%" PRId64 "\n", f->i); break;
            case JV_BOOL: jt_buf_puts(b, f->i ? ",true\n" : ",false\n"); break;
            case JV_STR:
                cell(b, kept(rl, f->val_off), f->val_len);
                jt_buf_puts(b, "\n");
                break;
            default: jt_buf_printf(b, ",%s\n", secret_text); break;
            }
        }
    }
}
