/* The deterministic tick source of the tests' jett-ticks executable (interp.h, JT_TEST_TICKS):
 * the runtime built with it calls jt_test_tick at every safe point. Never linked into jett. */
#include <stdlib.h>

#include "agent/agent.h"
#include "runtime/interp.h"

static uint64_t every; /* 0: real ticks (the timer runs) */
static _Thread_local uint64_t passed;

void jt_test_ticks_start(jettprof_run *run)
{
    const char *e = getenv("JETT_TEST_TICK_EVERY");
    char *end;
    unsigned long long n = e ? strtoull(e, &end, 10) : 0;
    if (!e || !*e || *end || n == 0)
        return;
    every = n;
    jp_timer_stop(run); /* no thread is registered yet: no real tick reached one */
}

void jt_test_tick(struct jt_rt *rt)
{
    /* The tick is raised as the timer raises it (jp_timer_tick), so it is counted, coalesced
     * or charged to a waiting thread exactly as a real one. */
    if (every && rt->pt && ++passed % every == 0)
        jp_timer_tick(rt->pt->run);
}
