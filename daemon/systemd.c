/* systemd integration: socket activation, sd_notify, the journal stream (systemd.h). */
#include "systemd.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>
#include <unistd.h>

#include "jpd.h"
#include "util.h"

int jpd_sd_listen_socket(void)
{
    /* unset_environment: nothing the daemon starts later should take the fds for its own */
    int n = sd_listen_fds(1);
    if (n <= 0)
        return -ENOENT; /* none, not ours (LISTEN_PID), or malformed: bind our own socket */
    for (int fd = SD_LISTEN_FDS_START + 1; fd < SD_LISTEN_FDS_START + n; fd++)
        close(fd);
    return SD_LISTEN_FDS_START;
}

void jpd_sd_notify(const char *state)
{
    /* 0 without NOTIFY_SOCKET; kept set so that STOPPING=1 can follow READY=1 */
    int r = sd_notify(0, state);
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
