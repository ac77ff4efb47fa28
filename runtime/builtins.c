/* The builtins of the reference Jett runtime (LANGUAGE.md): printing, strings, lists, sleep,
 * fail, debug and log, whose rows runlog.c records, and the actors' send, receive, join and
 * self (actors.c). jt_builtin_apply takes the evaluated arguments, so both backends share it;
 * errors are reported through jt_rt_error, so a builtin's failure unwinds exactly like any
 * other runtime error. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "actors.h"
#include "interp.h"
#include "jettprof.h"

static void emit(struct jt_rt *rt, bool to_err, const char *p, size_t n)
{
    struct jt_rt *root = rt->root; /* the run's outputs are main's */
    if (root->capture) {
        jt_actor_lock_shared(rt);
        jt_buf_put(to_err ? &root->err : &root->out, p, n);
        jt_actor_unlock_shared(rt);
        return;
    }
    fwrite(p, 1, n, to_err ? stderr : stdout); /* one locked stdio call: lines never mix */
}

/* The decimal digits of v written backwards before end (at most 20 bytes); their count. */
static size_t int_text(int64_t v, char *end)
{
    char *p = end;
    uint64_t u = v < 0 ? 0u - (uint64_t)v : (uint64_t)v;
    do
        *--p = (char)('0' + u % 10u);
    while ((u /= 10u) != 0);
    if (v < 0)
        *--p = '-';
    return (size_t)(end - p);
}

/* Text of a value as print() shows it. Interpreter-internal buffer, not a Jett event. */
static void to_text(const jv v, struct jp_buf *b, int depth)
{
    switch (v.k) {
    case JV_NIL: jt_buf_puts(b, "nil"); return;
    case JV_INT: {
        char d[24];
        size_t len = int_text(v.u.i, d + sizeof d);
        jt_buf_put(b, d + sizeof d - len, len);
        return;
    }
    case JV_BOOL: jt_buf_puts(b, v.u.i ? "true" : "false"); return;
    case JV_STR: {
        const struct jt_str *s = (const struct jt_str *)v.u.o;
        jt_buf_put(b, s->data, s->len);
        return;
    }
    case JV_SECRET: jt_buf_puts(b, "<secret>"); return;
    case JV_LIST: {
        const struct jt_list *l = (const struct jt_list *)v.u.o;
        if (depth >= MAX_PRINT_DEPTH) {
            jt_buf_puts(b, "[...]");
            return;
        }
        jt_buf_puts(b, "[");
        for (uint64_t i = 0; i < l->len; i++) {
            if (i)
                jt_buf_puts(b, ", ");
            to_text(l->items[i], b, depth + 1);
        }
        jt_buf_puts(b, "]");
        return;
    }
    default: return;
    }
}

static bool want_int(struct jt_rt *rt, const struct jt_node *at, jv v, const char *what)
{
    if (v.k == JV_INT)
        return true;
    jt_rt_error(rt, at, "%s expects int, got %s", what, jt_kind_name(v.k));
    return false;
}

static void sleep_ms(struct jt_rt *rt, int64_t ms)
{
    struct timespec deadline;
    clock_gettime(CLOCK_MONOTONIC, &deadline);
    deadline.tv_sec += ms / 1000;
    deadline.tv_nsec += (ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) {
        deadline.tv_sec++;
        deadline.tv_nsec -= 1000000000L;
    }
    /* Slices of at most 10 ms so an interrupt is honoured promptly. */
    for (;;) {
        if (__atomic_load_n(rt->interrupt, __ATOMIC_RELAXED))
            return;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        int64_t left = (int64_t)(deadline.tv_sec - now.tv_sec) * 1000000000LL +
                       (deadline.tv_nsec - now.tv_nsec);
        if (left <= 0)
            return;
        if (left > 10000000LL)
            left = 10000000LL;
        struct timespec ts = {0, (long)left};
        nanosleep(&ts, NULL);
    }
}

/* Every argument is evaluated first, left to right (an error there is an ordinary runtime
 * error, and what was evaluated is released), then the builtin applies to the values. */
jv jt_call_builtin(struct jt_rt *rt, const struct jt_node *n)
{
    jv small[3], *a = small;
    if (n->nkids > 3 && !(a = calloc(n->nkids, sizeof *a))) { /* log's many arguments */
        jt_rt_error(rt, n, "out of memory: cannot evaluate the arguments of %s",
                    jt_builtin_name(n->op));
        return NIL;
    }
    uint32_t got = 0;
    for (; got < n->nkids; got++) {
        a[got] = jt_eval(rt, n->kids[got]);
        if (rt->ctl)
            break;
    }
    jv r = NIL;
    if (!rt->ctl) {
        r = jt_builtin_apply(rt, n, a, got);
    } else {
        for (uint32_t i = 0; i < got; i++)
            jv_release(&rt->heap, a[i]);
    }
    if (a != small)
        free(a);
    return r;
}

/* log(level, message, key, value, ...): the call is recorded or rejected; a rejection is no
 * error. */
static void apply_log(struct jt_rt *rt, const struct jt_node *n, const jv *a, uint32_t nargs)
{
    jt_actor_lock_shared(rt); /* one sequence of log numbers for the run */
    int lr = jt_runlog_log(&rt->root->runlog, rt->fn->src, n->line, n->col, a, nargs);
    jt_actor_unlock_shared(rt);
    if (lr < 0)
        jt_rt_error(rt, n, "out of memory: cannot record a log record");
}

jv jt_builtin_apply(struct jt_rt *rt, const struct jt_node *n, jv *a, uint32_t nargs)
{
    jv r = NIL;
    switch (n->op) {
    case JT_B_LOG:
        apply_log(rt, n, a, nargs);
        break;
    case JT_B_PRINT:
    case JT_B_EPRINT: {
        struct jp_buf b = {0};
        to_text(a[0], &b, 0);
        jt_buf_put(&b, "\n", 1);
        emit(rt, n->op == JT_B_EPRINT, b.p, b.len);
        jp_buf_free(&b);
        break;
    }
    case JT_B_STR:
        if (a[0].k == JV_STR || a[0].k == JV_SECRET) {
            r = a[0];
            a[0] = NIL;
        } else if (a[0].k == JV_INT) { /* the common case, without a text buffer */
            char d[24];
            size_t len = int_text(a[0].u.i, d + sizeof d);
            jt_new_str(rt, n, d + sizeof d - len, len, &r, JV_STR);
        } else {
            struct jp_buf b = {0};
            to_text(a[0], &b, 0);
            jt_new_str(rt, n, b.p, b.len, &r, JV_STR);
            jp_buf_free(&b);
        }
        break;
    case JT_B_LEN:
        if (a[0].k == JV_STR || a[0].k == JV_SECRET)
            r = mk_int((int64_t)((struct jt_str *)a[0].u.o)->len);
        else if (a[0].k == JV_LIST)
            r = mk_int((int64_t)((struct jt_list *)a[0].u.o)->len);
        else
            jt_rt_error(rt, n, "len expects str, secret or list, got %s", jt_kind_name(a[0].k));
        break;
    case JT_B_PUSH: {
        if (a[0].k != JV_LIST) {
            jt_rt_error(rt, n, "push expects a list first, got %s", jt_kind_name(a[0].k));
            break;
        }
        struct jt_list *l = (struct jt_list *)a[0].u.o;
        if (l->len == l->cap) {
            /* Growth policy (LANGUAGE.md): 0 -> 4 slots, then doubling. */
            uint64_t nc = l->cap ? l->cap * 2 : 4;
            if (jt_heap_list_grow(&rt->heap, l, nc) < 0) {
                jt_rt_error(rt, n, "out of memory: cannot grow a list to %" PRIu64 " slots", nc);
                break;
            }
        }
        l->items[l->len++] = a[1];
        a[1] = NIL;
        break;
    }
    case JT_B_POP: {
        if (a[0].k != JV_LIST) {
            jt_rt_error(rt, n, "pop expects a list, got %s", jt_kind_name(a[0].k));
            break;
        }
        struct jt_list *l = (struct jt_list *)a[0].u.o;
        if (l->len == 0) {
            jt_rt_error(rt, n, "pop from an empty list");
            break;
        }
        r = l->items[--l->len];
        break;
    }
    case JT_B_SLEEP:
        if (!want_int(rt, n, a[0], "sleep"))
            break;
        if (a[0].u.i < 0 || a[0].u.i > 86400000) {
            jt_rt_error(rt, n, "sleep expects milliseconds from 0 to 86400000, got %" PRId64,
                        a[0].u.i);
            break;
        }
        if (jt_actor_sleep(rt, n, a[0].u.i)) /* parked: its worker runs another actor */
            break;
        if (rt->pt)
            jettprof_set_state(rt->pt, JETTPROF_STATE_WAITING);
        sleep_ms(rt, a[0].u.i);
        if (rt->pt)
            jettprof_set_state(rt->pt, JETTPROF_STATE_JETT);
        jt_safe_point(rt);
        break;
    case JT_B_SEND:
        r = jt_actor_send(rt, n, a[0], a[1]);
        break;
    case JT_B_RECEIVE:
        r = jt_actor_receive(rt, n);
        break;
    case JT_B_JOIN:
        r = jt_actor_join(rt, n, a[0]);
        break;
    case JT_B_SELF:
        r = mk_int(jt_actor_id(rt));
        break;
    case JT_B_FAIL: {
        struct jp_buf b = {0};
        to_text(a[0], &b, 0);
        jt_rt_error(rt, n, "%s", b.p ? b.p : "");
        jp_buf_free(&b);
        break;
    }
    case JT_B_DEBUG: {
        jt_actor_lock_shared(rt);
        int dr = jt_runlog_debug(&rt->root->runlog, rt->fn->src, n->line, n->col, a[0]);
        jt_actor_unlock_shared(rt);
        if (dr < 0) {
            jt_rt_error(rt, n, "out of memory: cannot record a debug row");
            break;
        }
        r = a[0];
        a[0] = NIL;
        break;
    }
    case JT_B_SECRET:
        if (a[0].k != JV_STR && a[0].k != JV_SECRET) {
            jt_rt_error(rt, n, "secret expects str, got %s", jt_kind_name(a[0].k));
            break;
        }
        r = a[0];
        r.k = JV_SECRET;
        a[0] = NIL;
        break;
    case JT_B_SUBSTR: {
        if (a[0].k != JV_STR) {
            jt_rt_error(rt, n, "substr expects str first, got %s", jt_kind_name(a[0].k));
            break;
        }
        if (!want_int(rt, n, a[1], "substr's start") || !want_int(rt, n, a[2], "substr's length"))
            break;
        const struct jt_str *s = (const struct jt_str *)a[0].u.o;
        if (a[1].u.i < 0 || a[2].u.i < 0 || (uint64_t)a[1].u.i > s->len ||
            (uint64_t)a[2].u.i > s->len - (uint64_t)a[1].u.i) {
            jt_rt_error(rt, n,
                        "substr(%" PRId64 ", %" PRId64 ") is outside a string of %" PRIu64
                        " bytes",
                     a[1].u.i, a[2].u.i, s->len);
            break;
        }
        jt_new_str(rt, n, s->data + a[1].u.i, (uint64_t)a[2].u.i, &r, JV_STR);
        break;
    }
    case JT_B_BYTE: {
        if (a[0].k != JV_STR) {
            jt_rt_error(rt, n, "byte expects str first, got %s", jt_kind_name(a[0].k));
            break;
        }
        if (!want_int(rt, n, a[1], "byte's index"))
            break;
        const struct jt_str *s = (const struct jt_str *)a[0].u.o;
        if (a[1].u.i < 0 || (uint64_t)a[1].u.i >= s->len) {
            jt_rt_error(rt, n, "byte index %" PRId64 " is outside a string of %" PRIu64 " bytes",
                     a[1].u.i, s->len);
            break;
        }
        r = mk_int((unsigned char)s->data[a[1].u.i]);
        break;
    }
    case JT_B_CHR: {
        if (!want_int(rt, n, a[0], "chr"))
            break;
        if (a[0].u.i < 0 || a[0].u.i > 255) {
            jt_rt_error(rt, n, "chr expects a byte value from 0 to 255, got %" PRId64, a[0].u.i);
            break;
        }
        char c = (char)a[0].u.i;
        jt_new_str(rt, n, &c, 1, &r, JV_STR);
        break;
    }
    case JT_B_LIST: {
        if (!want_int(rt, n, a[0], "list's count"))
            break;
        if (a[0].u.i < 0 || (uint64_t)a[0].u.i > JT_MAX_LIST_SLOTS) {
            jt_rt_error(rt, n, "list expects a count from 0 to %" PRIu64 ", got %" PRId64,
                     JT_MAX_LIST_SLOTS, a[0].u.i);
            break;
        }
        struct jt_list *l;
        if (jt_heap_list(&rt->heap, (uint64_t)a[0].u.i, &l) < 0) {
            jt_rt_error(rt, n, "out of memory: cannot allocate a list of %" PRId64 " slots",
                        a[0].u.i);
            break;
        }
        for (uint64_t i = 0; i < l->cap; i++) {
            jv_retain(a[1]);
            l->items[i] = a[1];
        }
        l->len = l->cap;
        r = (jv){.k = JV_LIST, .u.o = &l->h};
        break;
    }
    default:
        jt_rt_error(rt, n, "unknown builtin");
        break;
    }
    for (uint32_t i = 0; i < nargs; i++) /* what the builtin did not take */
        jv_release(&rt->heap, a[i]);
    if (rt->ctl) {
        jv_release(&rt->heap, r);
        return NIL;
    }
    return r;
}
