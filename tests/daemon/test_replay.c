/* Captures and replay: a complete capture replays byte-identical to the live result (CPU and
 * memory); truncated and corrupted captures at many offsets give a partial profile with a caveat
 * or a clear error, never a crash; a missing file is a clear error; --capture-dir files are the
 * daemon's own (0600, its names). */
#include <criterion/criterion.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "capfile.h"
#include "protocol/capture.h"
#include "support.h"

static void private_run(struct jpt_stream *s, int cap_fd, struct jpt_result *r)
{
    struct jpt_client c;
    pid_t pid = jpt_private(&c, NULL);
    cr_assert_gt(pid, 0);
    cr_assert_eq(jpt_run(&c, s, 1024, cap_fd, r), 0);
    cr_assert_eq(r->error_code, 0, "daemon error: %s", r->error);
    jpt_client_close(&c);
    int st = tl_wait(pid, 10000);
    cr_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static int replay(const char *file, const char *format, char **out, size_t *len, char **err)
{
    char *argv[] = {(char *)jpt_daemon_bin(), "replay", (char *)file, "--format",
                    (char *)format, NULL};
    return jpt_capture_cmd(argv, out, len, err);
}

static void expect_identical_replay(uint32_t mode, uint32_t seed)
{
    char *dir = jpt_tmpdir();
    char path[600];
    snprintf(path, sizeof path, "%s/run.jpcap", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    cr_assert_geq(fd, 0);
    struct jpt_stream s;
    jpt_stream_init(&s, mode, seed, 30000);
    struct jpt_result r;
    private_run(&s, fd, &r);
    close(fd);
    cr_assert_eq(r.status, JP_STATUS_COMPLETE);

    char *out, *err;
    size_t len;
    int st = replay(path, "human", &out, &len, &err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "replay failed: %s", err);
    cr_assert_eq(len, r.human_len);
    cr_assert_eq(memcmp(out, r.human, len), 0, "human replay differs");
    cr_assert_str_eq(err, "", "a complete replay has no caveat");
    free(out);
    free(err);
    st = replay(path, "toon", &out, &len, &err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "replay failed: %s", err);
    cr_assert_eq(len, r.toon_len);
    cr_assert_eq(memcmp(out, r.toon, len), 0, "toon replay differs");
    free(out);
    free(err);
    jpt_result_free(&r);
    unlink(path);
    rmdir(dir);
    free(dir);
}

Test(replay, cpu_capture_replays_byte_identical)
{
    expect_identical_replay(JP_MODE_CPU, 21);
}

Test(replay, memory_capture_replays_byte_identical)
{
    expect_identical_replay(JP_MODE_MEMORY, 22);
}

Test(replay, missing_file_is_a_clear_error)
{
    char *out, *err;
    int st = replay("/nonexistent/dir/none.jpcap", "human", &out, NULL, &err);
    cr_assert(WIFEXITED(st));
    cr_assert_eq(WEXITSTATUS(st), 1);
    cr_assert(strstr(err, "capture_missing") != NULL, "stderr: %s", err);
    cr_assert(strstr(err, "none.jpcap") != NULL, "stderr names the file: %s", err);
    cr_assert_str_eq(out, "");
    free(out);
    free(err);
}

static char *make_capture(const char *dir, uint32_t mode, size_t *size)
{
    static char path[600];
    snprintf(path, sizeof path, "%s/base.jpcap", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    cr_assert_geq(fd, 0);
    struct jpt_stream s;
    jpt_stream_init(&s, mode, 33, 20000);
    struct jpt_result r;
    private_run(&s, fd, &r);
    jpt_result_free(&r);
    close(fd);
    (void)size;
    return path;
}

static uint8_t *read_bytes(const char *path, size_t *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    cr_assert_geq(fd, 0);
    struct stat st;
    fstat(fd, &st);
    uint8_t *b = malloc((size_t)st.st_size);
    cr_assert_eq(read(fd, b, (size_t)st.st_size), st.st_size);
    close(fd);
    *size = (size_t)st.st_size;
    return b;
}

static void write_bytes(const char *path, const uint8_t *b, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, b, n), (ssize_t)n);
    close(fd);
}

/* Replays a damaged copy: never a signal; exit 0 only with a partial profile and a
 * missing_stop_event or invalid-capture caveat (the profile of the blocks before the damage),
 * or, for damage the format cannot see, a complete profile; exit 1 only with an error naming
 * the invalid capture. Returns 0 partial, 1 invalid, 2 complete; a complete profile must be
 * `original` when that is given (the damage changed nothing the replay reads). */
static int replay_damaged(const char *path, size_t at, const char *original)
{
    char *out, *err;
    int st = replay(path, "toon", &out, NULL, &err);
    cr_assert(WIFEXITED(st), "replay crashed at offset %zu (signal %d)", at, WTERMSIG(st));
    int code = WEXITSTATUS(st);
    int kind;
    if (code == 0 && (strstr(err, "caveat: missing_stop_event") ||
                      strstr(err, "caveat: invalid capture"))) {
        cr_assert(strstr(out, "partial") != NULL, "offset %zu: partial profile expected", at);
        kind = 0;
    } else if (code == 0) {
        cr_assert_str_eq(err, "", "offset %zu", at);
        if (original)
            cr_assert_str_eq(out, original, "offset %zu: damage went unnoticed and changed the "
                             "profile", at);
        kind = 2;
    } else {
        cr_assert_eq(code, 1, "offset %zu: exit %d", at, code);
        cr_assert(strstr(err, "invalid") != NULL, "offset %zu: stderr %s", at, err);
        cr_assert_str_eq(out, "", "no profile from an invalid capture");
        kind = 1;
    }
    free(out);
    free(err);
    return kind;
}

Test(replay, truncated_captures_at_many_offsets)
{
    char *dir = jpt_tmpdir();
    const char *base = make_capture(dir, JP_MODE_MEMORY, NULL);
    size_t n;
    uint8_t *b = read_bytes(base, &n);
    cr_assert_gt(n, 1000);
    char cut[600];
    snprintf(cut, sizeof cut, "%s/cut.jpcap", dir);
    int partial = 0, invalid = 0;
    size_t offsets[80];
    int k = 0;
    for (size_t o = 0; o < 24; o += 3)
        offsets[k++] = o;              /* inside the file header */
    for (int i = 1; i <= 60; i++)
        offsets[k++] = n * (size_t)i / 61; /* spread over the blocks */
    offsets[k++] = n - 1;
    for (int i = 0; i < k; i++) {
        write_bytes(cut, b, offsets[i]);
        int kind = replay_damaged(cut, offsets[i], NULL);
        cr_assert_neq(kind, 2, "a truncated capture cannot be complete (offset %zu)", offsets[i]);
        partial += kind == 0;
        invalid += kind == 1;
    }
    cr_assert_gt(partial, 0, "truncation past the header must give partial profiles");
    cr_assert_gt(invalid, 0, "truncation inside the header must be invalid");
    free(b);
    unlink(cut);
    unlink(base);
    rmdir(dir);
    free(dir);
}

Test(replay, corrupted_captures_at_many_offsets)
{
    char *dir = jpt_tmpdir();
    const char *base = make_capture(dir, JP_MODE_CPU, NULL);
    size_t n;
    uint8_t *b = read_bytes(base, &n);
    char *original, *err;
    int st = replay(base, "toon", &original, NULL, &err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "replay failed: %s", err);
    cr_assert_str_eq(err, "", "the undamaged capture is complete");
    free(err);
    char bad[600];
    snprintf(bad, sizeof bad, "%s/bad.jpcap", dir);
    int detected = 0;
    for (int i = 0; i < 60; i++) {
        size_t at = i < 30 ? (size_t)i : n * (size_t)(i - 29) / 31;
        b[at] ^= 0x5a;
        write_bytes(bad, b, n);
        b[at] ^= 0x5a;
        detected += replay_damaged(bad, at, original) != 2;
    }
    /* the file header and every block are checksummed: no flipped byte goes unseen */
    cr_assert_eq(detected, 60, "checksums and bounds must catch every flipped byte");
    free(original);
    /* Garbage that is not a capture at all. */
    memset(b, 'x', n);
    write_bytes(bad, b, n);
    cr_assert_eq(replay_damaged(bad, 0, NULL), 1);
    write_bytes(bad, b, 0);
    cr_assert_eq(replay_damaged(bad, 0, NULL), 1);
    free(b);
    unlink(bad);
    unlink(base);
    rmdir(dir);
    free(dir);
}

Test(replay, capture_dir_files_are_the_daemons_own_and_replay_identically)
{
    char *dir = jpt_tmpdir();
    char sock[600], caps[600];
    snprintf(sock, sizeof sock, "%s/d.sock", dir);
    snprintf(caps, sizeof caps, "%s/caps", dir);
    cr_assert_eq(mkdir(caps, 0700), 0);
    const char *extra[] = {"--capture-dir", caps, NULL};
    pid_t d = jpt_serve(sock, extra, NULL);
    cr_assert_gt(d, 0);
    struct jpt_client c;
    cr_assert_eq(jpt_client_connect(&c, sock), 0);
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_CPU, 44, 20000);
    struct jpt_result r;
    cr_assert_eq(jpt_run(&c, &s, 1024, -1, &r), 0);
    jpt_client_close(&c);
    kill(d, SIGTERM);
    int st = tl_wait(d, 10000);
    cr_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);

    DIR *dd = opendir(caps);
    struct dirent *e;
    int files = 0;
    char path[1200];
    while ((e = readdir(dd))) {
        if (e->d_name[0] == '.')
            continue;
        files++;
        snprintf(path, sizeof path, "%s/%s", caps, e->d_name);
    }
    closedir(dd);
    cr_assert_eq(files, 1);
    struct stat sb;
    cr_assert_eq(lstat(path, &sb), 0);
    cr_assert(S_ISREG(sb.st_mode));
    cr_assert_eq(sb.st_mode & 0777, 0600, "mode %o", sb.st_mode & 0777);
    char *out, *err;
    size_t len;
    st = replay(path, "toon", &out, &len, &err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", err);
    cr_assert_eq(len, r.toon_len);
    cr_assert_eq(memcmp(out, r.toon, len), 0);
    free(out);
    free(err);
    jpt_result_free(&r);
    unlink(path);
    rmdir(caps);
    rmdir(dir);
    free(dir);
}

Test(replay, an_unfinished_run_leaves_a_capture_that_replays_partial)
{
    char *dir = jpt_tmpdir();
    char path[600];
    snprintf(path, sizeof path, "%s/lost.jpcap", dir);
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    char num[16];
    snprintf(num, sizeof num, "%d", sv[1]);
    char *argv[] = {(char *)jpt_daemon_bin(), "--session-fd", num, NULL};
    int errfd;
    pid_t pid = jpt_spawn(argv, sv[1], &errfd);
    close(sv[1]);
    struct jpt_client c;
    cr_assert_eq(jpt_client_open_fd(&c, sv[0]), 0);
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_MEMORY, 55, 100000);
    struct jp_ring ring;
    uint64_t id;
    cr_assert_eq(jpt_start_run(&c, &s, 1024, fd, 5000, &ring, &id), 0);
    close(fd);
    jpt_client_close(&c);
    jp_ring_unmap(&ring);
    char *derr = jpt_slurp_fd(errfd);
    close(errfd);
    int st = tl_wait(pid, 10000);
    cr_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    cr_assert(strstr(derr, "producer_lost") != NULL, "%s", derr);
    free(derr);
    char *out, *err;
    st = replay(path, "human", &out, NULL, &err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", err);
    cr_assert(strstr(err, "missing_stop_event") != NULL, "caveat expected: %s", err);
    cr_assert(strstr(out, "partial") != NULL);
    free(out);
    free(err);
    unlink(path);
    rmdir(dir);
    free(dir);
}

Test(replay, capture_dir_never_writes_through_a_planted_link)
{
    char *dir = jpt_tmpdir();
    char sock[600], caps[600], victim[600];
    snprintf(sock, sizeof sock, "%s/d.sock", dir);
    snprintf(caps, sizeof caps, "%s/caps", dir);
    snprintf(victim, sizeof victim, "%s/victim", dir);
    cr_assert_eq(mkdir(caps, 0700), 0);
    int v = open(victim, O_WRONLY | O_CREAT | O_EXCL, 0600);
    cr_assert_eq(write(v, "keep", 4), 4);
    close(v);
    /* Links under every name the daemon could pick for run 1 in the next few seconds. */
    long long now = (long long)time(NULL);
    for (long long t = now; t < now + 10; t++) {
        char link[900];
        snprintf(link, sizeof link, "%s/run-%lld-1.jpcap", caps, t);
        cr_assert_eq(symlink(victim, link), 0);
    }
    const char *extra[] = {"--capture-dir", caps, NULL};
    pid_t d = jpt_serve(sock, extra, NULL);
    cr_assert_gt(d, 0);
    struct jpt_client c;
    cr_assert_eq(jpt_client_connect(&c, sock), 0);
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_MEMORY, 45, 2000);
    struct jpt_result r;
    cr_assert_eq(jpt_run(&c, &s, 1024, -1, &r), 0);
    cr_assert_eq(r.error_code, 0);
    jpt_client_close(&c);
    kill(d, SIGTERM);
    int st = tl_wait(d, 10000);
    cr_assert(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0);
    size_t n;
    char *kept = jpt_slurp_file(victim, &n);
    cr_assert_str_eq(kept, "keep", "the daemon wrote through a link");
    free(kept);
    /* The capture went to a fresh regular file beside the links. */
    DIR *dd = opendir(caps);
    struct dirent *e;
    int regular = 0;
    char path[1200];
    while ((e = readdir(dd))) {
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof path, "%s/%s", caps, e->d_name);
        struct stat sb;
        cr_assert_eq(lstat(path, &sb), 0);
        if (S_ISREG(sb.st_mode)) {
            regular++;
            cr_assert_eq(sb.st_mode & 0777, 0600);
            cr_assert_gt(sb.st_size, 0);
        }
        unlink(path);
    }
    closedir(dd);
    cr_assert_eq(regular, 1);
    jpt_result_free(&r);
    unlink(victim);
    rmdir(caps);
    rmdir(dir);
    free(dir);
}

/* ---- recovery: the profile of every complete block before the damage ---- */

/* Replays path in both formats and checks each against the engine's profile of the first
 * nrecs records of the stream, rendered as a truncated stream's ending; stderr must name the
 * byte offset and the verdict word. */
static void expect_recovered(const char *path, uint32_t mode, uint32_t seed, uint64_t events,
                             uint64_t nrecs, uint64_t offset, const char *verdict)
{
    static const char *const formats[] = {"human", "toon"};
    for (int f = 0; f < 2; f++) {
        size_t want_len;
        char *want = jpt_capfile_expected(mode, seed, events, nrecs, JP_END_TRUNCATED,
                                          f ? JP_OUT_TOON : JP_OUT_HUMAN, &want_len);
        char *out, *err;
        size_t len;
        int st = replay(path, formats[f], &out, &len, &err);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s replay: exit %d: %s", formats[f],
                  WIFEXITED(st) ? WEXITSTATUS(st) : -1, err);
        cr_expect_eq(len, want_len, "%s: %zu bytes, the blocks before the damage give %zu",
                     formats[f], len, want_len);
        cr_expect(len == want_len && memcmp(out, want, len) == 0,
                  "%s: not the profile of the complete blocks:\n%.2000s", formats[f], out);
        cr_expect(strstr(out, "missing_stop_event") != NULL, "not marked as truncated");
        char at[64];
        snprintf(at, sizeof at, "at byte %llu", (unsigned long long)offset);
        cr_expect(strstr(err, at) != NULL, "stderr must say %s: %s", at, err);
        cr_expect(strstr(err, verdict) != NULL, "stderr must say %s: %s", verdict, err);
        free(out);
        free(err);
        free(want);
    }
}

/* Flips one byte inside the payload of the middle block of the capture bytes b (n of them,
 * which must hold between min_blocks and 4096 blocks) and writes them to path. The records
 * in the blocks before it in *before, the damaged block's offset in *offset; the block's
 * header size is returned. */
static uint32_t damage_middle_block(const char *path, uint8_t *b, size_t n, uint32_t min_blocks,
                                    uint64_t *before, uint64_t *offset)
{
    static struct jpt_capfile_block blk[4096];
    uint32_t nb = jpt_capfile_blocks(b, n, blk, 4096);
    cr_assert(nb > min_blocks && nb <= 4096, "%u blocks", nb);
    uint32_t mid = nb / 2;
    *before = 0;
    for (uint32_t i = 0; i < mid; i++)
        *before += blk[i].records;
    b[blk[mid].offset + blk[mid].header_len + blk[mid].payload_len / 2] ^= 0x20;
    jpt_capfile_put(path, b, n);
    *offset = blk[mid].offset;
    return blk[mid].header_len;
}

Test(replay, a_damaged_block_in_a_big_capture_gives_the_profile_before_it)
{
    char *dir = jpt_tmpdir();
    char path[600];
    snprintf(path, sizeof path, "%s/big.jpcap", dir);
    const uint64_t events = 1600000;
    jpt_capfile_write(path, JP_MODE_MEMORY, 61, events);
    size_t n;
    uint8_t *b = jpt_capfile_read(path, &n);
    cr_assert_gt(n, 4u << 20, "a big capture: %zu bytes", n);
    uint64_t before, offset;
    damage_middle_block(path, b, n, 100, &before, &offset);
    free(b);
    expect_recovered(path, JP_MODE_MEMORY, 61, events, before, offset,
                     "block checksum mismatch");
    unlink(path);
    rmdir(dir);
    free(dir);
}

Test(replay, a_small_capture_cut_by_one_byte_keeps_its_complete_blocks)
{
    static const uint32_t modes[] = {JP_MODE_CPU, JP_MODE_MEMORY, JP_MODE_CPU, JP_MODE_MEMORY};
    for (int m = 0; m < 4; m++) {
        char *dir = jpt_tmpdir();
        char path[600];
        snprintf(path, sizeof path, "%s/small.jpcap", dir);
        uint64_t nrecs = jpt_capfile_write_format(path, modes[m], 62, 40,
                                                  m < 2 ? 0 : JP_CAPTURE_VERSION_1);
        size_t n;
        uint8_t *b = jpt_capfile_read(path, &n);
        cr_assert_lt(n, JP_CAPTURE_BLOCK_TARGET, "a small capture");
        struct jpt_capfile_block blk[8];
        uint32_t nb = jpt_capfile_blocks(b, n, blk, 8);
        cr_assert_geq(nb, 1);
        jpt_capfile_put(path, b, n - 1);
        free(b);
        /* every record but the stop record, which the cut took */
        expect_recovered(path, modes[m], 62, 40, nrecs - 1, blk[nb - 1].offset,
                         "missing_stop_event");
        unlink(path);
        rmdir(dir);
        free(dir);
    }
}

/* Captures written before compression (version 1) replay as they always did: the whole
 * profile from a complete one, and every complete block before damage from a damaged one. The
 * compressed capture of the same stream is a fraction of the size and gives the same bytes. */
Test(replay, version_1_captures_still_replay)
{
    static const uint32_t modes[] = {JP_MODE_CPU, JP_MODE_MEMORY};
    for (int m = 0; m < 2; m++) {
        char *dir = jpt_tmpdir();
        char v1[600], v2[600];
        snprintf(v1, sizeof v1, "%s/v1.jpcap", dir);
        snprintf(v2, sizeof v2, "%s/v2.jpcap", dir);
        const uint64_t events = 60000;
        uint64_t nrecs = jpt_capfile_write_format(v1, modes[m], 63, events,
                                                  JP_CAPTURE_VERSION_1);
        cr_assert_eq(jpt_capfile_write(v2, modes[m], 63, events), nrecs);
        size_t n1, n2;
        uint8_t *b1 = jpt_capfile_read(v1, &n1), *b2 = jpt_capfile_read(v2, &n2);
        cr_assert(b1[8] == JP_CAPTURE_VERSION_1 && b2[8] == JP_CAPTURE_VERSION, "versions");
        cr_assert_lt(n2 * 3, n1, "compressed: %zu of %zu bytes", n2, n1);
        free(b2);
        static const char *const formats[] = {"human", "toon"};
        for (int f = 0; f < 2; f++) {
            size_t want_len, l1, l2;
            char *want = jpt_capfile_expected(modes[m], 63, events, nrecs, JP_END_STOP,
                                              f ? JP_OUT_TOON : JP_OUT_HUMAN, &want_len);
            char *o1, *o2, *e1, *e2;
            int s1 = replay(v1, formats[f], &o1, &l1, &e1);
            int s2 = replay(v2, formats[f], &o2, &l2, &e2);
            cr_assert(WIFEXITED(s1) && WEXITSTATUS(s1) == 0, "v1 replay: %s", e1);
            cr_assert(WIFEXITED(s2) && WEXITSTATUS(s2) == 0, "v2 replay: %s", e2);
            cr_assert(l1 == want_len && memcmp(o1, want, l1) == 0, "v1 %s differs:\n%.2000s",
                      formats[f], o1);
            cr_assert(l2 == want_len && memcmp(o2, want, l2) == 0, "v2 %s differs",
                      formats[f]);
            cr_assert_str_eq(e1, "", "no caveat");
            free(o1), free(o2), free(e1), free(e2), free(want);
        }
        /* damage in the middle of a version 1 file */
        uint64_t before, offset;
        cr_assert_eq(damage_middle_block(v1, b1, n1, 4, &before, &offset),
                     JP_CAPTURE_BLOCK_HEADER_SIZE_V1);
        free(b1);
        expect_recovered(v1, modes[m], 63, events, before, offset, "block checksum mismatch");
        unlink(v1);
        unlink(v2);
        rmdir(dir);
        free(dir);
    }
}

/* A version 2 capture written before version 3 existed (examples/retaining_cache in memory
 * mode, by the daemon of that time) replays to the bytes that daemon's replay gave, kept
 * beside it: the reader still reads every version it ever wrote. */
Test(replay, a_stored_version_2_capture_replays_byte_identical)
{
    const char *root = getenv("JETTPROF_SOURCE_ROOT");
    cr_assert_not_null(root, "JETTPROF_SOURCE_ROOT");
    char cap[600], want_path[600];
    snprintf(cap, sizeof cap, "%s/tests/daemon/data/retaining_cache.v2.jpcap", root);
    size_t n;
    uint8_t *file = jpt_capfile_read(cap, &n);
    cr_assert(n > 8 && file[8] == JP_CAPTURE_VERSION_2, "a version 2 file");
    free(file);
    static const char *const formats[] = {"human", "toon"};
    for (int f = 0; f < 2; f++) {
        snprintf(want_path, sizeof want_path, "%s/tests/daemon/data/retaining_cache.v2.%s",
                 root, formats[f]);
        size_t want_len;
        uint8_t *want = jpt_capfile_read(want_path, &want_len);
        char *out, *err;
        size_t len;
        int st = replay(cap, formats[f], &out, &len, &err);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "replay failed: %s", err);
        cr_assert(len == want_len && memcmp(out, want, len) == 0, "%s replay differs:\n%s",
                  formats[f], out);
        cr_assert_str_eq(err, "", "a complete replay has no caveat");
        free(out), free(err), free(want);
    }
}

/* ---- a point of a capture: --until-record N, diff CAPTURE@N ---- */

/* `jettprofd replay FILE --until-record N --format F`: the exit status, stdout and stderr. */
static int replay_until(const char *file, const char *n, const char *format, char **out,
                        size_t *len, char **err)
{
    char *argv[] = {(char *)jpt_daemon_bin(), "replay", (char *)file, "--until-record",
                    (char *)n, "--format", (char *)format, NULL};
    return jpt_capture_cmd(argv, out, len, err);
}

/* The snapshot of the first N records of a capture is what the engine renders for exactly
 * those records as a run in flight, in both formats and both modes, at points all through the
 * stream (the last one just before RUN_STOP); its TOON says so (running, partial in_progress,
 * records_taken) and, in memory mode, leaves retained bytes unavailable. */
static void expect_points(uint32_t mode, uint32_t seed)
{
    char *dir = jpt_tmpdir();
    char path[600];
    snprintf(path, sizeof path, "%s/p.jpcap", dir);
    uint64_t events = 3000, nrecs = jpt_capfile_write(path, mode, seed, events);
    const uint64_t points[] = {1, 2, 57, nrecs / 2, nrecs - 1};
    for (unsigned i = 0; i < sizeof points / sizeof points[0]; i++) {
        char n[32];
        snprintf(n, sizeof n, "%llu", (unsigned long long)points[i]);
        for (int toon = 0; toon < 2; toon++) {
            char *out, *err;
            size_t len;
            int st = replay_until(path, n, toon ? "toon" : "human", &out, &len, &err);
            cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "--until-record %s: %s", n, err);
            size_t wlen;
            char *want = jpt_capfile_expected(mode, seed, events, points[i], JP_END_RUNNING,
                                              toon ? JP_OUT_TOON : JP_OUT_HUMAN, &wlen);
            cr_assert_eq(len, wlen, "--until-record %s:\n%s\nwant:\n%s", n, out, want);
            cr_assert_eq(memcmp(out, want, len), 0, "--until-record %s:\n%s\nwant:\n%s", n, out,
                         want);
            if (toon) {
                char line[64];
                snprintf(line, sizeof line, "\n    records_taken: %s\n", n);
                cr_assert(strstr(out, line), "%s", out);
                cr_assert(strstr(out, "\n  termination: running\n"), "%s", out);
                if (points[i] > 1) /* RUN_START alone is no run yet */
                    cr_assert(strstr(out, "\n  partial_reason: in_progress\n"), "%s", out);
                if (mode == JP_MODE_MEMORY && points[i] > 1)
                    cr_assert(strstr(out, "\n    retained_bytes: unavailable\n"), "%s", out);
            } else if (points[i] > 1) {
                cr_assert(strstr(out, "live snapshot: the first "), "%s", out);
            }
            free(want);
            free(out);
            free(err);
        }
    }
    unlink(path);
    rmdir(dir);
    free(dir);
}

Test(replay, until_record_gives_the_snapshot_of_a_cpu_captures_first_records)
{
    expect_points(JP_MODE_CPU, 31);
}

Test(replay, until_record_gives_the_snapshot_of_a_memory_captures_first_records)
{
    expect_points(JP_MODE_MEMORY, 32);
}

/* Past the stream's end, or not a count: a clear error naming what was wrong. */
Test(replay, until_record_past_the_end_or_not_a_count_is_an_error)
{
    char *dir = jpt_tmpdir();
    char path[600];
    snprintf(path, sizeof path, "%s/p.jpcap", dir);
    uint64_t nrecs = jpt_capfile_write(path, JP_MODE_CPU, 33, 200);
    char n[32];
    snprintf(n, sizeof n, "%llu", (unsigned long long)nrecs + 1u);
    char *out, *err;
    size_t len;
    int st = replay_until(path, n, "toon", &out, &len, &err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d", st);
    char want[128];
    snprintf(want, sizeof want, "holds %llu records", (unsigned long long)nrecs);
    cr_assert(strstr(err, want) && len == 0, "%s", err);
    free(out);
    free(err);
    const char *bad[] = {"0", "-1", "12x", ""};
    for (unsigned i = 0; i < 4; i++) {
        st = replay_until(path, bad[i], "toon", &out, &len, &err);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2, "%s: status %d", bad[i], st);
        cr_assert(strstr(err, "--until-record must be a record count"), "%s", err);
        free(out);
        free(err);
    }
    unlink(path);
    rmdir(dir);
    free(dir);
}

/* diff takes a point of a capture as either side: the first half of a memory run against the
 * whole of it, and a point against itself (nothing changed). */
Test(replay, diff_takes_a_point_of_a_capture)
{
    char *dir = jpt_tmpdir();
    char path[600], half[640], self[1300];
    snprintf(path, sizeof path, "%s/p.jpcap", dir);
    uint64_t nrecs = jpt_capfile_write(path, JP_MODE_MEMORY, 34, 2000);
    snprintf(half, sizeof half, "%s@%llu", path, (unsigned long long)nrecs / 2u);
    char *argv[] = {(char *)jpt_daemon_bin(), "diff", half, path, "--format", "toon", NULL};
    char *out, *err;
    size_t len;
    int st = jpt_capture_cmd(argv, &out, &len, &err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", err);
    cr_assert(strstr(out, "diff:"), "%s", out);
    free(out);
    free(err);
    char *same[] = {(char *)jpt_daemon_bin(), "diff", half, half, NULL};
    st = jpt_capture_cmd(same, &out, &len, &err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", err);
    cr_assert(strstr(out, "+0.00"), "a point against itself changes nothing:\n%s", out);
    cr_assert_null(strstr(out, "+0.01"), "%s", out);
    free(out);
    free(err);
    snprintf(self, sizeof self, "%s@%llu", path, (unsigned long long)nrecs + 5u);
    char *past[] = {(char *)jpt_daemon_bin(), "diff", self, path, NULL};
    st = jpt_capture_cmd(past, &out, &len, &err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 1, "%s", err);
    cr_assert(strstr(err, "the capture holds"), "%s", err);
    free(out);
    free(err);
    unlink(path);
    rmdir(dir);
    free(dir);
}

/* The leak hunt in one command: `diff CAPTURE@N CAPTURE --value live_bytes` compares what was
 * live at the point with what is live at the end, site by site; its totals are the snapshot's
 * live bytes and the final profile's retained bytes. A value of the other mode, or one diff does
 * not take, is refused naming it. */
static uint64_t toon_u64(const char *toon, const char *line)
{
    const char *p = strstr(toon, line);
    cr_assert_not_null(p, "no \"%s\" in:\n%s", line, toon);
    return strtoull(p + strlen(line), NULL, 10);
}

Test(replay, diff_of_two_points_by_live_bytes_names_what_grew)
{
    char *dir = jpt_tmpdir();
    char path[600], half[640];
    snprintf(path, sizeof path, "%s/p.jpcap", dir);
    uint64_t nrecs = jpt_capfile_write(path, JP_MODE_MEMORY, 35, 4000);
    snprintf(half, sizeof half, "%s@%llu", path, (unsigned long long)nrecs / 2u);
    char n[32];
    snprintf(n, sizeof n, "%llu", (unsigned long long)nrecs / 2u);
    char *snap, *fin, *out, *err;
    size_t len;
    int st = replay_until(path, n, "toon", &snap, &len, &err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", err);
    free(err);
    st = replay(path, "toon", &fin, &len, &err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", err);
    free(err);
    char *argv[] = {(char *)jpt_daemon_bin(), "diff", half, path, "--value", "live_bytes",
                    "--format", "toon", NULL};
    st = jpt_capture_cmd(argv, &out, &len, &err);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s", err);
    const char *base = strstr(out, "\n  base:\n"), *next = strstr(out, "\n  new:\n");
    cr_assert(base && next, "%s", out);
    cr_assert_eq(toon_u64(base, "\n    live_bytes: "), toon_u64(snap, "\n    live_bytes: "),
                 "%s", out);
    cr_assert_eq(toon_u64(next, "\n    live_bytes: "), toon_u64(fin, "\n    retained_bytes: "),
                 "%s", out);
    cr_assert(strstr(out, "base_live_bytes,new_live_bytes"), "%s", out);
    free(out);
    free(err);
    const char *bad[][2] = {{"retained_count", "2"}, {"samples", "1"}, {"nonsense", "2"}};
    for (unsigned i = 0; i < 3; i++) {
        char *b[] = {(char *)jpt_daemon_bin(), "diff", half, path, "--value",
                     (char *)bad[i][0], NULL};
        st = jpt_capture_cmd(b, &out, &len, &err);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == atoi(bad[i][1]), "%s: %d %s", bad[i][0],
                  st, err);
        cr_assert(strstr(err, bad[i][0]), "%s", err);
        free(out);
        free(err);
    }
    free(snap);
    free(fin);
    unlink(path);
    rmdir(dir);
    free(dir);
}
