/* Fleet push (push.c): each finished run's pprof export sent over HTTP(S) with libcurl to a
 * Grafana Pyroscope ingest endpoint. `serve --push URL` queues every finished run to one
 * background thread, which never delays a run's result; `export CAPTURE --push URL` sends one
 * profile and waits for the answer. The request, the labels and the retry policy are described
 * at the top of push.c; the operator's view is in jettprofd(8) and the README.
 */
#ifndef JETTPROF_DAEMON_PUSH_H
#define JETTPROF_DAEMON_PUSH_H

#include <stddef.h>
#include <stdint.h>

#define JPD_PUSH_MAX_LABELS 16u     /* --label k=v given at most this often */
#define JPD_PUSH_QUEUE_MAX 64u      /* profiles waiting for the push thread, at most */
#define JPD_PUSH_QUEUE_BYTES (64u << 20) /* ... and their bytes; past either the oldest goes */
#define JPD_PUSH_ATTEMPTS 3u        /* tries per profile: the first and two retries */
#define JPD_PUSH_BACKOFF_MS 1000u   /* before the first retry; doubled before each next one */
#define JPD_PUSH_CONNECT_MS 5000u   /* one attempt's connection (DNS, TCP, TLS) at most */
#define JPD_PUSH_TIMEOUT_MS 30000u  /* one attempt as a whole at most */
#define JPD_PUSH_GRACE_MS 5000u     /* at shutdown, queued pushes get this long, then go */
/* A pushed profile is cut to Grafana Pyroscope's default limits (pkg/validation/limits.go:
 * max_profile_stacktrace_samples, max_profile_size_bytes before compression): the smallest
 * samples merged into one `<cut>` sample, counted (window.c). */
#define JPD_PUSH_MAX_SAMPLES 16000u
#define JPD_PUSH_MAX_RAW_BYTES (4u << 20)

/* Test knobs read once at start (main.c), like the JETTPROFD_*_MS knobs of jpd.h:
 * JETTPROFD_PUSH_BACKOFF_MS, JETTPROFD_PUSH_TIMEOUT_MS (the connect timeout is the smaller
 * of it and JPD_PUSH_CONNECT_MS) and JETTPROFD_PUSH_GRACE_MS. */
extern uint32_t jpd_push_backoff_ms, jpd_push_timeout_ms, jpd_push_grace_ms;

/* What the command line asked for. The strings are the caller's (argv). */
struct jpd_push_opts {
    const char *url;                         /* --push; NULL: no push */
    int parca;                               /* the URL's path ends in /profiles/writeraw */
    const char *labels[JPD_PUSH_MAX_LABELS]; /* --label k=v, in the order given */
    uint32_t nlabels;
};

/* One --push or --label (flag) and its value into o, checked: the URL's scheme is http or
 * https and libcurl can parse it, --push comes once; a label is KEY=VALUE with KEY matching
 * [A-Za-z_][A-Za-z0-9_]*, not program, mode or host (the daemon sets those) nor starting
 * with "__" (reserved by the receivers), not given twice, and a non-empty well-formed UTF-8
 * VALUE without control characters, ',', '{' or '}' (the name grammar has no escapes);
 * JPD_PUSH_MAX_LABELS at most. 0, or -EINVAL with why[cap] saying what was wrong, naming the
 * flag and the value (a URL's user:password never appears there). --push loads libcurl
 * (lazylib.h): -ELIBACC when it cannot, why[cap] "--push needs libcurl (SONAME): ..."; and
 * -ENOMEM. */
int jpd_push_opt(struct jpd_push_opts *o, const char *flag, const char *value, char *why,
                 size_t cap);

/* The URL as logs and status show it: user:password replaced by "***", query and fragment
 * cut to "?...". Never fails: cut to cap. */
void jpd_push_redact(const char *url, char *out, size_t cap);

/* What one pushed profile says about its run. */
struct jpd_push_meta {
    const char *program;   /* the run's program (relative logical path), "" when unknown */
    uint32_t mode;         /* JP_MODE_* */
    int64_t from_s, until_s; /* Unix seconds; from_s is clamped to until_s */
};

/* The request's URL for a profile (malloc'ed in *out): o->url (its path /ingest when it has
 * none) with name, from, until, format and spyName added to its query; for Parca o->url as it
 * is. host: the host label. 0 or -ENOMEM. */
int jpd_push_url(const struct jpd_push_opts *o, const char *host, const struct jpd_push_meta *m,
                 char **out);

/* The request's body for a profile's pprof bytes: for Pyroscope the bytes themselves (*out
 * NULL: send pprof as it is); for Parca, the JSON of its WriteRawRequest (malloc'ed in *out,
 * *out_len bytes). 0 or -ENOMEM. */
int jpd_push_body(const struct jpd_push_opts *o, const char *host, const struct jpd_push_meta *m,
                  const void *pprof, size_t len, char **out, size_t *out_len);

/* The request's Content-Type header line. */
const char *jpd_push_content_type(const struct jpd_push_opts *o);

/* The one libcurl initialisation of the process, before any thread starts, after a --push
 * was checked (jpd_push_opt loaded libcurl). 0 or -ENOMEM (-ELIBACC: libcurl not loaded). */
int jpd_push_global_init(void);
void jpd_push_global_cleanup(void);

/* `export --push`: sends one profile with the retry policy and waits. 0 when the endpoint
 * accepted it; else -errno with why[cap] naming the HTTP status or the transfer's error. */
int jpd_push_now(const struct jpd_push_opts *o, const struct jpd_push_meta *m,
                 const void *body, size_t len, char *why, size_t cap);

/* `serve --push`: the push thread and its queue. */
struct jpd_push;
/* Starts the thread (signals blocked in it). 0 or -errno (nothing left running). */
int jpd_push_start(const struct jpd_push_opts *o, struct jpd_push **out);
/* From any thread: queues a finished run's profile and returns at once; takes body (malloc'ed)
 * whatever happens. A full queue drops its oldest profile (counted, logged); so does a
 * profile larger than the byte cap, itself. p may be NULL: then body is freed. */
void jpd_push_queue(struct jpd_push *p, uint64_t run_id, const struct jpd_push_meta *m,
                    char *body, size_t len);
/* Counts n samples merged into a `<cut>` sample for the receiver's limits (p NULL: none). */
void jpd_push_note_cut(struct jpd_push *p, uint64_t n);
/* Counts a run whose profile could not be rendered for the push as failed, with why. */
void jpd_push_render_failed(struct jpd_push *p, uint64_t run_id, const char *why);
/* The end: queued profiles get jpd_push_grace_ms to go out, then the one in flight is
 * aborted and every one left is dropped (counted and logged). Joins the thread, frees p
 * (NULL: nothing). Never waits longer than the grace plus libcurl's abort (about a second). */
void jpd_push_stop(struct jpd_push *p);

/* What `status` shows. */
struct jpd_push_stats {
    char target[256];      /* the URL, redacted (jpd_push_redact) */
    uint64_t pushed;       /* profiles the endpoint accepted */
    uint64_t failed;       /* profiles given up after every attempt (or never rendered) */
    uint64_t retried;      /* attempts after a first one failed */
    uint64_t dropped;      /* profiles dropped unsent: the queue was full, or shutdown */
    uint32_t queued;       /* profiles waiting or being sent now */
    uint64_t cut;          /* samples merged into `<cut>` samples for the receiver's limits */
    char last_error[200];  /* the last failed attempt's error, "" when none */
};
/* 1 with *out filled when p is a push, 0 when p is NULL (no --push). */
int jpd_push_stats(struct jpd_push *p, struct jpd_push_stats *out);

#endif
