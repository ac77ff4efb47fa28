/* Excerpt redaction from the loaded sources: comments, string literals, secret-typed
 * expressions, control characters, the 160-byte cut at a UTF-8 boundary, and the
 * source_redacted flag set exactly when a rule changed the text. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/jett.h"
#include "support.h"

static char *dir;
static struct jt_program *prog;

static const char fixture[] =
    "namespace t.redact\n"                                        /* 1 */
    "fn get() -> secret { return \"from-vault\" }\n"             /* 2 */
    "fn main() {\n"                                               /* 3 */
    "    let k: secret = \"hunter2\"   // the password\n"         /* 4 */
    "    print(k)\n"                                              /* 5 */
    "    let t = k + \"-suffix\"\n"                               /* 6 */
    "    let z = get()\n"                                         /* 7 */
    "    var v = 1\n"                                             /* 8 */
    "    let y = 1 + 2\n"                                         /* 9 */
    "    let w = secret(\"tok\") == secret(\"tok\")\n"            /* 10 */
    "    print(len(z));\tprint(v)\n"                             /* 11 */
    "    print(\"plain \\\"quoted\\\" literal\") // trailing\n"   /* 12 */
    "    // only a comment\n"                                     /* 13 */
    "    print([k, 1])\n"                                         /* 14 */
    "}\n";                                                        /* 15 */

static void setup(void)
{
    dir = jtt_tmpdir();
    jtt_write(dir, "main.jett", fixture);
    char path[4200];
    snprintf(path, sizeof path, "%s/main.jett", dir);
    struct jt_diags d = {0};
    cr_assert_eq(jt_compile(path, NULL, &prog, &d), 0, "%s", d.text.p ? d.text.p : "");
    jp_buf_free(&d.text);
}

static void teardown(void)
{
    jt_program_free(prog);
    jtt_rmtree(dir);
    free(dir);
}

static const struct jt_source *main_src(void)
{
    for (uint32_t i = 0; i < prog->nsources; i++)
        if (strcmp(prog->sources[i]->logical, "main.jett") == 0)
            return prog->sources[i];
    cr_assert_fail("main.jett not loaded");
    return NULL;
}

static void expect_line(uint32_t line, const char *want, int want_redacted)
{
    char buf[JT_EXCERPT_MAX + 1];
    int red = -1;
    int n = jt_excerpt(main_src(), line, buf, JT_EXCERPT_MAX, &red);
    cr_assert_geq(n, 0, "line %u: %d", line, n);
    buf[n] = '\0';
    cr_expect_str_eq(buf, want, "line %u", line);
    cr_expect_eq(red, want_redacted, "line %u: redacted %d", line, red);
}

TestSuite(excerpt, .init = setup, .fini = teardown);

Test(excerpt, an_untouched_line_is_not_marked_redacted)
{
    expect_line(9, "let y = 1 + 2", 0);
    expect_line(8, "var v = 1", 0);
    expect_line(3, "fn main() {", 0);
}

Test(excerpt, comments_are_omitted_and_literals_replaced)
{
    expect_line(12, "print(<redacted-literal>)", 1);
    expect_line(13, "", 1);
}

Test(excerpt, secret_typed_expressions_become_one_token)
{
    expect_line(4, "let k: secret = <secret-expression>", 1);
    expect_line(5, "print(<secret-expression>)", 1);
    expect_line(6, "let t = <secret-expression>", 1);
    expect_line(7, "let z = <secret-expression>", 1);
    expect_line(2, "fn get() -> secret { return <secret-expression> }", 1);
    /* comparing secrets gives a bool: only the secret operands are hidden */
    expect_line(10, "let w = <secret-expression> == <secret-expression>", 1);
    /* len of a secret is an int: the argument is hidden, the call is not */
    expect_line(14, "print(<secret-expression>)", 1);
}

Test(excerpt, control_characters_are_escaped)
{
    expect_line(11, "print(len(<secret-expression>));\\tprint(v)", 1);
}

Test(excerpt, no_secret_or_literal_text_survives_any_line)
{
    for (uint32_t line = 1; line <= 15; line++) {
        char buf[JT_EXCERPT_MAX + 1];
        int red;
        int n = jt_excerpt(main_src(), line, buf, JT_EXCERPT_MAX, &red);
        cr_assert_geq(n, 0);
        buf[n] = '\0';
        cr_expect_null(strstr(buf, "hunter2"), "line %u: %s", line, buf);
        cr_expect_null(strstr(buf, "vault"), "line %u: %s", line, buf);
        cr_expect_null(strstr(buf, "password"), "line %u: %s", line, buf);
        cr_expect_null(strstr(buf, "quoted"), "line %u: %s", line, buf);
        cr_expect_null(strstr(buf, "tok"), "line %u: %s", line, buf);
    }
}

Test(excerpt, a_line_past_the_end_is_unavailable)
{
    char buf[JT_EXCERPT_MAX];
    int red;
    cr_expect_eq(jt_excerpt(main_src(), 0, buf, sizeof buf, &red), -ENOENT);
    cr_expect_eq(jt_excerpt(main_src(), 99, buf, sizeof buf, &red), -ENOENT);
}

/* One file, built at run time: a long identifier of two-byte characters. */
Test(cut, long_lines_stop_at_160_bytes_on_a_character_boundary)
{
    char *d = jtt_tmpdir();
    char src[2048];
    size_t n = (size_t)snprintf(src, sizeof src, "fn main() {\nlet a");
    for (int i = 0; i < 100; i++)
        n += (size_t)snprintf(src + n, sizeof src - n, "\xc3\xa9"); /* é */
    snprintf(src + n, sizeof src - n, " = 1\nlet short = 2\n}\n");
    jtt_write(d, "main.jett", src);
    char path[4200];
    snprintf(path, sizeof path, "%s/main.jett", d);
    struct jt_diags diags = {0};
    struct jt_program *p = NULL;
    cr_assert_eq(jt_compile(path, NULL, &p, &diags), 0, "%s", diags.text.p);
    const struct jt_source *s = p->sources[0];
    char buf[256];
    int red = 0;
    int len = jt_excerpt(s, 2, buf, 200, &red);
    /* "let a" is 5 bytes, then 2-byte characters: byte 160 falls inside one, cut before it */
    cr_expect_eq(len, 159, "len %d", len);
    cr_expect_eq(red, 1);
    cr_expect_eq(memcmp(buf, "let a", 5), 0);
    cr_expect_eq(((unsigned char)buf[len - 1] & 0xc0), 0x80, "ends mid-character");
    cr_expect_eq((unsigned char)buf[len - 2], 0xc3);
    len = jt_excerpt(s, 3, buf, 200, &red);
    cr_expect_eq(len, 13);
    cr_expect_eq(red, 0);
    jt_program_free(p);
    jp_buf_free(&diags.text);
    jtt_rmtree(d);
    free(d);
}
