/* The client and offline commands of jettprofd, in the files that define them (show.c,
 * offline.c, export.c): main.c dispatches to them.
 */
#ifndef JETTPROF_DAEMON_COMMANDS_H
#define JETTPROF_DAEMON_COMMANDS_H

#include "jpd.h"

/* show.c: the clients of a serving daemon (show, status, runs). jpd_ask sends m to the daemon at socket_path and
 * reads one answer: an ERROR is printed (named after cmd), anything else goes to answer, which
 * returns the exit status or -1 for a message it did not expect. Returns the exit status. */
int jpd_ask(const char *cmd, const char *socket_path, const struct jp_ctl_msg *m,
            int (*answer)(const struct jp_ctl_msg *a, void *arg), void *arg);
int jpd_show(const char *socket_path, uint64_t run_id, uint32_t outputs);
/* `jettprofd status`: asks the daemon at socket_path and writes its answer to out_path (NULL:
 * stdout; else atomically, temp + rename). Returns the exit status. */
int jpd_status(const char *socket_path, uint32_t format, const char *out_path);
/* `jettprofd runs`: asks the daemon at socket_path for them. Returns the exit status. */
int jpd_runs(const char *socket_path, uint32_t format, uint32_t limit);


/* offline.c */
struct jpd_loaded {
    struct jp_engine *eng;
    uint32_t integrity;     /* JP_CAPI_* */
    const char *reason;     /* static: capture reader's or engine's reason */
    uint64_t offset;
    uint32_t ending;        /* JP_END_STOP or JP_END_TRUNCATED when usable */
    uint64_t records;
};
/* Reads a capture into a fresh engine. 0 with the verdict in *out (the engine is usable unless
 * integrity is INVALID or MISSING), or -errno for I/O trouble other than a missing file. */
int jpd_load_capture(const char *path, struct jpd_loaded *out);
/* The same for the first `until` records of its merged stream only: when the stream has that
 * many, *out's ending is JP_END_RUNNING (render it as a snapshot covering them); when it has
 * fewer, it is loaded whole as jpd_load_capture would (out->records says how many). */
int jpd_load_capture_until(const char *path, uint64_t until, struct jpd_loaded *out);
void jpd_loaded_free(struct jpd_loaded *l);
/* What is wrong with a capture that is not complete: its reason, and the byte offset when one
 * is known. */
void jpd_loaded_describe(char *buf, size_t cap, const struct jpd_loaded *l);
int jpd_cmd_replay(int argc, char **argv);
int jpd_cmd_summarize(int argc, char **argv);


/* top.c: `jettprofd top`. */
int jpd_cmd_top(int argc, char **argv);


/* export.c */
int jpd_cmd_export(int argc, char **argv);
int jpd_cmd_diff(int argc, char **argv);

#endif
