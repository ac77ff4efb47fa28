/* speedscope: the file format of the speedscope viewer (its published file-format schema),
 * one "sampled" profile whose samples are the stacks (frame indices, root first) and whose
 * weights are their values. Frames are listed once each, in the order they first appear in
 * the stacks, with their relative path and declaration line where the source is known. */
#include <errno.h>
#include <stdlib.h>

#include "common/json.h"
#include "export_internal.h"

#define SPEEDSCOPE_SCHEMA "https://www.speedscope.app/file-format-schema.json"

#ifndef JETTPROF_VERSION
#define JETTPROF_VERSION "unknown"
#endif

static void json_name(struct jp_buf *b, struct jp_buf *tmp, const struct jp_func *f)
{
    tmp->len = 0;
    jp_buf_put(tmp, "", 0);
    jp_wr_qualified(tmp, f);
    if (tmp->failed) {
        b->failed = true;
        return;
    }
    jp_json_str(b, tmp->p);
}

static void json_text(struct jp_buf *b, struct jp_buf *tmp, const char *s, size_t n)
{
    tmp->len = 0;
    jp_buf_put(tmp, s, n);
    if (tmp->failed) {
        b->failed = true;
        return;
    }
    jp_json_str(b, tmp->p);
}

void jpx_write_speedscope(struct jp_buf *b, const struct jpx_prof *p)
{
    const struct jp_engine_view *v = p->v;
    /* frame index + 1 per function, 0: not listed yet; slot nfuncs: <unattributed> */
    uint32_t *idx = calloc((size_t)v->nfuncs + 1u, sizeof *idx);
    if (!idx) {
        b->failed = true;
        return;
    }
    struct jp_buf tmp = {0};
    uint32_t seq[JP_MAX_DEPTH], nframes = 0;
    JP_BUF_LIT(b, "{\"$schema\":\"" SPEEDSCOPE_SCHEMA "\",\"exporter\":\"jettprofd "
                  JETTPROF_VERSION "\",\"name\":");
    tmp.len = 0;
    jp_buf_put(&tmp, "", 0);
    jpx_prof_title(&tmp, p);
    jp_json_str(b, tmp.failed ? "" : tmp.p);
    b->failed |= tmp.failed;
    JP_BUF_LIT(b, ",\"activeProfileIndex\":0,\"shared\":{\"frames\":[");
    for (uint32_t i = 0; i < p->n && !b->failed; i++) {
        uint32_t n = jpx_stack_frames(p, &p->st[i], seq);
        for (uint32_t k = 0; k < n; k++) {
            if (idx[seq[k]])
                continue;
            idx[seq[k]] = ++nframes;
            if (nframes > 1)
                jp_buf_put(b, ",", 1);
            JP_BUF_LIT(b, "{\"name\":");
            if (seq[k] == v->nfuncs) {
                JP_BUF_LIT(b, "\"" JPX_FRAME_UNATTRIBUTED "\"}");
                continue;
            }
            const struct jp_func *f = &v->funcs[seq[k]];
            json_name(b, &tmp, f);
            uint16_t plen;
            const char *path = jpx_frame_path(v, f, &plen);
            if (path) {
                JP_BUF_LIT(b, ",\"file\":");
                json_text(b, &tmp, path, plen);
                jp_buf_printf(b, ",\"line\":%u", (unsigned)f->decl_line);
            }
            jp_buf_put(b, "}", 1);
        }
    }
    JP_BUF_LIT(b, "]},\"profiles\":[{\"type\":\"sampled\",\"name\":");
    jp_json_str(b, jp_export_value_name(p->value));
    jp_buf_printf(b, ",\"unit\":\"%s\",\"startValue\":0,\"endValue\":%llu,\"samples\":[",
                  p->value == JP_XVAL_SAMPLES || p->value == JP_XVAL_ALLOC_COUNT ? "none"
                                                                                 : "bytes",
                  (unsigned long long)p->total);
    for (uint32_t i = 0; i < p->n && !b->failed; i++) {
        uint32_t n = jpx_stack_frames(p, &p->st[i], seq);
        jp_buf_put(b, i ? ",[" : "[", i ? 2 : 1);
        for (uint32_t k = 0; k < n; k++)
            jp_buf_printf(b, k ? ",%u" : "%u", (unsigned)(idx[seq[k]] - 1u));
        jp_buf_put(b, "]", 1);
    }
    JP_BUF_LIT(b, "],\"weights\":[");
    for (uint32_t i = 0; i < p->n; i++)
        jp_buf_printf(b, i ? ",%llu" : "%llu", (unsigned long long)p->st[i].value);
    JP_BUF_LIT(b, "]}]}\n");
    jp_buf_free(&tmp);
    free(idx);
}
