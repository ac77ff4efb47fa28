/* jettprofd command line.
 *
 *   jettprofd --session-fd N                  private mode: one run on an inherited socket
 *   jettprofd serve [--socket PATH] [--capture-dir DIR] [--capture-max-bytes N[K|M|G]]
 *                   [--capture-max-age DURATION] [--runs-log FILE] [--allow-group G]
 *                   [--max-runs-per-uid N] [--max-ring-bytes B] [--max-run-ring-bytes B]
 *                   [--max-cpu-budget B] [--max-retention-budget B] [--max-export-bytes N]
 *                   [--workers N]
 *                   [--push URL [--label K=V]... [--push-interval SECONDS]]
 *   jettprofd show RUN_ID [--socket PATH] [--format human|toon]
 *   jettprofd status [--socket PATH] [--format human|json|prometheus] [-o FILE]
 *   jettprofd runs [--socket PATH] [--format human|json] [--limit N]
 *   jettprofd replay FILE [--format human|toon] [--verbose] [--profile-threshold P] [--until-record N]
 *                    [--profile-limit N]
 *   jettprofd summarize [--repetitions OUT.jsonl] [--execution-index N] [--exit-code C] CAPTURE...
 *   jettprofd export CAPTURE [--format folded|pprof|speedscope|svg|html] [--value V] [-o FILE|-]
 *   jettprofd export CAPTURE --push URL [--label K=V]...
 *   jettprofd diff BASE NEW [--format human|toon|folded|svg|html] [-o FILE|-]
 *   jettprofd help [COMMAND] | --help | --version    (stdout, exit 0; so is CMD --help)
 *
 * Exit status: 0 success, 1 failure at run time (named on stderr), 2 bad command line (the
 * offending flag or value named on stderr).
 *
 * Test knobs, read once at start and never otherwise: JETTPROFD_EXCERPT_TIMEOUT_MS=N
 * (1..600000) replaces the 10 s a session waits for the runtime's EXCERPTS, and
 * JETTPROFD_HANDSHAKE_TIMEOUT_MS=N the 3 s a connection has for HELLO and RING, so a test can
 * watch each timeout fire; JETTPROFD_EXPORT_CHUNK_BYTES=N the 4 MiB pieces a run's exports
 * travel in, so a test can see one cross many frames; JETTPROFD_PUSH_BACKOFF_MS,
 * JETTPROFD_PUSH_TIMEOUT_MS and JETTPROFD_PUSH_GRACE_MS the push's wait before a retry, its
 * timeout per attempt and its moment at shutdown (push.h), so a test need not wait seconds.
 * A bad value is a command-line error (exit 2). JETTPROFD_TEST_LIBCURL=FILE and
 * JETTPROFD_TEST_LIBSYSTEMD=FILE name what is loaded instead of libcurl.so.4 and
 * libsystemd.so.0 (lazylib.h, read when the library is first needed), so a test can see the
 * daemon without them.
 */
#include <errno.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jpd.h"
#include "server.h"
#include "session_api.h"
#include "status.h"
#include "commands.h"
#include "util.h"
#include "push.h"

#define DEFAULT_MAX_RUNS 16u
#define DEFAULT_MAX_RING_BYTES ((uint64_t)JP_RING_HEADER_SIZE + (64ull << 20))
/* All of a run's rings: a main ring of up to DEFAULT_MAX_RING_BYTES and 64 worker rings of the
 * agent's default 16 MiB fit. */
#define DEFAULT_MAX_RUN_RING_BYTES ((uint64_t)(JP_CTL_MAX_WORKER_RINGS + 1u) * JP_RING_HEADER_SIZE + \
                                    (1088ull << 20))

#ifndef JETTPROF_VERSION
#define JETTPROF_VERSION "unknown"
#endif

/* One entry per subcommand: its synopsis and its option descriptions, printed by
 * `jettprofd help CMD`, `jettprofd CMD --help` (stdout, exit 0) and after a usage error
 * (stderr, exit 2). */
static const struct command {
    const char *name;
    const char *synopsis;
    const char *options;
} commands[] = {
    {"serve",
     "jettprofd serve [--socket PATH] [--capture-dir DIR] [--capture-max-bytes N[K|M|G]]\n"
     "                [--capture-max-age DURATION] [--runs-log FILE]\n"
     "                [--allow-group G] [--max-runs-per-uid N] [--max-ring-bytes B]\n"
     "                [--max-run-ring-bytes B]\n"
     "                [--max-cpu-budget B] [--max-retention-budget B]\n"
     "                [--max-export-bytes N] [--workers N]\n"
     "                [--push URL [--label K=V]... [--push-interval SECONDS]]\n",
     "Serves many runs on a unix socket (JETTPROFD_SOCKET=PATH jett run ...).\n"
     "  --socket PATH             where to listen, unless systemd handed over a socket\n"
     "                            (default: $JETTPROFD_SOCKET, else\n"
     "                            $XDG_RUNTIME_DIR/jettprofd.sock when not root, else\n"
     "                            /run/jettprofd.sock)\n"
     "  --capture-dir DIR         keep a capture of every run in DIR\n"
     "  --capture-max-bytes N     keep at most N bytes of captures there (suffix K, M or\n"
     "                            G: KiB, MiB, GiB), removing the oldest finished ones\n"
     "  --capture-max-age D       remove captures there older than D (suffix s, m, h or\n"
     "                            d; seconds without); both caps are checked at start\n"
     "                            and after each run, and spare captures being written\n"
     "  --runs-log FILE           append one line per finished run to FILE\n"
     "  --state-dir DIR           keep the finished runs `show` answers from (and the next\n"
     "                            run id) in DIR, so they survive a restart\n"
     "  --allow-group G           also admit members of group G (name or gid)\n"
     "  --max-runs-per-uid N      concurrent runs per user (default 16)\n"
     "  --max-ring-bytes B        largest ring a run may hand over (default 67109120)\n"
     "  --max-run-ring-bytes B    most bytes of all of one run's rings, its main ring and\n"
     "                            its runtime threads' own rings (default 1140867328); a\n"
     "                            thread whose ring would pass it shares the main ring\n"
     "  --max-cpu-budget B        most CPU metadata bytes a run may use (default\n"
     "                            33554432); a client may ask for less, never more\n"
     "  --max-retention-budget B  most retention metadata bytes a run may use\n"
     "                            (default 67108864); likewise\n"
     "  --max-export-bytes N      most bytes of exports (folded, pprof, speedscope, SVG)\n"
     "                            the daemon builds and holds for one run, all together\n"
     "                            (suffix K, M or G; default 16M, at most 1G); an export\n"
     "                            past it is refused (export_too_large), the profile\n"
     "                            still delivered\n"
     "  --workers N               threads that drain the runs, each with its own event\n"
     "                            loop, 1..256 (default: one per online CPU); a run stays\n"
     "                            on one of them for its life\n"
     "  --push URL                push each finished run's pprof (the bytes `export\n"
     "                            --format pprof` gives for its capture) to a Grafana\n"
     "                            Pyroscope ingest endpoint, in the background: POST\n"
     "                            URL?name=APP{program=P,mode=M,host=H,K=V...}&from=S\n"
     "                            &until=S&format=pprof&spyName=jettprofd, values\n"
     "                            percent-encoded; URL is http[s]://[USER:PASS@]HOST\n"
     "                            [:PORT][/PATH][?QUERY], PATH /ingest when absent;\n"
     "                            APP is the program's base name without .jett; 3\n"
     "                            attempts (again after 1 s, then 2 s) on no answer,\n"
     "                            408, 429 or 5xx; counted in `status`. A PATH ending\n"
     "                            in /profiles/writeraw is Parca's WriteRaw: the pprof\n"
     "                            in its JSON request instead\n"
     "  --push-interval SECONDS   with --push, push each run in flight every SECONDS\n"
     "                            (1..3600) as a window, on multiples of SECONDS of the\n"
     "                            wall clock: CPU samples and allocations made in the\n"
     "                            window, memory in use at its end (to Parca: apart, with\n"
     "                            duration 0); the last window ends with the run. Without\n"
     "                            it, one profile per finished run\n"
     "  --label K=V               one more label on every pushed profile (repeatable, up\n"
     "                            to 16; K matches [A-Za-z_][A-Za-z0-9_]*, not program,\n"
     "                            mode, host or __*; V without ',', '{', '}', '=')\n"},
    {"show",
     "jettprofd show RUN_ID [--socket PATH] [--format human|toon]\n",
     "Prints the profile of a finished run of the daemon serving on PATH, or the snapshot of\n"
     "a run in flight: the profile of the records taken so far (termination running).\n"},
    {"top",
     "jettprofd top [RUN_ID] [--socket PATH | --pid PID] [--interval SECONDS] [--batch]\n"
     "              [--frames N]\n",
     "A live view of a run in flight, refreshed every SECONDS (0.1 to 60, default 1):\n"
     "the program, mode, time into the run, records/s, ring fill, lost records and\n"
     "violations; live bytes (memory) or samples (CPU) over time as a strip; the top\n"
     "functions (CPU: share of the last interval and of the run, self and inclusive) or\n"
     "sites (memory: live bytes now, their change since the previous frame, allocated in\n"
     "the last interval, allocations). Keys: q quits, space pauses the table, s cycles the\n"
     "sort, + and - change the interval. On a terminal it draws in place; with --batch or\n"
     "when stdout is not a terminal it prints one plain frame per interval (--frames N\n"
     "stops after N). Without RUN_ID it lists the runs in flight you may see. When the run\n"
     "ends it prints the final profile. --pid PID watches a private run (`jett run\n"
     "--profile[-memory]`, PID the program's), for its own user only.\n"},
    {"status",
     "jettprofd status [--socket PATH] [--format human|json|prometheus] [-o FILE]\n",
     "Prints what the daemon serving on PATH is doing: its uptime, workers, RSS, totals and\n"
     "live runs (other users' runs only as a count, unless you are root or the daemon's\n"
     "user). prometheus is the text exposition format, for node_exporter's textfile\n"
     "collector; -o FILE writes it to FILE atomically (a temp file, then rename).\n"},
    {"runs",
     "jettprofd runs [--socket PATH] [--format human|json] [--limit N]\n",
     "Lists the newest N (default 20, at most 1000) finished runs of the daemon serving on\n"
     "PATH that you may see (your own; all of them for root and the daemon's user): id,\n"
     "start, duration, program, mode, status and reason.\n"},
    {"replay",
     "jettprofd replay FILE [--format human|toon] [--verbose] [--profile-threshold P]\n"
     "                 [--profile-limit N] [--until-record N]\n",
     "Rebuilds a run's profile from its capture, byte-identical to the live one; a damaged\n"
     "capture gives the profile of every complete block before the damage and a caveat.\n"
     "--verbose ends the human text with every total under its TOON name. --until-record N\n"
     "gives the snapshot of the first N records of the run's stream: the profile of the run\n"
     "in flight as it stood then (termination running, records_taken N).\n"},
    {"summarize",
     "jettprofd summarize [--repetitions OUT.jsonl] [--execution-index N]\n"
     "                    [--exit-code C] CAPTURE...\n",
     "Writes one JSON repetition row per capture (integrity and totals), to stdout or\n"
     "appended to OUT.jsonl.\n"},
    {"export",
     "jettprofd export CAPTURE [--format folded|pprof|speedscope|svg|html] [--value V]\n"
     "                 [-o FILE|-]\n"
     "       jettprofd export CAPTURE --push URL [--label K=V]...\n",
     "Writes a capture's profile for profile tools: folded stacks (default), pprof\n"
     "(gzip), speedscope JSON, an SVG flame graph, or the interactive HTML report (one\n"
     "self-contained page: tables, a flame graph to zoom and search, memory or samples\n"
     "over time); to stdout or FILE.\n"
     "  --value V     memory captures: alloc_bytes (default), alloc_count,\n"
     "                retained_bytes, peak_bytes, retained_count; CPU\n"
     "                captures: samples\n"
     "  --push URL    instead, push the capture's pprof (default value) to a Grafana\n"
     "                Pyroscope ingest endpoint as `serve --push` does, and wait: exit\n"
     "                0 once accepted, 1 naming the HTTP status or the error; program\n"
     "                and mode come from the capture, until is the capture file's\n"
     "                modification time and from that less the run's duration\n"
     "  --label K=V   one more label (repeatable, as for serve)\n"},
    {"diff",
     "jettprofd diff BASE NEW [--format human|toon|folded|svg|html] [--value V] [-o FILE|-]\n",
     "Compares two captures of one mode: per function (CPU) or site (memory) the change\n"
     "of its share of each run's total, largest change first; svg is a differential\n"
     "flame graph (red grew, blue shrank), html the same in the HTML report with the\n"
     "largest changes. Either side may be a point of a capture,\n"
     "CAPTURE@N: its first N records, as replay --until-record N takes them. --value V\n"
     "compares a memory run by alloc_count, live_bytes, retained_bytes or peak_bytes\n"
     "instead of allocated bytes: diff run.jpcap@N run.jpcap --value live_bytes names the\n"
     "sites whose live bytes grew after record N.\n"},
};

static const char usage_tail[] =
    "       jettprofd --session-fd N   (private mode, started by the agent)\n"
    "       jettprofd help [COMMAND] | --help | --version\n"
    "push (serve, export: --push URL, URL http[s]://[USER:PASS@]HOST[:PORT][/PATH]):\n"
    "       POST URL?name=APP{program=P,mode=M,host=H,K=V...}&from=S&until=S&format=pprof\n"
    "            &spyName=jettprofd with the pprof as the body (Grafana Pyroscope's\n"
    "       ingest; PATH /ingest when absent); PATH .../profiles/writeraw: Parca's\n"
    "       WriteRaw, POST URL with {\"series\":[{\"labels\":...,\"samples\":[{\"rawProfile\":\n"
    "       BASE64}]}],\"normalized\":true}\n"
    "test knobs (environment, read at start; for tests only):\n"
    "       JETTPROFD_EXCERPT_TIMEOUT_MS=N  wait N ms (1..600000) instead of 10000 for a\n"
    "                                       runtime's excerpts before rendering without\n"
    "                                       them\n"
    "       JETTPROFD_HANDSHAKE_TIMEOUT_MS=N  close a connection that has not sent its\n"
    "                                       hello and ring within N ms (1..600000)\n"
    "                                       instead of 3000\n"
    "       JETTPROFD_EXPORT_CHUNK_BYTES=N  send a run's exports in pieces of N bytes\n"
    "                                       (1..600000) instead of 4 MiB\n"
    "       JETTPROFD_TEST_TIME_SCALE=N     run the clocks push windows are cut and\n"
    "                                       stamped by N times as fast (1..100000)\n"
    "       JETTPROFD_TEST_WALL_FILE=PATH   move the wall clock of push windows by the\n"
    "                                       whole seconds PATH holds, read at each cut\n"
    "       JETTPROFD_PUSH_BACKOFF_MS=N     wait N ms (1..600000) instead of 1000 before\n"
    "                                       the first push retry (twice that before the\n"
    "                                       second)\n"
    "       JETTPROFD_PUSH_TIMEOUT_MS=N     give a push attempt N ms (1..600000) instead\n"
    "                                       of 30000\n"
    "       JETTPROFD_PUSH_GRACE_MS=N       at shutdown, give queued pushes N ms\n"
    "                                       (1..600000) instead of 5000\n"
    "       JETTPROFD_TEST_LIBCURL=FILE     load FILE instead of libcurl.so.4 for --push\n"
    "       JETTPROFD_TEST_LIBSYSTEMD=FILE  load FILE instead of libsystemd.so.0 for\n"
    "                                       socket activation and notifications\n";

static const struct command *find_command(const char *name)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(commands[i].name, name))
            return &commands[i];
    return NULL;
}

/* The whole usage on f; 0 on stdout (asked for), 2 on stderr (a usage error). */
static int usage_to(FILE *f)
{
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        fprintf(f, "%s%s", i ? "       " : "usage: ", commands[i].synopsis);
    fputs(usage_tail, f);
    return f == stdout ? 0 : 2;
}

static int usage(void)
{
    return usage_to(stderr);
}

static int command_help(const struct command *c)
{
    printf("usage: %s\n%s", c->synopsis, c->options);
    return 0;
}

/* `--help` (or -h) anywhere among a subcommand's arguments asks for its help. */
static int wants_help(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return 1;
    return 0;
}

static int bad(const char *cmd, const char *what, const char *arg)
{
    fprintf(stderr, "jettprofd%s%s: %s%s%s\n", cmd ? " " : "", cmd ? cmd : "", what,
            arg ? ": " : "", arg ? arg : "");
    return 2;
}

static int cmd_serve(int argc, char **argv)
{
    struct jpd_push_opts push = {0};
    struct jpd_config cfg = {.allow_group = -1, .max_runs_per_uid = DEFAULT_MAX_RUNS,
                             .max_ring_bytes = DEFAULT_MAX_RING_BYTES,
                             .max_run_ring_bytes = DEFAULT_MAX_RUN_RING_BYTES,
                             .max_cpu_budget = JP_DEFAULT_CPU_BUDGET,
                             .max_retention_budget = JP_DEFAULT_RETENTION_BUDGET,
                             .max_export_bytes = JPD_DEFAULT_MAX_EXPORT_BYTES};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        static const char *const with_value[] = {"--socket", "--capture-dir",
                                                 "--capture-max-bytes", "--capture-max-age",
                                                 "--runs-log", "--state-dir",
                                                 "--allow-group", "--max-runs-per-uid",
                                                 "--max-ring-bytes", "--max-cpu-budget",
                                                 "--max-run-ring-bytes",
                                                 "--max-retention-budget", "--max-export-bytes",
                                                 "--workers",
                                                 "--push", "--label", "--push-interval"};
        int known = 0;
        for (size_t k = 0; k < sizeof with_value / sizeof with_value[0]; k++)
            known |= !strcmp(a, with_value[k]);
        if (!known)
            return bad("serve", a[0] == '-' ? "unknown option" : "unexpected argument", a);
        if (i + 1 >= argc)
            return bad("serve", "missing value for", a);
        const char *v = argv[++i];
        uint64_t n;
        if (!strcmp(a, "--socket")) {
            cfg.socket_path = v;
        } else if (!strcmp(a, "--push") || !strcmp(a, "--label")) {
            char why[512];
            int r = jpd_push_opt(&push, a, v, why, sizeof why);
            if (r < 0 && r != -EINVAL) { /* out of memory, no libcurl: not the command line */
                fprintf(stderr, "jettprofd serve: %s\n", why);
                return 1;
            }
            if (r < 0)
                return bad("serve", why, NULL);
        } else if (!strcmp(a, "--push-interval")) {
            if (jpd_parse_u64(v, 1, 3600, &n) < 0)
                return bad("serve", "--push-interval must be an integer of seconds 1..3600, not",
                           v);
            cfg.push_interval_s = (uint32_t)n;
        } else if (!strcmp(a, "--capture-dir")) {
            cfg.capture_dir = v;
        } else if (!strcmp(a, "--state-dir")) {
            cfg.state_dir = v;
        } else if (!strcmp(a, "--capture-max-bytes")) {
            static const struct jpd_unit size_units[] = {
                {'K', 1ull << 10}, {'M', 1ull << 20}, {'G', 1ull << 30}};
            if (jpd_parse_scaled(v, size_units, 3, &cfg.capture_max_bytes) < 0)
                return bad("serve", "--capture-max-bytes must be a positive integer of bytes, "
                                    "with K, M or G after it for KiB, MiB or GiB, not", v);
        } else if (!strcmp(a, "--max-export-bytes")) {
            static const struct jpd_unit size_units[] = {
                {'K', 1ull << 10}, {'M', 1ull << 20}, {'G', 1ull << 30}};
            if (jpd_parse_scaled(v, size_units, 3, &cfg.max_export_bytes) < 0 ||
                cfg.max_export_bytes > JP_CTL_MAX_EXPORT)
                return bad("serve", "--max-export-bytes must be a positive integer of bytes up "
                                    "to 1G, with K, M or G after it for KiB, MiB or GiB, not", v);
        } else if (!strcmp(a, "--capture-max-age")) {
            static const struct jpd_unit time_units[] = {
                {'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}};
            if (jpd_parse_scaled(v, time_units, 4, &cfg.capture_max_age_s) < 0 ||
                cfg.capture_max_age_s > INT32_MAX)
                return bad("serve", "--capture-max-age must be a positive duration (seconds, "
                                    "or a number with s, m, h or d after it), not", v);
        } else if (!strcmp(a, "--runs-log")) {
            cfg.runs_log = v;
        } else if (!strcmp(a, "--allow-group")) {
            if (jpd_parse_u64(v, 0, INT32_MAX, &n) == 0) {
                cfg.allow_group = (int)n;
            } else {
                struct group *g = getgrnam(v);
                if (!g)
                    return bad("serve", "--allow-group names no known group", v);
                cfg.allow_group = (int)g->gr_gid;
            }
        } else if (!strcmp(a, "--max-runs-per-uid")) {
            if (jpd_parse_u64(v, 1, 100000, &n) < 0)
                return bad("serve", "--max-runs-per-uid must be an integer 1..100000, not", v);
            cfg.max_runs_per_uid = (uint32_t)n;
        } else if (!strcmp(a, "--workers")) {
            if (jpd_parse_u64(v, 1, JPD_MAX_WORKERS, &n) < 0)
                return bad("serve", "--workers must be an integer 1..256, not", v);
            cfg.workers = (uint32_t)n;
        } else if (!strcmp(a, "--max-cpu-budget") || !strcmp(a, "--max-retention-budget")) {
            if (jpd_parse_u64(v, 1, UINT64_MAX, &n) < 0)
                return bad("serve", !strcmp(a, "--max-cpu-budget")
                                        ? "--max-cpu-budget must be a positive integer (bytes), not"
                                        : "--max-retention-budget must be a positive integer "
                                          "(bytes), not", v);
            if (!strcmp(a, "--max-cpu-budget"))
                cfg.max_cpu_budget = n;
            else
                cfg.max_retention_budget = n;
        } else if (!strcmp(a, "--max-run-ring-bytes")) {
            uint64_t lo = JP_RING_HEADER_SIZE + (uint64_t)JP_RING_MIN_SLOTS * JP_SLOT_SIZE;
            if (jpd_parse_u64(v, lo, UINT64_MAX, &n) < 0)
                return bad("serve", "--max-run-ring-bytes must be an integer of at least the "
                                    "smallest ring (2304), not", v);
            cfg.max_run_ring_bytes = n;
        } else {
            uint64_t lo = JP_RING_HEADER_SIZE + (uint64_t)JP_RING_MIN_SLOTS * JP_SLOT_SIZE;
            if (jpd_parse_u64(v, lo, UINT64_MAX, &n) < 0)
                return bad("serve", "--max-ring-bytes must be an integer of at least the "
                                    "smallest ring (2304), not", v);
            cfg.max_ring_bytes = n;
        }
    }
    if ((cfg.capture_max_bytes || cfg.capture_max_age_s) && !cfg.capture_dir)
        return bad("serve", cfg.capture_max_bytes ? "--capture-max-bytes needs --capture-dir"
                                                  : "--capture-max-age needs --capture-dir",
                   NULL);
    if (push.nlabels && !push.url)
        return bad("serve", "--label needs --push", push.labels[0]);
    if (cfg.push_interval_s && !push.url)
        return bad("serve", "--push-interval needs --push", NULL);
    if (!push.url)
        return jpd_run_serve(&cfg);
    cfg.push = &push;
    int r = jpd_push_global_init();
    if (r < 0) {
        fprintf(stderr, "jettprofd serve: --push: libcurl cannot start: %s\n",
                jpd_error_text(r));
        return 1;
    }
    int rc = jpd_run_serve(&cfg);
    jpd_push_global_cleanup();
    return rc;
}

static int cmd_status(int argc, char **argv)
{
    const char *sock = NULL, *out = NULL;
    uint32_t format = JP_STATUS_FMT_HUMAN;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--socket") && strcmp(a, "--format") && strcmp(a, "-o"))
            return bad("status", a[0] == '-' ? "unknown option" : "unexpected argument", a);
        if (i + 1 >= argc)
            return bad("status", "missing value for", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--socket"))
            sock = v;
        else if (!strcmp(a, "-o"))
            out = v;
        else if (jp_status_format_parse(v, JP_STATUS_FORMAT_COUNT, &format) < 0)
            return bad("status", "--format must be human, json or prometheus, not", v);
    }
    char buf[160];
    if (!sock)
        sock = jpd_default_socket(buf, sizeof buf);
    return jpd_status(sock, format, out);
}

static int cmd_runs(int argc, char **argv)
{
    const char *sock = NULL;
    uint32_t format = JP_STATUS_FMT_HUMAN;
    uint64_t limit = 20;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--socket") && strcmp(a, "--format") && strcmp(a, "--limit"))
            return bad("runs", a[0] == '-' ? "unknown option" : "unexpected argument", a);
        if (i + 1 >= argc)
            return bad("runs", "missing value for", a);
        const char *v = argv[++i];
        if (!strcmp(a, "--socket"))
            sock = v;
        else if (!strcmp(a, "--limit")) {
            if (jpd_parse_u64(v, 1, JP_CTL_MAX_RUNS_LIMIT, &limit) < 0)
                return bad("runs", "--limit must be an integer in 1..1000, not", v);
        } else if (jp_status_format_parse(v, JP_RUNS_FORMAT_LAST + 1, &format) < 0)
            return bad("runs", "--format must be human or json, not", v);
    }
    char buf[160];
    if (!sock)
        sock = jpd_default_socket(buf, sizeof buf);
    return jpd_runs(sock, format, (uint32_t)limit);
}

static int cmd_show(int argc, char **argv)
{
    const char *sock = NULL;
    uint32_t outputs = JP_OUT_HUMAN;
    uint64_t run_id = 0;
    int have_id = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--socket") || !strcmp(a, "--format")) {
            if (i + 1 >= argc)
                return bad("show", "missing value for", a);
            const char *v = argv[++i];
            if (!strcmp(a, "--socket"))
                sock = v;
            else if (!strcmp(v, "human"))
                outputs = JP_OUT_HUMAN;
            else if (!strcmp(v, "toon"))
                outputs = JP_OUT_TOON;
            else
                return bad("show", "--format must be human or toon, not", v);
        } else if (a[0] == '-') {
            return bad("show", "unknown option", a);
        } else if (have_id) {
            return bad("show", "more than one RUN_ID given", a);
        } else {
            if (jpd_parse_u64(a, 1, UINT64_MAX, &run_id) < 0)
                return bad("show", "RUN_ID must be a positive integer, not", a);
            have_id = 1;
        }
    }
    if (!have_id)
        return bad("show", "missing RUN_ID", NULL);
    char buf[160];
    if (!sock)
        sock = jpd_default_socket(buf, sizeof buf);
    return jpd_show(sock, run_id, outputs);
}

int main(int argc, char **argv)
{
    static const struct {
        const char *name, *unit;
        uint32_t *ms;
    } knobs[] = {
        {"JETTPROFD_EXCERPT_TIMEOUT_MS", "milliseconds", &jpd_excerpt_timeout_ms},
        {"JETTPROFD_HANDSHAKE_TIMEOUT_MS", "milliseconds", &jpd_handshake_timeout_ms},
        {"JETTPROFD_EXPORT_CHUNK_BYTES", "bytes", &jpd_export_chunk_bytes},
        {"JETTPROFD_PUSH_BACKOFF_MS", "milliseconds", &jpd_push_backoff_ms},
        {"JETTPROFD_PUSH_TIMEOUT_MS", "milliseconds", &jpd_push_timeout_ms},
        {"JETTPROFD_PUSH_GRACE_MS", "milliseconds", &jpd_push_grace_ms},
    };
    for (size_t i = 0; i < sizeof knobs / sizeof knobs[0]; i++) {
        const char *knob = getenv(knobs[i].name);
        uint64_t ms;
        if (!knob)
            continue;
        if (jpd_parse_u64(knob, 1, 600000, &ms) < 0) {
            fprintf(stderr, "jettprofd: %s must be an integer 1..600000 (%s), not: %s\n",
                    knobs[i].name, knobs[i].unit, knob);
            return 2;
        }
        *knobs[i].ms = (uint32_t)ms;
    }
    const char *scale = getenv("JETTPROFD_TEST_TIME_SCALE");
    if (scale) {
        uint64_t n;
        if (jpd_parse_u64(scale, 1, 100000, &n) < 0) {
            fprintf(stderr, "jettprofd: JETTPROFD_TEST_TIME_SCALE must be an integer 1..100000, "
                            "not: %s\n", scale);
            return 2;
        }
        jpd_time_scale = (uint32_t)n;
    }
    jpd_wall_step_file = getenv("JETTPROFD_TEST_WALL_FILE");
    jpd_window_clock_init();
    if (argc < 2)
        return usage();
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V")) {
        printf("jettprofd %s\n", JETTPROF_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h") || (!strcmp(cmd, "help") && argc == 2))
        return usage_to(stdout);
    if (!strcmp(cmd, "help")) {
        const struct command *c = argc == 3 ? find_command(argv[2]) : NULL;
        if (!c)
            return argc == 3 ? bad("help", "no such command", argv[2])
                             : bad("help", "expected one COMMAND", NULL);
        return command_help(c);
    }
    const struct command *sub = find_command(cmd);
    if (sub && wants_help(argc - 2, argv + 2))
        return command_help(sub);
    if (!strcmp(cmd, "--session-fd")) {
        uint64_t fd;
        if (argc != 3)
            return argc < 3 ? bad(NULL, "missing value for", "--session-fd")
                            : bad(NULL, "unexpected argument", argv[3]);
        if (jpd_parse_u64(argv[2], 0, INT32_MAX, &fd) < 0)
            return bad(NULL, "--session-fd must be a file descriptor number, not", argv[2]);
        return jpd_run_private((int)fd);
    }
    if (!strcmp(cmd, "serve"))
        return cmd_serve(argc - 2, argv + 2);
    if (!strcmp(cmd, "show"))
        return cmd_show(argc - 2, argv + 2);
    if (!strcmp(cmd, "status"))
        return cmd_status(argc - 2, argv + 2);
    if (!strcmp(cmd, "top"))
        return jpd_cmd_top(argc - 2, argv + 2);
    if (!strcmp(cmd, "runs"))
        return cmd_runs(argc - 2, argv + 2);
    if (!strcmp(cmd, "replay"))
        return jpd_cmd_replay(argc - 2, argv + 2);
    if (!strcmp(cmd, "summarize"))
        return jpd_cmd_summarize(argc - 2, argv + 2);
    if (!strcmp(cmd, "export"))
        return jpd_cmd_export(argc - 2, argv + 2);
    if (!strcmp(cmd, "diff"))
        return jpd_cmd_diff(argc - 2, argv + 2);
    fprintf(stderr, "jettprofd: unknown command or option: %s\n", cmd);
    return usage();
}
