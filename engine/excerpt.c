/* EXCERPT records: the runtime's redacted code for the hot lines the report shows.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

/* ---- excerpts -------------------------------------------------------------------------- */

int jpe_on_excerpt(struct jp_engine *e, const uint8_t *rec)
{
    struct jp_rec_excerpt r;
    memcpy(&r, rec, sizeof r);
    if (r.source_id == JP_ID_NONE || r.source_id > e->nsource_defined)
        return violation(e);
    if (r.source_id > e->nsource_stored)
        return 0; /* no detail for that source: the hot line cannot be shown either */
    uint32_t src = e->source_map[r.source_id];
    if (!src)
        return 0; /* an unauthorized source shows no code */
    struct jp_excerpt_ent *x = NULL;
    for (uint32_t i = 0; i < e->nexcerpts; i++)
        if (e->excerpts[i].source == src && e->excerpts[i].line == r.line &&
            e->excerpts[i].col == r.col)
            x = &e->excerpts[i]; /* a later answer for the same line replaces the earlier */
    if (!x) {
        if (e->nexcerpts >= JP_CTL_MAX_EXCERPT_KEYS)
            return 0;
        int rc = jpe_vec_grow(e, (void **)&e->excerpts, &e->excerpts_cap, e->nexcerpts + 1u,
                          sizeof *e->excerpts);
        if (rc < 0)
            return rc == -ENOBUFS ? 0 : rc; /* code stays unavailable */
        x = &e->excerpts[e->nexcerpts++];
        memset(x, 0, sizeof *x);
    }
    /* A replaced text gives its bytes back to the budget before the new one is counted, so
     * answering the same line again never costs more than answering it once. */
    if (x->text) {
        free(x->text);
        e->used -= x->text_len + 1u;
        x->text = NULL;
    }
    char *text = NULL;
    if (!(r.flags & JP_EXCERPT_UNAVAILABLE)) {
        int rc = jpe_budget_dup(e, rec + sizeof r, r.text_len, &text);
        if (rc == -ENOMEM)
            return rc; /* the entry stays, its code unavailable: consistent */
        if (rc < 0)
            r.flags |= JP_EXCERPT_UNAVAILABLE; /* the budget refused: code unavailable */
    }
    *x = (struct jp_excerpt_ent){src, r.line, r.col, r.flags, text, text ? r.text_len : 0};
    return 0;
}
