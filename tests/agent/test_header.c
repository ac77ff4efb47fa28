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
