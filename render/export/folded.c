/* Folded stacks: one line per stack, `frame;frame;frame value`, root first, in the stacks'
 * order (export_internal.h), the value in the unit of the exported value. The format has no
 * quoting, so the bytes that would end a frame or a line (';' and control characters) are
 * written as '_'; the other formats keep names exact. */
#include "export_internal.h"

static void folded_name(struct jp_buf *b, struct jp_buf *tmp, const struct jp_func *f)
{
    tmp->len = 0;
    jp_wr_qualified(tmp, f);
    if (tmp->failed) {
        b->failed = true;
        return;
    }
    for (size_t i = 0; i < tmp->len; i++) {
        unsigned char c = (unsigned char)tmp->p[i];
        if (c == ';' || c < 0x20u || c == 0x7fu)
            tmp->p[i] = '_';
    }
    jp_buf_put(b, tmp->p, tmp->len);
}

void jpx_folded_stack(struct jp_buf *b, struct jp_buf *tmp, const struct jpx_prof *p,
                      const struct jpx_stack *s)
{
    uint32_t seq[JP_MAX_DEPTH];
    uint32_t n = jpx_stack_frames(p, s, seq);
    for (uint32_t k = 0; k < n; k++) {
        if (k)
            jp_buf_put(b, ";", 1);
        if (seq[k] == p->v->nfuncs)
            JP_BUF_LIT(b, JPX_FRAME_UNATTRIBUTED);
        else
            folded_name(b, tmp, &p->v->funcs[seq[k]]);
    }
}

void jpx_write_folded(struct jp_buf *b, const struct jpx_prof *p)
{
    struct jp_buf tmp = {0};
    for (uint32_t i = 0; i < p->n && !b->failed; i++) {
        jpx_folded_stack(b, &tmp, p, &p->st[i]);
        jp_buf_printf(b, " %llu\n", (unsigned long long)p->st[i].value);
    }
    jp_buf_free(&tmp);
}
