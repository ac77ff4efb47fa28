/* libjettprof-agent.so exports exactly the public API: every dynamic symbol it defines is a
 * jettprof_* function declared in jettprof.h, and every one of those is there. The protocol and
 * engine code linked into it stays hidden. Reads `nm -D --defined-only` of the library named by
 * $JETTPROF_AGENT_SO. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const api[] = {
    "jettprof_alloc", "jettprof_alloc_id", "jettprof_enter", "jettprof_enter_site",
    "jettprof_finish",
    "jettprof_frame", "jettprof_free", "jettprof_last_reason", "jettprof_leave",
    "jettprof_pending_word", "jettprof_resize", "jettprof_result_release",
    "jettprof_safe_point", "jettprof_safe_point_slow", "jettprof_set_state",
    "jettprof_set_task", "jettprof_source", "jettprof_start", "jettprof_stmt",
    "jettprof_stmt_pos",
    "jettprof_strerror", "jettprof_thread_fast", "jettprof_thread_register",
    "jettprof_thread_unregister",
};
#define NAPI (sizeof api / sizeof api[0])

/* The next "address type name" line nm printed: 1, or 0 at the end. */
static int nm_next(FILE *p, char type[8], char name[400])
{
    char line[512], addr[64];
    while (fgets(line, sizeof line, p))
        if (sscanf(line, "%63s %7s %399s", addr, type, name) == 3)
            return 1;
    return 0;
}

Test(symbols, only_the_api_is_exported)
{
    const char *so = getenv("JETTPROF_AGENT_SO");
    cr_assert(so && *so, "JETTPROF_AGENT_SO is not set (run through meson test)");
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "nm -D --defined-only '%s'", so);
    FILE *p = popen(cmd, "r");
    cr_assert(p != NULL);
    int found[NAPI] = {0};
    char type[8], name[400];
    int symbols = 0;
    while (nm_next(p, type, name)) {
        symbols++;
        int known = 0;
        for (size_t i = 0; i < NAPI; i++) {
            if (strcmp(name, api[i]) == 0) {
                found[i] = 1;
                known = 1;
            }
        }
        cr_assert(known, "exported symbol outside the API: %s", name);
    }
    cr_assert_eq(pclose(p), 0, "nm failed on %s", so);
    cr_assert_gt(symbols, 0);
    for (size_t i = 0; i < NAPI; i++)
        cr_assert(found[i], "API function not exported: %s", api[i]);
}

/* Adds the global symbols an archive defines (nm types T D B R) to *names. */
static size_t defined_globals(const char *archive, char ***names, size_t n)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "nm --defined-only '%s'", archive);
    FILE *p = popen(cmd, "r");
    cr_assert(p != NULL);
    char type[8], name[400];
    while (nm_next(p, type, name)) {
        if (!strchr("TDBR", type[0]))
            continue;
        *names = realloc(*names, (n + 1u) * sizeof **names);
        cr_assert(*names && ((*names)[n] = strdup(name)));
        n++;
    }
    cr_assert_eq(pclose(p), 0, "nm failed on %s", archive);
    return n;
}

static int listed(char **names, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return 1;
    return 0;
}

/* The agent renders its own failure profile with the writers alone: neither the engine (its
 * API and its internals: interning, live tables, young window, budget, ...) nor the report
 * builder is linked into the shared library or the installed static archive. The forbidden
 * names are every global the engine's and the report builder's archives define. */
Test(symbols, neither_engine_nor_report_builder_inside)
{
    const char *forbidden[] = {getenv("JETTPROF_ENGINE_A"), getenv("JETTPROF_REPORT_A")};
    const char *libs[] = {getenv("JETTPROF_AGENT_SO"), getenv("JETTPROF_AGENT_A")};
    char **bad = NULL;
    size_t nbad = 0;
    for (size_t i = 0; i < 2; i++) {
        cr_assert(forbidden[i] && *forbidden[i], "archive paths not set (run through meson)");
        nbad = defined_globals(forbidden[i], &bad, nbad);
    }
    cr_assert(listed(bad, nbad, "jp_engine_new") && listed(bad, nbad, "jpe_cpu_settle") &&
                  listed(bad, nbad, "jp_report_build"),
              "the engine and report archives define what they should");
    for (size_t l = 0; l < 2; l++) {
        cr_assert(libs[l] && *libs[l], "library paths not set (run through meson)");
        char cmd[4200];
        snprintf(cmd, sizeof cmd, "nm --defined-only '%s'", libs[l]);
        FILE *p = popen(cmd, "r");
        cr_assert(p != NULL);
        char type[8], name[400];
        int symbols = 0;
        while (nm_next(p, type, name)) {
            symbols++;
            cr_expect(!listed(bad, nbad, name), "%s defines %s", libs[l], name);
        }
        cr_assert_eq(pclose(p), 0, "nm failed on %s", libs[l]);
        cr_assert_gt(symbols, 0, "%s defines nothing", libs[l]);
    }
    for (size_t i = 0; i < nbad; i++)
        free(bad[i]);
    free(bad);
}
