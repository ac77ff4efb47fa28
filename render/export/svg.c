/* The SVG flame graph: a self-contained document (no script, stylesheet, font file or link),
 * readable as it is. One box per node of the stacks' tree, the root row at the bottom, each
 * box as wide as its value's share of the run's total; a label where the name fits, elided
 * with ".." where only part of it does, none where three characters do not; a <title>
 * tooltip per box with its exact figures; a heading with the mode, the status and the totals.
 * Geometry is integer arithmetic printed in hundredths of a pixel, so the bytes depend on the
 * profile only. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "export_internal.h"

#define SVG_WIDTH 1200u
#define SVG_MARGIN 10u
#define SVG_ROW 16u      /* px per stack level */
#define SVG_TOP 56u      /* px above the deepest row: the two heading lines */
#define SVG_CHAR_X100 720u /* a 12 px monospace character, in hundredths of a pixel */
#define SVG_PAD_X100 600u  /* label inset on both sides */

int jpx_svg_tree(const struct jpx_prof *p, struct jpx_svg_node **nodes, uint32_t *n)
{
    *nodes = NULL;
    *n = 0;
    /* at most one node per (stack, depth); the unattributed stack has one frame */
    size_t cap = 0;
    for (uint32_t i = 0; i < p->n; i++)
        cap += p->st[i].chain == JPX_STACK_UNATTRIBUTED ? 1u : p->v->chains[p->st[i].chain].depth;
    if (!cap)
        return 0;
    struct jpx_svg_node *nd = malloc(cap * sizeof *nd);
    if (!nd)
        return -ENOMEM;
    uint32_t open[JP_MAX_DEPTH], nopen = 0, seq[JP_MAX_DEPTH], count = 0;
    uint64_t at = 0;
    for (uint32_t i = 0; i < p->n; i++) {
        uint32_t len = jpx_stack_frames(p, &p->st[i], seq);
        /* the stacks are sorted, so a shared prefix is the previous stack's open nodes */
        uint32_t keep = 0;
        while (keep < nopen && keep < len && nd[open[keep]].func == seq[keep])
            keep++;
        nopen = keep;
        for (uint32_t k = keep; k < len; k++) {
            nd[count] = (struct jpx_svg_node){seq[k], k + 1u, k ? open[k - 1u] + 1u : 0, at, 0};
            open[nopen++] = count++;
        }
        for (uint32_t k = 0; k < len; k++)
            nd[open[k]].value += p->st[i].value;
        at += p->st[i].value;
    }
    *nodes = nd;
    *n = count;
    return 0;
}

/* XML text: the five specials escaped, control characters (not allowed in XML 1.0) as '?' */
static void xml_text(struct jp_buf *b, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        switch (c) {
        case '&': JP_BUF_LIT(b, "&amp;"); break;
        case '<': JP_BUF_LIT(b, "&lt;"); break;
        case '>': JP_BUF_LIT(b, "&gt;"); break;
        case '"': JP_BUF_LIT(b, "&quot;"); break;
        case '\'': JP_BUF_LIT(b, "&apos;"); break;
        default:
            if (c < 0x20u || c == 0x7fu)
                jp_buf_put(b, "?", 1);
            else
                jp_buf_put(b, &s[i], 1);
        }
    }
}

static void name_raw(struct jp_buf *b, const struct jp_engine_view *v, uint32_t func)
{
    if (func >= v->nfuncs)
        JP_BUF_LIT(b, JPX_FRAME_UNATTRIBUTED);
    else
        jp_wr_qualified(b, &v->funcs[func]);
}

void jpx_svg_name(struct jp_buf *b, const struct jp_engine_view *v, uint32_t func)
{
    struct jp_buf t = {0};
    name_raw(&t, v, func);
    b->failed |= t.failed;
    if (t.p)
        xml_text(b, t.p, t.len);
    jp_buf_free(&t);
}

/* hundredths of a pixel as a decimal: 12345 -> 123.45 */
static void px(struct jp_buf *b, uint64_t x100)
{
    jp_buf_printf(b, "%llu.%02llu", (unsigned long long)(x100 / 100u),
                  (unsigned long long)(x100 % 100u));
}

static uint64_t scale(uint64_t value, uint64_t total)
{
    __extension__ typedef unsigned __int128 u128;
    return total ? (uint64_t)((u128)value * ((SVG_WIDTH - 2u * SVG_MARGIN) * 100u) / total) : 0;
}

/* A warm colour from the name's bytes (FNV-1a), the same for a name in every graph; out of
 * memory for the name latches b. */
static uint32_t warm(struct jp_buf *b, const struct jp_engine_view *v, uint32_t func)
{
    struct jp_buf t = {0};
    name_raw(&t, v, func);
    b->failed |= t.failed;
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < t.len; i++)
        h = (h ^ (unsigned char)t.p[i]) * 16777619u;
    jp_buf_free(&t);
    uint32_t r = 205u + h % 50u, g = (h >> 8) % 230u, bl = (h >> 16) % 55u;
    return r << 16 | g << 8 | bl;
}

/* The label that fits in w100 hundredths of a pixel: the whole name, or its first code points
 * and "..", or nothing. */
static void label(struct jp_buf *b, const struct jp_engine_view *v, uint32_t func, uint64_t w100)
{
    if (w100 <= SVG_PAD_X100)
        return;
    uint64_t fit = (w100 - SVG_PAD_X100) / SVG_CHAR_X100;
    if (fit < 3u)
        return;
    struct jp_buf t = {0};
    name_raw(&t, v, func);
    b->failed |= t.failed;
    size_t chars = 0, cut = 0, keep = (size_t)fit - 2u;
    for (size_t i = 0; i < t.len; i++)
        if (((unsigned char)t.p[i] & 0xC0u) != 0x80u) {
            if (chars == keep)
                cut = i;
            chars++;
        }
    if (chars <= fit) {
        xml_text(b, t.p, t.len);
    } else {
        xml_text(b, t.p, cut);
        JP_BUF_LIT(b, "..");
    }
    jp_buf_free(&t);
}

static void plain_tip(struct jp_buf *b, const struct jpx_prof *p, const struct jpx_svg_node *nd)
{
    uint64_t h = jp_percent_hundredths(nd->value, p->total);
    jp_buf_printf(b, " (%llu %s, %llu.%02llu%%)", (unsigned long long)nd->value,
                  jpx_value_unit(p->value), (unsigned long long)(h / 100u),
                  (unsigned long long)(h % 100u));
}

/* The run's totals, as the report names them. */
static void totals_line(struct jp_buf *b, const struct jpx_prof *p)
{
    const struct jp_engine_view *v = p->v;
    if (v->mode == JP_MODE_CPU) {
        uint64_t recorded = v->counters->waiting_ticks + v->counters->runtime_ticks;
        for (unsigned s = 0; s < JP_STATE_LIMIT; s++)
            recorded += v->state_samples[s];
        jp_buf_printf(b, "requested_ticks %llu, recorded_samples %llu, attributed_samples %llu, "
                         "rate %u Hz",
                      (unsigned long long)v->counters->requested_ticks,
                      (unsigned long long)recorded,
                      (unsigned long long)v->state_samples[JP_STATE_JETT],
                      (unsigned)v->start->rate_hz);
        return;
    }
    jp_buf_printf(b, "allocation_count %llu, allocated_bytes %llu",
                  (unsigned long long)v->allocation_count,
                  (unsigned long long)v->allocated_bytes);
    if (p->r->live_exact)
        jp_buf_printf(b, ", peak_live_bytes %llu, retained_bytes %llu",
                      (unsigned long long)v->peak_bytes, (unsigned long long)v->live_bytes);
    else
        JP_BUF_LIT(b, ", peak_live_bytes unavailable, retained_bytes unavailable");
}

void jpx_svg_doc(struct jp_buf *b, const struct jpx_prof *p, const struct jpx_svg_node *nodes,
                 uint32_t n, const char *title, const struct jpx_svg_style *style)
{
    uint32_t depth = 0;
    for (uint32_t i = 0; i < n; i++)
        if (nodes[i].depth > depth)
            depth = nodes[i].depth;
    uint32_t height = SVG_TOP + depth * SVG_ROW + SVG_MARGIN;
    jp_buf_printf(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                     "<svg xmlns=\"http://www.w3.org/2000/svg\" version=\"1.1\" width=\"%u\" "
                     "height=\"%u\" viewBox=\"0 0 %u %u\">\n",
                  SVG_WIDTH, height, SVG_WIDTH, height);
    jp_buf_printf(b, "<rect x=\"0\" y=\"0\" width=\"%u\" height=\"%u\" fill=\"#ffffff\"/>\n",
                  SVG_WIDTH, height);
    JP_BUF_LIT(b, "<text x=\"600\" y=\"20\" text-anchor=\"middle\" font-family=\"monospace\" "
                  "font-size=\"15\" fill=\"#000000\">");
    xml_text(b, title, strlen(title));
    JP_BUF_LIT(b, "</text>\n<text x=\"600\" y=\"40\" text-anchor=\"middle\" "
                  "font-family=\"monospace\" font-size=\"12\" fill=\"#333333\">");
    if (style && style->subtitle) {
        xml_text(b, style->subtitle, strlen(style->subtitle));
    } else {
        struct jp_buf t = {0};
        totals_line(&t, p);
        b->failed |= t.failed;
        if (t.p)
            xml_text(b, t.p, t.len);
        jp_buf_free(&t);
    }
    JP_BUF_LIT(b, "</text>\n<g font-family=\"monospace\" font-size=\"12\" fill=\"#000000\">\n");
    for (uint32_t i = 0; i < n && !b->failed; i++) {
        const struct jpx_svg_node *nd = &nodes[i];
        uint64_t x = SVG_MARGIN * 100u + scale(nd->start, p->total);
        uint64_t w = scale(nd->value, p->total);
        uint64_t y = (SVG_TOP + (depth - nd->depth) * SVG_ROW) * 100u;
        uint32_t rgb = style && style->fill ? style->fill(style->ctx, i) : warm(b, p->v, nd->func);
        JP_BUF_LIT(b, "<g><title>");
        jpx_svg_name(b, p->v, nd->func);
        if (style && style->tip)
            style->tip(style->ctx, b, i);
        else
            plain_tip(b, p, nd);
        JP_BUF_LIT(b, "</title><rect x=\"");
        px(b, x);
        JP_BUF_LIT(b, "\" y=\"");
        px(b, y);
        JP_BUF_LIT(b, "\" width=\"");
        px(b, w);
        jp_buf_printf(b, "\" height=\"%u\" fill=\"#%06x\" stroke=\"#ffffff\" "
                         "stroke-width=\"0.5\"/>", SVG_ROW - 1u, (unsigned)rgb);
        size_t before = b->len;
        JP_BUF_LIT(b, "<text x=\"");
        px(b, x + SVG_PAD_X100 / 2u);
        JP_BUF_LIT(b, "\" y=\"");
        px(b, y + (SVG_ROW - 4u) * 100u);
        JP_BUF_LIT(b, "\">");
        size_t start = b->len;
        label(b, p->v, nd->func, w);
        if (b->len == start && !b->failed) {
            b->len = before; /* no label fits: no text element */
            b->p[b->len] = '\0';
        } else {
            JP_BUF_LIT(b, "</text>");
        }
        JP_BUF_LIT(b, "</g>\n");
    }
    JP_BUF_LIT(b, "</g>\n</svg>\n");
}

void jpx_write_svg(struct jp_buf *b, const struct jpx_prof *p)
{
    struct jpx_svg_node *nodes;
    uint32_t n;
    if (jpx_svg_tree(p, &nodes, &n) < 0) {
        b->failed = true;
        return;
    }
    struct jp_buf t = {0};
    jpx_prof_title(&t, p);
    if (t.failed || !t.p)
        b->failed = true;
    else
        jpx_svg_doc(b, p, nodes, n, t.p, NULL);
    jp_buf_free(&t);
    free(nodes);
}
