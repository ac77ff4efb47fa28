/* The shared libraries jettprofd loads only when it needs them (lazylib.c): libcurl for
 * --push (push.c, push_request.c) and libsystemd for socket activation and readiness
 * (systemd.c). Neither is linked in, so a private run and every command without them start
 * without mapping them and the ~40 libraries they bring. Their headers still give the types
 * and constants (pkg-config's compile flags only, daemon/meson.build).
 *
 * Each library is opened once, by soname, on the first call of its getter, from any thread;
 * every function its table lists must resolve, or the load fails as a whole and stays failed
 * (the getter returns NULL each time, why naming the library and what was missing). The
 * library stays loaded until the process ends.
 *
 * Test knobs (read when the library is first needed, for tests only): JETTPROFD_TEST_LIBCURL
 * and JETTPROFD_TEST_LIBSYSTEMD name the file to load instead of libcurl.so.4 and
 * libsystemd.so.0, so a test can see the daemon without them.
 */
#ifndef JETTPROF_DAEMON_LAZYLIB_H
#define JETTPROF_DAEMON_LAZYLIB_H

#include <stddef.h>
#include <curl/curl.h>
#include <systemd/sd-daemon.h>

#define JPD_LIBCURL_SONAME "libcurl.so.4"
#define JPD_LIBSYSTEMD_SONAME "libsystemd.so.0"

/* The libcurl functions push.c and push_request.c call, each the one curl_NAME names. Called
 * through these pointers, never by the names: curl.h's type-checking macros (GCC) do not
 * apply, so every value passed to easy_setopt must be the type its option takes (long,
 * curl_off_t, a pointer), as libcurl's documentation says. */
struct jpd_curl {
    CURLcode (*global_init)(long flags);
    void (*global_cleanup)(void);
    CURL *(*easy_init)(void);
    void (*easy_cleanup)(CURL *h);
    void (*easy_reset)(CURL *h);
    CURLcode (*easy_setopt)(CURL *h, CURLoption option, ...);
    CURLcode (*easy_perform)(CURL *h);
    CURLcode (*easy_getinfo)(CURL *h, CURLINFO info, ...);
    const char *(*easy_strerror)(CURLcode c);
    struct curl_slist *(*slist_append)(struct curl_slist *l, const char *s);
    void (*slist_free_all)(struct curl_slist *l);
    CURLU *(*url)(void);
    CURLUcode (*url_set)(CURLU *u, CURLUPart what, const char *part, unsigned int flags);
    CURLUcode (*url_get)(const CURLU *u, CURLUPart what, char **part, unsigned int flags);
    void (*url_cleanup)(CURLU *u);
    const char *(*url_strerror)(CURLUcode c);
    void (*free)(void *p);
};

/* libcurl's table, loaded on the first call; NULL when it cannot be loaded, with why[cap]
 * (cap > 0) saying "libcurl.so.4: " and dlerror's text. */
const struct jpd_curl *jpd_curl(char *why, size_t cap);

/* The libsystemd functions systemd.c calls. */
struct jpd_systemd {
    int (*listen_fds)(int unset_environment);
    int (*notify)(int unset_environment, const char *state);
};

/* libsystemd's table, as jpd_curl's. */
const struct jpd_systemd *jpd_systemd(char *why, size_t cap);

#endif
