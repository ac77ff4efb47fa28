/* tests/lib/toon.h: TOON documents checked with the official decoder (tests/toon/decode.mjs,
 * found through JETTPROF_SOURCE_ROOT; `npm ci` in tests/toon installs it). */
#ifndef JETTPROF_TESTS_LIB_TOON_H
#define JETTPROF_TESTS_LIB_TOON_H

#include <stddef.h>

/* Decodes the len bytes of text in the decoder's strict mode. Returns its JSON (one line,
 * malloc'ed) or NULL when the decoder rejects the document; then *err receives the decoder's
 * message (malloc'ed) when err is given, else the message is logged. Fails the test when the
 * decoder cannot be run at all, so a missing decoder never passes for a rejection.
 * The node binary is $JETT_TEST_NODE when set, else /usr/bin/node. */
char *tl_toon_decode(const void *text, size_t len, char **err);

#endif
