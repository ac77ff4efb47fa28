/* Loading a Jett program: the project root, imports of project files, vendored dependencies
 * (deps/NAME/...) and the stdlib, UTF-8 validation, and the run manifest of loaded sources
 * (origin + logical path) that profiling and excerpts use. Source text is read once, here;
 * excerpts later come from these loaded bytes, never from a new filesystem read.
 *
 * Logical paths are always relative and '/'-separated. Absolute host paths are kept only to
 * open files and check containment, and never appear in a diagnostic or any other output. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/utf8.h"
#include "bytecode.h"
#include "jett.h"

#define JT_MAX_SOURCE_BYTES (16u << 20) /* spans are 32-bit; keep far from it */
#define JT_MAX_SOURCES 4096u

int jt_add_global(struct jt_program *prog, struct jt_global *g)
{
    prog->globals = jt_xrealloc(prog->globals, sizeof *prog->globals * (prog->nglobals + 1));
    prog->globals[prog->nglobals] = *g;
    return (int)prog->nglobals++;
}

/* Reads a whole regular file; *st is the file that was read (fstat of the open fd). */
static int read_file(const char *path, char **text, size_t *len, struct stat *st)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (fstat(fd, st) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    if (!S_ISREG(st->st_mode)) {
        close(fd);
        return -EISDIR;
    }
    if (st->st_size > (off_t)JT_MAX_SOURCE_BYTES) {
        close(fd);
        return -EFBIG;
    }
    size_t cap = (size_t)st->st_size + 1, n = 0;
    char *buf = jt_xmalloc(cap);
    for (;;) {
        if (n + 1 >= cap) {
            if (cap > JT_MAX_SOURCE_BYTES) {
                free(buf);
                close(fd);
                return -EFBIG;
            }
            cap *= 2;
            buf = jt_xrealloc(buf, cap);
        }
        ssize_t r = read(fd, buf + n, cap - n - 1);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = -errno;
            free(buf);
            close(fd);
            return e;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
    *text = buf;
    *len = n;
    return 0;
}

/* Is `path` (canonical) inside directory `dir` (canonical)? */
static bool inside(const char *dir, const char *path)
{
    size_t n = strlen(dir);
    if (strcmp(dir, "/") == 0)
        return true;
    return strncmp(dir, path, n) == 0 && path[n] == '/';
}

/* A relative, '/'-separated path with no empty, "." or ".." segment and no backslash. */
static bool clean_relative(const char *p)
{
    if (!*p || *p == '/')
        return false;
    const char *s = p;
    for (;;) {
        const char *e = strchr(s, '/');
        size_t n = e ? (size_t)(e - s) : strlen(s);
        if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
            return false;
        if (!e)
            break;
        s = e + 1;
    }
    for (const char *c = p; *c; c++)
        if (*c == '\\' || (unsigned char)*c < 0x20)
            return false;
    return true;
}

struct loader {
    struct jt_program *prog;
    struct jt_diags *d;
    bool failed;
};

static char *path_join(const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    char *p = jt_xmalloc(na + nb + 2);
    memcpy(p, a, na);
    p[na] = '/';
    memcpy(p + na + 1, b, nb + 1);
    return p;
}

static struct jt_module *load(struct loader *L, enum jt_origin origin, const char *logical,
                              const char *dep_name, const char *base_dir, const char *rel,
                              const struct jt_source *from, uint32_t line, uint32_t col);

static void load_imports(struct loader *L, struct jt_module *m)
{
    struct jt_program *prog = L->prog;
    const struct jt_source *src = m->src;
    for (uint32_t i = 0; i < m->nimports; i++) {
        const char *imp = m->imports[i];
        uint32_t line = m->import_line[i], col = m->import_col[i];
        size_t n = strlen(imp);
        if (!clean_relative(imp) || n < 6 || strcmp(imp + n - 5, ".jett") != 0) {
            jt_diag(L->d, src, line, col,
                    "expected an import path that is relative, '/'-separated, without '.' or "
                    "'..' segments, and ends in .jett");
            L->failed = true;
            continue;
        }
        if (strncmp(imp, "stdlib/", 7) == 0) {
            load(L, JT_ORIGIN_STDLIB, imp, NULL, prog->stdlib_dir, imp + 7, src, line, col);
        } else if (strncmp(imp, "deps/", 5) == 0) {
            const char *name = imp + 5, *slash = strchr(name, '/');
            if (!slash) {
                jt_diag(L->d, src, line, col,
                        "expected 'deps/NAME/path.jett': a dependency import names the dependency and a file in it");
                L->failed = true;
                continue;
            }
            char *dep = jt_xstrndup(name, (size_t)(slash - name));
            char *deps = path_join(prog->root, "deps");
            char *dir = path_join(deps, dep);
            load(L, JT_ORIGIN_DEPENDENCY, name, dep, dir, slash + 1, src, line, col);
            free(dep);
            free(deps);
            free(dir);
        } else if (src->origin == JT_ORIGIN_PROJECT) {
            load(L, JT_ORIGIN_PROJECT, imp, NULL, prog->root, imp, src, line, col);
        } else if (src->origin == JT_ORIGIN_DEPENDENCY) {
            /* inside a dependency, a plain path is relative to that dependency's root */
            char *deps = path_join(prog->root, "deps");
            char *dir = path_join(deps, src->dep_name);
            size_t nl = strlen(src->dep_name) + 1 + n + 1;
            char *logical = jt_xmalloc(nl);
            snprintf(logical, nl, "%s/%s", src->dep_name, imp);
            load(L, JT_ORIGIN_DEPENDENCY, logical, src->dep_name, dir, imp, src, line, col);
            free(deps);
            free(dir);
            free(logical);
        } else {
            char *logical = path_join("stdlib", imp);
            load(L, JT_ORIGIN_STDLIB, logical, NULL, prog->stdlib_dir, imp, src, line, col);
            free(logical);
        }
    }
}

static struct jt_module *load(struct loader *L, enum jt_origin origin, const char *logical,
                              const char *dep_name, const char *base_dir, const char *rel,
                              const struct jt_source *from, uint32_t line, uint32_t col)
{
    struct jt_program *prog = L->prog;
    for (uint32_t i = 0; i < prog->nsources; i++)
        if (prog->sources[i]->origin == origin && strcmp(prog->sources[i]->logical, logical) == 0)
            return NULL; /* already loaded (or being loaded: import cycles are fine) */
    if (prog->nsources >= JT_MAX_SOURCES) {
        jt_diag(L->d, from, line, col, "too many source files (at most %u)", JT_MAX_SOURCES);
        L->failed = true;
        return NULL;
    }
    if (!base_dir) {
        jt_diag(L->d, from, line, col, "cannot import '%s': the standard library is not installed",
                logical);
        L->failed = true;
        return NULL;
    }
    char *joined = path_join(base_dir, rel);
    char *canon = realpath(joined, NULL);
    int e = canon ? 0 : errno;
    free(joined);
    char *base_canon = realpath(base_dir, NULL);
    if (!base_canon && !e)
        e = errno;
    if (!canon || !base_canon) {
        if (e == ENOMEM)
            jt_diag(L->d, from, line, col, "cannot load '%s': out of memory", logical);
        else
            jt_diag(L->d, from, line, col, "cannot find the imported file '%s'", logical);
        L->failed = true;
        free(canon);
        free(base_canon);
        return NULL;
    }
    if (!inside(base_canon, canon)) {
        jt_diag(L->d, from, line, col,
                "import '%s' resolves outside its %s: only files inside it may be loaded", logical,
                origin == JT_ORIGIN_STDLIB ? "standard library" :
                origin == JT_ORIGIN_DEPENDENCY ? "dependency" : "project");
        L->failed = true;
        free(canon);
        free(base_canon);
        return NULL;
    }
    free(base_canon);
    struct jt_source *src = jt_xcalloc(1, sizeof *src);
    src->origin = origin;
    src->logical = jt_xstrdup(logical);
    src->dep_name = dep_name ? jt_xstrdup(dep_name) : NULL;
    struct stat st;
    int r = read_file(canon, &src->text, &src->len, &st);
    free(canon);
    if (r < 0) {
        if (from)
            jt_diag(L->d, from, line, col, "cannot read the imported file '%s': %s", logical,
                    strerror(-r));
        else
            jt_diag(L->d, NULL, 0, 0, "cannot read %s: %s", logical, strerror(-r));
        L->failed = true;
        free(src->logical);
        free(src->dep_name);
        free(src);
        return NULL;
    }
    src->dev = st.st_dev;
    src->ino = st.st_ino;
    prog->sources = jt_xrealloc(prog->sources, sizeof *prog->sources * (prog->nsources + 1));
    prog->sources[prog->nsources++] = src;
    src->manifest_id = prog->nsources;
    size_t bad;
    if (jp_utf8_validate(src->text, src->len, &bad) < 0) {
        uint32_t l = 1, c = 1;
        for (size_t i = 0; i < bad; i++) {
            if (src->text[i] == '\n') {
                l++;
                c = 1;
            } else {
                c++;
            }
        }
        jt_diag(L->d, src, l, c, "invalid UTF-8: expected the source file to be UTF-8 text");
        L->failed = true;
        return NULL;
    }
    struct jt_module *m = NULL;
    if (jt_parse_module(src, &m, prog, L->d) < 0)
        L->failed = true;
    else
        load_imports(L, m); /* a module is initialised after what it imports */
    prog->modules = jt_xrealloc(prog->modules, sizeof *prog->modules * (prog->nmodules + 1));
    prog->modules[prog->nmodules++] = m;
    return m;
}

/* The project root is the nearest directory at or above the program's that holds a
 * `jett.project` file, else the program's own directory. */
static char *find_root(const char *file_canon)
{
    char *dir = jt_xstrdup(file_canon);
    char *slash = strrchr(dir, '/');
    if (slash == dir)
        slash[1] = '\0';
    else
        *slash = '\0';
    char *probe = jt_xstrdup(dir);
    for (;;) {
        char *marker = path_join(strcmp(probe, "/") == 0 ? "" : probe, "jett.project");
        bool found = access(marker, F_OK) == 0;
        free(marker);
        if (found) {
            free(dir);
            return probe;
        }
        char *s = strrchr(probe, '/');
        if (!s || strcmp(probe, "/") == 0)
            break;
        if (s == probe)
            s[1] = '\0';
        else
            *s = '\0';
    }
    free(probe);
    return dir;
}

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

int jt_compile(const char *file, const char *stdlib_dir, struct jt_program **out,
               struct jt_diags *d)
{
    struct jt_program *prog = jt_xcalloc(1, sizeof *prog);
    *out = prog;
    char *canon = realpath(file, NULL);
    if (!canon) {
        int e = errno;
        /* Name the file by its last segment only: the user may have given an absolute path. */
        jt_diag(d, NULL, 0, 0, "cannot open the program file %s: %s", base_name(file), strerror(e));
        return -EINVAL;
    }
    prog->root = find_root(canon);
    prog->stdlib_dir = stdlib_dir ? realpath(stdlib_dir, NULL) : NULL;
    const char *rel = canon + strlen(prog->root);
    if (strcmp(prog->root, "/") != 0)
        rel++; /* skip the separator */
    size_t n = strlen(rel);
    if (n < 6 || strcmp(rel + n - 5, ".jett") != 0) {
        jt_diag(d, NULL, 0, 0, "expected a Jett source file ending in .jett, got %s", base_name(file));
        free(canon);
        return -EINVAL;
    }
    struct loader L = {prog, d, false};
    struct jt_module *m = load(&L, JT_ORIGIN_PROJECT, rel, NULL, prog->root, rel, NULL, 0, 0);
    free(canon);
    if (L.failed || !m)
        return -EINVAL;
    if (jt_check_program(prog, d) < 0)
        return -EINVAL;
    /* main is looked up in the program file's own namespace */
    for (uint32_t i = 0; i < m->nfns; i++)
        if (strcmp(m->fns[i]->name, "main") == 0)
            prog->main = m->fns[i];
    if (!prog->main) {
        jt_diag(d, m->src, 1, 1, "expected a function 'main' in the program file");
        return -EINVAL;
    }
    if (prog->main->nparams != 0) {
        jt_diag(d, m->src, prog->main->decl_line, prog->main->decl_col,
                "expected 'main' to take no parameters");
        return -EINVAL;
    }
    return 0;
}

void jt_node_free(struct jt_node *n)
{
    if (!n)
        return;
    jt_node_free(n->a);
    jt_node_free(n->b);
    jt_node_free(n->c);
    jt_node_free(n->d);
    for (uint32_t i = 0; i < n->nkids; i++)
        jt_node_free(n->kids[i]);
    free(n->kids);
    if (n->kind != JT_N_ASSIGN) /* ASSIGN shares its name with its NAME child */
        free(n->name);
    if (n->str)
        free(n->str);
    free(n);
}

static void free_fn(struct jt_fn *f)
{
    if (!f)
        return;
    free(f->ns);
    free(f->name);
    for (uint32_t i = 0; i < f->nparams; i++)
        free(f->params[i].name);
    free(f->params);
    jt_node_free(f->body);
    free(f->slot_secret);
    free(f);
}

void jt_program_free(struct jt_program *p)
{
    if (!p)
        return;
    jt_bc_free_program(p);
    for (uint32_t i = 0; i < p->nmodules; i++) {
        struct jt_module *m = p->modules[i];
        for (uint32_t k = 0; k < m->nfns; k++)
            free_fn(m->fns[k]);
        free(m->fns);
        free(m->globals);
        for (uint32_t k = 0; k < m->nimports; k++)
            free(m->imports[k]);
        free(m->imports);
        free(m->import_line);
        free(m->import_col);
        free(m->ns);
        free_fn(m->init_frame);
        free(m);
    }
    free(p->modules);
    for (uint32_t i = 0; i < p->nglobals; i++) {
        free(p->globals[i].ns);
        free(p->globals[i].name);
        jt_node_free(p->globals[i].init);
    }
    free(p->globals);
    for (uint32_t i = 0; i < p->nsources; i++) {
        struct jt_source *s = p->sources[i];
        free(s->logical);
        free(s->dep_name);
        free(s->text);
        free(s->secret_spans);
        free(s);
    }
    free(p->sources);
    free(p->root);
    free(p->stdlib_dir);
    free(p);
}
