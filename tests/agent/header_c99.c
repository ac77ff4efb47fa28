/* jettprof.h alone, compiled as strict C99 (-std=c99 -pedantic -Wall -Wextra -Werror, see
 * meson.build): nothing may come before it, and it must need nothing else. The functions
 * report the layout this compiler sees, so the C11 test can compare it with the library's. */
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

size_t header_c99_sizeof_config(void)
{
    return sizeof(struct jettprof_config);
}

size_t header_c99_sizeof_frame_desc(void)
{
    return sizeof(struct jettprof_frame_desc);
}

size_t header_c99_sizeof_result(void)
{
    return sizeof(struct jettprof_result);
}

size_t header_c99_offsetof_excerpt(void)
{
    return offsetof(struct jettprof_config, excerpt);
}

size_t header_c99_offsetof_retention(void)
{
    return offsetof(struct jettprof_config, retention_budget_bytes);
}

/* The inline helpers compile in C99 too. */
int header_c99_poll(jettprof_thread *t)
{
    jettprof_poll(t, jettprof_pending_word(t));
    jettprof_stmt_set(jettprof_stmt_pos(t), 1, 1);
    return JETTPROF_API_VERSION;
}

size_t header_c99_sizeof_fast(void)
{
    return sizeof(struct jettprof_fast);
}

size_t header_c99_sizeof_site(void)
{
    return sizeof(struct jettprof_site);
}

size_t header_c99_offsetof_fast_nodes(void)
{
    return offsetof(struct jettprof_fast, nodes_);
}

/* The inline fast paths compile in C99 and, called from here, do what the library expects:
 * enter through a site, one of each memory hook, leave. Returns the first failure, else 0. */
int header_c99_fast_calls(jettprof_thread *t, struct jettprof_site *site, uint32_t frame)
{
    struct jettprof_fast *f = jettprof_thread_fast(t, JETTPROF_FAST_VERSION);
    uint64_t id = 0;
    int r;
    if (!f)
        return -1;
    r = jettprof_enter_fast(f, site, frame);
    if (r == 0)
        r = jettprof_alloc_fast(f, 16, &id);
    if (r == 0)
        r = jettprof_resize_fast(f, id, 16, 32);
    if (r == 0)
        r = jettprof_free_fast(f, id, 32);
    if (r == 0)
        r = jettprof_alloc_id_fast(f, 1000u + id, 8);
    jettprof_leave_fast(f);
    return r;
}
