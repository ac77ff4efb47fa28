/* The variable-length records laid out as a producer writes them (see recbuild.h). */
#include "recbuild.h"

#include <string.h>

uint32_t tl_rec_source(uint8_t *buf, const struct jp_rec_source_def *fixed, const char *path,
                       size_t path_len)
{
    struct jp_rec_source_def r = *fixed;
    r.h.type = JP_REC_SOURCE_DEF;
    r.path_len = (uint16_t)path_len;
    r.h.size = (uint16_t)(sizeof r + path_len);
    memcpy(buf, &r, sizeof r);
    memcpy(buf + sizeof r, path, path_len);
    return r.h.size;
}

uint32_t tl_rec_frame(uint8_t *buf, const struct jp_rec_frame_def *fixed, const char *ns,
                      size_t ns_len, const char *fn, size_t fn_len)
{
    struct jp_rec_frame_def r = *fixed;
    r.h.type = JP_REC_FRAME_DEF;
    r.ns_len = (uint16_t)ns_len;
    r.fn_len = (uint16_t)fn_len;
    r.h.size = (uint16_t)(sizeof r + ns_len + fn_len);
    memcpy(buf, &r, sizeof r);
    memcpy(buf + sizeof r, ns, ns_len);
    memcpy(buf + sizeof r + ns_len, fn, fn_len);
    return r.h.size;
}

uint32_t tl_rec_excerpt(uint8_t *buf, const struct jp_rec_excerpt *fixed, const char *text,
                        size_t text_len)
{
    struct jp_rec_excerpt r = *fixed;
    r.h.type = JP_REC_EXCERPT;
    r.text_len = (uint16_t)text_len;
    r.h.size = (uint16_t)(sizeof r + text_len);
    memcpy(buf, &r, sizeof r);
    if (text_len)
        memcpy(buf + sizeof r, text, text_len);
    return r.h.size;
}

struct jp_rec_run_start tl_rec_run_start(uint32_t mode)
{
    struct jp_rec_run_start rs;
    memset(&rs, 0, sizeof rs);
    rs.h = (struct jp_rec_hdr){JP_REC_RUN_START, sizeof rs};
    rs.format_version = JP_FORMAT_VERSION;
    rs.mode = (uint8_t)mode;
    rs.rate_hz = mode == JP_MODE_CPU ? 1000u : 0u;
    rs.limit = 10;
    return rs;
}
