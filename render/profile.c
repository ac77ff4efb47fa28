/* Build and write at once, for callers with no excerpt round trip (replay, tests, benches).
 * Its own library: it needs the report builder and the writers, which need neither it nor
 * each other's building half.
 */
#include <errno.h>
#include <string.h>

#include "report.h"

int jp_profile_render(struct jp_engine *e, const struct jp_report_opts *o,
                      struct jp_rendered *out)
{
    if (!o || o->size < sizeof *o || !out)
        return -EINVAL;
    memset(out, 0, sizeof *out);
    struct jp_engine_view v;
    int rc = jp_engine_view(e, &v);
    if (rc < 0)
        return rc;
    struct jp_report *r;
    if ((rc = jp_report_build(&v, o, &r)) < 0)
        return rc;
    rc = jp_report_write(r, o, out);
    jp_report_free(r);
    return rc;
}
