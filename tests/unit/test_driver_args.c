// SPDX-License-Identifier: Apache-2.0
/* Unit tests of the driver's pure parts: child argv, node bounds, cooldown policy. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "driver.h"

static int count(char **v)
{
    int n = 0;
    while (v[n])
        n++;
    return n;
}

static int find(char **v, const char *s)
{
    for (int i = 0; v[i]; i++)
        if (strcmp(v[i], s) == 0)
            return i;
    return -1;
}

Test(driver_args, child_argv_drops_driver_options_and_sets_its_own)
{
    char *argv[] = {"elastic-agent",
                    "--hosts",
                    "a:2,b:2",
                    "--run-id",
                    "r1",
                    "--tee",
                    "--nproc_per_node=3",
                    "--node-id",
                    "x",
                    "--min=1",
                    "--max",
                    "2",
                    "--discovery-interval",
                    "1",
                    "--host-cooldown=2",
                    "--ssh-option",
                    "StrictHostKeyChecking=no",
                    "--",
                    "w",
                    "--hosts",
                    "arg",
                    NULL};
    int argc = count(argv);
    struct driver_child c = {
        .exe = "/bin/ea", .host = "b", .slots = 2, .node_id = "nb", .min_nodes = 1, .max_nodes = 3};
    char **v = NULL;
    cr_assert_eq(driver_child_argv(argc, argv, argv + 18, &c, &v, NULL), 0);
    const char *want[] = {"/bin/ea",
                          "--run-id",
                          "r1",
                          "--tee",
                          "--ssh-option",
                          "StrictHostKeyChecking=no",
                          "--host",
                          "b",
                          "--nproc-per-node",
                          "2",
                          "--node-id",
                          "nb",
                          "--min",
                          "1",
                          "--max",
                          "3",
                          "--nic-discovery",
                          "off",
                          "--",
                          "w",
                          "--hosts",
                          "arg",
                          NULL};
    for (int i = 0; want[i]; i++)
        cr_assert_str_eq(v[i], want[i], "argv[%d]", i);
    cr_assert_null(v[count((char **)want)]);
    free(v);
}

Test(driver_args, child_argv_without_double_dash)
{
    char *argv[] = {"elastic-agent", "--hostfile", "f", "--max-restarts", "3", "w", "-x", NULL};
    struct driver_child c = {
        .exe = "e", .host = "h", .slots = 1, .node_id = "h", .min_nodes = 2, .max_nodes = 2};
    char **v = NULL;
    cr_assert_eq(driver_child_argv(count(argv), argv, argv + 5, &c, &v, NULL), 0);
    cr_assert_eq(find(v, "--hostfile"), -1);
    cr_assert_eq(find(v, "--max-restarts"), 1, "not taken for --max");
    int dd = find(v, "--");
    cr_assert_gt(dd, 0);
    cr_assert_str_eq(v[dd + 1], "w");
    cr_assert_str_eq(v[dd + 2], "-x");
    cr_assert_null(v[dd + 3]);
    free(v);
}

/* The store password reaches each child as --password-fd (the driver's memfd), never as the
 * user's own --password-file or --password-fd. */
Test(driver_args, child_argv_hands_the_password_by_fd)
{
    char *argv[] = {"elastic-agent", "--hosts", "a:1", "--user", "u", "--password-file", "/pw",
                    "--password-fd=9", "--", "w", NULL};
    struct driver_child c = {.exe = "e", .host = "a", .slots = 1, .node_id = "a",
                             .min_nodes = 1, .max_nodes = 1, .password_fd = "5"};
    char **v = NULL;
    cr_assert_eq(driver_child_argv(count(argv), argv, argv + 9, &c, &v, NULL), 0);
    cr_assert_eq(find(v, "--password-file"), -1);
    cr_assert_eq(find(v, "/pw"), -1);
    cr_assert_eq(find(v, "--password-fd=9"), -1);
    int k = find(v, "--password-fd");
    cr_assert(k > 0 && k < find(v, "--"));
    cr_assert_str_eq(v[k + 1], "5");
    cr_assert_eq(find(v, "--user"), 1);
    free(v);
    c.password_fd = NULL; /* no --user: nothing to hand */
    cr_assert_eq(driver_child_argv(count(argv), argv, argv + 9, &c, &v, NULL), 0);
    cr_assert_eq(find(v, "--password-fd"), -1);
    free(v);
}

Test(driver_args, bounds_given)
{
    char *a1[] = {"ea", "--hosts", "a", "--", "w", "--min", "3", NULL};
    cr_assert_not(driver_bounds_given(count(a1), a1, a1 + 4, NULL), "after the command");
    char *a2[] = {"ea", "--nnodes=1:2", "w", NULL};
    cr_assert(driver_bounds_given(count(a2), a2, a2 + 2, NULL));
    char *a3[] = {"ea", "--max-restarts", "2", "w", NULL};
    cr_assert_not(driver_bounds_given(count(a3), a3, a3 + 3, NULL));
    char *env[] = {"PATH=/bin", "ELASTIC_MIN=", NULL};
    cr_assert_not(driver_bounds_given(count(a3), a3, a3 + 3, env), "empty means unset");
    char *env2[] = {"PET_NNODES=2", NULL};
    cr_assert(driver_bounds_given(count(a3), a3, a3 + 3, env2));
}

Test(driver_args, cooldown_doubles_and_caps)
{
    cr_assert_eq(driver_cooldown_ms(10000, 1), 10000);
    cr_assert_eq(driver_cooldown_ms(10000, 2), 20000);
    cr_assert_eq(driver_cooldown_ms(10000, 3), 40000);
    cr_assert_eq(driver_cooldown_ms(10000, 6), 300000);
    cr_assert_eq(driver_cooldown_ms(10000, 1000), 300000, "capped, no overflow");
    cr_assert_eq(driver_cooldown_ms(600000, 3), 600000, "a first period over the cap stays");
}
