/* The bytecode backend (`jett run --backend vm`): a compiler from the checked AST to a compact
 * stack bytecode (bc_compile.c) and the VM that runs it (vm.c).
 *
 * Both backends run the same language on the same values, heap and allocation boundary: the
 * VM evaluates operands in the tree walker's order and applies them with the operations
 * interp.h shares (jt_op_*, jt_builtin_apply, the spawn steps), and makes its calls with the
 * tree walker's protocol (call.h: the same frame records, enter, leave, safe points, return
 * conversions and releases, in the same order), so it allocates and releases the
 * same objects in the same order, reports the same errors at the same positions, and passes
 * the same safe points (each statement, call entry, return and loop back-edge) with the same
 * current statement. A memory profile is therefore the same events in the same order, and a
 * CPU profile whose ticks are raised at the N-th safe point is the same samples.
 *
 * A function's code is an array of 32-bit words: an opcode, then its operands. Operands that
 * name a position are indexes into the function's position table, `pos`: the AST node whose
 * source span, line and column the instruction stands for (errors name it, STMT makes it the
 * current statement, builtins record it). Every call instruction has its own call-site cache
 * (`sites`), which the agent's inline enter uses.
 *
 * Temporaries live on the actor's value stack (rt->stack) above the running function's local
 * slots; `max_temps` is how many a function can hold at once, so a call checks for room for
 * its locals and temporaries before its arguments are evaluated.
 */
#ifndef JETT_RUNTIME_BYTECODE_H
#define JETT_RUNTIME_BYTECODE_H

#include <stdint.h>

#include "jett.h"
#include "jettprof.h"
#include "value.h"

/* X(NAME, operand words). Operands: P a position-table index, S a local slot, T a jump
 * target (a word index into code), N a count, C a call-site cache index. */
#define JT_BC_OPS(X)                                                                              \
    X(STMT, 3)       /* P L C: the statement's start (line L, column C, as P's) becomes      \
                        current; its safe point */                                            \
    X(NIL, 0) X(TRUE, 0) X(FALSE, 0)                                                          \
    X(INT, 2)        /* low word, high word */                                                \
    X(STR, 1)        /* P: a string literal node */                                           \
    X(LOCAL, 1)      /* S: push the local (a new reference) */                                \
    X(GLOBAL, 1)     /* P: a JT_N_GLOBAL node */                                              \
    X(LIST_NEW, 2)   /* P N: a new list of capacity N, before its elements are evaluated */   \
    X(LIST_ADD, 0)   /* append the top to the list below it */                                \
    X(ADD, 1) X(SUB, 1) X(MUL, 1) X(DIV, 1) X(MOD, 1) /* P: the node */                      \
    X(LT, 1) X(LE, 1) X(GT, 1) X(GE, 1) X(EQ, 1) X(NE, 1)                                     \
    X(ADD_K, 3) X(SUB_K, 3) X(MUL_K, 3) X(LT_K, 3) X(LE_K, 3) X(GT_K, 3) X(GE_K, 3)         \
    X(EQ_K, 3) X(NE_K, 3) /* P K(2 words): the same with an int literal right operand */       \
    X(DIV_K, 6) X(MOD_K, 6) /* P K(2) M(2) S: by a literal K > 0; for a dividend x >= 0 the  \
                               quotient is the high bits (x * M) >> S, M and S from K */      \
    X(BINARY, 1)     /* P: any other binary operator */                                       \
    X(UNARY, 1) X(INDEX, 1) /* P */                                                           \
    X(TRUTHY, 1)     /* P: the top must be a bool */                                          \
    X(JUMP, 1)       /* T */                                                                  \
    X(JFALSE, 2)     /* P T: pop a condition (a bool, else the error at P); jump when false */ \
    X(JTRUE, 2)      /* P T: pop a condition; jump when true (a while loop's test, below) */  \
    X(JFALSE_KEEP, 1) /* T: jump when the top bool is false (keeping it), else pop it */      \
    X(JTRUE_KEEP, 1) /* T: likewise when true */                                              \
    X(POP, 0)        /* release the top */                                                    \
    X(LET, 1)        /* P: a JT_N_LET: convert the top to its type, store it in its slot */    \
    X(SET_LOCAL, 1)  /* S */                                                                  \
    X(SET_GLOBAL, 1) /* P: a JT_N_ASSIGN to a global */                                       \
    X(SET_INDEX, 1)  /* P: list, index, value on the stack */                                 \
    X(CALL_ROOM, 1)  /* P: a JT_N_CALL; room for its frame, before the arguments */           \
    X(PARAM, 2)      /* P N: convert the top to parameter N's type */                         \
    X(CALL, 2)       /* P C: call with the arguments on the stack */                          \
    X(BUILTIN, 2)    /* P N: a builtin of N arguments */                                      \
    X(LEN, 1) X(BYTE, 1) /* P: len and byte, whose common cases are inline */                 \
    X(SPAWN_OK, 1)   /* P: a JT_N_SPAWN; may spawn here */                                    \
    X(SPAWN_ARG, 2)  /* P N: the top becomes spawn argument N's copy */                       \
    X(SPAWN, 1)      /* P: start the actor with the copies on the stack */                    \
    X(RANGE, 1)      /* P: the two bounds on the stack must be ints */                        \
    X(RANGE_NEXT, 2) /* S T: next value into S (the bounds stay below), or jump when done */  \
    X(RANGE_LOOP, 2) /* S T: the back-edge's safe point, then the next value and a jump back \
                        to T, or on when done */                                              \
    X(EACH, 1)       /* P: a JT_N_FOR_EACH; the list into its hidden slot, push index 0 */    \
    X(EACH_NEXT, 2)  /* P T: next element into the loop's slot, or jump when done */          \
    X(EACH_LOOP, 2)  /* P T: the back-edge's safe point, then EACH_NEXT's step back to T */    \
    X(EACH_END, 1)   /* P: clear the loop's slot and hidden slot */                           \
    X(DROP, 1)       /* N: drop N ints (loop state; nothing to release) */                    \
    X(BACK_EDGE, 0)  /* the loop back-edge's safe point */                                    \
    X(RETURN, 0)     /* return the top */                                                     \
    X(END, 0)        /* the end of a body: return nil */                                      \
    X(VALUE, 0)      /* the end of an initialiser: its value is the top */
enum jt_bc_op {
#define JT_X(n, w) JT_OP_##n,
    JT_BC_OPS(JT_X)
#undef JT_X
    JT_OP_LIMIT
};

struct jt_bc {
    uint32_t *code;
    uint32_t ncode;
    const struct jt_node **pos; /* the position table */
    uint32_t npos;
    struct jettprof_site *sites; /* one call-site cache per CALL */
    uint32_t nsites;
    uint32_t max_temps;          /* stack slots above the locals it may use at once */
};

/* Compiles every function and global initialiser of a checked program and sets
 * prog->bytecode. 0, or -ENOMEM (nothing compiled then). */
int jt_bc_compile(struct jt_program *prog);
/* Frees what jt_bc_compile made (jt_program_free calls it). */
void jt_bc_free_program(struct jt_program *prog);

struct jt_rt;
/* Runs f's body in the frame jt_call_enter set up (rt->base, rt->sp = base + f->nslots): a
 * `return` leaves its value in rt->retv with rt->ctl CTL_RETURN, as the tree walker does. */
void jt_bc_exec(struct jt_rt *rt, const struct jt_fn *f);
/* Evaluates a global's initialiser: an owned value, or NIL while rt->ctl unwinds. */
jv jt_bc_eval(struct jt_rt *rt, const struct jt_bc *bc);

#endif
