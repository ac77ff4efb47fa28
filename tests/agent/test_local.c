/* The agent without a daemon: configuration and capability checks, interning, the call stack
 * and its truncation, samples, coalescing, allocation hooks, bounded waits on a full ring, and
 * the exact record stream a local run leaves in its ring (read back as the daemon would). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "stream.h"

/* ---- configuration ---- */

Test(config, cpu_needs_tick_source_and_safe_stacks)
{
    jettprof_run *run = (jettprof_run *)1;
    struct jettprof_config c = ta_config(JETTPROF_MODE_CPU);
    c.capabilities = 0xffu & ~JETTPROF_CAP_SAFE_STACK_CAPTURE;
    cr_assert_eq(jettprof_start(&c, &run), -ENOTSUP);
    cr_assert_null(run);
    cr_assert_str_eq(jettprof_strerror(-ENOTSUP), "profiler: backend unsupported");
    c.capabilities = 0xffu & ~JETTPROF_CAP_CPU_TICK_SOURCE;
    cr_assert_eq(jettprof_start(&c, &run), -ENOTSUP);
    cr_assert(strstr(jettprof_last_reason(), "cpu_tick_source"));
}

Test(config, memory_needs_hooks_and_free_resize_events)
{
    jettprof_run *run = NULL;
    struct jettprof_config c = ta_config(JETTPROF_MODE_MEMORY);
    c.capabilities = JETTPROF_CAP_HEAP_ALLOCATION_HOOKS;
    cr_assert_eq(jettprof_start(&c, &run), -ENOTSUP);
    c.capabilities = JETTPROF_CAP_FREE_AND_RESIZE_EVENTS;
    cr_assert_eq(jettprof_start(&c, &run), -ENOTSUP);
    /* CPU capabilities do not make memory mode supported. */
    c.capabilities = JETTPROF_CAP_CPU_TICK_SOURCE | JETTPROF_CAP_SAFE_STACK_CAPTURE;
    cr_assert_eq(jettprof_start(&c, &run), -ENOTSUP);
}

Test(config, capabilities_are_checked_before_fields)
{
    jettprof_run *run = NULL;
    struct jettprof_config c = ta_config(JETTPROF_MODE_CPU);
    c.capabilities = 0;
    c.rate_hz = 5000;
    cr_assert_eq(jettprof_start(&c, &run), -ENOTSUP);
}

Test(config, rejects_each_bad_field)
{
    /* Each mutation alone must be rejected with -EINVAL and a reason. */
    struct jettprof_config base = ta_config(JETTPROF_MODE_CPU);
    struct jettprof_config v[16];
    const char *names[16];
    int n = 0;
    v[n] = base, v[n].size = sizeof base - 4, names[n++] = "size";
    v[n] = base, v[n].mode = 3, names[n++] = "mode";
    v[n] = base, v[n].rate_hz = 0, names[n++] = "rate 0";
    v[n] = base, v[n].rate_hz = 1001, names[n++] = "rate 1001";
    v[n] = base, v[n].threshold_bp = 10001, names[n++] = "threshold";
    v[n] = base, v[n].limit = 0, names[n++] = "limit 0";
    v[n] = base, v[n].limit = 101, names[n++] = "limit 101";
    v[n] = base, v[n].outputs = 8, names[n++] = "outputs";
    v[n] = base, v[n].capabilities = 0x3ffu, names[n++] = "capabilities";
    v[n] = base, v[n].capture_fd = -2, names[n++] = "capture_fd -2";
    v[n] = base, v[n].capture_fd = 1000, names[n++] = "capture_fd closed";
    v[n] = base, v[n].ring_slots = 100, names[n++] = "ring_slots not pow2";
    v[n] = base, v[n].ring_slots = 32, names[n++] = "ring_slots too small";
    v[n] = ta_config(JETTPROF_MODE_MEMORY), v[n].rate_hz = 1000, names[n++] = "memory rate";
    v[n] = base, v[n].stall_ms = 600001, names[n++] = "stall_ms";
    v[n] = base, v[n].size = JETTPROF_CONFIG_SIZE_V1 - 8, names[n++] = "size below v1";
    for (int i = 0; i < n; i++) {
        jettprof_run *run = NULL;
        jp_set_reason("");
        cr_assert_eq(jettprof_start(&v[i], &run), -EINVAL, "%s accepted", names[i]);
        cr_assert_null(run);
        cr_assert_neq(jettprof_last_reason()[0], '\0', "%s gave no reason", names[i]);
    }
    cr_assert_eq(jettprof_start(NULL, NULL), -EINVAL);
    cr_assert_str_eq(jettprof_strerror(-EINVAL), "profiler: invalid argument");
}

Test(config, read_only_capture_fd_is_rejected)
{
    int fd = open("/dev/null", O_RDONLY);
    struct jettprof_config c = ta_config(JETTPROF_MODE_CPU);
    c.capture_fd = fd;
    jettprof_run *run = NULL;
    cr_assert_eq(jettprof_start(&c, &run), -EINVAL);
    cr_assert_str_eq(jettprof_last_reason(), "capture_fd is not open for writing");
    close(fd);
}

Test(config, a_larger_struct_needs_a_zero_tail)
{
    struct {
        struct jettprof_config c;
        uint64_t future;
    } big = {ta_config(JETTPROF_MODE_MEMORY), 0};
    big.c.size = sizeof big;
    jettprof_run *run = NULL;
    cr_assert_eq(jp_agent_start_local(&big.c, 0, &run), 0);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    big.future = 1;
    cr_assert_eq(jp_agent_start_local(&big.c, 0, &run), -EINVAL);
}

/* A caller compiled against the first version of the struct (no stall_ms) still starts, with
 * the default stall bound; the environment sets it when the struct does not. */
Test(config, a_first_version_struct_gets_the_default_stall_bound)
{
    struct jettprof_config c = ta_config(JETTPROF_MODE_MEMORY);
    c.stall_ms = 123; /* past the v1 size: must not be read */
    c.size = JETTPROF_CONFIG_SIZE_V1;
    jettprof_run *run = NULL;
    unsetenv("JETT_PROFILE_STALL_MS");
    cr_assert_eq(jp_agent_start_local(&c, 0, &run), 0, "%s", jettprof_last_reason());
    cr_assert_eq(run->cfg.stall_ms, 1000);
    cr_assert_eq(run->stall_ns, 1000000000u);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    setenv("JETT_PROFILE_STALL_MS", "250", 1);
    cr_assert_eq(jp_agent_start_local(&c, 0, &run), 0);
    cr_assert_eq(run->cfg.stall_ms, 250, "the environment's bound");
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    c = ta_config(JETTPROF_MODE_MEMORY);
    c.stall_ms = 40;
    cr_assert_eq(jp_agent_start_local(&c, 0, &run), 0);
    cr_assert_eq(run->cfg.stall_ms, 40, "the struct's bound wins over the environment");
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    unsetenv("JETT_PROFILE_STALL_MS");
}

Test(config, a_bad_stall_bound_in_the_environment_is_refused_by_name)
{
    static const char *const bad_values[] = {"0", "600001", "-5", "1e3", "12ms", " 100",
                                             "99999999999999999999999"};
    struct jettprof_config c = ta_config(JETTPROF_MODE_MEMORY);
    for (size_t i = 0; i < sizeof bad_values / sizeof bad_values[0]; i++) {
        setenv("JETT_PROFILE_STALL_MS", bad_values[i], 1);
        jettprof_run *run = NULL;
        cr_assert_eq(jp_agent_start_local(&c, 0, &run), -EINVAL, "%s accepted", bad_values[i]);
        cr_assert_null(run);
        cr_assert(strstr(jettprof_last_reason(), "JETT_PROFILE_STALL_MS") != NULL, "%s: %s",
                  bad_values[i], jettprof_last_reason());
    }
    setenv("JETT_PROFILE_STALL_MS", "600000", 1);
    jettprof_run *run = NULL;
    cr_assert_eq(jp_agent_start_local(&c, 0, &run), 0, "the largest bound is accepted");
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    unsetenv("JETT_PROFILE_STALL_MS");
}

Test(config, setup_messages_are_stable)
{
    cr_assert_str_eq(jettprof_strerror(-ENOEXEC),
                     "profiler: setup failure: cannot start jettprofd");
    cr_assert_str_eq(jettprof_strerror(-ECONNREFUSED),
                     "profiler: setup failure: cannot connect to jettprofd");
    cr_assert_str_eq(jettprof_strerror(-ETIMEDOUT),
                     "profiler: setup failure: jettprofd did not answer");
    cr_assert_str_eq(jettprof_strerror(-EPROTO),
                     "profiler: setup failure: jettprofd handshake failed");
    cr_assert_str_eq(jettprof_strerror(-ECONNABORTED),
                     "profiler: setup failure: jettprofd refused the run");
    cr_assert_str_eq(jettprof_strerror(-EMFILE), "profiler: setup failure");
    cr_assert_str_eq(jettprof_strerror(0), "profiler: no error");
}

/* ---- sources and frames ---- */

Test(sources, absolute_and_unnormalised_paths_are_rejected)
{
    struct stream s;
    jettprof_run *run = ta_local_run(JETTPROF_MODE_CPU, &s);
    static const struct {
        const char *path, *why;
    } bad[] = {
        {"/home/user/app/src/main.jett", "source path is absolute"},
        {"/main.jett", "source path is absolute"},
        {"", "source path is empty"},
        {"~/src/a.jett", "source path is relative to a home directory"},
        {"C:/src/a.jett", "source path starts with a drive letter"},
        {"src\\a.jett", "source path contains a backslash"},
        {"src//a.jett", "source path has an empty segment"},
        {"src/", "source path has an empty segment"},
        {"./a.jett", "source path has a '.' or '..' segment"},
        {"src/../../etc/passwd", "source path has a '.' or '..' segment"},
        {"src/..", "source path has a '.' or '..' segment"},
        {"src/a\n.jett", "source path contains a control character"},
        {"src/\xc3\x28.jett", "source path is not valid UTF-8"},
        {"src/\xed\xa0\x80.jett", "source path is not valid UTF-8"}, /* a surrogate */
        {"src/\xc0\xaf.jett", "source path is not valid UTF-8"},     /* overlong '/' */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint32_t id = 77;
        cr_assert_eq(jettprof_source(run, JETTPROF_ORIGIN_PROJECT, bad[i].path, &id), -EINVAL,
                     "accepted %s", bad[i].path);
        cr_assert_str_eq(jettprof_last_reason(), bad[i].why, "%s", bad[i].path);
        cr_assert_eq(id, 77, "id written on failure");
    }
    char longp[1100];
    memset(longp, 'a', sizeof longp - 1);
    longp[sizeof longp - 1] = 0;
    uint32_t id;
    cr_assert_eq(jettprof_source(run, JETTPROF_ORIGIN_PROJECT, longp, &id), -EINVAL);
    cr_assert_eq(jettprof_source(run, 0, "src/a.jett", &id), -EINVAL);
    cr_assert_eq(jettprof_source(run, 4, "src/a.jett", &id), -EINVAL);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    ta_stream_drain(&s);
    cr_assert_eq(ta_stream_count(&s, JP_REC_SOURCE_DEF), 0, "a rejected path reached the stream");
    ta_stream_free(&s);
}

Test(sources, same_origin_and_path_is_one_id)
{
    struct stream s;
    jettprof_run *run = ta_local_run(JETTPROF_MODE_CPU, &s);
    uint32_t a, b, c, d;
    cr_assert_eq(jettprof_source(run, JETTPROF_ORIGIN_PROJECT, "src/a.jett", &a), 0);
    cr_assert_eq(jettprof_source(run, JETTPROF_ORIGIN_DEPENDENCY, "src/a.jett", &b), 0);
    cr_assert_eq(jettprof_source(run, JETTPROF_ORIGIN_PROJECT, "src/a.jett", &c), 0);
    cr_assert_eq(jettprof_source(run, JETTPROF_ORIGIN_STDLIB, "stdlib/list.jett", &d), 0);
    cr_assert_eq(a, 1);
    cr_assert_eq(b, 2);
    cr_assert_eq(c, 1);
    cr_assert_eq(d, 3);
    /* Many sources: the set grows and ids stay dense. */
    for (int i = 0; i < 1000; i++) {
        char p[64];
        snprintf(p, sizeof p, "src/gen/m%d.jett", i);
        uint32_t id;
        cr_assert_eq(jettprof_source(run, JETTPROF_ORIGIN_PROJECT, p, &id), 0);
        cr_assert_eq(id, 4u + (uint32_t)i);
    }
    uint32_t again;
    cr_assert_eq(jettprof_source(run, JETTPROF_ORIGIN_PROJECT, "src/gen/m500.jett", &again), 0);
    cr_assert_eq(again, 504);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    ta_stream_drain(&s);
    cr_assert_eq(ta_stream_count(&s, JP_REC_SOURCE_DEF), 1003);
    const struct jp_rec_source_def *sd = ta_stream_nth(&s, JP_REC_SOURCE_DEF, 1);
    cr_assert_eq(sd->source_id, 2);
    cr_assert_eq(sd->origin, JP_ORIGIN_DEPENDENCY);
    cr_assert_eq(sd->path_len, strlen("src/a.jett"));
    cr_assert_eq(memcmp(sd + 1, "src/a.jett", sd->path_len), 0);
    ta_stream_free(&s);
}

Test(frames, interning_is_by_full_identity)
{
    struct stream s;
    jettprof_run *run = ta_local_run(JETTPROF_MODE_CPU, &s);
    uint32_t f1 = ta_frame(run, "app.core", "run", 10);
    uint32_t f2 = ta_frame(run, "app.core", "run", 10);
    uint32_t f3 = ta_frame(run, "app.core", "run", 11); /* another declaration */
    uint32_t f4 = ta_frame(run, "app.other", "run", 10);
    cr_assert_eq(f1, 1);
    cr_assert_eq(f2, 1);
    cr_assert_eq(f3, 2);
    cr_assert_eq(f4, 3);
    struct jettprof_frame_desc d = {.size = sizeof d, .function = "<runtime>",
                                    .kind = JETTPROF_FRAME_RUNTIME_BUCKET, .decl_line = 5,
                                    .decl_end = 9};
    uint32_t f5;
    cr_assert_eq(jettprof_frame(run, &d, &f5), 0);
    cr_assert_eq(f5, 4);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    ta_stream_drain(&s);
    cr_assert_eq(ta_stream_count(&s, JP_REC_FRAME_DEF), 4);
    const struct jp_rec_frame_def *fd = ta_stream_nth(&s, JP_REC_FRAME_DEF, 3);
    cr_assert_eq(fd->frame_id, 4);
    cr_assert_eq(fd->kind, JP_FRAME_RUNTIME_BUCKET);
    cr_assert_eq(fd->source_id, 0);
    /* No source: the declaration is unavailable, whatever the runtime passed. */
    cr_assert_eq(fd->decl_line, 0);
    cr_assert_eq(fd->decl_end, 0);
    cr_assert_eq(fd->ns_len, 6);
    cr_assert_eq(memcmp(fd + 1, "<root><runtime>", 15), 0);
    fd = ta_stream_nth(&s, JP_REC_FRAME_DEF, 0);
    cr_assert_eq(fd->decl_line, 10);
    cr_assert_eq(fd->decl_start, 1000);
    cr_assert_eq(fd->source_id, 1);
    ta_stream_free(&s);
}

Test(frames, rejects_bad_descriptions)
{
    struct stream s;
    jettprof_run *run = ta_local_run(JETTPROF_MODE_CPU, &s);
    uint32_t src;
    cr_assert_eq(jettprof_source(run, JETTPROF_ORIGIN_PROJECT, "a.jett", &src), 0);
    struct jettprof_frame_desc ok = {.size = sizeof ok, .function = "f", .source_id = src};
    struct jettprof_frame_desc v[8];
    int n = 0;
    char longname[300];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = 0;
    v[n] = ok, v[n].size = 8, n++;
    v[n] = ok, v[n].kind = JP_FRAME_TRUNCATED, n++; /* the agent's own */
    v[n] = ok, v[n].function = NULL, n++;
    v[n] = ok, v[n].function = "", n++;
    v[n] = ok, v[n].function = longname, n++;
    v[n] = ok, v[n].ns = "bad\xff", n++;
    v[n] = ok, v[n].source_id = src + 1, n++; /* never interned */
    v[n] = ok, v[n].decl_start = 10, v[n].decl_end = 5, n++;
    for (int i = 0; i < n; i++) {
        uint32_t id = 0;
        cr_assert_eq(jettprof_frame(run, &v[i], &id), -EINVAL, "case %d accepted", i);
        cr_assert_eq(id, 0);
    }
    uint32_t id;
    cr_assert_eq(jettprof_frame(run, &ok, &id), 0);
    cr_assert_eq(id, 1, "rejected frames used ids");
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    ta_stream_free(&s);
}

Test(frames, without_source_spans_declarations_are_unavailable)
{
    struct jettprof_config c = ta_config(JETTPROF_MODE_CPU);
    c.capabilities &= ~JETTPROF_CAP_SOURCE_SPANS;
    jettprof_run *run;
    cr_assert_eq(jp_agent_start_local(&c, 0, &run), 0);
    struct stream s;
    ta_stream_open(&s, run);
    uint32_t f = ta_frame(run, "m", "f", 3);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    cr_assert_eq(jettprof_enter(t, f), 0);
    jettprof_stmt(t, 4, 5);
    jp_timer_tick(run);
    jettprof_safe_point(t);
    jettprof_leave(t);
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    ta_stream_drain(&s);
    const struct jp_rec_frame_def *fd = ta_stream_nth(&s, JP_REC_FRAME_DEF, 0);
    cr_assert_eq(fd->decl_line, 0);
    const struct jp_rec_cpu_sample *cs = ta_stream_nth(&s, JP_REC_CPU_SAMPLE, 0);
    cr_assert_eq(cs->flags & JP_SAMPLE_HAS_STMT, 0);
    cr_assert_eq(cs->stmt_line, 0);
    ta_stream_free(&s);
}

/* ---- call stacks ---- */

/* The node the thread is at, as the next allocation record reports it. */
Test(stack, nodes_are_interned_once_per_caller_and_frame)
{
    struct stream s;
    jettprof_run *run = ta_local_run(JETTPROF_MODE_MEMORY, &s);
    uint32_t fa = ta_frame(run, "m", "a", 1), fb = ta_frame(run, "m", "b", 2);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 7, &t), 0);
    cr_assert_eq(ta_node_now(t, &s), 0, "no frame: no stack");
    cr_assert_eq(jettprof_enter(t, fa), 0);
    cr_assert_eq(ta_node_now(t, &s), 1);
    cr_assert_eq(jettprof_enter(t, fb), 0);
    cr_assert_eq(ta_node_now(t, &s), 2);
    jettprof_leave(t);
    cr_assert_eq(ta_node_now(t, &s), 1, "leave returns to the caller's node");
    cr_assert_eq(jettprof_enter(t, fb), 0);
    cr_assert_eq(ta_node_now(t, &s), 2, "the same (caller, frame) is the same node");
    jettprof_leave(t);
    jettprof_leave(t);
    cr_assert_eq(jettprof_enter(t, fb), 0); /* b as a root: another node */
    cr_assert_eq(ta_node_now(t, &s), 3);
    jettprof_leave(t);
    jettprof_leave(t); /* unbalanced: ignored */
    cr_assert_eq(ta_node_now(t, &s), 0);
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    ta_stream_drain(&s);
    cr_assert_eq(ta_stream_count(&s, JP_REC_NODE_DEF), 3);
    const struct jp_rec_node_def *n = ta_stream_nth(&s, JP_REC_NODE_DEF, 1);
    cr_assert_eq(n->node_id, 2);
    cr_assert_eq(n->parent, 1);
    cr_assert_eq(n->frame_id, fb);
    n = ta_stream_nth(&s, JP_REC_NODE_DEF, 2);
    cr_assert_eq(n->parent, 0);
    cr_assert_eq(n->frame_id, fb);
    /* Every definition comes before the first record that names it. */
    size_t seen_nodes = 0;
    for (size_t i = 0; i < s.n; i++) {
        const struct jp_rec_hdr *h = ta_rec_at(&s, i);
        if (h->type == JP_REC_NODE_DEF)
            seen_nodes++;
        if (h->type == JP_REC_ALLOC)
            cr_assert_leq(((const struct jp_rec_alloc *)(const void *)h)->node, seen_nodes);
    }
    ta_stream_free(&s);
}

Test(stack, deeper_than_128_keeps_127_frames_then_truncated)
{
    struct stream s;
    jettprof_run *run = ta_local_run(JETTPROF_MODE_MEMORY, &s);
    uint32_t f = ta_frame(run, "m", "rec", 1);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    for (int i = 0; i < 128; i++)
        cr_assert_eq(jettprof_enter(t, f), 0);
    uint32_t at128 = ta_node_now(t, &s);
    cr_assert_eq(at128, 128, "exactly 128 frames are not truncated");
    cr_assert_eq(ta_stream_count(&s, JP_REC_FRAME_DEF), 1);
    for (int i = 128; i < 200; i++)
        cr_assert_eq(jettprof_enter(t, f), 0);
    uint32_t deep = ta_node_now(t, &s);
    cr_assert_eq(deep, 129);
    /* The truncated node hangs under the 127th frame and names the agent's frame. */
    const struct jp_rec_node_def *n = ta_stream_nth(&s, JP_REC_NODE_DEF, 128);
    cr_assert_eq(n->node_id, 129);
    cr_assert_eq(n->parent, 127);
    const struct jp_rec_frame_def *fd = ta_stream_nth(&s, JP_REC_FRAME_DEF, 1);
    cr_assert_eq(fd->frame_id, n->frame_id);
    cr_assert_eq(fd->kind, JP_FRAME_TRUNCATED);
    cr_assert_eq(fd->source_id, 0);
    cr_assert_eq(memcmp(fd + 1, "<root><truncated-stack>", 23), 0);
    /* Deeper enters stay on it; leaving unwinds exactly. */
    for (int i = 200; i > 129; i--)
        jettprof_leave(t);
    cr_assert_eq(ta_node_now(t, &s), 129);
    jettprof_leave(t); /* back to 128 frames: the real 128th node again */
    cr_assert_eq(ta_node_now(t, &s), 128);
    jettprof_leave(t);
    cr_assert_eq(ta_node_now(t, &s), 127);
    cr_assert_eq(jettprof_enter(t, f), 0);
    cr_assert_eq(jettprof_enter(t, f), 0);
    cr_assert_eq(ta_node_now(t, &s), 129, "the truncated node is reused");
    cr_assert_eq(ta_stream_count(&s, JP_REC_NODE_DEF), 129);
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    ta_stream_free(&s);
}

/* Frame 0 is no frame at any depth, the root's too, where (root, 0) packs to the key 0 that an
 * untouched cache entry holds: neither the plain call nor a call site may take it for a hit. */
Test(stack, frame_zero_at_the_root_is_refused)
{
    struct stream s;
    jettprof_run *run = ta_local_run(JETTPROF_MODE_CPU, &s);
    uint32_t f = ta_frame(run, "m", "f", 1);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    cr_assert_eq(jettprof_enter(t, 0), -EINVAL, "plain enter of frame 0 at the root");
    jettprof_leave(t);
    struct jettprof_fast *fp = jettprof_thread_fast(t, JETTPROF_FAST_VERSION);
    struct jettprof_site site = {0};
    cr_assert_eq(jettprof_enter(t, f), 0); /* node 1: the site is filled under caller 1 */
    cr_assert_eq(jettprof_enter_fast(fp, &site, f), 0);
    jettprof_leave_fast(fp);
    jettprof_leave_fast(fp);
    cr_assert_eq(jettprof_enter_fast(fp, &site, 0), -EINVAL,
                 "a site's enter of frame 0 at the root");
    jettprof_leave_fast(fp);
    cr_assert_eq(jettprof_enter(t, f), 0);
    cr_assert_eq(jettprof_enter_fast(fp, &site, 0), -EINVAL, "and under a caller");
    jettprof_leave_fast(fp);
    jettprof_leave_fast(fp);
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    ta_stream_free(&s);
}

Test(stack, unknown_frame_is_an_unavailable_level)
{
    struct stream s;
    jettprof_run *run = ta_local_run(JETTPROF_MODE_CPU, &s);
    uint32_t f = ta_frame(run, "m", "f", 1);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    cr_assert_eq(jettprof_enter(t, f), 0);
    cr_assert_eq(jettprof_enter(t, 99), -EINVAL);
    cr_assert_eq(jettprof_enter(t, 0), -EINVAL);
    cr_assert_eq(jettprof_enter(t, f), 0, "below an unavailable level nothing is interned");
    jp_timer_tick(run);
    jettprof_safe_point(t);
    jettprof_leave(t);
    jettprof_leave(t);
    jettprof_leave(t);
    jp_timer_tick(run);
    jettprof_safe_point(t);
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    ta_stream_drain(&s);
    cr_assert_eq(ta_stream_count(&s, JP_REC_NODE_DEF), 1);
    const struct jp_rec_cpu_sample *a = ta_stream_nth(&s, JP_REC_CPU_SAMPLE, 0);
    cr_assert_eq(a->state, JP_STATE_UNAVAILABLE, "never charged to the caller");
    cr_assert_eq(a->node, 0);
    const struct jp_rec_cpu_sample *b = ta_stream_nth(&s, JP_REC_CPU_SAMPLE, 1);
    cr_assert_eq(b->state, JP_STATE_JETT, "the stack is whole again after the leaves");
    cr_assert_eq(b->node, 1);
    ta_stream_free(&s);
}

/* ---- CPU samples ---- */

Test(cpu, ticks_coalesce_into_one_pending_request)
{
    struct stream s;
    jettprof_run *run = ta_local_run(JETTPROF_MODE_CPU, &s);
    uint32_t f = ta_frame(run, "m", "f", 1);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 3, &t), 0);
    const uint32_t *pw = jettprof_pending_word(t);
    cr_assert_eq(jettprof_enter(t, f), 0);
    jettprof_stmt(t, 12, 4);
    cr_assert_eq(*pw, 0);
    for (int i = 0; i < 5; i++)
        jp_timer_tick(run);
    cr_assert_eq(*pw, 1);
    jettprof_poll(t, pw);
    cr_assert_eq(*pw, 0);
    jettprof_poll(t, pw); /* nothing pending: no second sample */
    jp_timer_tick(run);
    jettprof_safe_point(t);
    jettprof_leave(t);
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    ta_stream_drain(&s);
    cr_assert_eq(ta_stream_count(&s, JP_REC_CPU_SAMPLE), 2);
    const struct jp_rec_cpu_sample *a = ta_stream_nth(&s, JP_REC_CPU_SAMPLE, 0);
    cr_assert_eq(a->requested_tick, 1, "the sample names the tick that raised the request");
    cr_assert_eq(a->state, JP_STATE_JETT);
    cr_assert_eq(a->node, 1);
    cr_assert_eq(a->flags, JP_SAMPLE_HAS_STMT);
    cr_assert_eq(a->stmt_line, 12);
    cr_assert_eq(a->stmt_col, 4);
    cr_assert_eq(((const struct jp_rec_cpu_sample *)ta_stream_nth(&s, JP_REC_CPU_SAMPLE, 1))
                     ->requested_tick,
                 6);
    const struct jp_rec_counters *c = ta_stream_last(&s, JP_REC_COUNTERS);
    cr_assert_eq(c->requested_ticks, 6);
    cr_assert_eq(c->coalesced_ticks, 4);
    cr_assert_eq(c->dropped_ticks, 0);
    /* The thread's identity precedes its first sample. */
    const struct jp_rec_exec *e = ta_stream_nth(&s, JP_REC_EXEC, 0);
    cr_assert_eq(e->runtime_thread_id, 3);
    cr_assert_eq(e->task_id, JP_ID_UNAVAILABLE);
    cr_assert_eq(ta_stream_count(&s, JP_REC_EXEC), 1, "an unchanged identity is not repeated");
    ta_stream_free(&s);
}

Test(cpu, a_late_timer_counts_every_elapsed_tick)
{
    struct stream s;
    jettprof_run *run = ta_local_run(JETTPROF_MODE_CPU, &s);
    uint32_t f = ta_frame(run, "m", "f", 1);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    cr_assert_eq(jettprof_enter(t, f), 0);
    jp_timer_ticks(run, 4); /* woke four periods after the last tick: one request, 3 folded */
    jettprof_safe_point(t);
    jettprof_set_state(t, JETTPROF_STATE_WAITING);
    jp_timer_ticks(run, 3); /* late while waiting: all three are waiting ticks */
    jettprof_set_state(t, JETTPROF_STATE_JETT);
    jettprof_leave(t);
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    ta_stream_drain(&s);
    cr_assert_eq(ta_stream_count(&s, JP_REC_CPU_SAMPLE), 1);
    const struct jp_rec_cpu_sample *a = ta_stream_nth(&s, JP_REC_CPU_SAMPLE, 0);
    cr_assert_eq(a->requested_tick, 4, "the request names the latest elapsed tick");
    const struct jp_rec_counters *c = ta_stream_last(&s, JP_REC_COUNTERS);
    cr_assert_eq(c->requested_ticks, 7);
    cr_assert_eq(c->coalesced_ticks, 3);
    cr_assert_eq(c->waiting_ticks, 3);
    ta_stream_free(&s);
}

Test(cpu, waiting_and_runtime_ticks_are_not_charged_to_the_caller)
{
    struct stream s;
    jettprof_run *run = ta_local_run(JETTPROF_MODE_CPU, &s);
    uint32_t f = ta_frame(run, "m", "f", 1);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 3, &t), 0);
    cr_assert_eq(jettprof_enter(t, f), 0);
    jp_timer_tick(run); /* raised while running Jett code ... */
    jettprof_set_state(t, JETTPROF_STATE_WAITING); /* ... answered before the wait */
    cr_assert_eq(*jettprof_pending_word(t), 0);
    for (int i = 0; i < 3; i++)
        jp_timer_tick(run);
    cr_assert_eq(*jettprof_pending_word(t), 0, "a waiting thread gets no request");
    jettprof_set_state(t, JETTPROF_STATE_RUNTIME);
    for (int i = 0; i < 2; i++)
        jp_timer_tick(run);
    jettprof_set_state(t, JETTPROF_STATE_JETT);
    jettprof_set_state(t, 9); /* not a state: ignored */
    jettprof_leave(t);
    jp_timer_tick(run); /* no frame at all: runtime work */
    jettprof_safe_point(t);
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    ta_stream_drain(&s);
    cr_assert_eq(ta_stream_count(&s, JP_REC_CPU_SAMPLE), 2);
    const struct jp_rec_cpu_sample *a = ta_stream_nth(&s, JP_REC_CPU_SAMPLE, 0);
    cr_assert_eq(a->state, JP_STATE_JETT);
    cr_assert_eq(a->node, 1);
    const struct jp_rec_cpu_sample *b = ta_stream_nth(&s, JP_REC_CPU_SAMPLE, 1);
    cr_assert_eq(b->state, JP_STATE_RUNTIME);
    cr_assert_eq(b->node, 0);
    const struct jp_rec_counters *c = ta_stream_last(&s, JP_REC_COUNTERS);
    cr_assert_eq(c->requested_ticks, 7);
    cr_assert_eq(c->waiting_ticks, 3);
    cr_assert_eq(c->runtime_ticks, 2);
    ta_stream_free(&s);
}

Test(cpu, statement_is_the_leafs_and_restored_on_return)
{
    struct stream s;
    jettprof_run *run = ta_local_run(JETTPROF_MODE_CPU, &s);
    uint32_t fa = ta_frame(run, "m", "a", 1), fb = ta_frame(run, "m", "b", 2);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    cr_assert_eq(jettprof_enter(t, fa), 0);
    jettprof_stmt(t, 5, 2);
    cr_assert_eq(jettprof_enter(t, fb), 0);
    jp_timer_tick(run);
    jettprof_safe_point(t); /* in b before any statement: no position */
    jettprof_stmt(t, 20, 3);
    jp_timer_tick(run);
    jettprof_safe_point(t);
    jettprof_leave(t);
    jp_timer_tick(run);
    jettprof_safe_point(t); /* back in a: its statement again */
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    ta_stream_drain(&s);
    const struct jp_rec_cpu_sample *x = ta_stream_nth(&s, JP_REC_CPU_SAMPLE, 0);
    cr_assert_eq(x->flags, 0);
    cr_assert_eq(x->node, 2);
    x = ta_stream_nth(&s, JP_REC_CPU_SAMPLE, 1);
    cr_assert_eq(x->flags, JP_SAMPLE_HAS_STMT);
    cr_assert_eq(x->stmt_line, 20);
    x = ta_stream_nth(&s, JP_REC_CPU_SAMPLE, 2);
    cr_assert_eq(x->node, 1);
    cr_assert_eq(x->stmt_line, 5);
    cr_assert_eq(x->stmt_col, 2);
    ta_stream_free(&s);
}

Test(cpu, task_changes_emit_exec_records)
{
    struct stream s;
    jettprof_run *run = ta_local_run(JETTPROF_MODE_CPU, &s);
    uint32_t f = ta_frame(run, "m", "f", 1);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 2, &t), 0);
    cr_assert_eq(jettprof_enter(t, f), 0);
    jettprof_set_task(t, 10, 20);
    jp_timer_tick(run);
    jettprof_safe_point(t);
    jp_timer_tick(run);
    jettprof_safe_point(t);
    jettprof_set_task(t, 11, JETTPROF_ID_UNAVAILABLE);
    jp_timer_tick(run);
    jettprof_safe_point(t);
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    ta_stream_drain(&s);
    cr_assert_eq(ta_stream_count(&s, JP_REC_EXEC), 2);
    const struct jp_rec_exec *e = ta_stream_nth(&s, JP_REC_EXEC, 0);
    cr_assert_eq(e->task_id, 10);
    cr_assert_eq(e->actor_id, 20);
    e = ta_stream_nth(&s, JP_REC_EXEC, 1);
    cr_assert_eq(e->task_id, 11);
    cr_assert_eq(e->actor_id, JP_ID_UNAVAILABLE);
    /* The second EXEC sits right before the third sample. */
    for (size_t i = 0; i + 1 < s.n; i++) {
        const struct jp_rec_hdr *h = ta_rec_at(&s, i);
        if (h->type == JP_REC_EXEC && ((const struct jp_rec_exec *)(const void *)h)->task_id == 11)
            cr_assert_eq(((const struct jp_rec_hdr *)ta_rec_at(&s, i + 1))->type,
                         JP_REC_CPU_SAMPLE);
    }
    ta_stream_free(&s);
}

Test(cpu, without_attribution_capabilities_ids_are_unavailable)
{
    struct jettprof_config c = ta_config(JETTPROF_MODE_CPU);
    c.capabilities &= ~(JETTPROF_CAP_TASK_ATTRIBUTION | JETTPROF_CAP_THREAD_REGISTRATION);
    jettprof_run *run;
    cr_assert_eq(jp_agent_start_local(&c, 0, &run), 0);
    struct stream s;
    ta_stream_open(&s, run);
    uint32_t f = ta_frame(run, "m", "f", 1);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 5, &t), 0);
    jettprof_set_task(t, 1, 2);
    cr_assert_eq(jettprof_enter(t, f), 0);
    jp_timer_tick(run);
    jettprof_safe_point(t);
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    ta_stream_drain(&s);
    cr_assert_eq(ta_stream_count(&s, JP_REC_EXEC), 0, "everything unavailable: as before any EXEC");
    cr_assert_eq(ta_stream_count(&s, JP_REC_CPU_SAMPLE), 1);
    ta_stream_free(&s);
}

Test(cpu, full_ring_drops_samples_without_waiting)
{
    struct jettprof_config c = ta_config(JETTPROF_MODE_CPU);
    c.ring_slots = 64;
    jettprof_run *run;
    cr_assert_eq(jp_agent_start_local(&c, 0, &run), 0);
    struct stream s;
    ta_stream_open(&s, run);
    uint32_t f = ta_frame(run, "m", "f", 1);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    cr_assert_eq(jettprof_enter(t, f), 0);
    uint64_t t0 = jp_mono_ns();
    for (int i = 0; i < 100; i++) {
        jp_timer_tick(run);
        jettprof_safe_point(t);
    }
    cr_assert_lt(jp_mono_ns() - t0, 500000000u, "CPU samples must never wait for room");
    struct jp_rec_counters k;
    jp_agent_counters(run, &k);
    cr_assert_gt(k.dropped_ticks, 0);
    ta_stream_drain(&s); /* room again: the counters and stop fit */
    size_t got = ta_stream_count(&s, JP_REC_CPU_SAMPLE);
    cr_assert_eq(got + k.dropped_ticks, 100, "every tick is a sample or a counted drop");
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    ta_stream_drain(&s);
    const struct jp_rec_counters *fin = ta_stream_last(&s, JP_REC_COUNTERS);
    cr_assert_eq(fin->dropped_ticks, k.dropped_ticks);
    ta_stream_free(&s);
}

/* ---- memory ---- */

Test(memory, hooks_push_events_with_agent_ids)
{
    struct stream s;
    jettprof_run *run = ta_local_run(JETTPROF_MODE_MEMORY, &s);
    uint32_t f = ta_frame(run, "m", "f", 1);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    cr_assert_eq(jettprof_enter(t, f), 0);
    uint64_t a, b, z;
    cr_assert_eq(jettprof_alloc(t, 100, &a), 0);
    cr_assert_eq(jettprof_alloc(t, 50, &b), 0);
    cr_assert_eq(jettprof_alloc(t, 0, &z), 0);
    cr_assert_eq(a, 1);
    cr_assert_eq(b, 2);
    cr_assert_eq(z, 3);
    cr_assert_eq(jettprof_resize(t, a, 100, 300), 0);
    cr_assert_eq(jettprof_free(t, b, 50), 0);
    cr_assert_eq(jettprof_alloc_id(t, 1000, 8), 0);
    jettprof_leave(t);
    cr_assert_eq(jettprof_free(t, 1000, 8), 0);
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RUNTIME_ERROR);
    ta_stream_drain(&s);
    cr_assert_eq(ta_stream_count(&s, JP_REC_ALLOC), 4);
    const struct jp_rec_alloc *al = ta_stream_nth(&s, JP_REC_ALLOC, 0);
    cr_assert_eq(al->allocation_id, 1);
    cr_assert_eq(al->size, 100);
    cr_assert_eq(al->node, 1);
    const struct jp_rec_resize *rz = ta_stream_nth(&s, JP_REC_RESIZE, 0);
    cr_assert_eq(rz->allocation_id, 1);
    cr_assert_eq(rz->old_size, 100);
    cr_assert_eq(rz->new_size, 300);
    const struct jp_rec_free *fr = ta_stream_nth(&s, JP_REC_FREE, 0);
    cr_assert_eq(fr->allocation_id, 2);
    cr_assert_eq(fr->old_size, 50);
    fr = ta_stream_nth(&s, JP_REC_FREE, 1);
    cr_assert_eq(fr->node, 0, "freed outside any frame");
    /* The stream's framing: RUN_START first, RUN_STOP last and counting all before it. */
    cr_assert_eq(((const struct jp_rec_hdr *)ta_rec_at(&s, 0))->type, JP_REC_RUN_START);
    const struct jp_rec_run_start *rs = ta_rec_at(&s, 0);
    cr_assert_eq(rs->mode, JP_MODE_MEMORY);
    cr_assert_eq(rs->rate_hz, 0);
    cr_assert_eq(rs->cpu_budget_bytes, 33554432u);
    cr_assert_eq(rs->retention_budget_bytes, 67108864u);
    cr_assert_eq(rs->capabilities, 0xffu);
    const struct jp_rec_run_stop *st = ta_rec_at(&s, s.n - 1);
    cr_assert_eq(st->h.type, JP_REC_RUN_STOP);
    cr_assert_eq(st->record_count, s.n - 1);
    cr_assert_eq(st->termination, JP_TERM_RUNTIME_ERROR);
    cr_assert_neq(st->process_cpu_ns, JP_NS_UNAVAILABLE);
    cr_assert_eq(((const struct jp_rec_hdr *)ta_rec_at(&s, s.n - 2))->type, JP_REC_COUNTERS);
    ta_stream_free(&s);
}

/* Resize sequences: a runtime that declares JETTPROF_CAP_RESIZE_SEQUENCE gets a stream of
 * format 2 in which a block's first resize is a RESIZE, a later one a RESIZE_SEQ naming how
 * many came before, and a free names its block's count; the inline hooks give the same
 * records. Without the capability a count other than 0 is refused and nothing is pushed. */
Test(memory, resize_sequences_are_recorded_only_when_declared)
{
    struct stream s;
    struct jettprof_config c = ta_config(JETTPROF_MODE_MEMORY);
    c.capabilities |= JETTPROF_CAP_RESIZE_SEQUENCE;
    jettprof_run *run = NULL;
    cr_assert_eq(jp_agent_start_local(&c, 0, &run), 0, "%s", jettprof_last_reason());
    ta_stream_open(&s, run);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    struct jettprof_fast *f = jettprof_thread_fast(t, JETTPROF_FAST_VERSION);
    cr_assert_not_null(f);
    uint64_t a, b;
    cr_assert_eq(jettprof_alloc(t, 10, &a), 0);
    cr_assert_eq(jettprof_alloc(t, 20, &b), 0);
    cr_assert_eq(jettprof_resize_seq(t, a, 0, 10, 30), 0);
    cr_assert_eq(jettprof_resize_seq(t, a, 1, 30, 10), 0);
    cr_assert_eq(jettprof_resize_seq_fast(f, b, 0, 20, 40), 0);
    cr_assert_eq(jettprof_resize_seq_fast(f, b, 1, 40, 50), 0);
    cr_assert_eq(jettprof_free_seq(t, a, 2, 10), 0);
    cr_assert_eq(jettprof_free_seq_fast(f, b, 2, 50), 0);
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    ta_stream_drain(&s);
    const struct jp_rec_run_start *rs = ta_rec_at(&s, 0);
    cr_assert_eq(rs->format_version, JP_FORMAT_VERSION_SEQ);
    cr_assert_eq(ta_stream_count(&s, JP_REC_RESIZE), 2);
    cr_assert_eq(ta_stream_count(&s, JP_REC_RESIZE_SEQ), 2);
    const struct jp_rec_resize_seq *rq = ta_stream_nth(&s, JP_REC_RESIZE_SEQ, 0);
    cr_assert_eq(rq->h.size, sizeof *rq);
    cr_assert_eq(rq->allocation_id, a);
    cr_assert_eq(rq->seq, 1);
    cr_assert_eq(rq->old_size, 30);
    cr_assert_eq(rq->new_size, 10);
    rq = ta_stream_nth(&s, JP_REC_RESIZE_SEQ, 1);
    cr_assert_eq(rq->allocation_id, b);
    cr_assert_eq(rq->new_size, 50);
    const struct jp_rec_free *fr = ta_stream_nth(&s, JP_REC_FREE, 0);
    cr_assert_eq(fr->seq, 2);
    cr_assert_eq(fr->old_size, 10);
    fr = ta_stream_nth(&s, JP_REC_FREE, 1);
    cr_assert_eq(fr->allocation_id, b);
    cr_assert_eq(fr->seq, 2);
    ta_stream_free(&s);

    run = ta_local_run(JETTPROF_MODE_MEMORY, &s);
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    cr_assert_eq(jettprof_alloc(t, 10, &a), 0);
    cr_assert_eq(jettprof_resize_seq(t, a, 1, 10, 30), -EINVAL);
    cr_assert(strstr(jettprof_last_reason(), "resize_sequence"), "%s", jettprof_last_reason());
    cr_assert_eq(jettprof_free_seq(t, a, 1, 10), -EINVAL);
    cr_assert_eq(jettprof_resize_seq(t, a, 0, 10, 30), 0);
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    ta_stream_drain(&s);
    rs = ta_rec_at(&s, 0);
    cr_assert_eq(rs->format_version, JP_FORMAT_VERSION);
    cr_assert_eq(ta_stream_count(&s, JP_REC_RESIZE), 1);
    cr_assert_eq(ta_stream_count(&s, JP_REC_RESIZE_SEQ) + ta_stream_count(&s, JP_REC_FREE), 0);
    ta_stream_free(&s);
}

Test(memory, cpu_mode_hooks_record_nothing_but_assign_ids)
{
    struct stream s;
    jettprof_run *run = ta_local_run(JETTPROF_MODE_CPU, &s);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    uint64_t a, b;
    cr_assert_eq(jettprof_alloc(t, 10, &a), 0);
    cr_assert_eq(jettprof_alloc(t, 10, &b), 0);
    cr_assert_eq(b, a + 1);
    cr_assert_eq(jettprof_free(t, a, 10), 0);
    cr_assert_eq(jettprof_resize(t, b, 10, 20), 0);
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    ta_stream_drain(&s);
    cr_assert_eq(ta_stream_count(&s, JP_REC_ALLOC) + ta_stream_count(&s, JP_REC_FREE) +
                     ta_stream_count(&s, JP_REC_RESIZE),
                 0);
    const struct jp_rec_run_stop *st = ta_rec_at(&s, s.n - 1);
    cr_assert_eq(st->process_cpu_ns != JP_NS_UNAVAILABLE, 1);
    ta_stream_free(&s);
}

/* A memory run on the smallest ring with the given stall bound, read back through *s, with the
 * calling thread registered in *t. */
static jettprof_run *tiny_memory_run(uint32_t stall_ms, struct stream *s, jettprof_thread **t)
{
    struct jettprof_config c = ta_config(JETTPROF_MODE_MEMORY);
    c.ring_slots = 64;
    c.stall_ms = stall_ms;
    jettprof_run *run;
    cr_assert_eq(jp_agent_start_local(&c, 0, &run), 0);
    ta_stream_open(s, run);
    cr_assert_eq(jettprof_thread_register(run, 1, t), 0);
    return run;
}

/* A consumer that makes no progress: the first event waits the stall bound, then it and every
 * later one drop at once (the run is stalled at that tail), each counted; the wait is
 * reported. */
Test(memory, a_stalled_consumer_costs_one_stall_bound_then_events_drop)
{
    struct stream s;
    jettprof_thread *t;
    jettprof_run *run = tiny_memory_run(200, &s, &t);
    uint64_t t0 = jp_mono_ns();
    int drops = 0;
    for (int i = 0; i < 200; i++) {
        uint64_t id = 0;
        int r = jettprof_alloc(t, 8, &id);
        cr_assert(r == 0 || r == -ENOBUFS);
        cr_assert_eq(id, (uint64_t)i + 1, "ids are assigned even for dropped events");
        drops += r == -ENOBUFS;
    }
    uint64_t spent = jp_mono_ns() - t0;
    cr_assert_geq(spent, 200000000u, "no wait for room before dropping");
    /* One stall bound per event would be 130 * 200 ms = 26 s. */
    cr_assert_lt(spent, 13000000000u, "after a stall, events drop without waiting");
    cr_assert_gt(drops, 100);
    struct jp_rec_counters k;
    jp_agent_counters(run, &k);
    cr_assert_geq(k.producer_wait_ns, 200000000u, "the wait is reported");
    cr_assert_leq(k.producer_wait_ns, spent);
    /* and shown to the consumer as it happens, through the ring header's gauges */
    uint64_t g_lost, g_wait;
    jp_ring_gauges(&s.ring, &g_lost, &g_wait);
    cr_expect_eq(g_lost, (uint64_t)drops, "gauge_lost");
    cr_expect_eq(g_wait, k.producer_wait_ns, "gauge_wait_ns");
    ta_stream_drain(&s);
    cr_assert_eq((int)ta_stream_count(&s, JP_REC_ALLOC) + drops, 200);
    /* The consumer moved: the stall is over, and the next event goes in. */
    cr_assert_eq(jettprof_alloc(t, 8, NULL), 0);
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    ta_stream_drain(&s);
    const struct jp_rec_counters *fin = ta_stream_last(&s, JP_REC_COUNTERS);
    cr_assert_eq(fin->lost_records, (uint64_t)drops);
    cr_assert_eq(fin->producer_wait_ns, k.producer_wait_ns);
    ta_stream_free(&s);
}

/* A consumer that keeps making progress, however slowly, loses nothing: here it releases one
 * record every few milliseconds, far slower than the producer, for longer in total than the
 * stall bound. */
struct slow_consumer {
    struct stream *s;
    uint32_t stop;
    uint64_t taken;
};

static void *drain_slowly(void *p)
{
    struct slow_consumer *sc = p;
    while (!__atomic_load_n(&sc->stop, __ATOMIC_ACQUIRE)) {
        sc->taken += ta_stream_drain_one(sc->s);
        struct timespec ts = {0, 3000000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

Test(memory, a_slow_consumer_that_progresses_loses_nothing)
{
    struct stream s;
    jettprof_thread *t;
    /* The default stall bound (1 s): a loaded machine may leave the consumer thread unscheduled
     * for a while, which is not the stall this test is about. 450 events through 64 slots at
     * one release per 3 ms wait about 1.2 s in all, more than the bound. */
    jettprof_run *run = tiny_memory_run(1000, &s, &t);
    struct slow_consumer sc = {&s, 0, 0};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, drain_slowly, &sc), 0);
    for (int i = 0; i < 450; i++)
        cr_assert_eq(jettprof_alloc(t, 8, NULL), 0, "event %d dropped", i);
    __atomic_store_n(&sc.stop, 1, __ATOMIC_RELEASE);
    cr_assert_eq(pthread_join(th, NULL), 0);
    struct jp_rec_counters k;
    jp_agent_counters(run, &k);
    cr_assert_eq(k.lost_records, 0);
    cr_assert_gt(k.producer_wait_ns, 1000000000u, "it waited longer than one stall bound");
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    ta_stream_drain(&s);
    cr_assert_eq(ta_stream_count(&s, JP_REC_ALLOC), 450);
    ta_stream_free(&s);
}

Test(memory, a_lost_definition_fails_the_collector)
{
    struct jettprof_config c = ta_config(JETTPROF_MODE_MEMORY);
    c.ring_slots = 64;
    c.stall_ms = 500;
    jettprof_run *run;
    cr_assert_eq(jp_agent_start_local(&c, 0, &run), 0);
    struct stream s;
    ta_stream_open(&s, run);
    /* Fill the ring with definitions nobody drains. */
    uint64_t t0 = jp_mono_ns();
    for (int i = 0; i < 40; i++) {
        char p[160];
        snprintf(p, sizeof p, "src/%080d/m%d.jett", 0, i); /* 4 slots each */
        uint32_t id;
        cr_assert_eq(jettprof_source(run, JETTPROF_ORIGIN_PROJECT, p, &id), 0,
                     "the program is never failed by its collector");
        cr_assert_eq(id, (uint32_t)i + 1);
    }
    uint64_t spent = jp_mono_ns() - t0;
    cr_assert_geq(spent, 500000000u, "a definition waits for room first");
    cr_assert_lt(spent, 10000000000u, "after one failure, no further waits");
    cr_assert_eq(jp_load_relaxed32(&run->failed), 1);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    ta_stream_free(&s);
}

Test(cpu, counters_snapshots_during_the_run)
{
    struct stream s;
    jettprof_run *run = ta_local_run(JETTPROF_MODE_CPU, &s);
    uint32_t f = ta_frame(run, "m", "f", 1);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    cr_assert_eq(jettprof_enter(t, f), 0);
    for (int i = 0; i < 600; i++) {
        jp_timer_tick(run);
        jettprof_safe_point(t);
        if (i % 100 == 0)
            ta_stream_drain(&s);
    }
    jettprof_leave(t);
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    ta_stream_drain(&s);
    /* Two snapshots (after 256 and 512 samples) and the final one, which is cumulative. */
    cr_assert_eq(ta_stream_count(&s, JP_REC_COUNTERS), 3);
    const struct jp_rec_counters *a = ta_stream_nth(&s, JP_REC_COUNTERS, 0);
    cr_assert_eq(a->requested_ticks, 256);
    const struct jp_rec_counters *z = ta_stream_last(&s, JP_REC_COUNTERS);
    cr_assert_eq(z->requested_ticks, 600);
    cr_assert_eq(((const struct jp_rec_hdr *)ta_rec_at(&s, s.n - 2))->type, JP_REC_COUNTERS);
    const struct jp_rec_run_stop *st = ta_rec_at(&s, s.n - 1);
    cr_assert_eq(st->record_count, s.n - 1, "snapshots are counted records too");
    ta_stream_free(&s);
}

Test(cpu, inline_statement_word_and_truncated_frames)
{
    struct stream s;
    jettprof_run *run = ta_local_run(JETTPROF_MODE_CPU, &s);
    uint32_t f = ta_frame(run, "m", "deep", 1);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    struct jettprof_pos *pos = jettprof_stmt_pos(t);
    for (int i = 0; i < 128; i++) {
        cr_assert_eq(jettprof_enter(t, f), 0);
        jettprof_stmt_set(pos, 1000u + (uint32_t)i, 7);
    }
    jp_timer_tick(run);
    jettprof_safe_point(t); /* #0: the 128th frame's statement */
    cr_assert_eq(jettprof_enter(t, f), 0); /* 129: truncated */
    jettprof_stmt_set(pos, 5, 5);
    cr_assert_eq(jettprof_enter(t, f), 0);
    jettprof_stmt_set(pos, 6, 6);
    jp_timer_tick(run);
    jettprof_safe_point(t); /* #1: in the truncated frame, no statement */
    jettprof_leave(t);
    jettprof_leave(t);
    jp_timer_tick(run);
    jettprof_safe_point(t); /* #2: back at 128, its statement restored */
    jettprof_leave(t);
    jp_timer_tick(run);
    jettprof_safe_point(t); /* #3: at 127 */
    for (int i = 0; i < 127; i++)
        jettprof_leave(t);
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    ta_stream_drain(&s);
    const struct jp_rec_cpu_sample *x = ta_stream_nth(&s, JP_REC_CPU_SAMPLE, 0);
    cr_assert_eq(x->stmt_line, 1127);
    cr_assert_eq(x->stmt_col, 7);
    x = ta_stream_nth(&s, JP_REC_CPU_SAMPLE, 1);
    cr_assert_eq(x->node, 129);
    cr_assert_eq(x->flags, 0, "a truncated leaf has no statement of its own");
    x = ta_stream_nth(&s, JP_REC_CPU_SAMPLE, 2);
    cr_assert_eq(x->node, 128);
    cr_assert_eq(x->stmt_line, 1127);
    x = ta_stream_nth(&s, JP_REC_CPU_SAMPLE, 3);
    cr_assert_eq(x->node, 127);
    cr_assert_eq(x->stmt_line, 1126);
    ta_stream_free(&s);
}

Test(fork, a_child_never_writes_into_the_parents_ring)
{
    struct stream s;
    jettprof_run *run = ta_local_run(JETTPROF_MODE_MEMORY, &s);
    uint32_t f = ta_frame(run, "m", "f", 1);
    jettprof_thread *t;
    cr_assert_eq(jettprof_thread_register(run, 1, &t), 0);
    cr_assert_eq(jettprof_enter(t, f), 0);
    uint64_t id;
    cr_assert_eq(jettprof_alloc(t, 8, &id), 0);
    pid_t c = fork();
    if (c == 0) {
        /* The child goes on calling the agent: nothing may reach the parent's ring, and
         * nothing may wait or crash. */
        int ok = 1;
        for (int i = 0; i < 10000; i++) {
            uint64_t cid;
            int r = jettprof_alloc(t, 16, &cid);
            ok &= r == 0 || r == -ENOBUFS;
        }
        uint32_t sid;
        ok &= jettprof_source(run, JETTPROF_ORIGIN_PROJECT, "src/child.jett", &sid) == 0;
        jettprof_leave(t);
        jettprof_thread_unregister(t);
        struct jettprof_result res = {.size = sizeof res};
        ok &= jettprof_finish(run, JETTPROF_TERM_RETURNED, &res) == 0;
        ok &= res.collector_failed == 1;
        jettprof_result_release(&res);
        _exit(ok ? 0 : 1);
    }
    int st;
    cr_assert_eq(waitpid(c, &st, 0), c);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child was harmed");
    cr_assert_eq(jettprof_alloc(t, 8, &id), 0);
    cr_assert_eq(id, 2, "the parent's id counter is its own");
    jettprof_leave(t);
    jettprof_thread_unregister(t);
    jp_agent_local_end(run, JETTPROF_TERM_RETURNED);
    ta_stream_drain(&s);
    cr_assert_eq(ta_stream_count(&s, JP_REC_ALLOC), 2, "the child's events reached the parent");
    cr_assert_eq(ta_stream_count(&s, JP_REC_SOURCE_DEF), 1);
    const struct jp_rec_run_stop *st2 = ta_rec_at(&s, s.n - 1);
    cr_assert_eq(st2->record_count, s.n - 1);
    ta_stream_free(&s);
}
