/* Accounting against the run's metadata budget: every table growth and every kept string is
 * counted in e->used before it happens, including the instant a growth holds old and new
 * arrays at once (jpe_budget_hold). A budget refusal is -ENOBUFS and degrades the profile; a
 * failed malloc is -ENOMEM and is passed up (engine.h).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "engine_internal.h"

/* ---- budget ---------------------------------------------------------------------------- */

/* Whether the budget admits holding `extra` bytes on top of what is accounted now (a growth's
 * new array while the old one is still held); records the high-water mark when it does. */
int jpe_budget_hold(struct jp_engine *e, uint64_t extra)
{
    if (extra > e->budget || e->used > e->budget - extra)
        return -ENOBUFS;
    if (e->used + extra > e->peak_used)
        e->peak_used = e->used + extra;
    return 0;
}

/* Grows *p (an array of elem-sized items, capacity *cap) to hold need items, counting the new
 * bytes against the budget first: realloc may hold old and new at once, so the whole new
 * array must fit beside the old. -ENOBUFS when the budget refuses, -ENOMEM when malloc does. */
int jpe_vec_grow(struct jp_engine *e, void **p, uint32_t *cap, uint32_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    uint64_t ncap = *cap ? *cap : 8u;
    while (ncap < need)
        ncap *= 2u;
    if (ncap > UINT32_MAX)
        return -ENOBUFS;
    uint64_t delta = (ncap - *cap) * (uint64_t)elem;
    if (jpe_budget_hold(e, ncap * (uint64_t)elem) < 0)
        return -ENOBUFS;
    void *np = realloc(*p, (size_t)ncap * elem);
    if (!np)
        return -ENOMEM;
    memset((char *)np + (size_t)*cap * elem, 0, (size_t)(ncap - *cap) * elem);
    e->used += delta;
    *p = np;
    *cap = (uint32_t)ncap;
    return 0;
}

/* A NUL-terminated copy of src[0..len) in *out, counted against the budget. -ENOBUFS when the
 * budget refuses (the caller degrades as the contract says), -ENOMEM when malloc does (the
 * caller passes it up: the host is out of memory, which is not a budget state). */
int jpe_budget_dup(struct jp_engine *e, const void *src, size_t len, char **out)
{
    *out = NULL;
    if (jpe_budget_hold(e, len + 1u) < 0)
        return -ENOBUFS;
    char *d = malloc(len + 1u);
    if (!d)
        return -ENOMEM;
    memcpy(d, src, len);
    d[len] = 0;
    e->used += len + 1u;
    *out = d;
    return 0;
}

/* Stops all further detail; returns 0 so callers can `return jpe_stop_detail(e)` on -ENOBUFS. */
int jpe_stop_detail(struct jp_engine *e)
{
    e->detail_stopped = true;
    e->cpu_fast = false;
    return 0;
}

/* -ENOBUFS is the budget speaking (detail stops); -ENOMEM is the host running out. */
int jpe_budget_fail(struct jp_engine *e, int r)
{
    if (r == -ENOBUFS)
        return jpe_stop_detail(e);
    return r;
}

/* Bytes the engine has accounted against the run's budget (for benches and tests). */
uint64_t jp_engine_metadata_bytes(const struct jp_engine *e)
{
    return e->used;
}

uint64_t jp_engine_metadata_peak_bytes(const struct jp_engine *e)
{
    return e->peak_used > e->used ? e->peak_used : e->used;
}
