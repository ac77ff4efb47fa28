/* The public header compiles alone as strict C99 (tests/agent/header_c99.c is built with
 * -std=c99 -pedantic -Wall -Wextra -Werror, so this suite does not link if it does not), and
 * the C99 view of every public struct is the same as the library's C11 view. */
#include <criterion/criterion.h>
#include <stddef.h>

#include "jettprof.h"

size_t header_c99_sizeof_config(void);
size_t header_c99_sizeof_frame_desc(void);
size_t header_c99_sizeof_result(void);
size_t header_c99_offsetof_excerpt(void);
size_t header_c99_offsetof_retention(void);
int header_c99_poll(jettprof_thread *t);
size_t header_c99_sizeof_fast(void);
size_t header_c99_sizeof_site(void);
size_t header_c99_offsetof_fast_nodes(void);
int header_c99_fast_calls(jettprof_thread *t, struct jettprof_site *site, uint32_t frame);

Test(header, c99_and_c11_agree_on_every_public_layout)
{
    cr_assert_eq(header_c99_sizeof_config(), sizeof(struct jettprof_config));
    cr_assert_eq(header_c99_sizeof_frame_desc(), sizeof(struct jettprof_frame_desc));
    cr_assert_eq(header_c99_sizeof_result(), sizeof(struct jettprof_result));
    cr_assert_eq(header_c99_offsetof_excerpt(), offsetof(struct jettprof_config, excerpt));
    cr_assert_eq(header_c99_offsetof_retention(),
                 offsetof(struct jettprof_config, retention_budget_bytes));
    cr_assert_eq(header_c99_sizeof_fast(), sizeof(struct jettprof_fast));
    cr_assert_eq(header_c99_sizeof_site(), sizeof(struct jettprof_site));
    cr_assert_eq(header_c99_offsetof_fast_nodes(), offsetof(struct jettprof_fast, nodes_));
    /* Every struct passed in starts with its size field. */
    cr_assert_eq(offsetof(struct jettprof_config, size), 0);
    cr_assert_eq(offsetof(struct jettprof_frame_desc, size), 0);
    cr_assert_eq(offsetof(struct jettprof_result, size), 0);
}

Test(header, capability_bits_match_the_wire_list)
{
    /* The header is standalone, so it repeats the protocol's values; they must not drift. */
    cr_assert_eq(JETTPROF_CAP_CPU_TICK_SOURCE, 1u << 0);
    cr_assert_eq(JETTPROF_CAP_SAFE_STACK_CAPTURE, 1u << 1);
    cr_assert_eq(JETTPROF_CAP_THREAD_REGISTRATION, 1u << 2);
    cr_assert_eq(JETTPROF_CAP_TASK_ATTRIBUTION, 1u << 3);
    cr_assert_eq(JETTPROF_CAP_SOURCE_SPANS, 1u << 4);
    cr_assert_eq(JETTPROF_CAP_PROCESS_CPU_TIME, 1u << 5);
    cr_assert_eq(JETTPROF_CAP_HEAP_ALLOCATION_HOOKS, 1u << 6);
    cr_assert_eq(JETTPROF_CAP_FREE_AND_RESIZE_EVENTS, 1u << 7);
}

/* The agent's test hooks (agent.h), declared here so this suite sees jettprof.h alone. */
int jp_agent_start_local(const struct jettprof_config *cfg, int with_timer, jettprof_run **out);
void jp_agent_local_end(jettprof_run *run, uint32_t termination);

Test(header, c99_inline_fast_paths_run_against_the_library)
{
    struct jettprof_config c = {
        .size = sizeof c, .mode = JETTPROF_MODE_MEMORY, .threshold_bp = 500, .limit = 10,
        .outputs = JETTPROF_OUT_TOON, .capabilities = 0xffu, .capture_fd = -1,
        .ring_slots = 1u << 12,
    };
    jettprof_run *run = NULL;
    cr_assert_eq(jp_agent_start_local(&c, 0, &run), 0);
    uint32_t src, frame;
    cr_assert_eq(jettprof_source(run, JETTPROF_ORIGIN_PROJECT, "h.jett", &src), 0);
    struct jettprof_frame_desc d = {.size = sizeof d, .function = "f", .source_id = src,
                                    .decl_line = 1, .decl_col = 1};
    cr_assert_eq(jettprof_frame(run, &d, &frame), 0);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    struct jettprof_site site;
    memset(&site, 0, sizeof site);
    /* The first round fills the site and arms the window through the plain calls; the second
     * takes the inline paths compiled as C99. */
    cr_assert_eq(header_c99_fast_calls(t, &site, frame), 0);
    cr_assert_eq(header_c99_fast_calls(t, &site, frame), 0);
    cr_assert_neq(site.stamp_, 0, "the site was filled");
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
}
