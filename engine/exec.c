/* Execution identity (run-local, reported as counts only): the distinct (key, thread, task)
 * tuples behind each function or site, and the distinct runtime threads of the run.
 */
#include <errno.h>
#include <string.h>

#include "engine_internal.h"

static uint64_t exec_hash_k(const struct jp_engine *e, const struct jp_exec_tuple *k)
{
    return hash2(e->seed, (uint64_t)k->key << 32 | k->thread, k->task);
}
static uint64_t exec_hash(const struct jp_engine *e, uint32_t idx)
{
    return exec_hash_k(e, &e->exec_tuples[idx]);
}
static bool exec_eq(const struct jp_engine *e, uint32_t idx, const void *key)
{
    return !memcmp(&e->exec_tuples[idx], key, sizeof(struct jp_exec_tuple));
}
static uint64_t thread_hash(const struct jp_engine *e, uint32_t idx)
{
    return hash2(e->seed, e->threads[idx], 0);
}
static bool thread_eq(const struct jp_engine *e, uint32_t idx, const void *key)
{
    return e->threads[idx] == *(const uint32_t *)key;
}

/* ---- execution identity ---------------------------------------------------------------- */

/* Notes the current identity against a detail key (see struct jp_exec_tuple). A refused
 * growth stops detail like any detail table and makes the counts unavailable. */
int jpe_exec_note(struct jp_engine *e, uint32_t key)
{
    if (e->exec_lost || e->detail_stopped)
        return 0;
    struct jp_exec_tuple k = {key, e->exec.runtime_thread_id, e->exec.task_id};
    if (k.thread == JP_ID_UNAVAILABLE && k.task == JP_ID_UNAVAILABLE)
        return 0;
    uint64_t h = exec_hash_k(e, &k);
    struct intern in = {&e->exec_tab, exec_hash, exec_eq, (void **)&e->exec_tuples,
                        &e->exec_cap, e->nexec, UINT32_MAX, sizeof *e->exec_tuples};
    uint32_t idx;
    int rc = intern_find(e, &in, h, &k, &idx);
    if (rc == -ENOBUFS)
        e->exec_lost = true;
    if (rc <= 0)
        return jpe_budget_fail(e, rc);
    e->exec_tuples[idx] = k;
    e->nexec++;
    jpe_intern_put(&e->exec_tab, h, idx);
    return 0;
}

/* Notes the current runtime thread among the run's distinct threads (totals); the slow half
 * runs once per EXEC record at most. */
int jpe_thread_note_slow(struct jp_engine *e)
{
    e->thread_epoch = e->exec_epoch;
    uint32_t tid = e->exec.runtime_thread_id;
    if (tid == JP_ID_UNAVAILABLE || e->threads_lost)
        return 0;
    uint64_t h = hash2(e->seed, tid, 0);
    struct intern in = {&e->thread_tab, thread_hash, thread_eq, (void **)&e->threads,
                        &e->threads_cap, e->nthreads, UINT32_MAX, sizeof *e->threads};
    uint32_t idx;
    int rc = intern_find(e, &in, h, &tid, &idx);
    if (rc == -ENOBUFS)
        e->threads_lost = true;
    if (rc <= 0)
        return jpe_budget_fail(e, rc);
    e->threads[idx] = tid;
    e->nthreads++;
    jpe_intern_put(&e->thread_tab, h, idx);
    return 0;
}
