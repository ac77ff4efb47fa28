/* libFuzzer harness: the two backends on the same program. The input's bytes choose a
 * well-formed Jett program (tests/lib/jettgen.h: it always compiles and ends, uses no actors
 * and no sleep); the program is compiled once, run on the tree walker, then compiled to bytecode
 * and run on the VM, each in a fresh VM with its output captured and no profiler.
 *
 * Invariants: the same outcome (returned, runtime error), the same stdout and stderr bytes, the
 * same runtime error message (file, line, column, text), the same debug rows and log sequence,
 * and the same heap at the end: as many live Jett objects of as many Jett bytes (what a memory
 * profile reports as retained). The allocation events themselves are compared by
 * tests/runtime/test_backend.c, which runs programs of the same generator through jettprofd on
 * both backends and compares the whole memory profiles. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "runtime/bytecode.h"
#include "runtime/interp.h"
#include "tests/lib/jettgen.h"

struct result {
    enum jt_outcome outcome;
    char *out, *err, *errmsg;
    size_t out_len, err_len, errmsg_len;
    uint64_t objects, live_bytes;
    uint32_t ndebug, nlogs;
    uint64_t log_seq;
};

static char *take(struct jp_buf *b, size_t *len)
{
    *len = b->len;
    char *p = malloc(b->len + 1);
    if (!p)
        abort();
    if (b->len)
        memcpy(p, b->p, b->len);
    p[b->len] = '\0';
    return p;
}

static void run(struct jt_program *prog, struct result *r)
{
    static const int no_interrupt = 0;
    struct jt_rt rt;
    jt_rt_init(&rt, prog, &no_interrupt);
    rt.capture = true;
    rt.runlog.human = NULL;
    r->outcome = jt_rt_run(&rt);
    r->out = take(&rt.out, &r->out_len);
    r->err = take(&rt.err, &r->err_len);
    r->errmsg = take(&rt.errmsg, &r->errmsg_len);
    r->objects = rt.heap.objects;
    r->live_bytes = rt.heap.live_bytes;
    r->ndebug = rt.runlog.ndebug;
    r->nlogs = rt.runlog.nlogs;
    r->log_seq = rt.runlog.last_seq;
    jt_rt_fini(&rt);
}

static void same(const char *what, const char *a, size_t na, const char *b, size_t nb,
                 const char *src)
{
    if (na != nb || memcmp(a, b, na) != 0) {
        fprintf(stderr, "fuzz_backends: %s differs\n--- interp\n%.*s\n--- vm\n%.*s\n--- program\n%s",
                what, (int)na, a, (int)nb, b, src);
        abort();
    }
}

/* Where each program is written (jt_compile reads a file), removed at exit. */
static char dir[] = "/tmp/fuzz_backends.XXXXXX";
static char path[64];

static void remove_dir(void)
{
    unlink(path);
    rmdir(dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!path[0]) {
        if (!mkdtemp(dir))
            abort();
        snprintf(path, sizeof path, "%s/main.jett", dir);
        atexit(remove_dir);
    }
    char *src;
    size_t len = tl_jett_program(data, size, &src);
    if (!len)
        abort();
    FILE *f = fopen(path, "w");
    if (!f || fwrite(src, 1, len, f) != len || fclose(f) != 0)
        abort();
    struct jt_diags d = {0};
    struct jt_program *prog = NULL;
    if (jt_compile(path, NULL, &prog, &d) < 0) {
        fprintf(stderr, "fuzz_backends: a generated program does not compile:\n%s\n%s",
                d.text.p ? d.text.p : "", src);
        abort(); /* the generator's promise */
    }
    jp_buf_free(&d.text);
    struct result a, b;
    run(prog, &a);
    if (jt_bc_compile(prog) < 0)
        abort();
    run(prog, &b);
    if (a.outcome != b.outcome) {
        fprintf(stderr, "fuzz_backends: outcome %d on the interpreter, %d on the VM\n%s",
                (int)a.outcome, (int)b.outcome, src);
        abort();
    }
    same("stdout", a.out, a.out_len, b.out, b.out_len, src);
    same("stderr", a.err, a.err_len, b.err, b.err_len, src);
    same("the runtime error", a.errmsg, a.errmsg_len, b.errmsg, b.errmsg_len, src);
    if (a.objects != b.objects || a.live_bytes != b.live_bytes) {
        fprintf(stderr, "fuzz_backends: at the end %llu objects of %llu bytes on the "
                        "interpreter, %llu of %llu on the VM\n%s",
                (unsigned long long)a.objects, (unsigned long long)a.live_bytes,
                (unsigned long long)b.objects, (unsigned long long)b.live_bytes, src);
        abort();
    }
    if (a.ndebug != b.ndebug || a.nlogs != b.nlogs || a.log_seq != b.log_seq) {
        fprintf(stderr, "fuzz_backends: debug rows / logs differ\n%s", src);
        abort();
    }
    struct result *rs[] = {&a, &b};
    for (int i = 0; i < 2; i++) {
        free(rs[i]->out);
        free(rs[i]->err);
        free(rs[i]->errmsg);
    }
    jt_program_free(prog);
    free(src);
    return 0;
}
