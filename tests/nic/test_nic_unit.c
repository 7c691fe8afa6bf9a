// SPDX-License-Identifier: Apache-2.0
/* Issue #11's pure parts: the topology builder (DMLC link maps) for N = 1..9 and beyond, the node
 * record's NIC discovery fields, and interface lists (--iface, getifaddrs). */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "netif.h"
#include "state.h"
#include "topology.h"

/* Ring closes through every rank once; the tree is a tree (one root, parent/children agree,
 * every rank reachable from rank 0, at most two children). */
static void check_links(int n, const struct rdzv_link *l)
{
    /* ring */
    char *seen = calloc((size_t)n, 1);
    int r = 0;
    for (int step = 0; step < n; step++) {
        cr_assert(!seen[r], "n=%d: ring visits %d twice", n, r);
        seen[r] = 1;
        cr_assert_eq(l[l[r].ring_next].ring_prev, r, "n=%d: ring prev/next disagree at %d", n, r);
        r = l[r].ring_next;
        cr_assert(r >= 0 && r < n);
    }
    cr_assert_eq(r, 0, "n=%d: ring does not close", n);
    /* tree */
    memset(seen, 0, (size_t)n);
    int roots = 0, edges = 0;
    for (int i = 0; i < n; i++) {
        roots += l[i].parent == -1;
        cr_assert(l[i].n_children >= 0 && l[i].n_children <= 2);
        for (int c = 0; c < l[i].n_children; c++) {
            cr_assert_eq(l[l[i].children[c]].parent, i, "n=%d: child %d of %d disagrees", n,
                         l[i].children[c], i);
            edges++;
        }
        if (l[i].n_children == 2)
            cr_assert_lt(l[i].children[0], l[i].children[1]);
    }
    cr_assert_eq(roots, 1, "n=%d: %d roots", n, roots);
    cr_assert_eq(l[0].parent, -1, "n=%d: rank 0 is not the root", n);
    cr_assert_eq(edges, n - 1, "n=%d: %d tree edges", n, edges);
    int *stack = malloc((size_t)n * sizeof(*stack)), top = 0, reached = 0;
    stack[top++] = 0;
    while (top) {
        int v = stack[--top];
        cr_assert(!seen[v], "n=%d: cycle through %d", n, v);
        seen[v] = 1;
        reached++;
        for (int c = 0; c < l[v].n_children; c++)
            stack[top++] = l[v].children[c];
    }
    cr_assert_eq(reached, n, "n=%d: only %d ranks reachable from the root", n, reached);
    free(stack);
    free(seen);
}

Test(topology, ring_and_tree_n1_to_9)
{
    for (int n = 1; n <= 9; n++) {
        struct rdzv_link l[9];
        cr_assert_eq(rdzv_topo_build(n, l), 0);
        check_links(n, l);
    }
    struct rdzv_link one;
    cr_assert_eq(rdzv_topo_build(0, &one), -EINVAL);
}

Test(topology, large_worlds)
{
    for (int n = 10; n <= 1100; n += 109) {
        struct rdzv_link *l = calloc((size_t)n, sizeof(*l));
        cr_assert_eq(rdzv_topo_build(n, l), 0);
        check_links(n, l);
        free(l);
    }
}

/* The DMLC tracker's exact maps (get_link_map) for 9 workers: parents and children. */
Test(topology, same_as_dmlc_tracker)
{
    const int parent[9] = {-1, 0, 1, 2, 2, 1, 8, 8, 0};
    const int children[9][2] = {{1, 8}, {2, 5}, {3, 4}, {-1}, {-1}, {-1}, {-1}, {-1}, {6, 7}};
    struct rdzv_link l[9];
    cr_assert_eq(rdzv_topo_build(9, l), 0);
    for (int i = 0; i < 9; i++) {
        cr_assert_eq(l[i].parent, parent[i], "rank %d", i);
        cr_assert_eq(l[i].ring_next, (i + 1) % 9);
        cr_assert_eq(l[i].ring_prev, (i + 8) % 9);
        for (int c = 0; c < l[i].n_children; c++)
            cr_assert_eq(l[i].children[c], children[i][c], "rank %d child %d", i, c);
        cr_assert_eq(l[i].n_children, children[i][0] < 0 ? 0 : 2, "rank %d", i);
    }
    /* n = 4: 0-{1,3}, 1-{2} */
    cr_assert_eq(rdzv_topo_build(4, l), 0);
    cr_assert_eq(l[2].parent, 1);
    cr_assert_eq(l[3].parent, 0);
    cr_assert_eq(l[1].n_children, 1);
}

Test(node_record, ifaces_round_trip)
{
    struct rdzv_node n = {.node_id = "a",
                          .host = "h",
                          .addr = "10.0.0.1",
                          .nproc = 2,
                          .pid = 7,
                          .probe_port = 40000,
                          .n_ifaces = 2,
                          .ifaces = {{"eth0", "10.0.0.1", 24}, {"ib0", "fd00::5", 64}}};
    char *json = NULL;
    cr_assert_eq(rdzv_node_encode(&n, &json, NULL), 0);
    struct rdzv_node back;
    cr_assert_eq(rdzv_node_decode(json, strlen(json), &back, NULL), 0);
    free(json);
    cr_assert_eq(back.probe_port, 40000);
    cr_assert_eq(back.n_ifaces, 2);
    cr_assert_str_eq(back.ifaces[1].name, "ib0");
    cr_assert_str_eq(back.ifaces[1].addr, "fd00::5");
    cr_assert_eq(back.ifaces[1].prefix, 64);
    /* without discovery: no fields, decodes with probe_port 0 (old records too) */
    n.probe_port = 0;
    cr_assert_eq(rdzv_node_encode(&n, &json, NULL), 0);
    cr_assert_null(strstr(json, "ifaces"));
    cr_assert_eq(rdzv_node_decode(json, strlen(json), &back, NULL), 0);
    cr_assert_eq(back.probe_port, 0);
    cr_assert_eq(back.n_ifaces, 0);
    free(json);
}

Test(node_record, bad_ifaces_rejected)
{
    const char *bad[] = {
        "{\"node\":\"a\",\"host\":\"h\",\"addr\":\"x\",\"nproc\":1,\"pid\":1,\"probe_port\":0,"
        "\"ifaces\":[]}",
        "{\"node\":\"a\",\"host\":\"h\",\"addr\":\"x\",\"nproc\":1,\"pid\":1,\"probe_port\":5}",
        "{\"node\":\"a\",\"host\":\"h\",\"addr\":\"x\",\"nproc\":1,\"pid\":1,\"probe_port\":5,"
        "\"ifaces\":[{\"name\":\"eth0\",\"addr\":\"1.2.3.4\"}]}",
        "{\"node\":\"a\",\"host\":\"h\",\"addr\":\"x\",\"nproc\":1,\"pid\":1,\"probe_port\":5,"
        "\"ifaces\":[{\"name\":\"averyveryverylongname\",\"addr\":\"1.2.3.4\",\"prefix\":8}]}",
        "{\"node\":\"a\",\"host\":\"h\",\"addr\":\"x\",\"nproc\":1,\"pid\":1,\"probe_port\":5,"
        "\"ifaces\":[{\"name\":\"e\",\"addr\":\"1.2.3.4\",\"prefix\":200}]}",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        struct rdzv_node n;
        struct ea_error err = {0};
        cr_assert_eq(rdzv_node_decode(bad[i], strlen(bad[i]), &n, &err), -EBADMSG, "%zu", i);
        cr_assert(strstr(err.msg, "node record"), "%s", err.msg);
    }
}

Test(netif, iface_lists)
{
    cr_assert_eq(netif_check_list("eth0", NULL), 0);
    cr_assert_eq(netif_check_list("eth0,ib0,enp3s0f1", NULL), 0);
    const char *bad[] = {"", ",", "eth0,", "a b", "eth0/1", "averyveryverylongname", "e:1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        struct ea_error err = {0};
        cr_assert_eq(netif_check_list(bad[i], &err), -EINVAL, "'%s'", bad[i]);
        cr_assert(strstr(err.msg, "--iface"));
    }
    cr_assert(netif_in_list(NULL, "x"));
    cr_assert(netif_in_list("a,eth0", "eth0"));
    cr_assert(!netif_in_list("a,eth0", "eth"));
    cr_assert(netif_is_loopback("127.0.0.1"));
    cr_assert(netif_is_loopback("127.9.0.1"));
    cr_assert(netif_is_loopback("::1"));
    cr_assert(!netif_is_loopback("10.0.0.1"));
}

Test(netif, lists_loopback_and_honours_filter)
{
    struct rdzv_iface ifs[RDZV_IFACE_MAX];
    size_t n = 0;
    cr_assert_eq(netif_list(NULL, ifs, RDZV_IFACE_MAX, &n, NULL, NULL, 0, NULL), 0);
    bool lo = false;
    for (size_t i = 0; i < n; i++)
        lo = lo || (strcmp(ifs[i].addr, "127.0.0.1") == 0 && ifs[i].prefix == 8);
    cr_assert(lo, "127.0.0.1/8 not listed");
    cr_assert_eq(netif_list("lo", ifs, RDZV_IFACE_MAX, &n, NULL, NULL, 0, NULL), 0);
    for (size_t i = 0; i < n; i++)
        cr_assert_str_eq(ifs[i].name, "lo");
    struct ea_error err = {0};
    cr_assert_eq(netif_list("lo,nosuch0", ifs, RDZV_IFACE_MAX, &n, NULL, NULL, 0, &err), -ENODEV);
    cr_assert(strstr(err.msg, "'nosuch0'") && strstr(err.msg, "lo"), "%s", err.msg);
}

/* More addresses than fit: the rest are counted and named, never dropped in silence. */
Test(netif, addresses_beyond_max_are_counted_and_named)
{
    struct rdzv_iface ifs[RDZV_IFACE_MAX];
    size_t all = 0, n = 0, skipped = 99;
    char names[64];
    cr_assert_eq(netif_list(NULL, ifs, RDZV_IFACE_MAX, &all, &skipped, names, sizeof(names),
                            NULL),
                 0);
    cr_assert_geq(all, 1);
    if (skipped == 0) /* this host's addresses all fit: none left out, no names */
        cr_assert_str_eq(names, "");
    cr_assert_eq(netif_list(NULL, ifs, 0, &n, &skipped, names, sizeof(names), NULL), 0);
    cr_assert_eq(n, 0);
    cr_assert_geq(skipped, all, "with room for none, every address is left out");
    cr_assert(netif_in_list(names, ifs[0].name) || strstr(names, "lo"), "names: %s", names);
}

/* The options' validation (exit 2 through cfg_parse's -EINVAL), with messages naming them. */
#include "config.h"

static int parse(struct cfg *c, struct ea_error *err, ...)
{
    char *argv[16] = {"elastic-agent"};
    int argc = 1;
    va_list ap;
    va_start(ap, err);
    for (char *a; (a = va_arg(ap, char *));)
        argv[argc++] = a;
    va_end(ap);
    argv[argc++] = "--";
    argv[argc++] = "true";
    argv[argc] = NULL;
    return cfg_parse(argc, argv, NULL, c, err);
}

Test(options, nic_and_env_style)
{
    struct cfg c;
    cr_assert_eq(parse(&c, NULL, "--nic-discovery", "on", "--iface", "eth0,ib0", "--env-style",
                       "torch,dmlc", "--dmlc-tracker", "10.0.0.1:9091", (char *)NULL),
                 0);
    cr_assert_str_eq(c.iface, "eth0,ib0");
    struct {
        const char *flag, *value, *needle;
    } bad[] = {
        {"--nic-discovery", "maybe", "--nic-discovery"},
        {"--iface", "eth0,", "--iface"},
        {"--iface", "a/b", "--iface"},
        {"--env-style", "mpi", "--env-style"},
        {"--dmlc-tracker", "nohost", "--dmlc-tracker"},
        {"--dmlc-tracker", "h:99999", "--dmlc-tracker"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        struct ea_error err = {0};
        int r = strcmp(bad[i].flag, "--dmlc-tracker") == 0
                    ? parse(&c, &err, "--env-style", "dmlc", bad[i].flag, bad[i].value, (char *)NULL)
                    : parse(&c, &err, bad[i].flag, bad[i].value, (char *)NULL);
        cr_assert_eq(r, -EINVAL, "%s %s", bad[i].flag, bad[i].value);
        cr_assert(strstr(err.msg, bad[i].needle), "%s", err.msg);
    }
    struct ea_error err = {0};
    cr_assert_eq(parse(&c, &err, "--dmlc-tracker", "h:9091", (char *)NULL), -EINVAL);
    cr_assert(strstr(err.msg, "needs --env-style with dmlc"), "%s", err.msg);
    ea_error_clear(&err);
    cr_assert_eq(parse(&c, &err, "--nic-discovery", "off", "--iface", "eth0", (char *)NULL), -EINVAL);
    cr_assert(strstr(err.msg, "--iface"), "%s", err.msg);
}
