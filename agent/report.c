// SPDX-License-Identifier: Apache-2.0
/* report: torch error files in, first-failure table out. */
#include "report.h"

#include <errno.h>
#include <jansson.h>
#include <signal.h>
#include <string.h>
#include <time.h>

int report_read_error_file(const char *path, char *buf, size_t size)
{
    if (!path || !path[0])
        return -ENOENT;
    json_error_t jerr;
    json_t *root = json_load_file(path, 0, &jerr);
    if (!root) {
        FILE *f = fopen(path, "r");
        if (!f)
            return -ENOENT;
        fclose(f);
        return -EBADMSG;
    }
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
    fprintf(out, "%s\n%s FAILED\n%s\nRoot Cause (first observed failure):\n[0]:\n", bar, entry,
            sec);
    fprintf(out, "  time      : %s\n  host      : %s\n  node      : %s\n", when, f->host,
            f->node_id);
    fprintf(out, "  rank      : %d (local_rank: %d)\n", f->rank, f->local_rank);
    if (f->signal > 0)
        fprintf(out, "  exitcode  : %d (pid: %lld)\n", -f->signal, (long long)f->pid);
    else
        fprintf(out, "  exitcode  : %d (pid: %lld)\n", f->exit_code, (long long)f->pid);
    fputs("  traceback : ", out);
    for (const char *p = f->message; *p; p++) {
        fputc(*p, out);
        if (*p == '\n' && p[1])
            fputs("    ", out);
    }
    fprintf(out, "\n%s\n", bar);
    fflush(out);
}
