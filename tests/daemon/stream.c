/* The daemon suites' record streams: jpt_stream, deterministic per seed, and the excerpts a
 * test's "runtime" answers with (see support.h). No Criterion: bench/daemon produces with it. */
#include "support.h"

#include <stdio.h>
#include <string.h>

#include "tests/lib/recbuild.h"

#define NSRC 3u
#define NFRAME 8u
#define NNODE 24u

enum { PH_START, PH_SRC, PH_FRAME, PH_NODE, PH_EXEC, PH_EVENTS, PH_COUNTERS, PH_STOP, PH_END };

static uint64_t rnd(struct jpt_stream *s)
{
    /* xorshift64*: deterministic per seed, good enough to spread events over sites */
    s->rng ^= s->rng >> 12;
    s->rng ^= s->rng << 25;
    s->rng ^= s->rng >> 27;
    return s->rng * 2685821657736338717ull;
}

void jpt_stream_init(struct jpt_stream *s, uint32_t mode, uint32_t seed, uint64_t events)
{
    memset(s, 0, sizeof *s);
    s->mode = mode;
    s->seed = seed;
    s->events = events;
    s->with_stop = 1;
    s->threshold_bp = 500;
    s->limit = 10;
    s->cpu_budget = 33554432u;
    s->retention_budget = 67108864u;
    s->rng = 0x9e3779b97f4a7c15ull ^ ((uint64_t)seed * 0x100000001b3ull) ^ mode;
    if (!s->rng)
        s->rng = 1;
}

static uint32_t nframes(const struct jpt_stream *s)
{
    return s->wide ? JPT_WIDE_CHAIN + s->wide : NFRAME;
}

/* A node skewed toward low ids so profiles have a clear order of bottlenecks; in a wide
 * stream, a leaf. */
static uint32_t pick_node(struct jpt_stream *s)
{
    if (s->wide)
        return JPT_WIDE_CHAIN + 1u + (uint32_t)(rnd(s) % s->wide);
    uint64_t a = rnd(s);
    uint32_t span = (uint32_t)(a % NNODE) + 1u;
    return 1u + (uint32_t)((a >> 32) % span);
}

uint32_t jpt_stream_stop(const struct jpt_stream *s, uint8_t *buf)
{
    struct jp_rec_run_stop r;
    memset(&r, 0, sizeof r);
    r.h.type = JP_REC_RUN_STOP;
    r.h.size = sizeof r;
    r.termination = JP_TERM_RETURNED;
    r.wall_ns = s->events * 1000u + 1u;
    r.process_cpu_ns = JP_NS_UNAVAILABLE;
    r.record_count = s->emitted;
    memcpy(buf, &r, sizeof r);
    return sizeof r;
}

uint32_t jpt_stream_next(struct jpt_stream *s, uint8_t *buf)
{
    for (;;) {
        switch (s->phase) {
        case PH_START: {
            struct jp_rec_run_start r = tl_rec_run_start(s->mode);
            r.threshold_bp = s->threshold_bp;
            r.limit = s->limit;
            r.capabilities = 0xffu;
            r.pid = 4242;
            r.cpu_budget_bytes = s->cpu_budget;
            r.retention_budget_bytes = s->retention_budget;
            memcpy(buf, &r, sizeof r);
            s->phase = PH_SRC;
            s->i = 0;
            s->emitted++;
            return sizeof r;
        }
        case PH_SRC: {
            if (s->i == NSRC) {
                s->phase = PH_FRAME;
                s->i = 0;
                continue;
            }
            char path[256];
            int n = s->i == 0 && s->program ? snprintf(path, sizeof path, "%s", s->program)
                    : s->i < 2 ? snprintf(path, sizeof path, "src/mod%u_%u.jett", s->seed % 7u, s->i)
                               : snprintf(path, sizeof path, "stdlib/core.jett");
            struct jp_rec_source_def r;
            memset(&r, 0, sizeof r);
            r.source_id = s->i + 1;
            r.origin = s->i < 2 ? JP_ORIGIN_PROJECT : JP_ORIGIN_STDLIB;
            s->i++;
            s->emitted++;
            return tl_rec_source(buf, &r, path, (size_t)n);
        }
        case PH_FRAME: {
            if (s->i == nframes(s)) {
                s->phase = PH_NODE;
                s->i = 0;
                continue;
            }
            uint32_t id = s->i + 1;
            char ns[JP_NAME_MAX + 1], fn[JP_NAME_MAX + 1];
            int nl = snprintf(ns, sizeof ns, "app.m%u", id % 3u);
            int fl = snprintf(fn, sizeof fn, "f%u_%u", id, s->seed % 5u);
            if (s->wide) { /* names of the longest length allowed, told apart by their ends */
                memset(ns, 'n', JP_NAME_MAX);
                memset(fn, 'f', JP_NAME_MAX);
                nl = fl = (int)JP_NAME_MAX;
                snprintf(fn + JP_NAME_MAX - 12, 13, "_%011u", id);
            }
            struct jp_rec_frame_def r;
            memset(&r, 0, sizeof r);
            r.frame_id = id;
            r.kind = JP_FRAME_FUNCTION;
            if (id != nframes(s)) { /* the last frame has no source: unavailable */
                r.source_id = (id % NSRC) + 1;
                r.decl_start = id * 100u;
                r.decl_end = id * 100u + 50u;
                r.decl_line = id * 10u + 1u;
                r.decl_col = 1;
            }
            s->i++;
            s->emitted++;
            return tl_rec_frame(buf, &r, ns, (size_t)nl, fn, (size_t)fl);
        }
        case PH_NODE: {
            if (s->i == (s->wide ? nframes(s) : NNODE)) {
                s->phase = PH_EXEC;
                continue;
            }
            uint32_t id = s->i + 1;
            struct jp_rec_node_def r;
            memset(&r, 0, sizeof r);
            r.h.type = JP_REC_NODE_DEF;
            r.h.size = sizeof r;
            r.node_id = id;
            if (s->wide) { /* node k is frame k: a chain, then the leaves under its end */
                r.parent = id == 1 ? JP_ID_NONE : id <= JPT_WIDE_CHAIN ? id - 1 : JPT_WIDE_CHAIN;
                r.frame_id = id;
            } else {
                r.parent = id <= 3 ? JP_ID_NONE : 1u + (uint32_t)(rnd(s) % (id - 1));
                r.frame_id = id <= 3 ? id : 1u + (uint32_t)(rnd(s) % NFRAME);
            }
            memcpy(buf, &r, sizeof r);
            s->i++;
            s->emitted++;
            return sizeof r;
        }
        case PH_EXEC: {
            struct jp_rec_exec r;
            memset(&r, 0, sizeof r);
            r.h.type = JP_REC_EXEC;
            r.h.size = sizeof r;
            r.runtime_thread_id = 1;
            r.task_id = JP_ID_UNAVAILABLE;
            r.actor_id = JP_ID_UNAVAILABLE;
            memcpy(buf, &r, sizeof r);
            s->phase = PH_EVENTS;
            s->i = 0;
            s->emitted++;
            return sizeof r;
        }
        case PH_EVENTS: {
            if (s->i == s->events) {
                s->phase = PH_COUNTERS;
                continue;
            }
            uint64_t seq = s->i++;
            s->emitted++;
            if (s->mode == JP_MODE_CPU) {
                struct jp_rec_cpu_sample r;
                memset(&r, 0, sizeof r);
                r.h.type = JP_REC_CPU_SAMPLE;
                r.h.size = sizeof r;
                uint64_t x = rnd(s);
                r.state = (x % 16) == 0 ? JP_STATE_RUNTIME : (x % 16) == 1 ? JP_STATE_WAITING
                                                                            : JP_STATE_JETT;
                if (r.state == JP_STATE_JETT) {
                    r.node = pick_node(s);
                    r.flags = JP_SAMPLE_HAS_STMT;
                    r.stmt_line = 1u + (r.node * 7u) % 40u;
                    r.stmt_col = 1u + r.node % 3u;
                }
                r.requested_tick = seq;
                memcpy(buf, &r, sizeof r);
                return sizeof r;
            }
            uint64_t x = rnd(s);
            if (s->nlive == 0 || (s->nlive < 64 && x % 3 != 0)) {
                struct jp_rec_alloc r;
                memset(&r, 0, sizeof r);
                r.h.type = JP_REC_ALLOC;
                r.h.size = sizeof r;
                r.node = pick_node(s);
                r.allocation_id = ++s->next_id;
                r.size = 16u + (x >> 20) % 4096u;
                s->live_id[s->nlive] = r.allocation_id;
                s->live_size[s->nlive] = r.size;
                s->nlive++;
                memcpy(buf, &r, sizeof r);
                return sizeof r;
            }
            uint32_t k = (uint32_t)((x >> 8) % s->nlive);
            if ((x >> 40) & 1) {
                struct jp_rec_resize r;
                memset(&r, 0, sizeof r);
                r.h.type = JP_REC_RESIZE;
                r.h.size = sizeof r;
                r.node = pick_node(s);
                r.allocation_id = s->live_id[k];
                r.old_size = s->live_size[k];
                uint64_t delta = (x >> 24) % 512u;
                r.new_size = r.old_size + delta >= 200u ? r.old_size + delta - 200u : 0u;
                s->live_size[k] = r.new_size;
                memcpy(buf, &r, sizeof r);
                return sizeof r;
            }
            struct jp_rec_free r;
            memset(&r, 0, sizeof r);
            r.h.type = JP_REC_FREE;
            r.h.size = sizeof r;
            r.node = pick_node(s);
            r.allocation_id = s->live_id[k];
            r.old_size = s->live_size[k];
            s->nlive--;
            s->live_id[k] = s->live_id[s->nlive];
            s->live_size[k] = s->live_size[s->nlive];
            memcpy(buf, &r, sizeof r);
            return sizeof r;
        }
        case PH_COUNTERS: {
            struct jp_rec_counters r;
            memset(&r, 0, sizeof r);
            r.h.type = JP_REC_COUNTERS;
            r.h.size = sizeof r;
            if (s->mode == JP_MODE_CPU) {
                r.requested_ticks = s->events + s->events / 10u;
                r.coalesced_ticks = s->events / 20u;
            }
            memcpy(buf, &r, sizeof r);
            s->phase = s->with_stop ? PH_STOP : PH_END;
            s->emitted++;
            return sizeof r;
        }
        case PH_STOP:
            s->phase = PH_END;
            return jpt_stream_stop(s, buf);
        default:
            return 0;
        }
    }
}

void jpt_excerpt_for(const struct jp_ctl_excerpt_key *k, struct jp_ctl_excerpt *x, char *text,
                     size_t cap)
{
    memset(x, 0, sizeof *x);
    x->source_id = k->source_id;
    x->line = k->line;
    x->col = k->col;
    if (k->line % 5 == 0) {
        x->flags = JP_EXCERPT_UNAVAILABLE;
        x->text = "";
        return;
    }
    int n = snprintf(text, cap, "let v%u = work(<redacted-literal>, %u)", k->line, k->col);
    x->flags = JP_EXCERPT_REDACTED;
    x->text = text;
    x->text_len = (size_t)n;
}
