/* Execution identity in the report: functions aggregate across workers, and each bottleneck
 * reports how many distinct runtime threads and tasks its samples (CPU, inclusive) or its
 * creation events (memory) came from; `unavailable` when none carried that identity; the
 * totals count the run's distinct runtime threads. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "helpers.h"

static void t_exec(struct jp_engine *e, uint32_t thread, uint32_t task)
{
    struct jp_rec_exec x = {{JP_REC_EXEC, sizeof x}, thread, task, JP_ID_UNAVAILABLE};
    cr_assert_eq(t_feed_raw(e, &x, sizeof x, NULL), 0);
}

#define NA JP_ID_UNAVAILABLE

/* Two threads (1, 2), three tasks (10, 11, 12). Nodes: 1 main, 2 main>work,
 * 3 main>work>leaf, 4 main>leaf, 5 idle (a root only sampled without identity).
 *   before any EXEC: node 5 x1
 *   EXEC(1, 10):  node 3 x3          -> main, work, leaf see thread 1, task 10
 *   EXEC(2, 11):  node 4 x2          -> main, leaf see thread 2, task 11
 *   EXEC(2, -):   node 4 x1, runtime -> thread 2 again, no task
 *   EXEC(1, 12):  node 2 x1          -> main, work see thread 1, task 12
 *   EXEC(-, -):   node 5 x1          -> nothing to count
 * Inclusive: main 7, leaf 6, work 4, idle 2 (of 9 jett samples). Expected per function:
 *   main threads {1,2} = 2, tasks {10,11,12} = 3; leaf {1,2} = 2, {10,11} = 2;
 *   work {1} = 1, {10,12} = 2; idle unavailable, unavailable. Totals: 2 runtime threads. */
Test(exec, two_threads_three_tasks_counted_per_bottleneck)
{
    struct jp_engine *e;
    cr_assert_eq(jp_engine_new(&e), 0);
    t_start(e, JP_MODE_CPU, 100, 0, 10, 32 * MiB, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/x.jett");
    t_frame(e, 1, 1, "<root>", "main", 0, 9, 1, JP_FRAME_FUNCTION);
    t_frame(e, 2, 1, "x", "work", 10, 19, 2, JP_FRAME_FUNCTION);
    t_frame(e, 3, 1, "x", "leaf", 20, 29, 3, JP_FRAME_FUNCTION);
    t_frame(e, 4, 1, "x", "idle", 30, 39, 4, JP_FRAME_FUNCTION);
    t_node(e, 1, 0, 1);
    t_node(e, 2, 1, 2);
    t_node(e, 3, 2, 3);
    t_node(e, 4, 1, 3);
    t_node(e, 5, 0, 4);
    t_sample(e, JP_STATE_JETT, 5, 31, 1);
    t_exec(e, 1, 10);
    for (int i = 0; i < 3; i++)
        t_sample(e, JP_STATE_JETT, 3, 21, 1);
    t_exec(e, 2, 11);
    t_sample(e, JP_STATE_JETT, 4, 22, 1);
    t_sample(e, JP_STATE_JETT, 4, 22, 1);
    t_exec(e, 2, NA);
    t_sample(e, JP_STATE_JETT, 4, 22, 1);
    t_sample(e, JP_STATE_RUNTIME, 0, 0, 0);
    t_exec(e, 1, 12);
    t_sample(e, JP_STATE_JETT, 2, 11, 1);
    t_exec(e, NA, NA);
    t_sample(e, JP_STATE_JETT, 5, 31, 1);
    t_stop(e, JP_TERM_RETURNED, 1000000, 0, 0);
    char *json, *human;
    t_render(e, JP_END_STOP, NULL, &human, &json, NULL);
    const char *want[][4] = {
        {"main", "7", "2", "3"},
        {"leaf", "6", "2", "2"},
        {"work", "4", "1", "2"},
        {"idle", "2", "unavailable", "unavailable"},
    };
    cr_assert_eq(t_json_len(json, "profile.bottlenecks"), 4);
    char path[96];
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "profile.bottlenecks.%d.function", i);
        J_EQ(json, path, want[i][0]);
        snprintf(path, sizeof path, "profile.bottlenecks.%d.inclusive_samples", i);
        J_EQ(json, path, want[i][1]);
        snprintf(path, sizeof path, "profile.bottlenecks.%d.runtime_threads", i);
        J_EQ(json, path, want[i][2]);
        snprintf(path, sizeof path, "profile.bottlenecks.%d.tasks", i);
        J_EQ(json, path, want[i][3]);
    }
    J_EQ(json, "profile.totals.runtime_threads", "2");
    /* the same counts in the human text, in rank order */
    const char *m = strstr(human, "#1 main");
    const char *l = m ? strstr(m, "#2 x.leaf") : NULL;
    const char *w = l ? strstr(l, "#3 x.work") : NULL;
    cr_assert(m && l && w, "%s", human);
    cr_assert(strstr(m, "runtime threads: 2, tasks: 3") < l);
    cr_assert(strstr(l, "runtime threads: 2, tasks: 2") < w);
    cr_assert(strstr(w, "runtime threads: 1, tasks: 2") != NULL);
    cr_assert(strstr(human, "\nruntime threads: 2\n") != NULL, "%s", human);
    free(json);
    free(human);
    jp_engine_free(e);
}

/* Memory: per creation site, from allocation events only; a thread that only frees counts in
 * the totals but at no site. */
Test(exec, memory_sites_count_creation_identity)
{
    struct jp_engine *e;
    cr_assert_eq(jp_engine_new(&e), 0);
    t_start(e, JP_MODE_MEMORY, 0, 0, 10, 32 * MiB, 64 * MiB);
    t_source(e, 1, JP_ORIGIN_PROJECT, "src/m.jett");
    t_frame(e, 1, 1, "m", "fill", 0, 9, 1, JP_FRAME_FUNCTION);
    t_frame(e, 2, 1, "m", "grow", 10, 19, 2, JP_FRAME_FUNCTION);
    t_frame(e, 3, 1, "m", "anon", 20, 29, 3, JP_FRAME_FUNCTION);
    t_node(e, 1, 0, 1);
    t_node(e, 2, 0, 2);
    t_node(e, 3, 0, 3);
    t_alloc(e, 3, 1, 10); /* no identity yet */
    t_exec(e, 1, 10);
    t_alloc(e, 1, 2, 400);
    t_exec(e, 2, 11);
    t_alloc(e, 1, 3, 400);
    t_alloc(e, 2, 4, 300);
    t_exec(e, 2, 12);
    t_resize(e, 2, 2, 400, 800); /* a resize creates nothing: no identity for grow */
    t_exec(e, 3, 13);
    t_free(e, 0, 3, 400);
    t_stop(e, JP_TERM_RETURNED, 1000, 0, 0);
    char *json;
    t_render(e, JP_END_STOP, NULL, NULL, &json, NULL);
    /* order by allocated bytes: fill 800, grow 300 + 400, anon 10 */
    J_EQ(json, "profile.bottlenecks.0.function", "fill");
    J_EQ(json, "profile.bottlenecks.0.runtime_threads", "2");
    J_EQ(json, "profile.bottlenecks.0.tasks", "2");
    J_EQ(json, "profile.bottlenecks.1.function", "grow");
    J_EQ(json, "profile.bottlenecks.1.runtime_threads", "1");
    J_EQ(json, "profile.bottlenecks.1.tasks", "1");
    J_EQ(json, "profile.bottlenecks.2.function", "anon");
    J_EQ(json, "profile.bottlenecks.2.runtime_threads", "unavailable");
    J_EQ(json, "profile.bottlenecks.2.tasks", "unavailable");
    J_EQ(json, "profile.totals.runtime_threads", "3");
    free(json);
    jp_engine_free(e);
}
