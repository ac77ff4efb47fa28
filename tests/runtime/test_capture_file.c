/* `jett run --profile-capture PATH`: the capture file is this run's own. A planted symbolic link
 * is never followed (its target stays as it was), an existing file is refused with a message
 * naming the path unless --profile-capture-overwrite is given, the program's own source files are
 * refused even then (compared by device and inode, so another name for the same file is caught
 * too), and a setup failure leaves no file behind that this run created. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "support.h"

#define PROGRAM                                                                                   \
    "fn main() {\n"                                                                               \
    "  var x = 0\n"                                                                               \
    "  for i in 0..20000 { x = x + i }\n"                                                         \
    "  print(\"user code ran\")\n"                                                                \
    "}\n"

static struct jt_run run_with(const char *dir, const char *const *opts)
{
    const char *argv[16] = {"run", "main.jett"};
    size_t n = 2;
    for (size_t i = 0; opts[i]; i++)
        argv[n++] = opts[i];
    argv[n] = NULL;
    struct jt_run r;
    jtt_run(dir, argv, &r);
    return r;
}

/* A fresh directory holding PROGRAM as main.jett; project_done removes it. */
static char *project_with_program(void)
{
    char *dir = jtt_tmpdir();
    jtt_write(dir, "main.jett", PROGRAM);
    return dir;
}

static void project_done(char *dir)
{
    jtt_rmtree(dir);
    free(dir);
}

static char *path_in(const char *dir, const char *rel)
{
    char *p = malloc(strlen(dir) + strlen(rel) + 2);
    sprintf(p, "%s/%s", dir, rel);
    return p;
}

/* The whole content of a file, malloc'ed and NUL-terminated; NULL when it cannot be read. */
static char *content(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *b = calloc(1, 1 << 20);
    size_t n = fread(b, 1, (1 << 20) - 1, f);
    b[n] = '\0';
    fclose(f);
    return b;
}

static void expect_content(const char *path, const char *want)
{
    char *got = content(path);
    cr_assert_not_null(got, "%s is gone", path);
    cr_expect_str_eq(got, want, "%s was changed", path);
    free(got);
}

/* The capture at path replays (the file is a real, complete capture). */
static void expect_replayable(const char *path)
{
    const char *argv[] = {"replay", path, NULL};
    struct jt_run rep;
    jtt_run_exe(getenv("JETTPROFD"), NULL, argv, &rep);
    cr_expect_eq(rep.status, 0, "replay: %s", rep.err);
    cr_expect(strstr(rep.out, "CPU profile"), "%s", rep.out);
    cr_expect_str_eq(rep.err, "", "a complete capture has no caveat");
    jtt_run_free(&rep);
}

Test(capture_file, a_planted_symlink_is_never_followed)
{
    char *dir = project_with_program();
    jtt_write(dir, "victim.txt", "another user's data\n");
    char *victim = path_in(dir, "victim.txt"), *link = path_in(dir, "shared.jpcap");
    cr_assert_eq(symlink(victim, link), 0);
    const char *plain[] = {"--profile", "--profile-capture", link, NULL};
    const char *overwrite[] = {"--profile", "--profile-capture", link,
                               "--profile-capture-overwrite", NULL};
    const char *const *variants[] = {plain, overwrite};
    for (int v = 0; v < 2; v++) {
        struct jt_run r = run_with(dir, variants[v]);
        cr_expect_eq(r.status, 4, "variant %d: exit %d: %s", v, r.status, r.err);
        cr_expect_null(strstr(r.err, "user code ran"), "variant %d: user code ran", v);
        cr_expect(strstr(r.err, link), "variant %d: the message names the path: %s", v, r.err);
        expect_content(victim, "another user's data\n");
        struct stat st;
        cr_expect_eq(lstat(link, &st), 0, "variant %d: the link itself is left alone", v);
        cr_expect(S_ISLNK(st.st_mode), "variant %d: still a link", v);
        jtt_run_free(&r);
    }
    /* A dangling link is not followed either: nothing appears at its target. */
    char *absent = path_in(dir, "absent.txt"), *dangling = path_in(dir, "dangling.jpcap");
    cr_assert_eq(symlink(absent, dangling), 0);
    const char *opts[] = {"--profile", "--profile-capture", dangling, NULL};
    struct jt_run r = run_with(dir, opts);
    cr_expect_eq(r.status, 4, "exit %d: %s", r.status, r.err);
    cr_expect_neq(access(absent, F_OK), 0, "the link was followed to create its target");
    jtt_run_free(&r);
    free(victim);
    free(link);
    free(absent);
    free(dangling);
    project_done(dir);
}

Test(capture_file, an_existing_file_is_refused_naming_it)
{
    char *dir = project_with_program();
    jtt_write(dir, "old.jpcap", "yesterday's capture\n");
    char *old = path_in(dir, "old.jpcap");
    const char *opts[] = {"--profile", "--profile-capture", old, NULL};
    struct jt_run r = run_with(dir, opts);
    cr_expect_eq(r.status, 4, "exit %d: %s", r.status, r.err);
    cr_expect_null(strstr(r.err, "user code ran"), "user code ran: %s", r.err);
    cr_expect(strstr(r.err, old), "the message names the path: %s", r.err);
    cr_expect(strstr(r.err, "already exists"), "%s", r.err);
    cr_expect(strstr(r.err, "--profile-capture-overwrite"), "says how to replace it: %s", r.err);
    expect_content(old, "yesterday's capture\n");
    jtt_run_free(&r);
    free(old);
    project_done(dir);
}

Test(capture_file, the_overwrite_flag_replaces_an_existing_file)
{
    char *dir = project_with_program();
    /* longer than any capture of this run: the old bytes must not survive past the new end */
    char big[200000];
    memset(big, 'z', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    jtt_write(dir, "old.jpcap", big);
    char *old = path_in(dir, "old.jpcap");
    const char *opts[] = {"--profile", "--profile-capture-overwrite", "--profile-capture", old,
                          NULL};
    struct jt_run r = run_with(dir, opts);
    cr_expect_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.out, "user code ran"), "%s", r.out);
    expect_replayable(old);
    jtt_run_free(&r);
    /* and a new file with the flag is created as usual */
    char *fresh = path_in(dir, "fresh.jpcap");
    const char *opts2[] = {"--profile", "--profile-capture", fresh, "--profile-capture-overwrite",
                           NULL};
    r = run_with(dir, opts2);
    cr_expect_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    struct stat st;
    cr_assert_eq(stat(fresh, &st), 0, "no capture file");
    cr_expect_eq(st.st_mode & 0777, 0600, "mode %o", st.st_mode & 0777);
    expect_replayable(fresh);
    jtt_run_free(&r);
    free(old);
    free(fresh);
    project_done(dir);
}

Test(capture_file, the_programs_own_sources_are_refused_even_with_overwrite)
{
    char *dir = jtt_tmpdir();
    const char *lib = "namespace app.lib\nfn twice(n: int) -> int {\n  return n * 2\n}\n";
    const char *main_src = "import \"lib.jett\"\n"
                           "fn main() {\n"
                           "  print(\"user code ran\")\n"
                           "  print(app.lib.twice(21))\n"
                           "}\n";
    jtt_write(dir, "jett.project", "");
    jtt_write(dir, "lib.jett", lib);
    jtt_write(dir, "main.jett", main_src);
    /* check the program runs at all, so a refusal below is the capture rule's */
    const char *none[] = {NULL};
    struct jt_run r = run_with(dir, none);
    cr_assert_eq(r.status, 0, "the fixture program fails: %s", r.err);
    cr_assert(strstr(r.out, "42"), "%s", r.out);
    jtt_run_free(&r);

    char *entry = path_in(dir, "main.jett"), *other = path_in(dir, "other-name.jpcap");
    char *libpath = path_in(dir, "lib.jett");
    cr_assert_eq(link(libpath, other), 0, "a second name for the imported source");
    const char *targets[] = {"main.jett", entry, other};
    for (int t = 0; t < 3; t++) {
        const char *opts[] = {"--profile", "--profile-capture", targets[t],
                              "--profile-capture-overwrite", NULL};
        r = run_with(dir, opts);
        cr_expect_eq(r.status, 4, "%s: exit %d: %s", targets[t], r.status, r.err);
        cr_expect_null(strstr(r.err, "user code ran"), "%s: user code ran", targets[t]);
        cr_expect(strstr(r.err, targets[t]), "the message names the path: %s", r.err);
        cr_expect(strstr(r.err, "source"), "%s", r.err);
        expect_content(entry, main_src);
        expect_content(libpath, lib);
        jtt_run_free(&r);
    }
    free(entry);
    free(other);
    free(libpath);
    project_done(dir);
}

Test(capture_file, a_setup_failure_leaves_no_file_behind)
{
    char *dir = project_with_program();
    char *cap = path_in(dir, "run.jpcap");
    char *saved = strdup(getenv("JETTPROFD") ? getenv("JETTPROFD") : "");
    setenv("JETTPROFD", "/nonexistent/jettprofd", 1);
    const char *opts[] = {"--profile", "--profile-capture", cap, NULL};
    struct jt_run r = run_with(dir, opts);
    cr_expect_eq(r.status, 4, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.err, "profiler: setup failure"), "%s", r.err);
    cr_expect_neq(access(cap, F_OK), 0, "the run left the capture file it created");
    jtt_run_free(&r);
    /* a file that was there before is not this run's to remove */
    jtt_write(dir, "run.jpcap", "older\n");
    const char *opts2[] = {"--profile", "--profile-capture", cap, "--profile-capture-overwrite",
                           NULL};
    r = run_with(dir, opts2);
    cr_expect_eq(r.status, 4, "exit %d: %s", r.status, r.err);
    cr_expect_eq(access(cap, F_OK), 0, "a file this run did not create was removed");
    jtt_run_free(&r);
    setenv("JETTPROFD", saved, 1);
    free(saved);
    free(cap);
    project_done(dir);
}

/* A capture that cannot be written whole never costs the run its profile or its exit status,
 * and is never silent: stderr says the capture failed and why. The daemon writes the capture,
 * so the fault is put there: a long-lived daemon started under `ulimit -f 1` (512 bytes, less
 * than any capture of the runs below: their loops are long enough for a capture packed by column
 * to pass it whatever the machine's load, as samples follow CPU time (some 1,300 samples at
 * about 1.4 bytes each); the daemon ignores SIGXFSZ, so a write past the limit fails
 * with EFBIG as a full disk fails with ENOSPC), the run attached to it through
 * JETTPROFD_SOCKET. The same run without the limit prints no such line. */
static struct jt_run run_beside_daemon(const char *dir, const char *cap, const char *limit)
{
    char script[8192];
    snprintf(script, sizeof script,
             "(%s exec \"$JETTPROFD\" serve --socket d.sock) & d=$!\n"
             "i=0; while [ ! -S d.sock ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done\n"
             "JETTPROFD_SOCKET=\"$PWD/d.sock\" \"%s\" run main.jett --profile-memory "
             "--profile-capture \"%s\"\n"
             "rc=$?; kill $d; wait $d; exit $rc\n",
             limit, jtt_jett(), cap);
    const char *argv[] = {"-c", script, NULL};
    struct jt_run r;
    jtt_run_exe("/bin/sh", dir, argv, &r);
    return r;
}

Test(capture_file, a_capture_that_fails_midway_is_reported_and_the_run_goes_on)
{
    char *dir = jtt_tmpdir();
    jtt_write(dir, "main.jett",
              "fn main() {\n"
              "  var keep = []\n"
              "  for i in 0..300000 { push(keep, \"row\" + str(i)) }\n"
              "  print(\"user code ran\")\n"
              "}\n");
    char *cap = path_in(dir, "run.jpcap");
    struct jt_run r = run_beside_daemon(dir, cap, "ulimit -f 1;");
    cr_expect_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.out, "user code ran"), "%s", r.out);
    cr_expect(strstr(r.err, "Memory profile"), "the live profile is printed: %s", r.err);
    cr_expect(strstr(r.err, "profiler: capture failed: File too large"), "%s", r.err);
    cr_expect(!strstr(r.err, "collector failure"), "%s", r.err);
    jtt_run_free(&r);

    unlink(cap);
    r = run_beside_daemon(dir, cap, "");
    cr_expect_eq(r.status, 0, "exit %d: %s", r.status, r.err);
    cr_expect(strstr(r.err, "Memory profile"), "%s", r.err);
    cr_expect(!strstr(r.err, "capture failed"), "%s", r.err);
    jtt_run_free(&r);
    free(cap);
    project_done(dir);
}
