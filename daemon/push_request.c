/* Fleet push, the request's form (push.h): the checks of --push and --label, and the URL and
 * body a profile is sent with; push.c sends them.
 *
 * The request follows Pyroscope's HTTP ingest API (its server API reference,
 * https://grafana.com/docs/pyroscope/latest/configure-server/about-server-api/):
 *
 *   POST URL?name=APP{program=P,mode=M,host=H,k=v,...}&from=S&until=S&format=pprof
 *            &spyName=jettprofd              (each value percent-encoded: only RFC 3986's
 *                                             unreserved bytes are left as they are)
 *   Content-Type: application/octet-stream
 *   body: the run's pprof export (render/export: gzip'ed profile.proto), the very bytes of
 *         `jettprofd export CAPTURE --format pprof` for the run's capture
 *
 * - With format=pprof Pyroscope reads the whole body as the profile (it reads a multipart form
 *   with a `profile` part only when no format is named, to carry a sample_type_config). The
 *   sample types are Go's (samples/cpu; alloc_objects, alloc_space, inuse_space), which its
 *   default mapping knows, so none is sent. For pprof it ignores units, aggregationType and
 *   sampleRate, and takes name as the series' prefix: it appends the profile type itself
 *   (APP.cpu{...}). from and until are Unix seconds: the run's wall-clock start and end.
 * - The name's grammar: APP is [A-Za-z0-9_./-]+; a label key is [A-Za-z0-9_.]+ (__name__
 *   reserved); a value runs to the next ',' or '}' with no escape, its ends trimmed. So APP,
 *   the program's base name without ".jett", keeps [A-Za-z0-9_.-] and has '_' for any other
 *   character (a well-formed multi-byte one becomes one '_'), and is "jett" when nothing is
 *   left. A label value taken from the run (program, host) has '_' for each control
 *   character, ',', '{', '}', '=' and each byte that starts no well-formed UTF-8 sequence, and
 *   keeps the rest: a client's program can neither end its value nor add a label. The
 *   operator's --label values are refused at the command line when they hold any of those.
 *   A run without a program (no project source) has APP "jett" and no program label.
 *
 * Parca: a URL whose path ends in /profiles/writeraw is Parca's WriteRaw as its HTTP gateway
 * serves it (parca.profilestore.v1alpha1.ProfileStoreService, `post: "/profiles/writeraw"`,
 * body "*"), so the request is instead
 *
 *   POST URL   Content-Type: application/json
 *   {"series":[{"labels":{"labels":[{"name":"__name__","value":"jett_cpu"|"jett_memory"},
 *     {"name":"program","value":P},{"name":"mode","value":M},{"name":"host","value":H},
 *     {"name":K,"value":V}...]},"samples":[{"rawProfile":BASE64}]}],"normalized":true}
 *
 *   the protobuf JSON form of a WriteRawRequest (bytes as base64), the pprof the same bytes as
 *   above; `normalized`: the profile has no addresses to normalise. Label names are the
 *   Prometheus kind, which --label's keys already are; values are the same as Pyroscope's
 *   (the run's cleaned as described above), as JSON strings. Parca's time comes from the
 *   profile, so no from/until is sent.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/buf.h"
#include "common/utf8.h"
#include "jpd.h"
#include "lazylib.h"
#include "push.h"

/* ---- the command line ---- */

static int is_alpha(unsigned char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int is_alnum(unsigned char c)
{
    return is_alpha(c) || (c >= '0' && c <= '9');
}

/* A byte no label value carries: it would end the value or the set, or fool a reader. */
static int value_byte_bad(unsigned char c)
{
    return c < 0x20 || c == 0x7f || c == ',' || c == '{' || c == '}' || c == '=';
}

void jpd_push_redact(const char *url, char *out, size_t cap)
{
    const char *sep = strstr(url, "://");
    size_t auth = sep ? (size_t)(sep - url) + 3 : 0;
    size_t auth_end = auth + strcspn(url + auth, "/?#");
    size_t cut = auth_end + strcspn(url + auth_end, "?#");
    const char *at = NULL;
    for (size_t i = auth; i < auth_end; i++)
        if (url[i] == '@')
            at = url + i;
    const char *host = at ? at + 1 : url + auth;
    snprintf(out, cap, "%.*s%s%.*s%s", (int)auth, url, at ? "***@" : "",
             (int)(url + cut - host), host,
             url[cut] == '?' ? "?..." : url[cut] == '#' ? "#..." : "");
}

static int bad_opt(char *why, size_t cap, const char *what, const char *value)
{
    snprintf(why, cap, "%s: %s", what, value);
    return -EINVAL;
}

int jpd_push_opt(struct jpd_push_opts *o, const char *flag, const char *v, char *why,
                 size_t cap)
{
    if (!strcmp(flag, "--push")) {
        char shown[256];
        jpd_push_redact(v, shown, sizeof shown);
        if (o->url)
            return bad_opt(why, cap, "--push may be given once; again", shown);
        if (strncasecmp(v, "http://", 7) && strncasecmp(v, "https://", 8))
            return bad_opt(why, cap, "--push needs an http:// or https:// URL, not", shown);
        /* The first use of libcurl in the process: it is loaded here, on the main thread,
         * before the push thread or any other starts. */
        char lib[400];
        const struct jpd_curl *cu = jpd_curl(lib, sizeof lib);
        if (!cu) {
            snprintf(why, cap, "--push needs %s", lib);
            return -ELIBACC;
        }
        CURLU *u = cu->url();
        if (!u) {
            snprintf(why, cap, "--push: out of memory");
            return -ENOMEM;
        }
        CURLUcode c = cu->url_set(u, CURLUPART_URL, v, 0);
        char *path = NULL;
        if (c == CURLUE_OK)
            c = cu->url_get(u, CURLUPART_PATH, &path, 0);
        cu->url_cleanup(u);
        if (c != CURLUE_OK) {
            snprintf(why, cap, "--push is not a URL libcurl can use (%s): %s",
                     cu->url_strerror(c), shown);
            return c == CURLUE_OUT_OF_MEMORY ? -ENOMEM : -EINVAL;
        }
        static const char parca_path[] = "/profiles/writeraw";
        size_t pl = strlen(path), ql = sizeof parca_path - 1u;
        o->parca = pl >= ql && !strcmp(path + pl - ql, parca_path);
        cu->free(path);
        o->url = v;
        return 0;
    }
    const char *eq = strchr(v, '=');
    if (!eq)
        return bad_opt(why, cap, "--label needs KEY=VALUE, not", v);
    size_t klen = (size_t)(eq - v), vlen = strlen(eq + 1);
    int key_ok = klen > 0 && (is_alpha((unsigned char)v[0]) || v[0] == '_');
    for (size_t i = 1; i < klen; i++)
        key_ok &= is_alnum((unsigned char)v[i]) || v[i] == '_';
    if (!key_ok)
        return bad_opt(why, cap, "--label KEY must match [A-Za-z_][A-Za-z0-9_]*, not", v);
    static const char *const daemon_keys[] = {"program", "mode", "host"};
    for (size_t i = 0; i < sizeof daemon_keys / sizeof daemon_keys[0]; i++)
        if (klen == strlen(daemon_keys[i]) && !memcmp(v, daemon_keys[i], klen))
            return bad_opt(why, cap, "--label cannot set program, mode or host (the daemon "
                                     "sets them from the run), not", v);
    if (klen >= 2 && v[0] == '_' && v[1] == '_')
        return bad_opt(why, cap, "--label KEY may not start with __ (reserved by the "
                                 "receivers), not", v);
    for (uint32_t i = 0; i < o->nlabels; i++)
        if (!strncmp(o->labels[i], v, klen + 1))
            return bad_opt(why, cap, "--label names the same KEY twice", v);
    int value_ok = vlen > 0 && jp_utf8_validate(eq + 1, vlen, NULL) == 0;
    for (size_t i = 0; value_ok && i < vlen; i++)
        value_ok = !value_byte_bad((unsigned char)eq[1 + i]);
    if (!value_ok)
        return bad_opt(why, cap, "--label VALUE must be non-empty UTF-8 without control "
                                 "characters, ',', '{', '}' or '=', not", v);
    if (o->nlabels >= JPD_PUSH_MAX_LABELS)
        return bad_opt(why, cap, "--label may be given at most 16 times; once more", v);
    o->labels[o->nlabels++] = v;
    return 0;
}

/* ---- the request ---- */

/* s[n] percent-encoded: RFC 3986's unreserved bytes stay, every other one is %XX. */
static void put_encoded(struct jp_buf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789ABCDEF";
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (is_alnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
            jp_buf_put(b, &s[i], 1);
        } else {
            char e[3] = {'%', hex[c >> 4], hex[c & 15]};
            jp_buf_put(b, e, 3);
        }
    }
}

/* A label value from the run (hostile bytes): see the top of the file. */
static void put_run_value(struct jp_buf *b, const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        size_t k = jp_utf8_seq_len(s + i, n - i);
        if (k == 0 || (k == 1 && value_byte_bad((unsigned char)s[i]))) {
            JP_BUF_LIT(b, "_");
            i++;
        } else {
            jp_buf_put(b, s + i, k);
            i += k;
        }
    }
}

/* The series name's APP: the program's base name without .jett, in APP's alphabet. */
static void put_app(struct jp_buf *b, const char *program)
{
    const char *slash = strrchr(program, '/');
    const char *base = slash ? slash + 1 : program;
    size_t n = strlen(base);
    if (n >= 5 && !strcmp(base + n - 5, ".jett"))
        n -= 5;
    size_t start = b->len;
    for (size_t i = 0; i < n;) {
        size_t k = jp_utf8_seq_len(base + i, n - i);
        unsigned char c = (unsigned char)base[i];
        if (k == 1 && (is_alnum(c) || c == '_' || c == '.' || c == '-'))
            jp_buf_put(b, base + i, 1);
        else
            JP_BUF_LIT(b, "_");
        i += k ? k : 1;
    }
    if (b->len == start)
        JP_BUF_LIT(b, "jett");
}

int jpd_push_url(const struct jpd_push_opts *o, const char *host, const struct jpd_push_meta *m,
                 char **out)
{
    if (o->parca)
        return (*out = strdup(o->url)) ? 0 : -ENOMEM;
    const char *program = m->program ? m->program : "";
    const char *mode = jp_mode_name(m->mode);
    int64_t until = m->until_s, from = m->from_s > 0 && m->from_s < until ? m->from_s : until;
    struct jp_buf name = {0}, q = {0};
    put_app(&name, program);
    JP_BUF_LIT(&name, "{");
    if (program[0]) {
        JP_BUF_LIT(&name, "program=");
        put_run_value(&name, program);
        JP_BUF_LIT(&name, ",");
    }
    jp_buf_printf(&name, "mode=%s,host=", mode ? mode : "unknown");
    put_run_value(&name, host);
    for (uint32_t i = 0; i < o->nlabels; i++) {
        JP_BUF_LIT(&name, ",");
        jp_buf_puts(&name, o->labels[i]);
    }
    JP_BUF_LIT(&name, "}");
    JP_BUF_LIT(&q, "name=");
    if (name.p)
        put_encoded(&q, name.p, name.len);
    jp_buf_printf(&q, "&from=%lld&until=%lld&format=pprof&spyName=jettprofd", (long long)from,
                  (long long)until);
    int r = name.failed || q.failed ? -ENOMEM : 0;
    jp_buf_free(&name);
    /* loaded when the URL was checked (jpd_push_opt) */
    const struct jpd_curl *cu = jpd_curl(NULL, 0);
    CURLU *u = r == 0 && cu ? cu->url() : NULL;
    char *path = NULL, *full = NULL;
    if (!u)
        r = -ENOMEM;
    /* The URL parsed at the command line; what fails here is memory. */
    if (r == 0 && (cu->url_set(u, CURLUPART_URL, o->url, 0) != CURLUE_OK ||
                   cu->url_get(u, CURLUPART_PATH, &path, 0) != CURLUE_OK))
        r = -ENOMEM;
    if (r == 0 && (!strcmp(path, "/") || !path[0]) &&
        cu->url_set(u, CURLUPART_PATH, "/ingest", 0) != CURLUE_OK)
        r = -ENOMEM;
    if (r == 0 && (cu->url_set(u, CURLUPART_QUERY, q.p, CURLU_APPENDQUERY) != CURLUE_OK ||
                   cu->url_get(u, CURLUPART_URL, &full, 0) != CURLUE_OK))
        r = -ENOMEM;
    if (r == 0 && !(*out = strdup(full)))
        r = -ENOMEM;
    if (cu) {
        cu->free(path);
        cu->free(full);
        cu->url_cleanup(u);
    }
    jp_buf_free(&q);
    return r;
}

/* One {"name":..,"value":..} of Parca's label set; value cleaned as a run's when run. */
static void parca_label(struct jp_buf *b, const char *name, size_t nlen, const char *value,
                        int run)
{
    struct jp_buf v = {0};
    if (run)
        put_run_value(&v, value);
    else
        jp_buf_puts(&v, value);
    JP_BUF_LIT(b, ",{\"name\":\"");
    jp_buf_put(b, name, nlen);
    JP_BUF_LIT(b, "\",\"value\":");
    jp_json_str(b, v.p ? v.p : "");
    JP_BUF_LIT(b, "}");
    b->failed |= v.failed;
    jp_buf_free(&v);
}

int jpd_push_body(const struct jpd_push_opts *o, const char *host, const struct jpd_push_meta *m,
                  const void *pprof, size_t len, char **out, size_t *out_len)
{
    *out = NULL;
    *out_len = 0;
    if (!o->parca)
        return 0;
    const char *program = m->program ? m->program : "";
    const char *mode = jp_mode_name(m->mode);
    struct jp_buf b = {0};
    jp_buf_printf(&b, "{\"series\":[{\"labels\":{\"labels\":[{\"name\":\"__name__\","
                  "\"value\":\"jett_%s\"}", mode ? mode : "unknown");
    if (program[0])
        parca_label(&b, "program", 7, program, 1);
    parca_label(&b, "mode", 4, mode ? mode : "unknown", 0);
    parca_label(&b, "host", 4, host, 1);
    for (uint32_t i = 0; i < o->nlabels; i++) {
        const char *eq = strchr(o->labels[i], '='); /* checked at the command line */
        parca_label(&b, o->labels[i], (size_t)(eq - o->labels[i]), eq + 1, 0);
    }
    JP_BUF_LIT(&b, "]},\"samples\":[{\"rawProfile\":");
    jp_json_base64(&b, pprof, len);
    JP_BUF_LIT(&b, "}]}],\"normalized\":true}");
    if (b.failed) {
        jp_buf_free(&b);
        return -ENOMEM;
    }
    *out = b.p;
    *out_len = b.len;
    return 0;
}

const char *jpd_push_content_type(const struct jpd_push_opts *o)
{
    return o->parca ? "Content-Type: application/json" : "Content-Type: application/octet-stream";
}
