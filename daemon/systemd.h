/* systemd integration of the long-lived daemon (systemd/jettprofd.service): the listening
 * socket systemd hands over, readiness and stop notifications (Type=notify), and whether
 * stderr is the journal's stream (then log lines carry syslog priorities). Each is a no-op
 * outside systemd. */
#ifndef JETTPROF_DAEMON_SYSTEMD_H
#define JETTPROF_DAEMON_SYSTEMD_H

/* The socket systemd passed (sd_listen_fds: LISTEN_PID names us, LISTEN_FDS counts them), or
 * -ENOENT when there is none. The variables are unset either way. Our .socket unit declares
 * one socket: any further ones are closed so they do not leak into nothing. */
int jpd_sd_listen_socket(void);

/* Tells the service manager state ("READY=1", "STOPPING=1") when NOTIFY_SOCKET is set; a
 * failure is logged and otherwise ignored (the daemon works on without it). */
void jpd_sd_notify(const char *state);

/* 1 when stderr is the stream systemd connected to the journal (JOURNAL_STREAM names its
 * device and inode), else 0. Decided once, on the first call; callable from any thread. */
int jpd_sd_stderr_is_journal(void);

#endif
