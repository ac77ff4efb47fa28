/* libjettprof-agent.so exports exactly the public API: every dynamic symbol it defines is a
 * jettprof_* function declared in jettprof.h, and every one of those is there. The protocol and
 * engine code linked into it stays hidden. Reads `nm -D --defined-only` of the library named by
 * $JETTPROF_AGENT_SO. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const api[] = {
    "jettprof_alloc", "jettprof_alloc_id", "jettprof_enter", "jettprof_finish",
    "jettprof_frame", "jettprof_free", "jettprof_last_reason", "jettprof_leave",
    "jettprof_pending_word", "jettprof_resize", "jettprof_result_release",
    "jettprof_safe_point", "jettprof_safe_point_slow", "jettprof_set_state",
    "jettprof_set_task", "jettprof_source", "jettprof_start", "jettprof_stmt",
    "jettprof_stmt_pos",
    "jettprof_strerror", "jettprof_thread_register", "jettprof_thread_unregister",
};
#define NAPI (sizeof api / sizeof api[0])

Test(symbols, only_the_api_is_exported)
{
    const char *so = getenv("JETTPROF_AGENT_SO");
    cr_assert(so && *so, "JETTPROF_AGENT_SO is not set (run through meson test)");
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "nm -D --defined-only '%s'", so);
    FILE *p = popen(cmd, "r");
    cr_assert(p != NULL);
    int found[NAPI] = {0};
    char line[512];
    int symbols = 0;
    while (fgets(line, sizeof line, p)) {
        char addr[64], type[8], name[400];
        if (sscanf(line, "%63s %7s %399s", addr, type, name) != 3)
            continue;
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
