// SPDX-License-Identifier: Apache-2.0
/* Error files in torch's format become the root cause; the failure table has torch's shape. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "escape_check.h"
#include "report.h"

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert(f);
    fputs(text, f);
    fclose(f);
}

Test(report, reads_torch_error_files)
{
    char path[] = "/tmp/ea-err-XXXXXX";
    close(mkstemp(path));
    char buf[512];
    write_file(path, "{\"message\": {\"message\": \"RuntimeError: boom\", \"extraInfo\": "
                     "{\"py_callstack\": \"Traceback: x\", \"timestamp\": \"1\"}}}");
    cr_assert_eq(report_read_error_file(path, buf, sizeof(buf)), 0);
    cr_assert(strstr(buf, "RuntimeError: boom"));
    cr_assert(strstr(buf, "Traceback: x"));
    write_file(path, "{\"message\": \"plain\", \"timestamp\": 3}");
    cr_assert_eq(report_read_error_file(path, buf, sizeof(buf)), 0);
    cr_assert_str_eq(buf, "plain");
    write_file(path, "garbage");
    cr_assert_eq(report_read_error_file(path, buf, sizeof(buf)), -EBADMSG);
    write_file(path, "{\"other\": 1}");
    cr_assert_eq(report_read_error_file(path, buf, sizeof(buf)), -EBADMSG);
    unlink(path);
    cr_assert_eq(report_read_error_file(path, buf, sizeof(buf)), -ENOENT);
}

Test(report, default_messages)
{
    char buf[256];
    report_default_message(-1, 9, 123, buf, sizeof(buf));
    cr_assert_str_eq(buf, "Signal 9 (SIGKILL) received by PID 123");
    report_default_message(3, 0, 1, buf, sizeof(buf));
    cr_assert(strstr(buf, "exited with code 3"));
}

Test(report, failure_table)
{
    struct rdzv_failure f = {.node_id = "n1", .host = "h1", .rank = 5, .local_rank = 1,
                             .exit_code = 2, .pid = 77, .time_ms = 0,
                             .message = "ValueError: bad\nsecond line"};
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    report_print_failure(out, "train.py", &f);
    fclose(out);
    cr_assert(strstr(buf, "train.py FAILED"));
    cr_assert(strstr(buf, "Root Cause (first observed failure):"));
    cr_assert(strstr(buf, "  rank      : 5 (local_rank: 1)"));
    cr_assert(strstr(buf, "  exitcode  : 2 (pid: 77)"));
    cr_assert(strstr(buf, "  host      : h1"));
    cr_assert(strstr(buf, "ValueError: bad\n    second line"), "%s", buf);
    free(buf);
}

/* The table's host, node and traceback come from the store and a worker's error file: a control
 * character there must not forge a line or drive the terminal (mutation-checked). */
Test(report, failure_table_escapes_control_characters)
{
    struct rdzv_failure f = {.node_id = "n1\rFAKE", .host = "h1\nnode      : forged",
                             .rank = 0, .exit_code = 1, .pid = 7,
                             .message = "boom\x1b[2J\rfake\nnext\x7f line"};
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    report_print_failure(out, "train.py", &f);
    fclose(out);
    cr_assert_null(strchr(buf, '\x1b'), "%s", buf);
    cr_assert_null(strchr(buf, '\r'), "%s", buf);
    cr_assert_null(strchr(buf, '\x7f'), "%s", buf);
    cr_assert(strstr(buf, "  host      : h1\\nnode      : forged\n"), "%s", buf);
    cr_assert(strstr(buf, "  node      : n1\\rFAKE\n"), "%s", buf);
    cr_assert(strstr(buf, "boom\\x1b[2J\\rfake\n    next\\x7f line"), "%s", buf);
    free(buf);
}

/* Issue 38: the same for the whole hostile set (C0, C1 as UTF-8 and raw, DEL), the entry point
 * (a spec's command) included. Mutation checked: the escape of the host/node lines, of the
 * traceback's lines. */
Test(report, failure_table_escapes_every_control_character)
{
    struct rdzv_failure f = {.rank = 0, .exit_code = 1, .pid = 7};
    snprintf(f.node_id, sizeof(f.node_id), "%s", EVIL);
    snprintf(f.host, sizeof(f.host), "%s", EVIL);
    snprintf(f.message, sizeof(f.message), "%s", EVIL);
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    report_print_failure(out, EVIL, &f);
    fclose(out);
    assert_terminal_safe(buf, "the failure table");
    cr_assert(strstr(buf, "\n" EVIL_ESC " FAILED\n"), "%s", buf);
    cr_assert(strstr(buf, "  host      : " EVIL_ESC "\n  node      : " EVIL_ESC "\n"), "%s", buf);
    cr_assert(strstr(buf, "  traceback : " EVIL_A_ESC "\n    " EVIL_B_ESC "\n"), "%s", buf);
    free(buf);
}

Test(report, stderr_tail_last_lines_as_valid_utf8)
{
    char buf[4096] = "exited with code 1";
    /* a full 64-byte buffer: the cut first line goes, then the last 10 lines are kept */
    char tail[65] = "ut line\n1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\nbad \xff\x01 \xc3\xa9t\xc3\n\n";
    report_append_stderr_tail(buf, sizeof(buf), tail, strlen(tail));
    cr_assert_str_eq(buf, "exited with code 1\nlast lines of stderr:\n3\n4\n5\n6\n7\n8\n9\n10\n11\n"
                          "bad ?? \xc3\xa9t?");
    char small[40] = "x";
    report_append_stderr_tail(small, sizeof(small), "a long line that does not fit here\n", 4096);
    cr_assert_eq(strlen(small), sizeof(small) - 1);
    cr_assert(strncmp(small, "x\nlast lines of stderr:\na long", 30) == 0, "%s", small);
    char bar[256] = "";
    report_append_stderr_tail(bar, sizeof(bar), "epoch 1\r 10%|#  |\r 50%|## |\r\nKilled\r\n",
                              4096);
    cr_assert_str_eq(bar, "last lines of stderr:\n 50%|## |\nKilled");
    char none[16] = "y";
    report_append_stderr_tail(none, sizeof(none), NULL, 10);
    report_append_stderr_tail(none, sizeof(none), "\n\n", 10);
    cr_assert_str_eq(none, "y");
}
