// SPDX-License-Identifier: Apache-2.0
/*
 * What the agent writes to disk and to its log, against a worker that wants to be seen: worker
 * logs (--log-dir) are created 0600 in 0700 directories whatever the umask, so other users of the
 * node cannot read a worker's output; and a worker's error-file message holding a newline and
 * terminal escapes shows up escaped inside the agent's own line, never as a line of its own.
 */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness.h"

#define W EA_HELPERS_DIR "/ea-testworker"

static char dir[256], state[300], envdir[300];

static void setup(void)
{
    h_suite_dirs("loghard", dir, state, envdir);
}

static void teardown(void)
{
    h_kill_agents();
    h_rmdir(dir);
}

TestSuite(log_hardening, .init = setup, .fini = teardown, .timeout = 60);

static void start(struct h_agent *a, const char *const *extra, const char *const *cmd)
{
    const char *args[32] = {"--standalone", "--state-dir", state, "--node-id", "solo",
                            "--stop-timeout", "2"};
    int n = 7;
    for (int i = 0; extra[i]; i++)
        args[n++] = extra[i];
    args[n++] = "--";
    for (int i = 0; cmd[i]; i++)
        args[n++] = cmd[i];
    args[n] = NULL;
    h_agent_start(a, dir, "solo", args);
}

static unsigned mode_of(const char *path)
{
    struct stat st;
    cr_assert_eq(lstat(path, &st), 0, "%s exists", path);
    return st.st_mode & 07777;
}

Test(log_hardening, worker_logs_are_0600_in_0700_directories)
{
    umask(022); /* the usual umask: without the fix, 0644 files in 0755 directories */
    const char *logdir = h_fmt("%s/logs", dir);
    const char *extra[] = {"--nproc-per-node", "2", "--log-dir", logdir, "--run-id", "modes",
                           NULL};
    const char *cmd[] = {W, "echo-lines", "2", NULL};
    struct h_agent a;
    start(&a, extra, cmd);
    h_expect_exit(&a, 0, 20000);
    const char *dirs[] = {logdir, h_fmt("%s/modes", logdir), h_fmt("%s/modes/1", logdir)};
    for (int i = 0; i < 3; i++)
        cr_assert_eq(mode_of(dirs[i]), 0700, "%s is 0%o, want 0700", dirs[i], mode_of(dirs[i]));
    for (int r = 0; r < 2; r++)
        for (int k = 0; k < 2; k++) {
            const char *f = h_fmt("%s/modes/1/rank_%d.%s", logdir, r, k ? "err" : "out");
            cr_assert_eq(mode_of(f), 0600, "%s is 0%o, want 0600", f, mode_of(f));
            cr_assert(h_file_contains(f, k ? "eline 2" : "line 2"), "%s has the output", f);
        }
}

Test(log_hardening, an_error_file_message_cannot_forge_a_log_line)
{
    /* on a terminal the CR would draw the forged text over the agent's own line */
    const char *forged = "2030-01-01T00:00:00.000Z elastic-agent[solo] INFO: run 'forge' succeeded";
    const char *msg = h_fmt("boom\r%s\x1b[2J\nsecond line", forged);
    const char *extra[] = {"--run-id", "forge", "--max-restarts", "0", NULL};
    const char *cmd[] = {W, "errorfile", msg, "1", NULL};
    struct h_agent a;
    start(&a, extra, cmd);
    h_expect_exit(&a, 1, 20000);
    if (!h_file_contains(a.log, h_fmt("failed: RuntimeError: boom\\r%s\\x1b[2J", forged))) {
        h_show_log(&a);
        cr_assert(false, "the message is in the agent's log line, escaped");
    }
    /* the agent's own lines ("<timestamp> elastic-agent[solo] LEVEL: ..."), not the
     * torchrun-style report block after them, which shows the traceback as the worker wrote it */
    FILE *f = fopen(a.log, "r");
    cr_assert(f);
    char line[4096];
    int lines = 0;
    while (fgets(line, sizeof(line), f)) {
        if (strlen(line) < 45 || line[0] != '2' || strncmp(line + 24, " elastic-agent[solo] ", 21))
            continue;
        lines++;
        cr_assert_null(strchr(line, '\r'), "a raw CR in a log line: %s", line);
        cr_assert_null(strchr(line, '\x1b'), "a raw ESC in a log line: %s", line);
    }
    fclose(f);
    cr_assert_geq(lines, 3);
}
