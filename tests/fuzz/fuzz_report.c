// SPDX-License-Identifier: Apache-2.0
/* Fuzz target: the torch error-file parser (agent/observe/report.c), the failure table printed from what
 * it returns, and the worker-stderr tail appended to failure messages (which must stay valid
 * UTF-8: the failure record is JSON). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "report.h"

static void stderr_tail(const uint8_t *data, size_t size)
{
    char *tail = malloc(size + 1);
    if (!tail)
        return;
    memcpy(tail, data, size);
    tail[size] = '\0';
    char msg[300] = "exited with code 1";
    /* the launcher's buffer may be full (cap == length) or not */
    report_append_stderr_tail(msg, sizeof(msg), tail, size && (data[0] & 1) ? size : size + 64);
    FUZZ_CHECK(strlen(msg) < sizeof(msg));
    json_t *j = json_string(msg); /* NULL: not valid UTF-8, the failure record would not encode */
    FUZZ_CHECK(j != NULL);
    json_decref(j);
    free(tail);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    stderr_tail(data, size);
    struct rdzv_failure f = {.rank = 1, .exit_code = 1, .pid = 42};
    snprintf(f.node_id, sizeof(f.node_id), "n0");
    snprintf(f.host, sizeof(f.host), "h0");
    int r = report_parse_error((const char *)data, size, f.message, sizeof(f.message));
    FUZZ_CHECK(r == 0 || r == -EBADMSG);
    if (r < 0)
        return 0;
    FUZZ_CHECK(strlen(f.message) < sizeof(f.message));
    FILE *out = fopen("/dev/null", "w");
    if (out) {
        report_print_failure(out, "train.py", &f);
        fclose(out);
    }
    return 0;
}
