/* A run's debug rows and structured log records (the `debug` and `log` builtins), the rules
 * that accept or reject them, and the two ways they leave the process: kept for the --agent
 * envelope's five tables, or written to stderr one line each as they happen (runtime/OUTPUT.md,
 * "Debug rows and structured logs"; the builtins are in runtime/LANGUAGE.md).
 *
 * Nothing here is a Jett heap event: the rows are interpreter bookkeeping, so recording them
 * changes no memory profile. Their allocations can fail, and that is reported, not absorbed:
 * the recording calls return -ENOMEM and the builtin raises the runtime error "out of memory",
 * after which the log takes nothing more (every later call is -ENOMEM too). Every row recorded
 * before stays in the envelope, as it does after any other runtime error or an interrupt.
 *
 * A secret's bytes are never copied in: a secret value is recorded as its kind alone and shown
 * as `<secret>` wherever a row is written. */
#ifndef JETT_RUNTIME_RUNLOG_H
#define JETT_RUNTIME_RUNLOG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "common/buf.h"
#include "jett.h"
#include "value.h"

#define JT_RUNLOG_MAX_ROWS 10000u  /* accepted log records; debug rows likewise */
#define JT_LOG_MAX_FIELDS 16u      /* key/value pairs of one record */
#define JT_LOG_MAX_BYTES 4096u     /* a record's message plus its values, as written */

/* The level words, in severity order: X(NAME, "word"). */
#define JT_LOG_LEVELS(X)                                                                          \
    X(TRACE, "trace") X(DEBUG, "debug") X(INFO, "info") X(WARN, "warn") X(ERROR, "error")
enum jt_log_level {
#define JT_X(n, w) JT_LOG_##n,
    JT_LOG_LEVELS(JT_X)
#undef JT_X
    JT_LOG_LEVEL_COUNT
};

struct jt_debug_row {
    const struct jt_source *src;
    uint32_t line, col;
    size_t value_off, value_len; /* the value's TOON rendering, in bytes */
};
struct jt_log_row {
    uint64_t seq;
    const struct jt_source *src;
    uint32_t level, line, col;
    size_t msg_off, msg_len;
    uint32_t field0, nfields; /* fields[field0 .. field0 + nfields) */
};
struct jt_log_field {
    uint32_t kind;  /* JV_INT, JV_BOOL, JV_STR or JV_SECRET (no bytes kept) */
    int64_t i;      /* JV_INT, JV_BOOL */
    size_t key_off, key_len, val_off, val_len; /* val: JV_STR's bytes */
};

struct jt_runlog {
    FILE *human;       /* NULL: rows are kept for the envelope; else one line each, written here */
    bool broken;       /* an allocation failed: nothing more is taken */
    uint64_t last_seq; /* log sequence numbers used so far, accepted or not */
    /* rows recorded so far (kept or written: the limit counts both); the arrays hold them only
     * when kept. A debug row's number is its position, from 1. */
    uint32_t ndebug, nlogs;
    struct jt_debug_row *debug;
    uint32_t capdebug;
    struct jt_log_row *logs;
    uint32_t caplogs;
    struct jt_log_field *fields;
    uint32_t nfields, capfields;
    struct jp_buf bytes; /* the kept text the rows point into */
};

/* `debug(v)` at src:line:col. 1 when a row was recorded (kept or written), 0 past the limit,
 * -ENOMEM. */
int jt_runlog_debug(struct jt_runlog *rl, const struct jt_source *src, uint32_t line,
                    uint32_t col, jv v);
/* `log(args...)` at src:line:col: takes the next sequence number, then 1 when the record was
 * accepted (kept or written), 0 when it was rejected (nothing recorded), -ENOMEM. */
int jt_runlog_log(struct jt_runlog *rl, const struct jt_source *src, uint32_t line, uint32_t col,
                  const jv *args, uint32_t nargs);
/* Appends the envelope's five tables (debug, logs, log_sources,
 * log_source_graph_path_segments, log_fields), each ending in a newline; an empty table is
 * `name[0]:`. Source ids are the sources' manifest ids. Aborts on exhaustion, like the rest of
 * the envelope writer. */
void jt_runlog_tables(const struct jt_runlog *rl, const struct jt_program *prog,
                      struct jp_buf *b);
void jt_runlog_free(struct jt_runlog *rl);

/* Appends the TOON rendering of v as a root document (what the official encoder writes for the
 * same value): a scalar, `[N]: a,b` for a list of scalars, `[]` for an empty root list, nested
 * lists as `- ` items two spaces deeper per level. nil is `null`, a secret `<secret>`; a list
 * nested deeper than MAX_PRINT_DEPTH is the string `[...]`. -ENOMEM when b failed. */
int jt_toon_value(struct jp_buf *b, jv v);

#endif
