// SPDX-License-Identifier: Apache-2.0
/* elastic-agent: entry point. Parses options, dispatches the subcommands (`status`, the pool's
 * `serve`/`submit`/`cancel`/`status --pool`) and the hidden exec-guard one. */
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>

#include "agent.h"
#include "config.h"
#include "daemon.h"
#include "driver.h"
#include "launcher.h"
#include "status.h"

extern char **environ;

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "exec-guard") == 0)
        return launch_guard_main(argc - 1, argv + 1);
    /* Before anything reads the store password: a process of the same uid (a worker, a
     * submitted command) may no longer read /proc/<this>/environ or mem, nor ptrace it; no core
     * dump holds the password either. Each worker's exec makes it dumpable again. */
    if (prctl(PR_SET_DUMPABLE, 0) < 0) {
        perror("elastic-agent: prctl(PR_SET_DUMPABLE)");
        return AGENT_EXIT_RDZV;
    }
    if (argc > 1 && strcmp(argv[1], "status") == 0)
        return pool_status_wanted(argc - 1, argv + 1) ? pool_status_main(argc - 1, argv + 1, environ)
                                                       : status_main(argc - 1, argv + 1, environ);
    if (argc > 1 && strcmp(argv[1], "serve") == 0)
        return serve_main(argc - 1, argv + 1, environ);
    if (argc > 1 && strcmp(argv[1], "submit") == 0)
        return submit_main(argc - 1, argv + 1, environ);
    if (argc > 1 && strcmp(argv[1], "cancel") == 0)
        return cancel_main(argc - 1, argv + 1, environ);
    struct cfg cfg;
    struct ea_error err = {0};
    if (cfg_parse(argc, argv, environ, &cfg, &err) < 0) {
        fprintf(stderr, "elastic-agent: %s\n", err.msg);
        return AGENT_EXIT_USAGE;
    }
    if (cfg.help) {
        cfg_print_help(stdout);
        return 0;
    }
    if (cfg.version) {
        printf("elastic-agent %s\n", EA_VERSION);
        return 0;
    }
    if (driver_wanted(&cfg))
        return driver_run(&cfg, argc, argv, environ);
    return agent_run(&cfg, environ);
}
