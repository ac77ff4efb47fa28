/* SIGTERM and a clean exit (see stop.h). Apart from spawn.c: this one asserts, and the benches
 * compile spawn.c without Criterion. */
#include "stop.h"

#include <criterion/criterion.h>
#include <signal.h>
#include <sys/wait.h>

#include "spawn.h"

void tl_stop(pid_t pid, int timeout_ms)
{
    kill(pid, SIGTERM);
    int st = tl_wait(pid, timeout_ms);
    cr_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "daemon exit %d", st);
}
