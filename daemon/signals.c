/* What each signal does to a running daemon, in one table (jettprofd(8), SIGNALS). A serving
 * daemon holds other users' runs: no signal that can be caught ends it by its default action
 * and loses them. Only SIGTERM (and SIGINT under `serve`) stops it, delivering every run in
 * flight; SIGHUP reopens the runs log for log rotation; every other catchable signal whose
 * default would end the process is ignored, and a fault signal is ignored only when another
 * process sent it with kill(2): a real fault (or the daemon's own abort()) still ends it the
 * way it would have, through whatever action was there before (a sanitizer's report, or the
 * default core dump).
 *
 * The loop's own signals (TERM, INT, HUP) are uv_signal handles on the main loop, so their
 * work runs there and not in a handler. The fault filter is a plain sigaction handler: it
 * calls only getpid(), sigaction() and raise(), all async-signal-safe.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "jpd.h"
#include "server.h"
#include "util.h"

enum action {
    SIG_STOP,    /* stop accepting, deliver every run in flight, exit */
    SIG_REOPEN,  /* reopen the runs log (serve; ignored by the private daemon) */
    SIG_IGNORE,  /* nothing happens */
    SIG_FOREIGN, /* ignored when sent by another process; a real fault keeps its old action */
};

static const struct {
    int sig;
    enum action act;
} signal_table[] = {
    {SIGTERM, SIG_STOP},
    {SIGINT, SIG_STOP}, /* the private daemon ignores it: Ctrl-C belongs to its client,
                         * which finalizes and asks for its profile */
    {SIGHUP, SIG_REOPEN},
    {SIGQUIT, SIG_IGNORE},
    {SIGUSR1, SIG_IGNORE},
    {SIGUSR2, SIG_IGNORE},
    {SIGALRM, SIG_IGNORE},
    {SIGVTALRM, SIG_IGNORE},
    {SIGPROF, SIG_IGNORE},
    {SIGPOLL, SIG_IGNORE},
    {SIGPWR, SIG_IGNORE},
    {SIGSTKFLT, SIG_IGNORE},
    {SIGXCPU, SIG_IGNORE}, /* past the hard limit the kernel sends SIGKILL, which nothing stops */
    {SIGXFSZ, SIG_IGNORE}, /* past a file size limit a write fails with EFBIG, handled */
    {SIGPIPE, SIG_IGNORE}, /* a peer gone mid-write is an EPIPE, handled */
    {SIGSEGV, SIG_FOREIGN},
    {SIGBUS, SIG_FOREIGN},
    {SIGILL, SIG_FOREIGN},
    {SIGFPE, SIG_FOREIGN},
    {SIGTRAP, SIG_FOREIGN},
    {SIGSYS, SIG_FOREIGN},
    {SIGABRT, SIG_FOREIGN},
};
#define NSIG_TABLE (sizeof signal_table / sizeof signal_table[0])

/* The action each fault signal had before ours, restored for a real fault. Written once at
 * start, before any handler can run; read only in the handler. */
static struct sigaction previous[NSIG_TABLE];
static int previous_sig[NSIG_TABLE];

static void on_fault(int sig, siginfo_t *info, void *uc)
{
    (void)uc;
    /* si_code <= 0: kill(2), sigqueue(3), tgkill(2) and the like, never the kernel. */
    if (info && info->si_code <= 0 && info->si_pid != getpid())
        return;
    for (size_t i = 0; i < NSIG_TABLE; i++)
        if (previous_sig[i] == sig) {
            sigaction(sig, &previous[i], NULL);
            break;
        }
    /* A real fault runs again when this returns and meets the old action; a signal the
     * process sent itself is sent again to it. */
    if (!info || info->si_code <= 0)
        raise(sig);
}

static void on_stop(uv_signal_t *h, int signum)
{
    (void)signum;
    jpd_server_stop(h->data);
}

/* SIGHUP: the runs log is opened again by name, so a rotated file is let go and a new one
 * begins; if the new one cannot be opened the old stays in use and the reason is logged. */
static void on_reopen(uv_signal_t *h, int signum)
{
    (void)signum;
    struct jpd_daemon *d = h->data;
    if (d->private_mode || !d->cfg->runs_log) {
        jpd_log("SIGHUP: no log file to reopen");
        return;
    }
    int fd = open(d->cfg->runs_log, O_WRONLY | O_APPEND | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        jpd_log_at(JPD_LOG_WARNING, "SIGHUP: cannot reopen the runs log (%s); still writing "
                   "to the file open before", strerror(errno));
        return;
    }
    if (d->runs_log_fd >= 0)
        close(d->runs_log_fd);
    d->runs_log_fd = fd;
    jpd_log("SIGHUP: reopened the runs log");
}

int jpd_signals_start(struct jpd_daemon *d)
{
    uv_signal_t *h[] = {&d->sigterm, &d->sigint, &d->sighup};
    for (size_t i = 0; i < sizeof h / sizeof h[0]; i++) {
        /* Only the first can fail: it makes the loop's signal pipe, the one thing that can. */
        int r = uv_signal_init(d->loop, h[i]);
        if (r < 0)
            return r;
        h[i]->data = d;
    }
    d->signals_active = 1;
    size_t nprev = 0;
    for (size_t i = 0; i < NSIG_TABLE; i++) {
        int sig = signal_table[i].sig;
        switch (signal_table[i].act) {
        case SIG_STOP:
            if (sig == SIGINT && d->private_mode)
                signal(SIGINT, SIG_IGN);
            else
                uv_signal_start(sig == SIGINT ? &d->sigint : &d->sigterm, on_stop, sig);
            break;
        case SIG_REOPEN:
            uv_signal_start(&d->sighup, on_reopen, sig);
            break;
        case SIG_IGNORE:
            signal(sig, SIG_IGN);
            break;
        case SIG_FOREIGN: {
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_sigaction = on_fault;
            sa.sa_flags = SA_SIGINFO | SA_RESTART;
            sigemptyset(&sa.sa_mask);
            if (sigaction(sig, &sa, &previous[nprev]) == 0)
                previous_sig[nprev++] = sig;
            break;
        }
        }
    }
    /* Real-time signals end a process by default too; none is used here. */
    for (int sig = SIGRTMIN; sig <= SIGRTMAX; sig++)
        signal(sig, SIG_IGN);
    return 0;
}

void jpd_signals_stop(struct jpd_daemon *d)
{
    if (!d->signals_active)
        return;
    d->signals_active = 0;
    uv_close((uv_handle_t *)&d->sigterm, NULL);
    uv_close((uv_handle_t *)&d->sigint, NULL);
    uv_close((uv_handle_t *)&d->sighup, NULL);
}
