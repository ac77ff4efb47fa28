/* jp_report_write: the writers library's entry point. Writes the outputs a caller asks for
 * (TOON with render/toon.c, human text with render/human.c) from one built report, and frees
 * them together: on any failure the caller is left holding nothing.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "report.h"

int jp_report_write(const struct jp_report *r, const struct jp_report_opts *o,
                    struct jp_rendered *out)
{
    int rc = 0;
    memset(out, 0, sizeof *out);
    if (!o || o->size < sizeof *o)
        return -EINVAL;
    out->status = r->status;
    snprintf(out->reason, sizeof out->reason, "%s", r->reason);
    if (o->outputs & JP_OUT_TOON)
        rc = jp_write_toon(r, &out->toon, &out->toon_len);
    if (rc >= 0 && (o->outputs & JP_OUT_HUMAN))
        rc = jp_write_human(r, o, &out->human, &out->human_len);
    if (rc < 0)
        jp_rendered_free(out);
    return rc < 0 ? rc : 0;
}

void jp_rendered_free(struct jp_rendered *r)
{
    if (!r)
        return;
    free(r->human);
    free(r->toon);
    r->human = r->toon = NULL;
    r->human_len = r->toon_len = 0;
}
