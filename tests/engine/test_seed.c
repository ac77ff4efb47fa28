/* Hash seeds: the engine keys its tables with a per-engine secret, and nothing it outputs may
 * depend on it. The same streams render byte for byte the same under two chosen seeds and a
 * random one, although the tables are laid out differently (shown through the function
 * table's slots); also at a budget edge, where the point detail stops must not move. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"
#include "render/report.h"

static void t_exec(struct jp_engine *e, uint32_t thread, uint32_t task)
{
    struct jp_rec_exec x = {{JP_REC_EXEC, sizeof x}, thread, task, JP_ID_UNAVAILABLE};
    cr_assert_eq(t_feed_raw(e, &x, sizeof x, NULL), 0);
}

/* 300 functions in 3 sources, equal sample counts in groups (ties go to keys 3 and 4), a tree
 * of 900 nodes, hot lines, and execution identities. */
static void cpu_stream(struct jp_engine *e, uint64_t budget)
{
    t_start(e, JP_MODE_CPU, 1000, 0, 100, budget, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/a.jett");
    t_source(e, 2, JP_ORIGIN_DEPENDENCY, "dep/a.jett");
    t_source(e, 3, JP_ORIGIN_STDLIB, "std/a.jett");
    char fn[16];
    for (uint32_t i = 1; i <= 300; i++) {
        snprintf(fn, sizeof fn, "f%u", i % 100u); /* the same name in three sources */
        t_frame(e, i, 1 + i % 3u, "n", fn, i, i + 3, i, JP_FRAME_FUNCTION);
    }
    for (uint32_t i = 1; i <= 900; i++)
        t_node(e, i, i > 300 ? 1 + (i * 7u) % (i - 1u) : 0, 1 + (i * 13u) % 300u);
    for (uint32_t i = 0; i < 6000; i++) {
        if (i % 500u == 0)
            t_exec(e, 1 + i / 1500u, 100 + i / 500u);
        t_sample(e, JP_STATE_JETT, 1 + (i * 31u) % 900u, 1 + i % 17u, 1 + i % 3u);
    }
    t_stop(e, JP_TERM_RETURNED, 2000000000, 1000000, 0);
}

/* Sites, narrow ids, ids past 2^32 (the wide table) and ids that come late (the id set). */
static void memory_stream(struct jp_engine *e, uint64_t budget)
{
    t_start(e, JP_MODE_MEMORY, 0, 0, 100, 32 * MiB, budget);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/m.jett");
    char fn[16];
    for (uint32_t i = 1; i <= 60; i++) {
        snprintf(fn, sizeof fn, "s%u", i);
        t_frame(e, i, 1, "m", fn, i * 4, i * 4 + 2, i, JP_FRAME_FUNCTION);
        t_node(e, i, 0, i);
    }
    for (uint64_t k = 1; k <= 3000; k++) {
        uint32_t site = 1 + (uint32_t)(k % 60u);
        if (k % 700u == 0)
            t_exec(e, (uint32_t)(k / 700u), (uint32_t)k);
        t_alloc(e, site, k * 2u, 16u + k % 50u);                      /* even ids, in order */
        t_alloc(e, site, (UINT64_C(1) << 40) + k * 977u, 8u + k % 9u); /* wide */
        if (k % 3u == 0)
            t_free(e, 0, k * 2u, 16u + k % 50u);
    }
    for (uint64_t k = 3000; k >= 1; k -= 2)
        t_alloc(e, 1 + (uint32_t)(k % 60u), k * 2u - 1u, 5); /* odd ids, late and descending */
    t_stop(e, JP_TERM_RETURNED, 1000, 0, 0);
}

static char *render_with(uint64_t seed, bool seeded, void (*stream)(struct jp_engine *, uint64_t),
                         uint64_t budget, uint32_t *slots)
{
    struct jp_engine *e;
    cr_assert_eq(jp_engine_new(&e), 0);
    if (seeded)
        cr_assert_eq(jp_engine_set_hash_seed(e, seed), 0);
    stream(e, budget);
    cr_assert_eq(jp_engine_set_hash_seed(e, seed), -EBUSY, "too late once records came");
    if (slots)
        for (uint32_t i = 0; i < 60; i++)
            slots[i] = jp_engine_func_slot(e, i);
    char *toon, *human;
    t_render(e, JP_END_STOP, &toon, &human, NULL, NULL);
    size_t n = strlen(toon) + strlen(human) + 1;
    char *both = malloc(n);
    snprintf(both, n, "%s%s", toon, human);
    free(toon);
    free(human);
    jp_engine_free(e);
    return both;
}

static void same_bytes_under_seeds(void (*stream)(struct jp_engine *, uint64_t), uint64_t budget)
{
    uint32_t sa[60], sb[60];
    char *a = render_with(1, true, stream, budget, sa);
    char *b = render_with(UINT64_C(0x9E3779B97F4A7C15), true, stream, budget, sb);
    char *c = render_with(0, false, stream, budget, NULL); /* whatever getrandom gave */
    bool moved = false;
    for (uint32_t i = 0; i < 60; i++) {
        cr_assert_neq(sa[i], UINT32_MAX);
        moved |= sa[i] != sb[i];
    }
    cr_assert(moved, "the two seeds must lay the function table out differently");
    cr_assert_str_eq(a, b);
    cr_assert_str_eq(a, c);
    free(a);
    free(b);
    free(c);
}

Test(seed, cpu_output_does_not_depend_on_the_seed)
{
    same_bytes_under_seeds(cpu_stream, 32 * MiB);
}

Test(seed, memory_output_does_not_depend_on_the_seed)
{
    same_bytes_under_seeds(memory_stream, 64 * MiB);
}

/* Budgets that run out midway: where detail stops or exact tracking ends is the same record
 * under every seed (growth depends on counts only). */
Test(seed, budget_edges_do_not_move_with_the_seed)
{
    /* half of what the whole CPU stream holds at its peak: detail stops partway */
    struct jp_engine *p;
    cr_assert_eq(jp_engine_new(&p), 0);
    cpu_stream(p, 32 * MiB);
    uint64_t half = jp_engine_metadata_peak_bytes(p) / 2u;
    jp_engine_free(p);
    char *a = render_with(1, true, cpu_stream, half, NULL);
    cr_assert(strstr(a, "partial_reason: cpu_metadata_limit") != NULL, "%s", a);
    cr_assert(strstr(a, "attributed_stacks: 0\n") == NULL, "some detail before the stop");
    char *b = render_with(77, true, cpu_stream, half, NULL);
    cr_assert_str_eq(a, b);
    free(a);
    free(b);
    a = render_with(1, true, memory_stream, 120000, NULL);
    cr_assert(strstr(a, "partial_reason: retention_metadata_limit") != NULL, "%s", a);
    b = render_with(77, true, memory_stream, 120000, NULL);
    cr_assert_str_eq(a, b);
    free(a);
    free(b);
}
