/* The CPU tick timer: a thread that wakes at the requested rate on CLOCK_MONOTONIC (absolute
 * clock_nanosleep, so wake-ups do not drift) and, per tick, only bumps counters and raises one
 * pending bit per registered runtime thread. It allocates nothing, takes no lock, and never
 * touches the ring: the runtime thread answers the bit at its next safe point.
 *
 *   label  who     operation                                 pairs with
 *   T1     timer   load-acquire pending (is one outstanding)  S2 in produce.c: the owner has
 *                                                             read req_tick before clearing
 *   T2     timer   store-release pending = 1                  S1 in produce.c: req_tick
 *                                                             (stored before) is visible
 *   T3     timer   load-acquire nslots                        R2 in produce.c
 *   T4     timer   load-acquire active                        R1 in produce.c
 *   X1     timer   load-acquire timer_stop                    X2 (jp_timer_stop)
 *
 * `pending` goes 0 -> 1 only here and 1 -> 0 only on its owner thread, so plain
 * acquire/release stores suffice; no read-modify-write is needed. The counters below are
 * written by this thread alone (relaxed) and read after pthread_join.
 *
 * A tick that finds its thread waiting or in runtime work counts as waiting_ticks /
 * runtime_ticks: such a thread cannot reach a safe point, and its blocked time is never to be
 * charged to the Jett frame it was called from.
 */
#include "agent.h"

#include <errno.h>
#include <signal.h>
#include <time.h>

void jp_timer_tick(struct jettprof_run *run)
{
    jp_timer_ticks(run, 1);
}

/* `elapsed` >= 1 opportunities have passed since the last wake-up (more than one when the timer
 * thread was preempted past a deadline). Each is a requested tick; per thread they raise at
 * most one request, and the rest fold into it as coalesced (or all count as waiting/runtime),
 * so a late timer shows up in the totals instead of silently lowering the rate. */
void jp_timer_ticks(struct jettprof_run *run, uint64_t elapsed)
{
    uint64_t tick = jp_load_relaxed64(&run->tick_no) + elapsed;
    jp_store_relaxed64(&run->tick_no, tick);
    uint64_t req = 0, coal = 0, wait = 0, rt = 0;
    uint32_t n = jp_load_acquire32(&run->nslots); /* T3: pairs with R2 */
    for (uint32_t i = 0; i < n; i++) {
        struct jettprof_thread *t = &run->threads[i];
        if (!jp_load_acquire32(&t->active)) /* T4: pairs with R1 */
            continue;
        req += elapsed;
        uint32_t st = jp_load_relaxed32(&t->state);
        if (st == JETTPROF_STATE_WAITING) {
            wait += elapsed;
            continue;
        }
        if (st == JETTPROF_STATE_RUNTIME) {
            rt += elapsed;
            continue;
        }
        if (jp_load_acquire32(&t->pending)) { /* T1: pairs with S2 */
            coal += elapsed; /* one request per thread at most: these ticks fold into it */
            continue;
        }
        coal += elapsed - 1u;
        jp_store_relaxed64(&t->req_tick, tick);
        jp_store_release32(&t->pending, 1u); /* T2: pairs with S1 */
    }
    jp_store_relaxed64(&run->requested_ticks, jp_load_relaxed64(&run->requested_ticks) + req);
    jp_store_relaxed64(&run->coalesced_ticks, jp_load_relaxed64(&run->coalesced_ticks) + coal);
    jp_store_relaxed64(&run->waiting_ticks, jp_load_relaxed64(&run->waiting_ticks) + wait);
    jp_store_relaxed64(&run->runtime_ticks, jp_load_relaxed64(&run->runtime_ticks) + rt);
}

/* Sleeps until the absolute monotonic deadline in steps of at most 10 ms, so a stop request is
 * seen within 10 ms even at 1 Hz. 1 when asked to stop. */
static int sleep_until(struct jettprof_run *run, uint64_t deadline)
{
    for (;;) {
        if (jp_load_acquire32(&run->timer_stop)) /* X1: pairs with X2 */
            return 1;
        uint64_t now = jp_mono_ns();
        if (now >= deadline)
            return 0;
        uint64_t step = deadline - now > 10000000u ? now + 10000000u : deadline;
        struct timespec ts = {(time_t)(step / 1000000000u), (long)(step % 1000000000u)};
        int r;
        do
            r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
        while (r == EINTR);
    }
}

static void *timer_main(void *arg)
{
    struct jettprof_run *run = arg;
    uint64_t rate = run->cfg.rate_hz, period = 1000000000u / rate;
    uint64_t t0 = jp_mono_ns();
    for (uint64_t k = 1;; k++) {
        /* The k-th deadline from the start, exact for rates that do not divide 1e9, and
         * without overflow for any run length. */
        uint64_t next = t0 + k / rate * 1000000000u + k % rate * 1000000000u / rate;
        if (sleep_until(run, next))
            break;
        /* Woken a period or more late (a preempted VM): every deadline that has passed is an
         * opportunity; they are ticked together and counted, then the schedule resumes. */
        uint64_t now = jp_mono_ns(), last = k;
        if (now - next >= period)
            last = (now - t0) / 1000000000u * rate + (now - t0) % 1000000000u * rate / 1000000000u;
        jp_timer_ticks(run, last - k + 1u);
        k = last;
    }
    return NULL;
}

int jp_timer_start(struct jettprof_run *run)
{
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0)
        return -ENOMEM;
    pthread_attr_setstacksize(&attr, 64u * 1024u);
    /* The host's signals are not ours to receive: the timer thread blocks them all (it
     * inherits the mask in place at creation). */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    jp_store_relaxed32(&run->timer_stop, 0);
    int r = pthread_create(&run->timer, &attr, timer_main, run);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (r != 0)
        return -r;
    pthread_setname_np(run->timer, "jettprof-timer");
    run->timer_running = 1;
    return 0;
}

void jp_timer_stop(struct jettprof_run *run)
{
    if (!run->timer_running)
        return;
    jp_store_release32(&run->timer_stop, 1u); /* X2: pairs with X1 */
    pthread_join(run->timer, NULL);
    run->timer_running = 0;
}
