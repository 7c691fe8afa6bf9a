// SPDX-License-Identifier: Apache-2.0
/* driver: the pure parts — a child agent's argv, the user's node bounds, the cooldown policy. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"
#include "ea_time.h"

/* Options the children must not see from the user: the driver's own, and those it sets. All
 * take a value. */
static const char *const dropped[] = {"hosts",
                                      "hostfile",
                                      "host-discovery-script",
                                      "discovery-interval",
                                      "host-cooldown",
                                      "nproc-per-node",
                                      "node-id",
                                      "min",
                                      "max",
                                      "nnodes",
                                      "nic-discovery",
                                      "password-file", /* the password goes by --password-fd */
                                      "password-fd",
                                      NULL};

/* "--name" or "--name=value" (with '_' for '-', as the parser allows): is name in `names`?
 * *ret_has_value tells whether the value is inside the argument. */
static bool named(const char *a, const char *const *names, bool *ret_has_value)
{
    if (strncmp(a, "--", 2) != 0 || !a[2])
        return false;
    const char *name = a + 2, *eq = strchr(name, '=');
    size_t len = eq ? (size_t)(eq - name) : strlen(name);
    for (const char *const *n = names; *n; n++) {
        if (strlen(*n) != len)
            continue;
        bool same = true;
        for (size_t i = 0; i < len && same; i++)
            same = (name[i] == '_' ? '-' : name[i]) == (*n)[i];
        if (same) {
            if (ret_has_value)
                *ret_has_value = eq != NULL;
            return true;
        }
    }
    return false;
}

/* Index of the worker command in argv (argc when there is none). */
static int command_index(int argc, char **argv, char *const *command)
{
    for (int i = 1; i < argc; i++)
        if (command && argv + i == command)
            return i;
    return argc;
}

int driver_child_argv(int argc, char **argv, char *const *command, const struct driver_child *c,
                      char ***ret, struct ea_error *err)
{
    int k = command_index(argc, argv, command);
    int ncmd = argc - k;
    size_t nptr = (size_t)k + 18 + (size_t)ncmd;
    enum { NUM = 24 };
    char **v = malloc(nptr * sizeof(char *) + 3 * NUM);
    if (!v)
        return ea_errorf(err, -ENOMEM, "out of memory");
    char *nums = (char *)(v + nptr);
    snprintf(nums, NUM, "%d", c->slots);
    snprintf(nums + NUM, NUM, "%d", c->min_nodes);
    snprintf(nums + 2 * NUM, NUM, "%d", c->max_nodes);
    size_t n = 0;
    v[n++] = (char *)c->exe;
    for (int i = 1; i < k; i++) {
        bool inside = false;
        if (strcmp(argv[i], "--") == 0)
            continue;
        if (named(argv[i], dropped, &inside)) {
            if (!inside)
                i++; /* and its value */
            continue;
        }
        v[n++] = argv[i];
    }
    const char *add[] = {"--host",
                         c->host,
                         "--nproc-per-node",
                         nums,
                         "--node-id",
                         c->node_id,
                         "--min",
                         nums + NUM,
                         "--max",
                         nums + 2 * NUM,
                         "--nic-discovery",
                         "off",
                         "--"};
    if (c->password_fd) {
        v[n++] = (char *)"--password-fd";
        v[n++] = (char *)c->password_fd;
    }
    for (size_t i = 0; i < sizeof(add) / sizeof(*add); i++)
        v[n++] = (char *)add[i];
    for (int i = k; i < argc; i++)
        v[n++] = argv[i];
    v[n] = NULL;
    *ret = v;
    return 0;
}

bool driver_bounds_given(int argc, char **argv, char *const *command, char **envp)
{
    static const char *const bounds[] = {"min", "max", "nnodes", NULL};
    int k = command_index(argc, argv, command);
    for (int i = 1; i < k; i++)
        if (named(argv[i], bounds, NULL))
            return true;
    static const char *const vars[] = {
        "ELASTIC_MIN=", "ELASTIC_MAX=", "ELASTIC_NNODES=", "PET_NNODES=", NULL};
    for (char **e = envp; e && *e; e++)
        for (const char *const *p = vars; *p; p++)
            if (strncmp(*e, *p, strlen(*p)) == 0 && (*e)[strlen(*p)])
                return true;
    return false;
}

int64_t driver_cooldown_ms(int64_t base_ms, int failures)
{
    return ea_backoff_ms(base_ms, failures, DRIVER_COOLDOWN_CAP_MS);
}
