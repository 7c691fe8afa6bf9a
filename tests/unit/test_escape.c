// SPDX-License-Identifier: Apache-2.0
/*
 * ea_escape and ea_fprintf (common/ea_escape.c), the one escaper of foreign strings: every
 * control character and every byte that is not UTF-8 comes out as text, valid UTF-8 passes, a
 * cut never splits an escape or a character; ea_fprintf escapes exactly its %s and %c arguments
 * and prints everything else as fprintf does.
 */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "ea_escape.h"
#include "escape_check.h"

Test(escape, every_control_and_non_utf8_byte_is_shown_as_text)
{
    char buf[EA_ESCAPED_SIZE(sizeof(EVIL))];
    ea_escape(buf, sizeof(buf), EVIL, 0);
    cr_assert_str_eq(buf, EVIL_ESC);
    assert_terminal_safe(buf, "ea_escape");
    /* every C0 control, DEL and every C1 (as UTF-8 and raw) */
    for (int c = 1; c < 0x100; c++) {
        char in[3] = {(char)c}, c1[3] = {(char)0xc2, (char)c};
        bool control = c < 0x20 || c == 0x7f;
        ea_escape(buf, sizeof(buf), in, 0);
        if (control || c >= 0x80) /* a lone byte above 0x7f is not UTF-8 */
            cr_assert(buf[0] == '\\' && strlen(buf) >= 2, "0x%02x -> '%s'", c, buf);
        else
            cr_assert_str_eq(buf, in);
        if (c >= 0x80 && c <= 0x9f) {
            ea_escape(buf, sizeof(buf), c1, 0);
            char want[16];
            snprintf(want, sizeof(want), "\\xc2\\x%02x", c);
            cr_assert_str_eq(buf, want, "U+%04X", c);
        }
    }
}

Test(escape, valid_utf8_and_backslashes_pass)
{
    char buf[128];
    const char *text = "caf\xc3\xa9 \xe2\x9c\x93 \xf0\x9f\x98\x80 \xc2\xa0 a\\x1b 100%";
    cr_assert_eq(ea_escape(buf, sizeof(buf), text, 0), strlen(text));
    cr_assert_str_eq(buf, text);
    /* overlong, surrogate, past U+10FFFF, cut short: every byte escaped */
    ea_escape(buf, sizeof(buf), "\xc0\xaf|\xed\xa0\x80|\xf4\x90\x80\x80|\xe2\x9c", 0);
    cr_assert_str_eq(buf, "\\xc0\\xaf|\\xed\\xa0\\x80|\\xf4\\x90\\x80\\x80|\\xe2\\x9c");
    /* with EA_ESCAPE_ASCII every byte above 0x7e; with EA_ESCAPE_KEEP_TAB a tab stays */
    ea_escape(buf, sizeof(buf), "\xc3\xa9\t", EA_ESCAPE_ASCII);
    cr_assert_str_eq(buf, "\\xc3\\xa9\\t");
    ea_escape(buf, sizeof(buf), "a\tb", EA_ESCAPE_KEEP_TAB);
    cr_assert_str_eq(buf, "a\tb");
}

Test(escape, a_cut_splits_no_escape_and_no_character)
{
    char buf[8];
    /* room for 7: "ab" then "\x1b" (4) fits, then "\xe2\x9c\x93" (3) would not: cut before */
    cr_assert_eq(ea_escape(buf, sizeof(buf), "ab\033\xe2\x9c\x93", 0), 6);
    cr_assert_str_eq(buf, "ab\\x1b");
    cr_assert_eq(ea_escape(buf, 5, "ab\033", 0), 2);
    cr_assert_str_eq(buf, "ab");
    cr_assert_eq(ea_escape(buf, 1, "abc", 0), 0);
    cr_assert_str_eq(buf, "");
}

static char *printed(void (*fn)(FILE *))
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    fn(f);
    fclose(f);
    return buf;
}

static void with_strings(FILE *f)
{
    cr_assert_eq(ea_fprintf(f, "[%s] [%-6s] [%6s] [%.3s] [%-*.*s] [%c%c] %%\n", EVIL, "ab", "ab",
                            "abcdef", 5, 2, "\033xyz", 'q', '\n'),
                 0);
}

/* Strings escaped, padded after escaping, cut by a precision before; %c escaped too. */
Test(escape, fprintf_escapes_its_string_arguments)
{
    char *got = printed(with_strings);
    cr_assert_str_eq(got, "[" EVIL_ESC "] [ab    ] [    ab] [abc] [\\x1bx] [q\\n] %\n");
    assert_terminal_safe(got, "ea_fprintf");
    free(got);
}

#define NUMBERS_FMT                                                                                \
    "%d|%5i|%-5d|%05d|%+d|% d|%x|%#X|%o|%u|%hhd|%hu|%ld|%lld|%zu|%zd|%jd|%td|%" PRId64 "|%" PRIu64 \
    "|%*d|%-*d|%.*d|%.3f|%10.2e|%g|%G|%a|%Lf|%p|%lu|%llx|%hhx\n"
#define NUMBERS_ARGS                                                                               \
    -42, 7, 7, 42, 5, 5, 255, 255, 8, 4000000000u, 300, 70000, -1L, -9LL, (size_t)99,              \
        (ssize_t)-99, (intmax_t)-5, (ptrdiff_t)-6, INT64_MIN, UINT64_MAX, -6, 3, 4, 3, 3, 2,       \
        3.14159, 12345.678, 0.0001, 1e20, 1.5, (long double)2.25, (void *)0x1234, 123ul,           \
        0xabcdefull, 0x1ff

static void numbers_ea(FILE *f)
{
    cr_assert_eq(ea_fprintf(f, NUMBERS_FMT, NUMBERS_ARGS), 0);
}

static void numbers_libc(FILE *f)
{
    fprintf(f, NUMBERS_FMT, NUMBERS_ARGS);
}

/* Every other conversion prints as fprintf prints it (flags, widths and precisions from the
 * list, negative `*` widths, every length modifier). */
Test(escape, fprintf_prints_numbers_as_fprintf_does)
{
    char *want = printed(numbers_libc), *got = printed(numbers_ea);
    cr_assert_str_eq(got, want);
    free(want);
    free(got);
}
