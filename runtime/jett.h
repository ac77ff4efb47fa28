/* The reference Jett runtime: internal interfaces shared by the lexer, parser, checker,
 * interpreter, heap boundary and the `jett run` driver. Nothing here is a public API; the
 * language it implements is described in runtime/LANGUAGE.md.
 *
 * Error convention: functions return 0 (or a count) on success and a negative errno on failure.
 * Human messages are made once, at the edge: compile diagnostics are collected in a
 * struct jt_diags, runtime errors in the interpreter's context, CLI errors by jt_cli_parse.
 */
#ifndef JETT_RUNTIME_JETT_H
#define JETT_RUNTIME_JETT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/buf.h"
#include "jettprof.h"

/* ---- growable byte buffer (interpreter-internal memory, never a Jett heap event) ---- */
/* The one text buffer (common/buf.h). The interpreter's appends abort on exhaustion, as the
 * jt_x* allocators do: its bookkeeping cannot degrade gracefully. Free with jp_buf_free. */
void jt_buf_put(struct jp_buf *b, const void *s, size_t n);
void jt_buf_puts(struct jp_buf *b, const char *s);
void jt_buf_printf(struct jp_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void *jt_xmalloc(size_t n);  /* aborts on exhaustion: interpreter internals only */
void *jt_xcalloc(size_t n, size_t m);
void *jt_xrealloc(void *p, size_t n);
char *jt_xstrndup(const char *s, size_t n);
char *jt_xstrdup(const char *s);

/* ---- CLI ---- */
enum jt_mode { JT_MODE_NONE = 0, JT_MODE_CPU = 1, JT_MODE_MEMORY = 2 };
/* What runs the program: the tree-walking interpreter (interp.c) or the bytecode VM (vm.c). */
enum jt_backend { JT_BACKEND_INTERP = 0, JT_BACKEND_VM = 1 };
#define JT_MAX_EXPORTS 8u
struct jt_cli {
    const char *file;
    enum jt_mode mode;
    bool agent;
    uint32_t threshold_bp; /* default 500 */
    uint32_t limit;        /* default 10 */
    uint32_t rate_hz;      /* default 1000 */
    const char *capture_path; /* NULL unless --profile-capture */
    bool capture_overwrite;   /* --profile-capture-overwrite: an existing file may be replaced */
    bool verbose;             /* --profile-verbose: the human report ends with every total */
    /* --profile-export FORMAT:PATH, in command-line order (JP_EXPORT_* formats) */
    struct jt_export { uint32_t format; const char *path; } exports[JT_MAX_EXPORTS];
    uint32_t nexports;
    uint32_t workers; /* --workers N: runtime worker threads, 1..JT_MAX_WORKERS (default 1) */
    enum jt_backend backend; /* --backend interp|vm (default vm) */
};
#define JT_MAX_WORKERS 64u
/* Parses `argv[0..argc)` as the arguments after `jett run` (options in any order, FILE once).
 * On error returns -EINVAL and writes one line naming what was wrong to err (no trailing
 * newline). Validation is complete before anything is read or compiled. */
int jt_cli_parse(int argc, char **argv, struct jt_cli *out, char *err, size_t errcap);
/* Strict decimal integer in [lo, hi]. */
int jt_parse_uint(const char *s, uint32_t lo, uint32_t hi, uint32_t *v);
/* A user-supplied value as a message may show it: at most max bytes of it (then "..."), every
 * control or non-ASCII byte as '?'. out holds cap bytes (NUL included). */
void jt_shown(const char *v, size_t max, char *out, size_t cap);

/* ---- diagnostics ---- */
struct jt_diags {
    struct jp_buf text; /* "path:line:col: error: message\n" lines */
    uint32_t count;
};
struct jt_source;
void jt_diag(struct jt_diags *d, const struct jt_source *src, uint32_t line, uint32_t col,
             const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* ---- sources ---- */
enum jt_origin { JT_ORIGIN_PROJECT = 1, JT_ORIGIN_DEPENDENCY = 2, JT_ORIGIN_STDLIB = 3 };
struct jt_span {
    uint32_t start, end; /* byte range [start, end) in the source */
};
struct jt_source {
    enum jt_origin origin;
    char *logical;   /* relative, '/'-separated: project path, NAME/..., or stdlib/... */
    char *dep_name;  /* dependency name for JT_ORIGIN_DEPENDENCY, else NULL */
    char *text;      /* the loaded bytes (NUL-terminated copy); excerpts come from here */
    size_t len;
    uint32_t manifest_id; /* the run manifest's id: position in load order, from 1 (the ids the
                           * profiler gives the same sources, announced in this order) */
    uint32_t prof_id; /* jettprof source id, 0 when not profiled */
    dev_t dev;        /* the file it was read from (identity, not name: a capture file must */
    ino_t ino;        /* never be one of the program's own sources) */
    /* byte ranges of maximal secret-typed expressions, sorted by start, non-overlapping */
    struct jt_span *secret_spans;
    uint32_t nsecret, capsecret;
};

/* ---- tokens ---- */
#define JT_TOKENS(X)                                                                              \
    X(EOF, "end of file") X(IDENT, "identifier") X(INT, "integer literal")                        \
    X(STRING, "string literal") X(COMMENT, "comment")                                             \
    X(LPAREN, "'('") X(RPAREN, "')'") X(LBRACE, "'{'") X(RBRACE, "'}'")                           \
    X(LBRACKET, "'['") X(RBRACKET, "']'") X(COMMA, "','") X(COLON, "':'") X(SEMI, "';'")          \
    X(DOT, "'.'") X(DOTDOT, "'..'") X(ARROW, "'->'") X(PLUS, "'+'") X(MINUS, "'-'")               \
    X(STAR, "'*'") X(SLASH, "'/'") X(PERCENT, "'%'") X(ASSIGN, "'='") X(EQ, "'=='")               \
    X(NE, "'!='") X(LT, "'<'") X(LE, "'<='") X(GT, "'>'") X(GE, "'>='") X(NOT, "'!'")             \
    X(AND, "'&&'") X(OR, "'||'")                                                                  \
    X(KW_NAMESPACE, "'namespace'") X(KW_IMPORT, "'import'") X(KW_FN, "'fn'")                      \
    X(KW_LET, "'let'") X(KW_VAR, "'var'") X(KW_IF, "'if'") X(KW_ELSE, "'else'")                   \
    X(KW_WHILE, "'while'") X(KW_FOR, "'for'") X(KW_IN, "'in'") X(KW_RETURN, "'return'")           \
    X(KW_BREAK, "'break'") X(KW_CONTINUE, "'continue'") X(KW_TRUE, "'true'")                      \
    X(KW_FALSE, "'false'") X(KW_SPAWN, "'spawn'")
enum jt_tok_kind {
#define JT_X(n, s) JT_T_##n,
    JT_TOKENS(JT_X)
#undef JT_X
    JT_T_LIMIT
};
const char *jt_tok_name(enum jt_tok_kind k);

struct jt_token {
    enum jt_tok_kind kind;
    uint32_t start, end;  /* bytes */
    uint32_t line, col;   /* 1-based; col counts bytes */
    bool nl_before;       /* first token on its line */
    int64_t ival;         /* JT_T_INT */
};
/* A lexer over one buffer. Comments are returned as JT_T_COMMENT tokens (the parser skips
 * them; the excerpt writer omits them). Errors are reported through diags and give -EINVAL. */
struct jt_lexer {
    const struct jt_source *src; /* for diagnostics; may be NULL */
    const char *p;
    size_t len, pos;
    uint32_t line, col;
    bool at_line_start;
    struct jt_diags *diags;      /* NULL: silent */
};
void jt_lex_init(struct jt_lexer *lx, const char *p, size_t len, const struct jt_source *src,
                 struct jt_diags *d);
int jt_lex_next(struct jt_lexer *lx, struct jt_token *t);
/* Decodes the escapes of a string literal token's body into out. */
int jt_unescape(const char *p, size_t len, struct jp_buf *out);

/* ---- AST ---- */
enum jt_type { JT_TY_ANY = 0, JT_TY_INT, JT_TY_BOOL, JT_TY_STR, JT_TY_LIST, JT_TY_SECRET };

#define JT_NODES(X)                                                                               \
    X(INT) X(BOOL) X(STR) X(LIST) X(LOCAL) X(GLOBAL) X(CALL) X(BUILTIN) X(INDEX) X(UNARY)         \
    X(BINARY) X(AND) X(OR) X(NAME) /* unresolved dotted name, parser only */                     \
    X(LET) X(ASSIGN) X(SETINDEX) X(IF) X(WHILE) X(FOR_RANGE) X(FOR_EACH) X(RETURN) X(BREAK)       \
    X(CONTINUE) X(EXPR) X(BLOCK) X(SPAWN) /* SPAWN: a = the call of the actor's function */
enum jt_node_kind {
#define JT_X(n) JT_N_##n,
    JT_NODES(JT_X)
#undef JT_X
};

struct jt_fn;
struct jt_str;
struct jt_node {
    enum jt_node_kind kind;
    uint32_t start, end, line, col; /* source span of the node */
    bool secret;                    /* checked type contains secret */
    uint32_t depth;                 /* expression tree height (bounded by the parser) */
    int op;                         /* token kind for UNARY/BINARY, builtin id for BUILTIN */
    int64_t ival;
    uint32_t slot;                  /* LOCAL/LET/ASSIGN/FOR: local slot; GLOBAL: global index */
    enum jt_type ty;                /* LET: declared type */
    char *name;                     /* NAME / LET: identifier (dotted for NAME) */
    struct jt_str *str;             /* STR: immortal literal */
    struct jt_fn *fn;               /* CALL */
    struct jettprof_site site;      /* CALL: the profiler's call-site cache (interp.c writes it) */
    struct jt_node *a, *b, *c, *d;
    struct jt_node **kids;
    uint32_t nkids;
};

struct jt_param {
    char *name;
    enum jt_type ty;
    uint32_t line, col;
};
struct jt_fn {
    char *ns;          /* NULL: <root> */
    char *name;
    struct jt_source *src;
    uint32_t decl_start, decl_end, decl_line, decl_col;
    struct jt_param *params;
    uint32_t nparams;
    enum jt_type ret;
    struct jt_node *body;
    uint32_t nslots;   /* params first */
    bool *slot_secret; /* checker: which slots hold secret-typed values */
    uint32_t prof_frame;
    struct jt_bc *bc;  /* its bytecode (bytecode.h) once compiled for --backend vm */
};
struct jt_global {
    char *ns;
    char *name;
    enum jt_type ty;
    bool secret;
    struct jt_node *init;
    struct jt_source *src;
    uint32_t line, col;
    struct jt_bc *bc;  /* its initialiser's bytecode once compiled for --backend vm */
};
struct jt_module {
    struct jt_source *src;
    char *ns;           /* NULL: <root> */
    struct jt_fn **fns;
    uint32_t nfns;
    uint32_t *globals;  /* indices into program globals, in declaration order */
    uint32_t nglobals;
    char **imports;     /* as written */
    uint32_t *import_line, *import_col;
    uint32_t nimports;
    struct jt_fn *init_frame; /* pseudo function "<init>" that runs this file's globals */
};

struct jt_program {
    char *root;            /* canonical project root (absolute; never printed) */
    char *stdlib_dir;      /* canonical stdlib directory (absolute; never printed) */
    struct jt_source **sources;
    uint32_t nsources;
    struct jt_module **modules; /* in initialisation order: imports before importers */
    uint32_t nmodules;
    struct jt_global *globals;
    uint32_t nglobals;
    struct jt_fn *main;
    bool bytecode;         /* compiled for, and run by, the bytecode VM (jt_bc_compile) */
};

/* Loads FILE and everything it imports, parses, resolves and checks. Returns 0, or -EINVAL
 * with diagnostics in d (nothing of the program may run then), or another -errno. */
int jt_compile(const char *file, const char *stdlib_dir, struct jt_program **out,
               struct jt_diags *d);
void jt_program_free(struct jt_program *p);
void jt_node_free(struct jt_node *n); /* a tree the parser could not attach */
/* Parser and checker entry points used by jt_compile (and tests). */
int jt_parse_module(struct jt_source *src, struct jt_module **out, struct jt_program *prog,
                    struct jt_diags *d);
int jt_check_program(struct jt_program *prog, struct jt_diags *d);
/* Appends a global to the program (parser); returns its index. */
int jt_add_global(struct jt_program *prog, struct jt_global *g);

/* ---- builtins: X(ID, "name", min_args, max_args) ---- */
#define JT_BUILTINS(X)                                                                            \
    X(PRINT, "print", 1, 1) X(EPRINT, "eprint", 1, 1) X(STR, "str", 1, 1) X(LEN, "len", 1, 1)     \
    X(PUSH, "push", 2, 2) X(POP, "pop", 1, 1) X(SLEEP, "sleep", 1, 1) X(FAIL, "fail", 1, 1)       \
    X(SECRET, "secret", 1, 1) X(SUBSTR, "substr", 3, 3) X(BYTE, "byte", 2, 2)                     \
    X(CHR, "chr", 1, 1) X(LIST, "list", 2, 2) X(DEBUG, "debug", 1, 1)                            \
    X(LOG, "log", 0, INT32_MAX) /* every shape of log call runs: a bad one is rejected */     \
    X(SEND, "send", 2, 2) X(RECEIVE, "receive", 0, 0) X(JOIN, "join", 1, 1) X(SELF, "self", 0, 0)
enum jt_builtin {
#define JT_X(id, s, lo, hi) JT_B_##id,
    JT_BUILTINS(JT_X)
#undef JT_X
    JT_B_LIMIT
};
int jt_builtin_lookup(const char *name, int *min_args, int *max_args);
const char *jt_builtin_name(int id);

/* ---- redacted excerpts (the agent's excerpt callback) ---- */
/* Writes the redacted excerpt of `line` of src: comments omitted, string literals as
 * <redacted-literal>, secret-typed spans as <secret-expression>, control characters escaped,
 * at most `cap` (<= 160 used) bytes cut at a UTF-8 boundary. Sets *redacted when any rule
 * changed the text. Returns the length, or -ENOENT (no such line) / -EINVAL (unsafe to
 * tokenize). */
#define JT_EXCERPT_MAX 160u
int jt_excerpt(const struct jt_source *src, uint32_t line, char *buf, size_t cap, int *redacted);

/* ---- TOON scalar writer (for the run envelope) ---- */
/* Appends s as a TOON string value (common/toon.h), aborting on exhaustion as jt_buf_put. */
void jt_toon_string(struct jp_buf *b, const char *s, size_t n);

#endif
