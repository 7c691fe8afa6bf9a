// SPDX-License-Identifier: Apache-2.0
/*
 * log: a value inside a message (a worker's error-file message, a node id, a store value) cannot
 * forge a log line or drive the terminal: text lines escape control characters (\n, ESC, DEL, C1)
 * and stay one line; JSON lines stay valid JSON even for a message that is not UTF-8.
 * Each test is its own process (criterion), so log's process-wide settings do not leak.
 */
#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ea_escape.h"
#include "log.h"

static char out_path[64];
static int saved_fd = -1;

/* stderr to a scratch file until done_capture() returns what was written */
static void capture(void)
{
    snprintf(out_path, sizeof(out_path), "/tmp/ea-test-log-XXXXXX");
    int fd = mkstemp(out_path);
    cr_assert_geq(fd, 0);
    fflush(stderr);
    saved_fd = dup(STDERR_FILENO);
    dup2(fd, STDERR_FILENO);
    close(fd);
}

static char *done_capture(void)
{
    fflush(stderr);
    dup2(saved_fd, STDERR_FILENO);
    close(saved_fd);
    FILE *f = fopen(out_path, "r");
    cr_assert(f);
    static char buf[8192];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    unlink(out_path);
    return buf;
}

static int count_char(const char *s, char c)
{
    int n = 0;
    for (; *s; s++)
        n += *s == c;
    return n;
}

Test(log, a_value_with_newline_and_escape_stays_one_line)
{
    log_init("info", "node-a");
    /* what a worker could put into its error file's message */
    const char *evil = "oops\n2030-01-01T00:00:00.000Z elastic-agent[node-b] INFO: run 'x' "
                       "succeeded\r\x1b[2J\x1b]0;title\a\x7f";
    capture();
    log_error("worker failed: '%s'", evil);
    char *out = done_capture();
    cr_assert_eq(count_char(out, '\n'), 1, "one line, ending the message: [%s]", out);
    cr_assert_eq(out[strlen(out) - 1], '\n');
    cr_assert_null(strchr(out, '\x1b'), "no raw ESC: [%s]", out);
    cr_assert_null(strchr(out, '\r'), "no raw CR");
    cr_assert_null(strchr(out, '\a'), "no raw BEL");
    cr_assert_null(strchr(out, '\x7f'), "no raw DEL");
    cr_assert(strstr(out, "oops\\n2030-01-01T00:00:00.000Z elastic-agent[node-b] INFO: run"),
              "the newline is shown as \\n: [%s]", out);
    cr_assert(strstr(out, "\\r\\x1b[2J\\x1b]0;title\\x07\\x7f'"), "escapes as \\xNN: [%s]", out);
    cr_assert(strstr(out, " elastic-agent[node-a] ERROR: worker failed: 'oops"), "[%s]", out);
}

Test(log, the_node_tag_is_escaped_too)
{
    log_init("info", "a\nb\x1b[31m");
    capture();
    log_info("hello");
    char *out = done_capture();
    cr_assert_eq(count_char(out, '\n'), 1, "[%s]", out);
    cr_assert(strstr(out, " elastic-agent[a\\nb\\x1b[31m] INFO: hello\n"), "[%s]", out);
}

/* The log's own use of ea_escape (common/ea_escape.h, test_escape has the rest): a tab in a
 * text line stays a tab; a line jansson refused is escaped to ASCII. */
Test(log, escape_keeps_text_and_utf8_and_never_cuts_an_escape)
{
    char buf[64];
    const char *c1 = "a\tb\001c\302\233d", *cut = "ab\033cd"; /* \302\233: C1 CSI U+009B */
    cr_assert_eq(ea_escape(buf, sizeof(buf), "plain 'text' 100% \\ ok", EA_ESCAPE_KEEP_TAB), 22);
    cr_assert_str_eq(buf, "plain 'text' 100% \\ ok");
    ea_escape(buf, sizeof(buf), "caf\xc3\xa9 \xe2\x9c\x93", EA_ESCAPE_KEEP_TAB); /* é ✓ */
    cr_assert_str_eq(buf, "caf\xc3\xa9 \xe2\x9c\x93");
    ea_escape(buf, sizeof(buf), c1, EA_ESCAPE_KEEP_TAB);
    cr_assert_str_eq(buf, "a\tb\\x01c\\xc2\\x9bd"); /* a tab stays a tab */
    ea_escape(buf, sizeof(buf), "\xff\xc3\xa9", EA_ESCAPE_ASCII);
    cr_assert_str_eq(buf, "\\xff\\xc3\\xa9");
    /* 5 bytes of room (and the NUL): "ab", then "\x1b" (4) does not fit: none of it is written */
    cr_assert_eq(ea_escape(buf, 6, cut, EA_ESCAPE_KEEP_TAB), 2);
    cr_assert_str_eq(buf, "ab");
    cr_assert_eq(ea_escape(buf, 1, "abc", EA_ESCAPE_KEEP_TAB), 0);
    cr_assert_str_eq(buf, "");
}

Test(log, json_lines_stay_json_for_any_bytes)
{
    log_init("info", "node-a");
    log_set_json("run1");
    capture();
    log_warn("store value '%s'", "x\n\x1b[2J\xff\xfe");
    char *out = done_capture();
    cr_assert_eq(count_char(out, '\n'), 1, "one line: [%s]", out);
    json_error_t jerr;
    json_t *o = json_loads(out, 0, &jerr);
    cr_assert(o, "valid JSON (%s): [%s]", jerr.text, out);
    const char *msg = json_string_value(json_object_get(o, "msg"));
    cr_assert(msg && strstr(msg, "store value 'x\\n\\x1b[2J\\xff\\xfe'"), "msg: %s", msg);
    json_decref(o);
}
