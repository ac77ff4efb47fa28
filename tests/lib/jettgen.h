/* A generator of well-formed Jett programs from bytes, for comparing the two backends: the
 * fuzz harness fuzz/fuzz_backends.c drives it with libFuzzer's inputs, and
 * tests/runtime/test_backend.c with a seeded stream. Every byte string gives a program the
 * checker accepts (the bytes choose among productions; when they run out every choice is the
 * first), that ends (loops are counted, recursion goes down a counter), and that uses neither
 * actors nor sleep, so its output, errors and heap events depend on the program alone. Types
 * are tracked so most operations are well typed; now and then one is not on purpose, and some
 * operations can fail at run time (an empty pop, an index out of range, a division by zero),
 * so runtime errors and their unwinding are exercised too. */
#ifndef JETT_TESTS_LIB_JETTGEN_H
#define JETT_TESTS_LIB_JETTGEN_H

#include <stddef.h>
#include <stdint.h>

/* Writes the program's text to out (malloc'ed, NUL-terminated); its length, or 0 when out of
 * memory. */
size_t tl_jett_program(const uint8_t *bytes, size_t n, char **out);

#endif
