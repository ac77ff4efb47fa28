/* tests/lib/stop.h: the end of a daemon a test started, as its service manager ends it. */
#ifndef JETTPROF_TESTS_LIB_STOP_H
#define JETTPROF_TESTS_LIB_STOP_H

#include <sys/types.h>

/* SIGTERMs pid (a child of tl_spawn or tl_fork) and reaps it: fails the test unless it exits
 * with status 0 within timeout_ms. The bound is the caller's: a daemon that holds runs, or is
 * told to wait for them, takes longer to drain. */
void tl_stop(pid_t pid, int timeout_ms);

#endif
