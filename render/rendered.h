/* A rendered profile: what the writers hand back for one run, whichever way it was built
 * (render/report.h from a report, render/failure.h for a failed collector). */
#ifndef JETTPROF_RENDER_RENDERED_H
#define JETTPROF_RENDER_RENDERED_H

#include <stddef.h>
#include <stdint.h>

struct jp_rendered {
    uint32_t status;      /* JP_STATUS_* */
    char reason[40];      /* the one stable partial/unavailable reason, "" when complete */
    char *human; size_t human_len; /* malloc'ed, NUL-terminated, NULL unless requested */
    char *toon; size_t toon_len;   /* the `profile:` TOON object at indent 0 */
};

void jp_rendered_free(struct jp_rendered *r);

#endif
