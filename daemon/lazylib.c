/* The libraries loaded when first needed (lazylib.h): one loader, a table of names and
 * offsets per library. */
#include "lazylib.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* dlsym's void * goes into a function pointer of the table by memcpy (POSIX: the same size and
 * representation), which ISO C's pointer conversions do not allow. */
_Static_assert(sizeof(void *) == sizeof(void (*)(void)), "function pointers are not void *");

struct lazy_fn {
    const char *name; /* the symbol */
    size_t off;       /* its pointer's place in the table */
};

struct lazy_lib {
    const char *what;   /* "libcurl": how errors name it */
    const char *soname;
    const char *knob;   /* a test knob naming another file to load, or NULL */
    const struct lazy_fn *fns;
    size_t nfns;
    void *table;        /* fns fill it; valid when ok */
    int ok;
    char why[400];
};

/* Loads l once: on any failure nothing of it stays open and the table is not used. Called
 * under the library's pthread_once only. */
static void lazy_load(struct lazy_lib *l)
{
    const char *file = l->knob ? getenv(l->knob) : NULL;
    if (!file || !file[0])
        file = l->soname;
    dlerror();
    void *h = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        snprintf(l->why, sizeof l->why, "%s (%s): %s", l->what, file, e ? e : "cannot load");
        return;
    }
    for (size_t i = 0; i < l->nfns; i++) {
        dlerror();
        void *sym = dlsym(h, l->fns[i].name);
        if (!sym) {
            const char *e = dlerror();
            snprintf(l->why, sizeof l->why, "%s (%s): no %s: %s", l->what, file,
                     l->fns[i].name, e ? e : "a null symbol");
            dlclose(h);
            return;
        }
        memcpy((char *)l->table + l->fns[i].off, &sym, sizeof sym);
    }
    l->ok = 1; /* h stays open until the process ends: the table points into it */
}

/* The getters: pthread_once runs the load once, whichever thread comes first, and orders its
 * writes (the table, ok, why) before every caller's return from pthread_once, so each reads
 * them without a lock afterwards; nothing writes them again. */
static const void *lazy_get(struct lazy_lib *l, pthread_once_t *once, void (*load)(void),
                            char *why, size_t cap)
{
    pthread_once(once, load);
    if (l->ok)
        return l->table;
    if (cap)
        snprintf(why, cap, "%s", l->why);
    return NULL;
}

#define FN(type, field, sym) {sym, offsetof(type, field)}

static struct jpd_curl curl_table;
static const struct lazy_fn curl_fns[] = {
    FN(struct jpd_curl, global_init, "curl_global_init"),
    FN(struct jpd_curl, global_cleanup, "curl_global_cleanup"),
    FN(struct jpd_curl, easy_init, "curl_easy_init"),
    FN(struct jpd_curl, easy_cleanup, "curl_easy_cleanup"),
    FN(struct jpd_curl, easy_reset, "curl_easy_reset"),
    FN(struct jpd_curl, easy_setopt, "curl_easy_setopt"),
    FN(struct jpd_curl, easy_perform, "curl_easy_perform"),
    FN(struct jpd_curl, easy_getinfo, "curl_easy_getinfo"),
    FN(struct jpd_curl, easy_strerror, "curl_easy_strerror"),
    FN(struct jpd_curl, slist_append, "curl_slist_append"),
    FN(struct jpd_curl, slist_free_all, "curl_slist_free_all"),
    FN(struct jpd_curl, url, "curl_url"),
    FN(struct jpd_curl, url_set, "curl_url_set"),
    FN(struct jpd_curl, url_get, "curl_url_get"),
    FN(struct jpd_curl, url_cleanup, "curl_url_cleanup"),
    FN(struct jpd_curl, url_strerror, "curl_url_strerror"),
    FN(struct jpd_curl, free, "curl_free"),
};
_Static_assert(sizeof curl_fns / sizeof curl_fns[0] * sizeof(void *) == sizeof curl_table,
               "every pointer of struct jpd_curl has its name");
static struct lazy_lib curl_lib = {
    .what = "libcurl", .soname = JPD_LIBCURL_SONAME, .knob = "JETTPROFD_TEST_LIBCURL",
    .fns = curl_fns, .nfns = sizeof curl_fns / sizeof curl_fns[0], .table = &curl_table};
static pthread_once_t curl_once = PTHREAD_ONCE_INIT;

static void curl_load(void)
{
    lazy_load(&curl_lib);
}

const struct jpd_curl *jpd_curl(char *why, size_t cap)
{
    return lazy_get(&curl_lib, &curl_once, curl_load, why, cap);
}

static struct jpd_systemd systemd_table;
static const struct lazy_fn systemd_fns[] = {
    FN(struct jpd_systemd, listen_fds, "sd_listen_fds"),
    FN(struct jpd_systemd, notify, "sd_notify"),
};
_Static_assert(sizeof systemd_fns / sizeof systemd_fns[0] * sizeof(void *) ==
               sizeof systemd_table, "every pointer of struct jpd_systemd has its name");
static struct lazy_lib systemd_lib = {
    .what = "libsystemd", .soname = JPD_LIBSYSTEMD_SONAME, .knob = "JETTPROFD_TEST_LIBSYSTEMD",
    .fns = systemd_fns, .nfns = sizeof systemd_fns / sizeof systemd_fns[0],
    .table = &systemd_table};
static pthread_once_t systemd_once = PTHREAD_ONCE_INIT;

static void systemd_load(void)
{
    lazy_load(&systemd_lib);
}

const struct jpd_systemd *jpd_systemd(char *why, size_t cap)
{
    return lazy_get(&systemd_lib, &systemd_once, systemd_load, why, cap);
}
