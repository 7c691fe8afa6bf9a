// SPDX-License-Identifier: Apache-2.0
/* report: torch error files in, first-failure table out. */
#include "report.h"
#include "ea_escape.h"

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

int report_parse_error(const char *data, size_t len, char *buf, size_t size)
{
    json_error_t jerr;
    json_t *root = json_loadb(data, len, 0, &jerr);
    if (!root)
        return -EBADMSG;
    int r = -EBADMSG;
    json_t *m = json_object_get(root, "message");
    if (json_is_string(m)) {
        snprintf(buf, size, "%s", json_string_value(m));
        r = 0;
    } else if (json_is_object(m)) {
        const char *msg = json_string_value(json_object_get(m, "message"));
        const char *stack = json_string_value(
            json_object_get(json_object_get(m, "extraInfo"), "py_callstack"));
        if (msg || stack) {
            if (msg && stack)
                snprintf(buf, size, "%s\n%s", msg, stack);
            else
                snprintf(buf, size, "%s", msg ? msg : stack);
            r = 0;
        }
    }
    json_decref(root);
    return r;
}

int report_read_error_file(const char *path, char *buf, size_t size)
{
    if (!path || !path[0])
        return -ENOENT;
    FILE *f = fopen(path, "re");
    if (!f)
        return -ENOENT;
    /* a worker controls this file: read a bounded amount, a larger one is not torch's */
    size_t cap = REPORT_ERROR_FILE_MAX, len = 0;
    char *data = malloc(cap);
    int r = -ENOMEM;
    if (data) {
        len = fread(data, 1, cap, f);
        r = ferror(f) || len == cap ? -EBADMSG : report_parse_error(data, len, buf, size);
    }
    free(data);
    fclose(f);
    return r;
}

void report_default_message(int exit_code, int signal, long pid, char *buf, size_t size)
{
    if (signal > 0)
        snprintf(buf, size, "Signal %d (SIG%s) received by PID %ld", signal, sigabbrev_np(signal)
                                                                                ? sigabbrev_np(signal)
                                                                                : "?",
                 pid);
    else
        snprintf(buf, size, "exited with code %d and left no error file (write one with "
                            "torch.distributed.elastic.multiprocessing.errors.record)",
                 exit_code);
}

void report_print_failure(FILE *out, const char *entry, const struct rdzv_failure *f)
{
    char when[64] = "?";
    time_t t = (time_t)(f->time_ms / 1000);
    struct tm tm;
    if (localtime_r(&t, &tm))
        strftime(when, sizeof(when), "%Y-%m-%d_%H:%M:%S", &tm);
    const char *bar = "============================================================";
    const char *sec = "------------------------------------------------------------";
    ea_fprintf(out, "%s\n%s FAILED\n%s\nRoot Cause (first observed failure):\n[0]:\n", bar, entry,
               sec);
    /* host, node id and message come from the store or a worker's error file: a control
     * character in them must not forge lines or drive the terminal (ea_fprintf escapes them) */
    ea_fprintf(out, "  time      : %s\n  host      : %s\n  node      : %s\n", when, f->host,
               f->node_id);
    fprintf(out, "  rank      : %d (local_rank: %d)\n", f->rank, f->local_rank);
    if (f->signal > 0)
        fprintf(out, "  exitcode  : %d (pid: %lld)\n", -f->signal, (long long)f->pid);
    else
        fprintf(out, "  exitcode  : %d (pid: %lld)\n", f->exit_code, (long long)f->pid);
    fputs("  traceback : ", out);
    /* line by line: each line escaped, the traceback's own line breaks kept (indented) */
    const char *p = f->message;
    for (;;) {
        size_t len = strcspn(p, "\n");
        ea_fprintf(out, "%.*s", (int)len, p);
        if (!p[len] || !p[len + 1])
            break;
        fputs("\n    ", out);
        p += len + 1;
    }
    fprintf(out, "\n%s\n", bar);
    fflush(out);
}

void report_append_stderr_tail(char *buf, size_t size, const char *tail, size_t tail_cap)
{
    if (!tail || size == 0)
        return;
    size_t len = strlen(tail);
    const char *start = tail, *end = tail + len;
    while (end > start && (end[-1] == '\n' || end[-1] == '\r'))
        end--;
    /* the buffer was full: its first line is probably cut, drop it when there are others */
    if (len >= tail_cap) {
        const char *nl = memchr(start, '\n', (size_t)(end - start));
        if (nl)
            start = nl + 1;
    }
    int lines = 0;
    for (const char *p = end; p > start; p--)
        if (p[-1] == '\n' && ++lines == REPORT_TAIL_LINES) {
            start = p;
            break;
        }
    if (end <= start)
        return;
    size_t n = strlen(buf);
    n += (size_t)snprintf(buf + n, n < size ? size - n : 0, "%slast lines of stderr:\n",
                          n ? "\n" : "");
    /* the tail is the worker's bytes: keep valid UTF-8 (the failure record is JSON), tabs and
     * newlines; a carriage return starts the line again (what a terminal shows of a progress
     * bar); anything else becomes '?' */
    size_t line_start = n;
    for (const unsigned char *p = (const unsigned char *)start; p < (const unsigned char *)end;) {
        size_t k = ea_utf8_len(p, (size_t)((const unsigned char *)end - p));
        if (n + (k ? k : 1) + 1 > size)
            break;
        if (p[0] == '\r') {
            if (p + 1 < (const unsigned char *)end && p[1] != '\n' && p[1] != '\r')
                n = line_start;
            p++;
            continue;
        }
        if (p[0] == '\n')
            line_start = n + 1;
        if (k == 1 && p[0] < 0x20 && p[0] != '\n' && p[0] != '\t')
            k = 0;
        if (k) {
            memcpy(buf + n, p, k);
            n += k;
            p += k;
        } else {
            buf[n++] = '?';
            p++;
        }
    }
    if (n < size)
        buf[n] = '\0';
}
