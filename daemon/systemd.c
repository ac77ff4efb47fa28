/* systemd integration: socket activation, sd_notify, the journal stream (systemd.h). */
#include "systemd.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "jpd.h"
#include "lazylib.h"
#include "util.h"

/* libsystemd is loaded (lazylib.h) only when the environment asks for it: LISTEN_FDS for
 * socket activation, NOTIFY_SOCKET for notifications. Both calls below come from the main
 * thread; jpd_systemd() is safe from any. Without it the daemon goes on as outside systemd. */

/* What sd_listen_fds(1) unsets, when it is not called. */
static int no_listen_fds(void)
{
    unsetenv("LISTEN_PID");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_FDNAMES");
    return -ENOENT;
}

int jpd_sd_listen_socket(void)
{
    if (!getenv("LISTEN_FDS"))
        return no_listen_fds(); /* not socket-activated: no need of libsystemd */
    char why[400];
    const struct jpd_systemd *sd = jpd_systemd(why, sizeof why);
    if (!sd) {
        jpd_log_at(JPD_LOG_WARNING, "socket activation asked for, but %s; binding our own "
                   "socket", why);
        return no_listen_fds();
    }
    /* unset_environment: nothing the daemon starts later should take the fds for its own */
    int n = sd->listen_fds(1);
    if (n <= 0)
        return -ENOENT; /* none, not ours (LISTEN_PID), or malformed: bind our own socket */
    for (int fd = SD_LISTEN_FDS_START + 1; fd < SD_LISTEN_FDS_START + n; fd++)
        close(fd);
    return SD_LISTEN_FDS_START;
}

void jpd_sd_notify(const char *state)
{
    if (!getenv("NOTIFY_SOCKET"))
        return; /* sd_notify would do nothing: no need of libsystemd */
    char why[400];
    const struct jpd_systemd *sd = jpd_systemd(why, sizeof why);
    if (!sd) {
        jpd_log_at(JPD_LOG_WARNING, "cannot tell systemd %s (%s)", state, why);
        return;
    }
    /* kept set so that STOPPING=1 can follow READY=1 */
    int r = sd->notify(0, state);
    if (r < 0)
        jpd_log_at(JPD_LOG_WARNING, "cannot tell systemd %s (%s)", state, strerror(-r));
}

static pthread_once_t journal_once = PTHREAD_ONCE_INIT;
static int journal_stderr;

static void journal_init(void)
{
    const char *v = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    char end;
    struct stat st;
    if (v && sscanf(v, "%llu:%llu%c", &dev, &ino, &end) == 2 &&
        fstat(STDERR_FILENO, &st) == 0)
        journal_stderr = (unsigned long long)st.st_dev == dev &&
                         (unsigned long long)st.st_ino == ino;
}

int jpd_sd_stderr_is_journal(void)
{
    /* pthread_once orders the write of journal_stderr before every reader's return */
    pthread_once(&journal_once, journal_init);
    return journal_stderr;
}
