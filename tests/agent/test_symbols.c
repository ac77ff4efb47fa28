/* libjettprof-agent.so exports exactly the public API: the functions agent/include/jettprof.h
 * declares ($JETTPROF_AGENT_HEADER, read here), each at the version node JETTPROF_1, and no
 * other symbol; the version script ($JETTPROF_AGENT_MAP) lists those same names. The protocol
 * and writers code linked into it stays hidden, and neither the engine nor the report builder
 * is linked in at all. Reads `nm` of the libraries named by $JETTPROF_AGENT_SO and
 * $JETTPROF_AGENT_A. */
#include <criterion/criterion.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/lib/text.h"

#define API_VERSION "JETTPROF_1"

struct names {
    char **v;
    size_t n;
};

static void names_add(struct names *s, const char *p, size_t len)
{
    s->v = realloc(s->v, (s->n + 1u) * sizeof *s->v);
    cr_assert_not_null(s->v);
    cr_assert_not_null(s->v[s->n] = strndup(p, len));
    s->n++;
}

static int names_has(const struct names *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->v[i], name) == 0)
            return 1;
    return 0;
}

static void names_free(struct names *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
}

/* The file named by the environment variable env (meson test sets it), read whole. */
static char *slurp_env(const char *env)
{
    const char *path = getenv(env);
    cr_assert(path && *path, "%s is not set (run through meson test)", env);
    return tl_slurp(path, NULL);
}

/* Comments, string and character literals and preprocessor lines become blanks (newlines
 * stay), so that what is left of a header is its declarations. */
static void blank_non_code(char *t)
{
    int bol = 1, pp = 0, cont = 0; /* cont: the directive's last character was a backslash */
    for (char *c = t; *c; c++) {
        if (c[0] == '/' && c[1] == '*') {
            char *e = strstr(c + 2, "*/");
            cr_assert_not_null(e, "an unterminated comment");
            for (; c < e + 1; c++)
                *c = *c == '\n' ? '\n' : ' ';
            *c = ' ';
        } else if (c[0] == '/' && c[1] == '/') {
            for (; c[1] && c[1] != '\n'; c++)
                *c = ' ';
            *c = ' ';
        } else if (*c == '"' || *c == '\'') {
            char q = *c;
            for (*c++ = ' '; *c && *c != q; c++) {
                if (*c == '\\' && c[1])
                    *c++ = ' ';
                *c = ' ';
            }
            cr_assert(*c, "an unterminated literal");
            *c = ' ';
        } else if (*c == '\n') {
            pp = pp && cont;
            bol = 1;
            continue;
        } else if (pp || (bol && *c == '#')) {
            pp = 1;
            cont = *c == '\\';
            *c = ' ';
        }
        bol = bol && isspace((unsigned char)*c);
    }
}

/* The name a file-scope statement (its text outside braces) declares as a function: the
 * identifier before its first parameter list, unless it is a typedef, static or no function
 * at all. NULL, or the name's start with *len. */
static const char *declared_function(const char *st, size_t *len)
{
    const char *prev = NULL;
    size_t prev_len = 0;
    for (const char *c = st; *c;) {
        if (isalpha((unsigned char)*c) || *c == '_') {
            const char *id = c;
            while (isalnum((unsigned char)*c) || *c == '_')
                c++;
            size_t n = (size_t)(c - id);
#define IS(word) (n == sizeof word - 1u && !memcmp(id, word, n))
            if (IS("typedef") || IS("static") || IS("_Static_assert") || IS("static_assert"))
                return NULL;
            if (IS("__attribute__")) { /* skip its (( ... )) */
                while (isspace((unsigned char)*c))
                    c++;
                for (int depth = 0; *c && (*c == '(' || depth); c++) {
                    depth += (*c == '(') - (*c == ')');
                    if (!depth && *c == ')') {
                        c++;
                        break;
                    }
                }
                continue;
            }
#undef IS
            prev = id;
            prev_len = n;
        } else if (*c == '(') {
            if (!prev)
                return NULL; /* a declarator in parentheses: a pointer, not a function */
            *len = prev_len;
            return prev;
        } else {
            if (!isspace((unsigned char)*c))
                prev = NULL;
            c++;
        }
    }
    return NULL;
}

/* Every function the header declares (file scope, or inside its extern "C" block), without
 * the functions it defines (static inline: not exported). */
static struct names header_functions(void)
{
    char *t = slurp_env("JETTPROF_AGENT_HEADER");
    blank_non_code(t);
    struct names out = {0};
    size_t cap = strlen(t) + 1u, n = 0;
    char *st = malloc(cap); /* the statement so far, outside braces */
    cr_assert_not_null(st);
    int depth = 0, linkage = 0, definition = 0;
    for (const char *c = t; *c; c++) {
        if (*c == '{') {
            st[n] = '\0';
            const char *w = st + strspn(st, " \t\n");
            if (!depth && !strncmp(w, "extern", 6) && !w[6 + strspn(w + 6, " \t\n")]) {
                linkage++; /* extern "C" { */
                n = 0;
                continue;
            }
            if (!depth++)
                definition = strchr(st, '(') != NULL;
        } else if (*c == '}') {
            if (!depth) {
                cr_assert_gt(linkage, 0, "an unbalanced brace in the header");
                linkage--;
                n = 0;
            } else if (!--depth && definition) {
                n = 0; /* a function definition ends at its brace */
                definition = 0;
            }
        } else if (depth) {
            continue;
        } else if (*c == ';') {
            st[n] = '\0';
            size_t len;
            const char *name = declared_function(st, &len);
            if (name)
                names_add(&out, name, len);
            n = 0;
        } else {
            st[n++] = *c;
        }
    }
    cr_assert(depth == 0 && linkage == 0, "unbalanced braces in the header");
    free(st);
    free(t);
    return out;
}

/* The names the version script's node API_VERSION makes global. */
static struct names map_globals(void)
{
    char *t = slurp_env("JETTPROF_AGENT_MAP");
    blank_non_code(t);
    struct names out = {0};
    char *node = strstr(t, API_VERSION);
    cr_assert_not_null(node, "the version script has no node " API_VERSION);
    char *g = strstr(node, "global:"), *l = strstr(node, "local:");
    cr_assert(g && l && g < l, "the node " API_VERSION " has a global: list before local:");
    for (char *c = g + 7; c < l;) {
        c += strspn(c, " \t\n");
        size_t n = strcspn(c, "; \t\n");
        if (c >= l || !n)
            break;
        names_add(&out, c, n);
        c += n;
        c += strspn(c, " \t\n");
        cr_assert_eq(*c, ';', "a name without its ';' in the version script");
        c++;
    }
    free(t);
    return out;
}

/* The next "address type name" line nm printed: 1, or 0 at the end. */
static int nm_next(FILE *p, char type[8], char name[400])
{
    char line[512], addr[64];
    while (fgets(line, sizeof line, p))
        if (sscanf(line, "%63s %7s %399s", addr, type, name) == 3)
            return 1;
    return 0;
}

Test(symbols, the_library_exports_exactly_the_functions_the_header_declares)
{
    struct names api = header_functions();
    cr_assert_gt(api.n, 0, "no function found in the header");
    const char *so = getenv("JETTPROF_AGENT_SO");
    cr_assert(so && *so, "JETTPROF_AGENT_SO is not set (run through meson test)");
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "nm -D --defined-only --with-symbol-versions '%s'", so);
    FILE *p = popen(cmd, "r");
    cr_assert(p != NULL);
    struct names exported = {0};
    char type[8], name[400];
    int node = 0;
    while (nm_next(p, type, name)) {
        if (!strcmp(type, "A") && !strcmp(name, API_VERSION)) {
            node = 1; /* the version node's own symbol */
            continue;
        }
        char *at = strstr(name, "@@");
        cr_expect(at && !strcmp(at + 2, API_VERSION), "%s is not exported at " API_VERSION,
                  name);
        size_t n = at ? (size_t)(at - name) : strlen(name);
        names_add(&exported, name, n);
        cr_expect(names_has(&api, exported.v[exported.n - 1u]),
                  "%s is exported but jettprof.h does not declare it", name);
    }
    cr_assert_eq(pclose(p), 0, "nm failed on %s", so);
    cr_expect(node, "the library defines no version " API_VERSION);
    for (size_t i = 0; i < api.n; i++)
        cr_expect(names_has(&exported, api.v[i]),
                  "jettprof.h declares %s but the library does not export it", api.v[i]);
    names_free(&exported);
    names_free(&api);
}

Test(symbols, the_version_script_lists_exactly_the_functions_the_header_declares)
{
    struct names api = header_functions(), map = map_globals();
    for (size_t i = 0; i < map.n; i++)
        cr_expect(names_has(&api, map.v[i]),
                  "the version script exports %s, which jettprof.h does not declare", map.v[i]);
    for (size_t i = 0; i < api.n; i++)
        cr_expect(names_has(&map, api.v[i]),
                  "jettprof.h declares %s but the version script does not list it", api.v[i]);
    names_free(&map);
    names_free(&api);
}

/* Adds the global symbols an archive defines (nm types T D B R) to *names. */
static size_t defined_globals(const char *archive, char ***names, size_t n)
{
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "nm --defined-only '%s'", archive);
    FILE *p = popen(cmd, "r");
    cr_assert(p != NULL);
    char type[8], name[400];
    while (nm_next(p, type, name)) {
        if (!strchr("TDBR", type[0]))
            continue;
        *names = realloc(*names, (n + 1u) * sizeof **names);
        cr_assert(*names && ((*names)[n] = strdup(name)));
        n++;
    }
    cr_assert_eq(pclose(p), 0, "nm failed on %s", archive);
    return n;
}

static int listed(char **names, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0)
            return 1;
    return 0;
}

/* The agent renders its own failure profile with the writers alone: neither the engine (its
 * API and its internals: interning, live tables, young window, budget, ...) nor the report
 * builder is linked into the shared library or the installed static archive. The forbidden
 * names are every global the engine's and the report builder's archives define. */
Test(symbols, neither_engine_nor_report_builder_inside)
{
    const char *forbidden[] = {getenv("JETTPROF_ENGINE_A"), getenv("JETTPROF_REPORT_A")};
    const char *libs[] = {getenv("JETTPROF_AGENT_SO"), getenv("JETTPROF_AGENT_A")};
    char **bad = NULL;
    size_t nbad = 0;
    for (size_t i = 0; i < 2; i++) {
        cr_assert(forbidden[i] && *forbidden[i], "archive paths not set (run through meson)");
        nbad = defined_globals(forbidden[i], &bad, nbad);
    }
    cr_assert(listed(bad, nbad, "jp_engine_new") && listed(bad, nbad, "jpe_cpu_settle") &&
                  listed(bad, nbad, "jp_report_build"),
              "the engine and report archives define what they should");
    for (size_t l = 0; l < 2; l++) {
        cr_assert(libs[l] && *libs[l], "library paths not set (run through meson)");
        char cmd[4200];
        snprintf(cmd, sizeof cmd, "nm --defined-only '%s'", libs[l]);
        FILE *p = popen(cmd, "r");
        cr_assert(p != NULL);
        char type[8], name[400];
        int symbols = 0;
        while (nm_next(p, type, name)) {
            symbols++;
            cr_expect(!listed(bad, nbad, name), "%s defines %s", libs[l], name);
        }
        cr_assert_eq(pclose(p), 0, "nm failed on %s", libs[l]);
        cr_assert_gt(symbols, 0, "%s defines nothing", libs[l]);
    }
    for (size_t i = 0; i < nbad; i++)
        free(bad[i]);
    free(bad);
}
