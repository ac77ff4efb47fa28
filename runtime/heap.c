/* The one allocation boundary for Jett heap objects. Every string and list is created,
 * resized and freed here, and only here are allocation events reported to the profiler
 * (after the host operation succeeded: a failed allocation reports nothing and becomes the
 * runtime error "out of memory"). Profiler ids are the agent's; addresses never leave. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "jett.h"
#include "jettprof.h"
#include "value.h"

struct jt_str *jt_literal_new(const char *bytes, size_t len)
{
    struct jt_str *s = jt_xmalloc(sizeof *s + len + 1);
    s->h.rc = -1;
    s->h.kind = JV_STR;
    s->h.pid = 0;
    s->len = len;
    memcpy(s->data, bytes, len);
    s->data[len] = '\0';
    return s;
}

/* The heap's list of live objects and its counts: an object joins when it is made (or a copy
 * sent to this heap's actor arrives) and leaves when it is freed (or sent away). */
static void live_link(struct jt_heap *h, struct jt_obj *o, uint64_t size)
{
    o->prev = NULL;
    o->next = h->live;
    if (h->live)
        h->live->prev = o;
    h->live = o;
    h->objects++;
    h->live_bytes += size;
}

static void live_unlink(struct jt_heap *h, struct jt_obj *o, uint64_t size)
{
    if (o->prev)
        o->prev->next = o->next;
    else
        h->live = o->next;
    if (o->next)
        o->next->prev = o->prev;
    o->prev = o->next = NULL;
    h->objects--;
    h->live_bytes -= size;
}

static void report_alloc(struct jt_heap *h, struct jt_obj *o, uint64_t size)
{
    live_link(h, o, size);
    if (h->pt) {
        uint64_t id = 0;
        /* A dropped event is counted by the agent; the object lives on untracked (pid 0). */
        int r = h->pf ? jettprof_alloc_fast(h->pf, size, &id) : jettprof_alloc(h->pt, size, &id);
        if (r == 0)
            o->pid = id;
    }
}

int jt_heap_str(struct jt_heap *h, uint64_t len, struct jt_str **out)
{
    if (len > JT_MAX_STR_BYTES)
        return -ENOMEM;
    struct jt_str *s = malloc(sizeof *s + len + 1);
    if (!s)
        return -ENOMEM;
    s->h.rc = 1;
    s->h.kind = JV_STR;
    s->h.pid = 0;
    s->len = len;
    s->data[len] = '\0';
    report_alloc(h, &s->h, len);
    *out = s;
    return 0;
}

int jt_heap_list(struct jt_heap *h, uint64_t cap, struct jt_list **out)
{
    if (cap > JT_MAX_LIST_SLOTS)
        return -ENOMEM;
    struct jt_list *l = malloc(sizeof *l);
    if (!l)
        return -ENOMEM;
    l->items = cap ? malloc(cap * sizeof(jv)) : NULL;
    if (cap && !l->items) {
        free(l);
        return -ENOMEM;
    }
    l->h.rc = 1;
    l->h.kind = JV_LIST;
    l->h.pid = 0;
    l->len = 0;
    l->cap = cap;
    report_alloc(h, &l->h, cap * JT_SLOT_BYTES);
    *out = l;
    return 0;
}

int jt_heap_list_grow(struct jt_heap *h, struct jt_list *l, uint64_t newcap)
{
    if (newcap > JT_MAX_LIST_SLOTS)
        return -ENOMEM;
    jv *p = realloc(l->items, newcap * sizeof(jv));
    if (!p)
        return -ENOMEM;
    uint64_t old = l->cap * JT_SLOT_BYTES, nsz = newcap * JT_SLOT_BYTES;
    l->items = p;
    l->cap = newcap;
    h->live_bytes += nsz - old;
    if (h->pf && l->h.pid)
        jettprof_resize_fast(h->pf, l->h.pid, old, nsz);
    else if (h->pt && l->h.pid)
        jettprof_resize(h->pt, l->h.pid, old, nsz);
    return 0;
}

static void push_work(struct jt_heap *h, struct jt_obj *o)
{
    if (h->nwork == h->capwork) {
        h->capwork = h->capwork ? h->capwork * 2 : 64;
        h->work = jt_xrealloc(h->work, h->capwork * sizeof *h->work);
    }
    h->work[h->nwork++] = o;
}

static void free_one(struct jt_heap *h, struct jt_obj *o)
{
    uint64_t size;
    if (o->kind == JV_LIST) {
        struct jt_list *l = (struct jt_list *)o;
        size = l->cap * JT_SLOT_BYTES;
        for (uint64_t i = 0; i < l->len; i++) {
            jv v = l->items[i];
            if (v.k >= JV_STR && v.u.o->rc >= 0 && --v.u.o->rc == 0)
                push_work(h, v.u.o);
        }
        free(l->items);
    } else {
        size = ((struct jt_str *)o)->len;
    }
    if (h->pf && o->pid)
        jettprof_free_fast(h->pf, o->pid, size);
    else if (h->pt && o->pid)
        jettprof_free(h->pt, o->pid, size);
    live_unlink(h, o, size);
    free(o);
}

void jt_heap_release(struct jt_heap *h, struct jt_obj *o)
{
    /* Iterative: a list nested a million deep is freed without recursion. */
    uint64_t base = h->nwork;
    free_one(h, o);
    while (h->nwork > base)
        free_one(h, h->work[--h->nwork]);
}

void jt_heap_fini(struct jt_heap *h)
{
    struct jt_obj *o = h->live;
    while (o) {
        struct jt_obj *nx = o->next;
        if (o->kind == JV_LIST)
            free(((struct jt_list *)o)->items);
        free(o);
        o = nx;
    }
    h->live = NULL;
    h->objects = 0;
    h->live_bytes = 0;
    free(h->work);
    h->work = NULL;
    h->nwork = h->capwork = 0;
}

/* The Jett size of an object, as allocation and free report it. */
static uint64_t obj_size(const struct jt_obj *o)
{
    return o->kind == JV_LIST ? ((const struct jt_list *)o)->cap * JT_SLOT_BYTES
                              : ((const struct jt_str *)o)->len;
}

/* Moves the objects of v's tree between a heap's live list and none. The tree is a copy made
 * for a transfer (actors.c): every object in it is reachable once, so the walk needs no marks,
 * and it is at most JT_MAX_COPY_DEPTH deep. */
static void move_tree(struct jt_heap *h, struct jt_obj *o, bool in)
{
    if (o->rc < 0)
        return; /* an immortal literal belongs to no heap */
    if (in)
        live_link(h, o, obj_size(o));
    else
        live_unlink(h, o, obj_size(o));
    if (o->kind == JV_LIST) {
        const struct jt_list *l = (const struct jt_list *)o;
        for (uint64_t i = 0; i < l->len; i++)
            if (l->items[i].k >= JV_STR)
                move_tree(h, l->items[i].u.o, in);
    }
}

void jt_heap_detach(struct jt_heap *h, jv v)
{
    if (v.k >= JV_STR)
        move_tree(h, v.u.o, false);
}

void jt_heap_adopt(struct jt_heap *h, jv v)
{
    if (v.k >= JV_STR)
        move_tree(h, v.u.o, true);
}
