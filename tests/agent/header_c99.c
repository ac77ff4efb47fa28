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
