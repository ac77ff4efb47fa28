/* common/: the one text buffer, TOON scalar encoder and JSON string writer every part uses.
 * The buffer latches an allocation failure and reports it once, at jp_buf_finish; the TOON
 * encoder quotes exactly when TOON needs it and never lets a byte that is not UTF-8 through. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/json.h"
#include "common/text.h"
#include "common/toon.h"

/* malloc/realloc fail while armed (this executable's own definitions win over libc's). */
static int fail_alloc;
void *__real_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_realloc(void *p, size_t n)
{
    return fail_alloc ? NULL : __real_realloc(p, n);
}

static char *toon(const char *s, size_t n)
{
    struct jp_buf b = {0};
    jp_toon_str(&b, s, n);
    char *out;
    size_t len;
    cr_assert_eq(jp_buf_finish(&b, &out, &len), 0);
    cr_assert_eq(strlen(out), len);
    return out;
}

static void expect_toon(const char *in, size_t n, const char *want)
{
    char *got = toon(in, n);
    cr_expect_str_eq(got, want, "encoding of a %zu-byte string", n);
    free(got);
}

#define EXPECT_TOON(lit, want) expect_toon((lit), sizeof(lit) - 1, (want))

Test(buf, appends_and_hands_the_text_over)
{
    struct jp_buf b = {0};
    jp_buf_puts(&b, "rank");
    JP_BUF_LIT(&b, ": ");
    jp_buf_printf(&b, "%u", 7u);
    char *out;
    size_t len;
    cr_assert_eq(jp_buf_finish(&b, &out, &len), 0);
    cr_expect_str_eq(out, "rank: 7");
    cr_expect_eq(len, 7);
    cr_expect_null(b.p, "the buffer is left empty");
    free(out);
}

Test(buf, a_long_format_grows_the_buffer)
{
    char big[3000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    struct jp_buf b = {0};
    jp_buf_printf(&b, "<%s>", big);
    char *out;
    size_t len;
    cr_assert_eq(jp_buf_finish(&b, &out, &len), 0);
    cr_expect_eq(len, sizeof big + 1);
    cr_expect_eq(out[0], '<');
    cr_expect_eq(out[len - 1], '>');
    free(out);
}

Test(buf, a_failed_allocation_is_latched_and_reported_as_out_of_memory)
{
    struct jp_buf b = {0};
    jp_buf_puts(&b, "before");
    fail_alloc = 1;
    char big[5000];
    memset(big, 'y', sizeof big);
    jp_buf_put(&b, big, sizeof big); /* needs a larger block: refused */
    fail_alloc = 0;
    jp_buf_puts(&b, "after"); /* dropped: the text is already incomplete */
    cr_expect(b.failed);
    char *out = NULL;
    size_t len = 0;
    cr_expect_eq(jp_buf_finish(&b, &out, &len), -ENOMEM);
    cr_expect_null(out);
    cr_expect_null(b.p, "the partial text is freed");
}

Test(buf, nothing_appended_is_not_a_text)
{
    struct jp_buf b = {0};
    char *out = NULL;
    size_t len = 0;
    cr_expect_eq(jp_buf_finish(&b, &out, &len), -ENOMEM);
}

Test(toon, plain_words_stay_bare)
{
    EXPECT_TOON("pipeline.transform", "pipeline.transform");
    EXPECT_TOON("src/main.jett", "src/main.jett");
    EXPECT_TOON("1abc", "1abc"); /* not a number: a decoder reads it as a string */
    EXPECT_TOON("caf\xc3\xa9", "caf\xc3\xa9");
}

Test(toon, what_a_decoder_would_misread_is_quoted)
{
    EXPECT_TOON("", "\"\"");
    EXPECT_TOON(" lead", "\" lead\"");
    EXPECT_TOON("trail\t", "\"trail\\t\"");
    EXPECT_TOON("true", "\"true\"");
    EXPECT_TOON("null", "\"null\"");
    EXPECT_TOON("42", "\"42\"");
    EXPECT_TOON("-x", "\"-x\"");
    EXPECT_TOON("1.5e3", "\"1.5e3\"");
    EXPECT_TOON("#tag", "\"#tag\"");
    EXPECT_TOON("a,b", "\"a,b\"");
    EXPECT_TOON("k: v", "\"k: v\"");
    EXPECT_TOON("say \"hi\"", "\"say \\\"hi\\\"\"");
    EXPECT_TOON("back\\slash", "\"back\\\\slash\"");
}

Test(toon, control_characters_are_escaped)
{
    EXPECT_TOON("a\nb", "\"a\\nb\"");
    EXPECT_TOON("a\rb", "\"a\\rb\"");
    EXPECT_TOON("bell\a", "\"bell\\u0007\"");
    EXPECT_TOON("del\x7f", "\"del\\u007f\"");
    expect_toon("nul\0x", 5, "\"nul\\u0000x\"");
}

Test(toon, bytes_that_are_not_utf8_become_one_replacement_each)
{
    EXPECT_TOON("\xff\xfe", "\"\xef\xbf\xbd\xef\xbf\xbd\"");
    EXPECT_TOON("ok\xc3", "\"ok\xef\xbf\xbd\"");          /* cut sequence */
    EXPECT_TOON("\xc0\xaf", "\"\xef\xbf\xbd\xef\xbf\xbd\""); /* overlong */
    EXPECT_TOON("\xed\xa0\x80", "\"\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\""); /* surrogate */
}

Test(json, strings_are_escaped)
{
    struct jp_buf b = {0};
    jp_json_str(&b, "a\"b\\c\n\x01");
    char *out;
    size_t len;
    cr_assert_eq(jp_buf_finish(&b, &out, &len), 0);
    cr_expect_str_eq(out, "\"a\\\"b\\\\c\\u000a\\u0001\"");
    free(out);
}

/* ---- jp_text_safe: the one rule for human text --------------------------------------- */

static void expect_safe(const char *in, size_t n, const char *want)
{
    struct jp_buf b = {0};
    jp_text_safe(&b, in, n);
    char *got;
    size_t len;
    cr_assert_eq(jp_buf_finish(&b, &got, &len), 0);
    cr_expect_str_eq(got ? got : "", want, "safe text of a %zu-byte string", n);
    free(got);
}

#define EXPECT_SAFE(lit, want) expect_safe((lit), sizeof(lit) - 1, (want))

Test(text, printable_ascii_and_utf8_above_c1_pass_unchanged)
{
    EXPECT_SAFE("src/main.jett", "src/main.jett");
    EXPECT_SAFE("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xc2\xa0", "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xc2\xa0");
    EXPECT_SAFE("", "");
}

Test(text, c0_and_del_are_hex_escapes)
{
    EXPECT_SAFE("a\x1b[2Jb", "a\\x1b[2Jb");
    EXPECT_SAFE("\n\r\t\x7f", "\\x0a\\x0d\\x09\\x7f");
    EXPECT_SAFE("x\0y", "x\\x00y");
}

Test(text, every_c1_control_is_a_unicode_escape)
{
    for (unsigned c = 0x80; c <= 0x9f; c++) {
        char in[3] = {'\xc2', (char)c, 0}, want[8];
        snprintf(want, sizeof want, "\\u%04x", c);
        expect_safe(in, 2, want);
    }
    EXPECT_SAFE("run \xc2\x9b" "31m red", "run \\u009b31m red");
}

Test(text, bytes_that_are_not_utf8_are_hex_escapes)
{
    /* a raw C1 byte, a lone continuation, a cut sequence, an overlong form, a surrogate */
    EXPECT_SAFE("\x9b" "1m", "\\x9b1m");
    EXPECT_SAFE("a\x80", "a\\x80");
    EXPECT_SAFE("\xe2\x82", "\\xe2\\x82");
    EXPECT_SAFE("\xc0\xaf", "\\xc0\\xaf");
    EXPECT_SAFE("\xed\xa0\x80", "\\xed\\xa0\\x80");
}

Test(text, a_null_string_writes_nothing)
{
    struct jp_buf b = {0};
    jp_text_safe_str(&b, NULL);
    jp_text_safe_str(&b, "ok\x07");
    cr_expect_str_eq(b.p, "ok\\x07");
    jp_buf_free(&b);
}
