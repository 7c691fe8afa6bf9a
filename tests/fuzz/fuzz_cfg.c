// SPDX-License-Identifier: Apache-2.0
/*
 * Fuzz target: the command line / environment parser (agent/cli/config.c cfg_parse_cmd). The input is
 * lines: if the first is "status" the status command is parsed, else the agent's; a line that
 * starts with an upper-case letter and holds '=' is an environment entry, any other line an argv
 * word (argv[0] is the program).
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "fuzz.h"

#define MAX_WORDS 64

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 8192)
        return 0;
    char *text = malloc(size + 1);
    if (!text)
        return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    /* --password-file opens a file the input names: keep the fuzzer off the file system */
    if (strstr(text, "assword") || strstr(text, "ASSWORD")) {
        free(text);
        return 0;
    }
    char *argv[MAX_WORDS + 2], *envp[MAX_WORDS + 1];
    int argc = 0, envc = 0;
    enum cfg_cmd cmd = CFG_AGENT;
    argv[argc++] = "elastic-agent";
    char *save = NULL;
    int line = 0;
    for (char *t = strtok_r(text, "\n", &save); t; t = strtok_r(NULL, "\n", &save), line++) {
        if (line == 0 && strcmp(t, "status") == 0) {
            cmd = CFG_STATUS;
            argv[0] = "status";
        } else if (isupper((unsigned char)t[0]) && strchr(t, '=')) {
            if (envc < MAX_WORDS)
                envp[envc++] = t;
        } else if (argc < MAX_WORDS) {
            argv[argc++] = t;
        }
    }
    argv[argc] = NULL;
    envp[envc] = NULL;
    struct cfg c;
    struct ea_error err = {0};
    int r = cfg_parse_cmd(cmd, argc, argv, envp, &c, &err);
    if (r < 0) {
        FUZZ_CHECK(r == -EINVAL && err.msg[0]);
    } else if (!c.help && !c.version) {
        FUZZ_CHECK(c.run_id && c.backend && c.state_dir && c.prefix);
        if (cmd == CFG_AGENT)
            FUZZ_CHECK(c.node_id && c.min_nodes >= 1 && c.min_nodes <= c.max_nodes &&
                   c.nproc_per_node >= 1 && c.command && c.command[0]);
    }
    free(text);
    return 0;
}
