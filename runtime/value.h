/* Jett values and heap objects.
 *
 * Integers and booleans are immediate. Strings and lists are Jett heap objects, reference
 * counted, created and released only through the allocation boundary in heap.c, which is
 * the one place that reports allocate / resize / free to the profiler. A string's Jett size
 * is its byte length; a list's is JT_SLOT_BYTES per slot of capacity. Headers and the
 * interpreter's own bookkeeping are interpreter internals, not Jett heap.
 *
 * String literals are immortal objects of the program image (made at compile time, never
 * counted or freed); a secret shares the string object it wraps, so wrapping allocates
 * nothing.
 */
#ifndef JETT_RUNTIME_VALUE_H
#define JETT_RUNTIME_VALUE_H

#include <stdint.h>

enum jv_kind { JV_NIL = 0, JV_INT, JV_BOOL, JV_STR, JV_LIST, JV_SECRET };

struct jt_obj {
    int64_t rc;          /* < 0: immortal (literals) */
    uint32_t kind;       /* JV_STR or JV_LIST */
    uint32_t pad;
    uint64_t pid;        /* the profiler's allocation id when tracked, else 0 */
    struct jt_obj *prev, *next; /* all live objects, so teardown frees even cycles */
};

typedef struct jv {
    uint64_t k;          /* enum jv_kind (a whole word: it is stored and loaded with the payload
                          * beside it, and a wider load than the store cannot be forwarded) */
    union {
        int64_t i;       /* JV_INT, JV_BOOL */
        struct jt_obj *o;/* JV_STR, JV_SECRET (a jt_str), JV_LIST */
    } u;
} jv;

#define JT_SLOT_BYTES ((uint64_t)sizeof(jv)) /* 16: Jett bytes per list slot */

struct jt_str {
    struct jt_obj h;
    uint64_t len;
    char data[];         /* len bytes, then a NUL for convenience */
};

struct jt_list {
    struct jt_obj h;
    uint64_t len, cap;
    jv *items;           /* cap slots; the Jett allocation proper */
};

/* Limits that keep sizes far from overflow; past them an operation is a runtime error. */
#define JT_MAX_STR_BYTES (UINT64_C(1) << 31)
#define JT_MAX_LIST_SLOTS (UINT64_C(1) << 27)

struct jettprof_thread;
struct jt_heap {
    struct jettprof_thread *pt; /* non-NULL: report events to the profiler */
    struct jettprof_fast *pf;   /* its inline hooks, set while the program runs (interp.c) */
    uint64_t objects;           /* live Jett objects (tests and diagnostics) */
    uint64_t live_bytes;        /* live Jett bytes by this runtime's own accounting */
    struct jt_obj *live;        /* list of live objects */
    /* pending releases: freeing a deep list must not recurse on the C stack */
    struct jt_obj **work;
    uint64_t nwork, capwork;
};

/* All return 0 or -ENOMEM (which the interpreter raises as a runtime error). */
int jt_heap_str(struct jt_heap *h, uint64_t len, struct jt_str **out);
int jt_heap_list(struct jt_heap *h, uint64_t cap, struct jt_list **out);
/* Grows the list's slot storage to newcap (> cap), a resize of the same allocation. */
int jt_heap_list_grow(struct jt_heap *h, struct jt_list *l, uint64_t newcap);
/* Drops one reference; at zero the object (and transitively what it held) is freed. */
void jt_heap_release(struct jt_heap *h, struct jt_obj *o);
/* Frees every object still alive without reporting anything: used after the profile is
 * final, when what is alive has been counted as retained. */
void jt_heap_fini(struct jt_heap *h);
/* A value copied for another actor changes hands without an event: detach takes its objects
 * off the sender's heap (they stay allocated, in no heap, while they travel), adopt puts them
 * on the receiver's, whose frees then report them. Only for trees of fresh objects made by a
 * copy (each object reachable once), at most JT_MAX_COPY_DEPTH deep. */
#define JT_MAX_COPY_DEPTH 64
void jt_heap_detach(struct jt_heap *h, jv v);
void jt_heap_adopt(struct jt_heap *h, jv v);

static inline void jv_retain(jv v)
{
    if (v.k >= JV_STR && v.u.o->rc >= 0)
        v.u.o->rc++;
}

static inline void jv_release(struct jt_heap *h, jv v)
{
    if (v.k >= JV_STR && v.u.o->rc >= 0 && --v.u.o->rc == 0)
        jt_heap_release(h, v.u.o);
}

struct jt_str *jt_literal_new(const char *bytes, size_t len);

#endif
