/* The calling-context stack: jettprof_enter/leave and the statement position, with the per-depth
 * cache and the call-site caches' fill (jettprof_enter_site); what is not cached is looked up or
 * interned in a producer section (intern.c). The inline twins are in jettprof.h; the records
 * that read this stack (samples, allocation events) are produced in produce.c. */
#include "agent.h"

#include <errno.h>
#include <string.h>

/* Statements across calls: entering saves the caller's position and starts the callee with
 * none; leaving restores the caller's. Past depth 128 the position belongs to frames below the
 * truncation and is never reported, so only the 128th frame's is saved (when the 129th is
 * entered) and restored (when it is left). At depth 0 the position is never reported. */
__attribute__((noinline)) static int enter_deep(struct jettprof_thread *t)
{
    struct jettprof_fast *f = &t->fast;
    uint32_t d = f->depth_++;
    if (d != JP_MAX_DEPTH)
        return 0; /* already truncated: deeper frames stay on <truncated-stack> */
    f->saved_[JP_MAX_DEPTH] = f->pos_;
    f->pos_ = (struct jp_stmt){0, 0};
    /* The stack becomes deeper than 128: keep the 127 root-most frames, then one
     * <truncated-stack> frame in place of the 128th and everything below it. */
    uint32_t parent = f->nodes_[JP_MAX_DEPTH - 1u];
    uint32_t node = JP_NODE_LOST;
    int err = 0;
    if (parent != JP_NODE_LOST) {
        struct jettprof_run *run = t->run;
        enum jp_sect s = jp_sect_enter(run, t);
        uint32_t fr = jp_truncated_frame(run);
        if (fr)
            node = jp_node_child(run, parent, fr, &err);
        else
            err = -ENOMEM;
        jp_sect_leave(run, s);
    }
    f->trunc_node_ = node;
    return err;
}

/* A (parent, frame) pair not in this depth's cache: the table, or a new node. In-section. */
__attribute__((noinline)) static int enter_lookup(struct jettprof_thread *t, uint32_t d,
                                                  uint32_t parent, uint64_t key,
                                                  uint32_t frame_id, uint32_t *out)
{
    struct jettprof_run *run = t->run;
    uint32_t node = JP_NODE_LOST;
    int err = 0;
    enum jp_sect s = jp_sect_enter(run, t);
    if (__builtin_expect(frame_id - 1u < run->nframes, 1)) {
        /* Below an unavailable level everything stays unavailable. */
        if (parent != JP_NODE_LOST) {
            uint32_t slot;
            node = jp_node_find(&run->nodes, key, &slot);
            if (node == 0)
                node = jp_node_child(run, parent, frame_id, &err);
            if (node != JP_NODE_LOST) {
                t->enter_key[d] = key;
                t->enter_node[d] = node;
            }
        }
    } else {
        jp_set_reason("enter names a frame id this run never interned");
        err = -EINVAL;
    }
    jp_sect_leave(run, s);
    *out = node;
    return err;
}

/* Pushes the level entered at depth d (below JP_MAX_DEPTH): its node, the caller's statement
 * saved, the callee's none yet. */
static inline void push_level(struct jettprof_fast *f, uint32_t d, uint32_t node)
{
    f->nodes_[d + 1u] = node;
    f->saved_[d] = f->pos_;
    f->pos_ = (struct jp_stmt){0, 0};
    f->depth_ = d + 1u;
}

int jettprof_enter(jettprof_thread *t, uint32_t frame_id)
{
    struct jettprof_fast *f = &t->fast;
    uint32_t d = f->depth_;
    if (__builtin_expect(d >= JP_MAX_DEPTH, 0))
        return enter_deep(t);
    uint32_t parent = f->nodes_[d];
    uint64_t key = jp_node_key(parent, frame_id);
    uint32_t node;
    int err = 0;
    /* An untouched entry is 0, which is also (root, frame 0)'s key: that is no hit. */
    if (__builtin_expect(t->enter_key[d] == key && key != 0, 1))
        node = t->enter_node[d];
    else
        err = enter_lookup(t, d, parent, key, frame_id, &node);
    /* Even on failure the level is pushed (as an unavailable stack), so the matching leave
     * stays balanced and nothing is charged to the caller. */
    push_level(f, d, node);
    return err;
}

/* The site keeps what successful enters below depth 128 resolved, under this registration's
 * stamp: jettprof_enter_fast() checks both before trusting a node, so a site filled for
 * another thread or run (a stamp never reused in the process) is a miss. Nothing is kept for
 * an unavailable level or past the truncation, where the inline path never looks.
 *
 * The inline path looks only in the caller's own way (caller node mod WAYS). Callers that
 * share a way are not thrown out by each other: the one displaced from its own way moves to
 * another, and a caller found there is swapped back into its own way here, without a lookup,
 * so a site keeps up to WAYS callers however their node ids fall. A stamped site has no empty
 * way: the first fill writes its entry into every way, and an entry found outside its caller's
 * way is still exactly what it says (a key names one caller and frame), so no query, not even
 * one with an invalid frame id, can match a way that holds nothing. */
/* Way j holds a copy of an entry another way holds too: it can take a displaced one. */
static bool way_spare(const struct jettprof_site *site, unsigned j)
{
    for (unsigned k = 0; k < JETTPROF_SITE_WAYS; k++)
        if (k != j && site->way_[k].key_ == site->way_[j].key_)
            return true;
    return false;
}

static void site_fill(struct jettprof_site *site, const struct jettprof_fast *f, uint32_t caller,
                      uint32_t frame_id, uint32_t node)
{
    uint64_t key = jp_node_key(caller, frame_id);
    unsigned w = caller & (JETTPROF_SITE_WAYS - 1u);
    if (site->stamp_ != f->stamp_) {
        /* another registration's ways name its nodes: none of them stays */
        for (unsigned j = 0; j < JETTPROF_SITE_WAYS; j++) {
            site->way_[j].key_ = key;
            site->way_[j].node_ = node;
        }
        site->stamp_ = f->stamp_;
        site->victim_ = 0;
        return;
    }
    if (site->way_[w].key_ != key) {
        /* w's entry moves to a spare way, or else in turn over the others */
        unsigned to = w;
        for (unsigned j = 0; j < JETTPROF_SITE_WAYS && to == w; j++)
            if (j != w && way_spare(site, j))
                to = j;
        if (to == w)
            to = (w + 1u + site->victim_++ % (JETTPROF_SITE_WAYS - 1u)) &
                 (JETTPROF_SITE_WAYS - 1u);
        site->way_[to] = site->way_[w];
    }
    site->way_[w].key_ = key;
    site->way_[w].node_ = node;
}

int jettprof_enter_site(jettprof_thread *t, struct jettprof_site *site, uint32_t frame_id)
{
    struct jettprof_fast *f = &t->fast;
    uint32_t d = f->depth_;
    if (d < JP_MAX_DEPTH && site->stamp_ == f->stamp_) {
        uint32_t caller = f->nodes_[d];
        uint64_t key = jp_node_key(caller, frame_id);
        unsigned w = caller & (JETTPROF_SITE_WAYS - 1u);
        for (unsigned j = 0; j < JETTPROF_SITE_WAYS; j++) {
            if (site->way_[j].key_ != key)
                continue;
            /* held in another way: back into its caller's, the occupant where it was */
            uint32_t node = site->way_[j].node_;
            site->way_[j] = site->way_[w];
            site->way_[w].key_ = key;
            site->way_[w].node_ = node;
            push_level(f, d, node);
            return 0;
        }
    }
    int err = jettprof_enter(t, frame_id);
    d = f->depth_;
    if (err == 0 && d <= JP_MAX_DEPTH && f->nodes_[d] != JP_NODE_LOST)
        site_fill(site, f, f->nodes_[d - 1u], frame_id, f->nodes_[d]);
    return err;
}

void jettprof_leave(jettprof_thread *t)
{
    struct jettprof_fast *f = &t->fast;
    uint32_t d = f->depth_;
    if (__builtin_expect(d == 0, 0))
        return; /* unbalanced leave: ignored rather than corrupting the stack */
    d--;
    f->depth_ = d;
    if (d <= JP_MAX_DEPTH)
        f->pos_ = d ? f->saved_[d] : (struct jp_stmt){0, 0};
}

void jettprof_stmt(jettprof_thread *t, uint32_t line, uint32_t col)
{
    t->fast.pos_ = (struct jp_stmt){line, col};
}

struct jettprof_pos *jettprof_stmt_pos(jettprof_thread *t)
{
    return &t->fast.pos_;
}

struct jettprof_fast *jettprof_thread_fast(jettprof_thread *t, uint32_t version)
{
    return version == JETTPROF_FAST_VERSION ? &t->fast : NULL;
}
