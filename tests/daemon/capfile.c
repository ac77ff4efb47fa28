/* Capture files from known streams for the offline suites (capfile.h). */
#include "capfile.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "protocol/capture.h"
#include "support.h"

uint64_t jpt_capfile_write(const char *path, uint32_t mode, uint32_t seed, uint64_t events)
{
    return jpt_capfile_write_format(path, mode, seed, events, 0);
}

uint64_t jpt_capfile_write_format(const char *path, uint32_t mode, uint32_t seed,
                                  uint64_t events, uint32_t format)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    cr_assert_geq(fd, 0, "cannot create %s", path);
    struct jp_capture_meta meta = {.mode = mode, .pid = 4321, .run_id = seed, .format = format};
    struct jp_capture_writer *w;
    cr_assert_eq(jp_capture_writer_new(fd, &meta, &w), 0, "capture writer");
    struct jpt_stream s;
    jpt_stream_init(&s, mode, seed, events);
    static uint8_t buf[JP_REC_MAX_SIZE];
    uint64_t n = 0;
    for (uint32_t len; (len = jpt_stream_next(&s, buf)); n++)
        cr_assert_eq(jp_capture_write(w, buf, len), 0, "capture record %llu",
                     (unsigned long long)n);
    cr_assert_eq(jp_capture_flush(w), 0, "flush");
    jp_capture_writer_free(w);
    cr_assert_eq(close(fd), 0);
    return n;
}

char *jpt_capfile_expected(uint32_t mode, uint32_t seed, uint64_t events, uint64_t nrecs,
                           uint32_t ending, uint32_t outputs, size_t *len)
{
    struct jpt_stream s;
    jpt_stream_init(&s, mode, seed, events);
    struct jp_engine *e;
    cr_assert_eq(jp_engine_new(&e), 0);
    static uint8_t buf[JP_REC_MAX_SIZE];
    const char *why = NULL;
    uint64_t n = 0;
    for (uint32_t l; n < nrecs && (l = jpt_stream_next(&s, buf)); n++)
        cr_assert_eq(jp_engine_feed(e, buf, l, &why), 0, "record %llu: %s",
                     (unsigned long long)n, why ? why : "");
    cr_assert_eq(n, nrecs, "the stream has %llu records", (unsigned long long)n);
    struct jp_report_opts o = {.size = sizeof o, .threshold_bp = -1, .limit = -1,
                               .ending = ending, .outputs = outputs, .records_taken = nrecs};
    struct jp_rendered r;
    memset(&r, 0, sizeof r);
    cr_assert_eq(jp_profile_render(e, &o, &r), 0, "render");
    jp_engine_free(e);
    char *text = outputs == JP_OUT_TOON ? r.toon : r.human;
    *len = outputs == JP_OUT_TOON ? r.toon_len : r.human_len;
    if (outputs == JP_OUT_TOON)
        r.toon = NULL;
    else
        r.human = NULL;
    jp_rendered_free(&r);
    cr_assert_not_null(text);
    return text;
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

uint32_t jpt_capfile_blocks(const uint8_t *file, size_t len, struct jpt_capfile_block *out,
                            uint32_t max)
{
    if (len < JP_CAPTURE_HEADER_SIZE)
        return 0;
    uint32_t hsize = jp_capture_block_header_size(file[8]);
    if (!hsize)
        return 0;
    uint64_t at = JP_CAPTURE_HEADER_SIZE + (uint64_t)le32(file + 12);
    uint32_t n = 0;
    while (at + hsize <= len) {
        uint32_t plen = le32(file + at + 4);
        if (n < max)
            out[n] = (struct jpt_capfile_block){at, hsize, plen, le32(file + at + hsize - 8)};
        n++;
        at += hsize + (uint64_t)plen;
    }
    return n;
}

void jpt_run_complete(const char *sock, uint32_t seed, uint64_t events)
{
    struct jpt_client c;
    cr_assert_eq(jpt_client_connect(&c, sock), 0);
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_CPU, seed, events);
    struct jpt_result r;
    cr_assert_eq(jpt_run(&c, &s, 4096, -1, &r), 0);
    cr_assert_eq(r.error_code, 0, "%s", r.error);
    cr_assert_eq(r.status, JP_STATUS_COMPLETE, "a complete profile");
    jpt_result_free(&r);
    jpt_client_close(&c);
}

uint8_t *jpt_capfile_read(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    cr_assert_geq(fd, 0, "cannot open %s", path);
    struct stat st;
    cr_assert_eq(fstat(fd, &st), 0);
    uint8_t *b = malloc((size_t)st.st_size + 1);
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, b + got, (size_t)st.st_size - got);
        cr_assert_gt(r, 0, "read %s", path);
        got += (size_t)r;
    }
    close(fd);
    *len = got;
    return b;
}

void jpt_capfile_put(const char *path, const uint8_t *bytes, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    cr_assert_geq(fd, 0, "cannot create %s", path);
    size_t put = 0;
    while (put < len) {
        ssize_t w = write(fd, bytes + put, len - put);
        cr_assert_gt(w, 0, "write %s", path);
        put += (size_t)w;
    }
    cr_assert_eq(close(fd), 0);
}
