/* Control messages between the agent and jettprofd over a unix stream socket.
 *
 * Framing: a 4-byte little-endian length, then that many bytes of one msgpack map. The map has
 * "t" (message type name, a string) and the type's fields below. Lengths above JP_CTL_MAX_FRAME
 * are refused before any allocation. File descriptors (the ring memfd, a capture file) travel as
 * SCM_RIGHTS ancillary data on the same socket next to the frame that announces them.
 *
 * Decoding is strict and incremental: feed bytes as they arrive, in any split; each complete
 * frame yields one message or an error naming what was wrong (unknown type, missing field, wrong
 * field type, oversize frame, trailing bytes). Unknown extra fields are an error too.
 *
 * Wire fields are the member names of the union arm below ("pid", "slot_count", ...), each
 * exactly once, integers as msgpack unsigned integers; a (pointer, length) pair is one msgpack
 * str ("reason", "human", "toon", "message"; export "data", whose bytes may be any: pprof is
 * gzip); error.code travels as its stable word from
 * JP_CTL_ERRORS; excerpt_request "keys" is an array of [source_id, line, col]; excerpts "items"
 * an array of [source_id, line, col, flags, text]. Ranges checked both ways: hello.mode and
 * finalize.termination must name a JP_MODE_* / JP_TERM_*, outputs only JP_OUT_* bits,
 * ring.slot_count in [JP_RING_MIN_SLOTS, JP_RING_MAX_SLOTS], has_capture 0/1, result.status
 * 1..3, excerpt texts <= JP_EXCERPT_MAX with known flags. hello.version is passed through
 * unchecked so the daemon can answer unsupported_version.
 */
#ifndef JETTPROF_PROTOCOL_CONTROL_H
#define JETTPROF_PROTOCOL_CONTROL_H

#include <stddef.h>
#include <stdint.h>

#define JP_CTL_VERSION 1u
#define JP_CTL_MAX_FRAME (1u << 24) /* 16 MiB: a rendered profile plus slack */
#define JP_CTL_MAX_EXCERPT_KEYS 4096u  /* also the most items of an "excerpts" message */
/* Worker rings a run may hand over in all (the agent keeps one per thread slot for the run's
 * life, and has 64 slots); WELCOME also bounds their bytes (serve --max-run-ring-bytes). */
#define JP_CTL_MAX_WORKER_RINGS 64u
#define JP_CTL_MAX_ELEMENTS (1u << 16) /* msgpack values in one frame, containers' members */

/* X(NAME, "wire name") */
#define JP_CTL_TYPES(X)                                                                           \
    X(HELLO, "hello")               /* agent -> daemon: who and what */                          \
    X(WELCOME, "welcome")           /* daemon -> agent: accepted, run id */                      \
    X(RING, "ring")                 /* agent -> daemon: ring fd (+ optional capture fd) */       \
    X(FINALIZE, "finalize")         /* agent -> daemon: the run ended, with its termination */   \
    X(EXCERPT_REQUEST, "excerpt_request") /* daemon -> agent: hot lines that want excerpts */    \
    X(EXCERPTS, "excerpts")         /* agent -> daemon: redacted excerpts for those lines */     \
    X(RESULT, "result")             /* daemon -> agent: status and rendered outputs */           \
    X(SHOW, "show")                 /* client -> long-lived daemon: a finished run's profile */  \
    X(ERROR, "error")               /* either way: stable code + message, then close */          \
    X(EXPORT, "export")             /* daemon -> agent: one piece of an export, before RESULT */  \
    X(STATUS, "status")             /* client -> long-lived daemon: what it is doing */          \
    X(STATUS_REPLY, "status_reply") /* daemon -> client: the status (or runs) text, then close */ \
    X(RUNS, "runs")                 /* client -> long-lived daemon: recent finished runs */    \
    X(WORKER_RING, "worker_ring")   /* agent -> daemon: a registered thread's own ring fd */ \
    X(TOP, "top")                   /* client -> daemon: a frame of a live run, for top */      \
    X(TOP_FRAME, "top_frame")       /* daemon -> client: that frame */

enum jp_ctl_type {
    JP_CTL_NONE = 0,
#define JP_X(n, s) JP_CTL_##n,
    JP_CTL_TYPES(JP_X)
#undef JP_X
    JP_CTL_TYPE_LIMIT
};
const char *jp_ctl_type_name(uint32_t type);

#define JP_OUT_HUMAN 0x1u
#define JP_OUT_TOON 0x2u
#define JP_OUT_VERBOSE 0x4u /* the human text ends with its full totals block */
#define JP_OUT_ALL (JP_OUT_HUMAN | JP_OUT_TOON | JP_OUT_VERBOSE) /* what hello.outputs may ask */

/* Export formats (render/export/export.h), one list for the wire (finalize.exports bits,
 * export.format), the renderers and the CLIs: X(NAME, "word") */
#define JP_EXPORT_FORMATS(X)                                                                      \
    X(FOLDED, "folded")                                                                           \
    X(PPROF, "pprof")                                                                             \
    X(SPEEDSCOPE, "speedscope")                                                                   \
    X(SVG, "svg")                                                                                 \
    X(HTML, "html")
enum {
#define JP_X(n, w) JP_EXPORT_##n,
    JP_EXPORT_FORMATS(JP_X)
#undef JP_X
    JP_EXPORT_FORMAT_COUNT
};
/* What STATUS answers in, one list for the wire and the CLI: X(NAME, "word"); RUNS takes the
 * formats up to JP_RUNS_FORMAT_LAST. RUNS's limit is 1..JP_CTL_MAX_RUNS_LIMIT rows. */
#define JP_STATUS_FORMATS(X) X(HUMAN, "human") X(JSON, "json") X(PROMETHEUS, "prometheus")
enum {
#define JP_X(n, w) JP_STATUS_FMT_##n,
    JP_STATUS_FORMATS(JP_X)
#undef JP_X
    JP_STATUS_FORMAT_COUNT
};
#define JP_RUNS_FORMAT_LAST JP_STATUS_FMT_JSON
#define JP_CTL_MAX_RUNS_LIMIT 1000u
/* The word of a status format (NULL when out of range), and the reverse: 0, or -EINVAL for a
 * word that names none of the first `count` formats. */
const char *jp_status_format_name(uint32_t format);
int jp_status_format_parse(const char *word, uint32_t count, uint32_t *format);

/* An export travels as EXPORT messages of at most this many data bytes each, in order, so that
 * an export of any size stays within the frame limit. The agent takes at most
 * JP_CTL_MAX_EXPORT bytes of one export. */
#define JP_CTL_EXPORT_CHUNK (4u << 20)
#define JP_CTL_MAX_EXPORT (UINT64_C(1) << 30)

/* Stable error codes of JP_CTL_ERROR, one list: X(NAME, "wire word"). */
#define JP_CTL_ERRORS(X)                                                                          \
    X(BAD_MESSAGE, "bad_message")                                                                 \
    X(UNSUPPORTED_VERSION, "unsupported_version")                                                 \
    X(PERMISSION_DENIED, "permission_denied")                                                     \
    X(TOO_MANY_RUNS, "too_many_runs")                                                             \
    X(BAD_RING, "bad_ring")                                                                       \
    X(BAD_CAPTURE, "bad_capture")                                                                 \
    X(PROTOCOL_VIOLATION, "protocol_violation")                                                   \
    X(SHUTTING_DOWN, "shutting_down")                                                             \
    X(NO_SUCH_RUN, "no_such_run")                                                                 \
    X(INTERNAL, "internal")
enum jp_ctl_error {
    JP_CTLE_NONE = 0,
#define JP_X(n, s) JP_CTLE_##n,
    JP_CTL_ERRORS(JP_X)
#undef JP_X
    JP_CTLE_LIMIT
};
const char *jp_ctl_error_name(uint32_t code);

/* TOP: the most rows a frame carries; the most points of its timeline (the engine's). */
#define JP_CTL_MAX_TOP_ROWS 1000u
#define JP_CTL_MAX_TOP_POINTS 512u
/* A frame's figures ("figures", by mode):
 *   CPU:    samples in all, then samples by state (JP_STATE_* order, JP_STATE_LIMIT of them);
 *   memory: live bytes now, peak live bytes so far, allocated bytes, allocation count.
 * A row's three values: CPU self samples, inclusive samples, 0; memory live bytes now,
 * allocated bytes, allocation count (of the allocations created in that function). */
#define JP_CTL_MAX_TOP_FIGURES 16u
struct jp_ctl_top_row {
    const char *name; size_t name_len; /* "namespace.function" */
    const char *path; size_t path_len; /* "" when the source is unavailable */
    uint32_t line;                     /* its declaration's line, 0 when unavailable */
    uint64_t v[3];
};

struct jp_ctl_excerpt_key {
    uint32_t source_id, line, col;
};
struct jp_ctl_excerpt {
    uint32_t source_id, line, col;
    uint32_t flags; /* JP_EXCERPT_* */
    const char *text; size_t text_len; /* <= JP_EXCERPT_MAX */
};

/* A decoded or to-be-encoded message. Strings and arrays point into the decoder's frame buffer
 * and stay valid until the next jp_ctl_decoder_next() / jp_ctl_decoder_free(). */
struct jp_ctl_msg {
    uint32_t type; /* enum jp_ctl_type */
    union {
        struct {
            uint32_t version; /* JP_CTL_VERSION */
            uint32_t pid;
            uint32_t mode;    /* JP_MODE_* */
            uint32_t rate_hz, threshold_bp, limit;
            uint32_t outputs; /* JP_OUT_* */
            uint32_t capabilities;
        } hello;
        /* ring_bytes: the most bytes (headers included) all of the run's rings may have
         * together, its main ring and its worker rings; UINT64_MAX: no cap. */
        struct { uint64_t run_id, ring_bytes; } welcome;
        struct { uint64_t run_id; uint32_t outputs; } show; /* answered by RESULT or ERROR */
        /* format: JP_STATUS_FMT_*; answered by STATUS_REPLY or ERROR */
        struct { uint32_t format; } status;
        struct { const char *text; size_t text_len; } status_reply;
        /* format: JP_STATUS_FMT_* up to JP_RUNS_FORMAT_LAST; limit: the most rows, newest
         * first, 1..JP_CTL_MAX_RUNS_LIMIT; answered by STATUS_REPLY or ERROR */
        struct { uint32_t format, limit; } runs;
        struct {
            uint32_t slot_count;
            uint32_t has_capture; /* 1: a second fd, an open writable capture file, follows */
        } ring;
        /* A registered runtime thread's own ring (one memfd follows, as for RING); the thread's
         * identity is in the ring's own EXEC records. Sent after RING, any time before
         * FINALIZE, never answered: the agent keeps within the caps WELCOME gave
         * (at most JP_CTL_MAX_WORKER_RINGS, all the run's rings within welcome.ring_bytes),
         * and a run that passes them is ended as a protocol violation. The n-th worker ring is
         * ring n of the run. What a worker ring may carry and how the daemon merges the run's
         * rings: protocol/ring.h, "A run's rings". */
        struct { uint32_t slot_count; } worker_ring;
        struct {
            uint32_t termination; /* JP_TERM_* */
            uint32_t exports;     /* 1u << JP_EXPORT_*: what to render before RESULT */
        } finalize;
        struct {
            uint32_t format;         /* JP_EXPORT_* */
            uint32_t error;          /* 0, or the errno that kept the daemon from rendering it
                                      * (then total is 0 and data empty) */
            uint64_t total, offset;  /* the export's size; where data goes in it */
            const char *data; size_t data_len; /* <= JP_CTL_EXPORT_CHUNK bytes, any bytes */
        } export_piece;
        struct { const struct jp_ctl_excerpt_key *keys; uint32_t count; } excerpt_request;
        struct { const struct jp_ctl_excerpt *items; uint32_t count; } excerpts;
        struct {
            uint32_t status; /* 1 complete, 2 partial, 3 unavailable */
            const char *reason; size_t reason_len; /* "" when complete */
            const char *human; size_t human_len;   /* "" unless requested */
            const char *toon; size_t toon_len;     /* "" unless requested */
            uint32_t capture_errno; /* 0, or the errno that ended the run's capture early */
        } result;
        /* A frame of a live run (run_id 0: the one run of a private daemon), answered by
         * TOP_FRAME, by RESULT (the human text of its final profile) once the run has ended,
         * or by ERROR. rows: 1..JP_CTL_MAX_TOP_ROWS. The connection stays open for the next
         * TOP; a run that ends while it is open sends its RESULT unasked. */
        struct { uint64_t run_id; uint32_t rows; } top;
        struct {
            uint64_t run_id;
            uint32_t mode;                        /* JP_MODE_* */
            const char *program; size_t program_len;
            uint64_t elapsed_ns, records;         /* into the run; records taken */
            uint64_t fill, slots;                 /* the fullest ring's fill, its slots */
            uint64_t lost, violations;
            const uint64_t *figures; uint32_t nfigures; /* see JP_CTL_MAX_TOP_FIGURES */
            uint64_t stretch_ns;                  /* what one timeline point covers */
            /* CPU: samples in each stretch; memory: the most bytes live at once in it */
            const uint64_t *timeline; uint32_t npoints;
            /* the rows with the most of any of their values, at most top.rows, any order */
            const struct jp_ctl_top_row *rows; uint32_t nrows;
        } top_frame;
        struct {
            uint32_t code; /* enum jp_ctl_error */
            const char *message; size_t message_len;
        } error;
    } u;
};

/* Encodes one framed message into a malloc'ed buffer (*out, *out_len). 0 or -errno
 * (-EINVAL for a message that violates its own limits). */
int jp_ctl_encode(const struct jp_ctl_msg *m, uint8_t **out, size_t *out_len);

struct jp_ctl_decoder; /* opaque */
int jp_ctl_decoder_new(uint32_t max_frame, struct jp_ctl_decoder **out);
void jp_ctl_decoder_free(struct jp_ctl_decoder *d);
/* Changes the largest frame accepted (1..JP_CTL_MAX_FRAME, else -EINVAL): every frame not yet
 * returned is checked against the new bound. A reader lets a peer send large frames only where
 * the protocol expects them. Once -EMSGSIZE was returned it stays. */
int jp_ctl_decoder_set_max_frame(struct jp_ctl_decoder *d, uint32_t max_frame);
/* Appends received bytes. -EMSGSIZE as soon as a frame header announces more than max_frame. */
int jp_ctl_decoder_feed(struct jp_ctl_decoder *d, const uint8_t *bytes, size_t len);
/* Takes the next complete message: 1 and *m filled, 0 when more bytes are needed, or -EPROTO
 * with *why a stable reason ("unknown message type", "missing field ring.slot_count", ...).
 * An error is final: the decoder keeps returning it (a stream cannot be resynchronised).
 * Decoding allocates only within bounds set by the frame's own length: a frame is checked
 * (every container count and string length against the bytes left, at most
 * JP_CTL_MAX_ELEMENTS elements in all) before msgpack-c builds objects from it. */
int jp_ctl_decoder_next(struct jp_ctl_decoder *d, struct jp_ctl_msg *m, const char **why);
/* Bytes buffered but not yet part of a returned message (a partial frame at EOF is an error). */
size_t jp_ctl_decoder_pending(const struct jp_ctl_decoder *d);

/* Most fds one frame carries (the ring memfd, a capture file). */
#define JP_CTL_MAX_FDS 2u

/* Blocking helpers for the agent side (the daemon uses libuv). Send a frame with up to two fds
 * attached as SCM_RIGHTS; receive into a decoder collecting passed fds. 0 or -errno.
 * jp_ctl_send writes the whole frame: it retries on EINTR and partial writes (waiting with poll
 * on a non-blocking socket), attaches the fds to the first byte sent, and uses MSG_NOSIGNAL so
 * a closed peer is -EPIPE, not SIGPIPE. -EINVAL for nfds > JP_CTL_MAX_FDS or a bad message. */
int jp_ctl_send(int sock, const struct jp_ctl_msg *m, const int *fds, unsigned nfds);
/* The same with an overall deadline of timeout_ms (-1: none): -ETIMEDOUT when a peer that stops
 * reading leaves the frame unsent by then (part of it may have gone; the stream is then
 * unusable). On a blocking socket set SO_SNDTIMEO too, so one sendmsg cannot outlast it. */
int jp_ctl_send_timeout(int sock, const struct jp_ctl_msg *m, const int *fds, unsigned nfds,
                        int timeout_ms);

/* One blocking recvmsg (retried on EINTR) into the decoder; received fds (MSG_CMSG_CLOEXEC) are
 * stored in fds[0..*nfds). Returns the bytes read (> 0), 0 at EOF, or -errno: the decoder's
 * -EMSGSIZE, -EPROTO when the peer sent more fds than max_fds or the control data was
 * truncated (every fd of that call is closed then). Call jp_ctl_decoder_next() afterwards. */
int jp_ctl_recv(int sock, struct jp_ctl_decoder *d, int *fds, unsigned max_fds, unsigned *nfds);

/* Control-buffer room recvmsg needs for JP_CTL_MAX_FDS fds plus slack, so that a peer sending
 * a few more is seen as "too many" rather than silently truncated. Use it as
 * `union { struct cmsghdr align; char buf[JP_CTL_CMSG_SPACE]; } u;` for msg_control. */
#define JP_CTL_CMSG_SPACE 64u
struct msghdr;
/* For a caller that runs recvmsg itself (the daemon from a uv_poll_t): collects the SCM_RIGHTS
 * fds of a received msghdr into fds[0..*nfds). On too many fds (> max_fds) or MSG_CTRUNC it
 * closes every fd the message carried, sets *nfds = 0 and returns -EPROTO; else 0. Other
 * control messages are ignored. */
int jp_ctl_take_fds(struct msghdr *msg, int *fds, unsigned max_fds, unsigned *nfds);

#endif
