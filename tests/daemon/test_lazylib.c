/* The libraries jettprofd loads only when it needs them (daemon/lazylib.h): libcurl and
 * libsystemd are not among its ELF NEEDED entries; a private run and a plain `serve` never map
 * them, a `serve --push` maps libcurl; a push whose libcurl cannot be loaded fails at once,
 * naming it (test knob JETTPROFD_TEST_LIBCURL); socket activation and notifications whose
 * libsystemd cannot be loaded are warned about and the daemon serves on its own socket
 * (JETTPROFD_TEST_LIBSYSTEMD). */
#include <criterion/criterion.h>
#include <elf.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support.h"
#include "capfile.h"
#include "tests/lib/stop.h"

/* The whole file at path, its bytes as they are (malloc'ed, *len of them). */
static char *read_bytes(const char *path, size_t *len)
{
    FILE *fp = fopen(path, "rbe");
    cr_assert_not_null(fp, "%s", path);
    size_t cap = 1 << 20, n = 0;
    char *b = malloc(cap);
    cr_assert_not_null(b);
    for (size_t got; (got = fread(b + n, 1, cap - n, fp)) > 0;) {
        n += got;
        if (n == cap)
            cr_assert_not_null(b = realloc(b, cap *= 2));
    }
    cr_assert(!ferror(fp), "%s", path);
    fclose(fp);
    *len = n;
    return b;
}

/* The NEEDED entries of the 64-bit ELF file at path, each followed by '\n' (malloc'ed). */
static char *needed_of(const char *path)
{
    size_t len;
    char *f = read_bytes(path, &len);
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)f;
    cr_assert(len >= sizeof *eh && !memcmp(eh->e_ident, ELFMAG, SELFMAG) &&
              eh->e_ident[EI_CLASS] == ELFCLASS64, "%s is no 64-bit ELF file", path);
    cr_assert(eh->e_shoff + (size_t)eh->e_shnum * sizeof(Elf64_Shdr) <= len);
    const Elf64_Shdr *sh = (const Elf64_Shdr *)(f + eh->e_shoff);
    size_t cap = 4096, n = 0;
    char *out = calloc(1, cap);
    cr_assert_not_null(out);
    int dynamic = 0;
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        if (sh[i].sh_type != SHT_DYNAMIC)
            continue;
        dynamic = 1;
        cr_assert(sh[i].sh_link < eh->e_shnum);
        const Elf64_Shdr *str = &sh[sh[i].sh_link];
        cr_assert(sh[i].sh_offset + sh[i].sh_size <= len && str->sh_offset + str->sh_size <= len);
        const Elf64_Dyn *d = (const Elf64_Dyn *)(f + sh[i].sh_offset);
        for (size_t k = 0; k < sh[i].sh_size / sizeof *d && d[k].d_tag != DT_NULL; k++) {
            if (d[k].d_tag != DT_NEEDED)
                continue;
            cr_assert(d[k].d_un.d_val < str->sh_size);
            const char *name = f + str->sh_offset + d[k].d_un.d_val;
            n += (size_t)snprintf(out + n, cap - n, "%.*s\n",
                                  (int)strnlen(name, str->sh_size - d[k].d_un.d_val), name);
            cr_assert_lt(n, cap, "too many NEEDED entries for this test");
        }
    }
    cr_assert(dynamic, "%s has no dynamic section", path);
    free(f);
    return out;
}

/* /proc/PID/maps of a live process (malloc'ed). */
static char *maps_of(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
    size_t len;
    char *m = jpt_slurp_file(path, &len);
    cr_assert_not_null(m, "%s", path);
    cr_assert(strstr(m, "libc.so") || strstr(m, "libc-"), "not a process's maps: %s", path);
    return m;
}

Test(lazylib, jettprofd_needs_neither_libcurl_nor_libsystemd)
{
    char *needed = needed_of(jpt_daemon_bin());
    cr_expect(strstr(needed, "libuv"), "the parser finds what is there: %s", needed);
    cr_expect(!strstr(needed, "libcurl"), "jettprofd links libcurl:\n%s", needed);
    cr_expect(!strstr(needed, "libsystemd"), "jettprofd links libsystemd:\n%s", needed);
    free(needed);
}

Test(lazylib, a_private_run_maps_neither_libcurl_nor_libsystemd)
{
    struct jpt_client c;
    int err_fd;
    pid_t pid = jpt_private(&c, &err_fd);
    cr_assert_gt(pid, 0);
    struct jpt_stream s;
    jpt_stream_init(&s, JP_MODE_CPU, 5, 20000);
    struct jp_ring ring;
    uint64_t run_id;
    /* the run started: the daemon is in its session, past everything it loads at start */
    cr_assert_eq(jpt_start_run(&c, &s, 1024, -1, 1000, &ring, &run_id), 0);
    char *m = maps_of(pid);
    cr_expect(!strstr(m, "libcurl"), "a private run mapped libcurl:\n%s", m);
    cr_expect(!strstr(m, "libsystemd"), "a private run mapped libsystemd:\n%s", m);
    free(m);
    jpt_client_close(&c); /* the client is gone: the daemon prints what it has and exits */
    jp_ring_unmap(&ring);
    free(jpt_slurp_fd(err_fd));
    close(err_fd);
    int st = tl_wait(pid, 10000);
    cr_expect(st >= 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %d", st);
}

Test(lazylib, serve_maps_libcurl_only_with_a_push)
{
    for (int push = 0; push < 2; push++) {
        const char *extra[] = {"--push", "http://127.0.0.1:1/ingest", NULL};
        struct jpt_served d;
        cr_assert_eq(jpt_serve_tmp(&d, push ? extra : NULL, NULL), 0);
        char *m = maps_of(d.pid);
        if (push)
            cr_expect(strstr(m, "libcurl"), "serve --push has not loaded libcurl:\n%s", m);
        else
            cr_expect(!strstr(m, "libcurl"), "serve mapped libcurl:\n%s", m);
        cr_expect(!strstr(m, "libsystemd"), "serve outside systemd mapped libsystemd:\n%s", m);
        free(m);
        tl_stop(d.pid, 10000);
        jpt_served_clean(&d);
    }
}

Test(lazylib, a_push_without_libcurl_fails_at_once_naming_it)
{
    cr_assert_eq(setenv("JETTPROFD_TEST_LIBCURL", "libjettprof-no-curl.so.4", 1), 0);
    char *dir = jpt_tmpdir();
    char sock[600], cap[600];
    snprintf(sock, sizeof sock, "%s/d.sock", dir);
    snprintf(cap, sizeof cap, "%s/none.jpcap", dir);
    char *serve[] = {(char *)jpt_daemon_bin(), (char *)"serve", (char *)"--socket", sock,
                     (char *)"--push", (char *)"http://127.0.0.1:1/ingest", NULL};
    char *export[] = {(char *)jpt_daemon_bin(), (char *)"export", cap, (char *)"--push",
                      (char *)"http://127.0.0.1:1/ingest", NULL};
    char *const *cmds[] = {serve, export};
    for (int i = 0; i < 2; i++) {
        char *out, *err;
        size_t len;
        int st = jpt_capture_cmd(cmds[i], &out, &len, &err);
        free(out);
        cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 1, "%s: status %d: %s", cmds[i][1], st,
                  err);
        char want[200];
        snprintf(want, sizeof want, "jettprofd %s: --push needs libcurl "
                 "(libjettprof-no-curl.so.4): libjettprof-no-curl.so.4: ", cmds[i][1]);
        cr_expect(strstr(err, want), "%s: wanted \"%s\" in: %s", cmds[i][1], want, err);
        free(err);
    }
    cr_expect_neq(access(sock, F_OK), 0, "serve never started serving");
    /* a library that is there but is not libcurl: what it lacks is named */
    cr_assert_eq(setenv("JETTPROFD_TEST_LIBCURL", "libc.so.6", 1), 0);
    char *out, *err;
    size_t len;
    int st = jpt_capture_cmd(serve, &out, &len, &err);
    free(out);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 1, "status %d: %s", st, err);
    cr_expect(strstr(err, "--push needs libcurl (libc.so.6): no curl_global_init: "), "%s", err);
    free(err);
    unsetenv("JETTPROFD_TEST_LIBCURL");
    rmdir(dir);
    free(dir);
}

Test(lazylib, systemd_asked_for_without_libsystemd_is_warned_about_and_served_without)
{
    cr_assert_eq(setenv("JETTPROFD_TEST_LIBSYSTEMD", "libjettprof-no-systemd.so.0", 1), 0);
    cr_assert_eq(setenv("LISTEN_FDS", "1", 1), 0);
    cr_assert_eq(setenv("LISTEN_PID", "1", 1), 0);
    cr_assert_eq(setenv("NOTIFY_SOCKET", "/nonexistent/notify", 1), 0);
    int errfd;
    struct jpt_served d;
    int r = jpt_serve_tmp(&d, NULL, &errfd);
    unsetenv("JETTPROFD_TEST_LIBSYSTEMD");
    unsetenv("LISTEN_FDS");
    unsetenv("LISTEN_PID");
    unsetenv("NOTIFY_SOCKET");
    cr_assert_eq(r, 0, "the daemon did not serve on its own socket");
    jpt_run_complete(d.sock, 4, 2000);
    tl_stop(d.pid, 10000);
    char *err = jpt_slurp_fd(errfd);
    close(errfd);
    cr_expect(strstr(err, "socket activation asked for, but libsystemd "
                          "(libjettprof-no-systemd.so.0): "), "%s", err);
    cr_expect(strstr(err, "cannot tell systemd READY=1 (libsystemd "
                          "(libjettprof-no-systemd.so.0): "), "%s", err);
    cr_expect(strstr(err, "cannot tell systemd STOPPING=1 (libsystemd "), "%s", err);
    free(err);
    jpt_served_clean(&d);
}
