/* What the two writers of the writers library share (defined in render/writers.c): the
 * qualified names, the excerpt lookup, the rule names and fixed suggestion templates, and the
 * one list of totals. The TOON writer (toon.c) and the human writer (human.c) take these
 * from here so that the two documents cannot disagree. Internal to render/: callers use
 * render/report.h.
 */
#ifndef JETTPROF_RENDER_WRITERS_H
#define JETTPROF_RENDER_WRITERS_H

#include <stdint.h>

#include "common/buf.h"
#include "report.h"

/* namespace.function, or the bare function in the <root> namespace, as raw bytes */
void jp_wr_qualified(struct jp_buf *s, const struct jp_func *f);

/* The excerpt the engine holds for (canonical source, line, col), or NULL. */
const struct jp_excerpt_ent *jp_wr_find_excerpt(const struct jp_engine_view *v, uint32_t src,
                                                uint32_t line, uint32_t col);

/* JP_RULE_* -> its stable id ("CPU_HIGH_SELF") */
extern const char *const jp_wr_rule_names[JP_RULE_COUNT];

/* The fixed template of `rule` for entry en, filled only with reported names, locations and
 * counts (render/REPORT.md lists the texts). */
void jp_wr_suggestion_text(struct jp_buf *s, const struct jp_report *r, const struct jp_entry *en,
                           uint32_t rule);

/* One total: its TOON key (render/REPORT.md) and its value. */
enum { JP_WR_U64, JP_WR_UNAVAILABLE, JP_WR_HUNDREDTHS };
struct jp_wr_item {
    const char *k;
    unsigned kind; /* JP_WR_*: an integer, the word `unavailable`, or hundredths */
    uint64_t v;
};
#define JP_WR_MAX_ITEMS 40u

/* Fills it[] (room for JP_WR_MAX_ITEMS) with the report's totals in TOON order and returns how
 * many: the one list both writers print, so they carry the same totals. */
unsigned jp_wr_totals(const struct jp_report *r, struct jp_wr_item *it);

#endif
