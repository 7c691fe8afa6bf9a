// SPDX-License-Identifier: Apache-2.0
/*
 * netns_harness: network namespaces for multi-host tests on one machine. Creates namespaces,
 * veth links (namespace <-> root, namespace <-> bridge in the root namespace, namespace <->
 * namespace), addresses and routes, and runs commands inside a namespace (optionally with its own
 * UTS hostname, so programs that call gethostname() see a distinct "host").
 *
 * Everything it creates is registered and removed by netns_cleanup() — call it from the suite's
 * criterion fini (it also runs atexit), so a failed assertion never leaves namespaces, links or
 * processes behind. Names are unique per test process: "ea<pid-hex>..." (interface names stay
 * within IFNAMSIZ). Needs root (CAP_SYS_ADMIN + CAP_NET_ADMIN) and `ip` (iproute2); when the
 * kernel refuses, netns_require() skips the test with the reason printed. Not for: traffic shaping
 * (use netns_run(ns, {"tc", ...}) if needed), IPv6 (addresses are whatever `ip addr add` accepts).
 *
 * All functions that can fail assert with criterion (cr_assert) and print the failing `ip`
 * command, except netns_available(), netns_run() and netns_socket() which report. (Prefix netns_,
 * not nn_: criterion links nanomsg, whose nn_socket() a test binary must not shadow.)
 * Link: tests/nic.cmake defines the static library ea_netns_harness.
 */
#ifndef EA_TESTS_NETNS_HARNESS_H
#define EA_TESTS_NETNS_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#define NETNS_NAME_MAX 32

/* True when namespaces and veth links can be created here (root, iproute2 present); otherwise
 * false with a one-line reason in why (may be NULL). Probes once and caches the answer. */
bool netns_available(char *why, size_t why_size);

/* Skip the calling criterion test (cr_skip_test, reason printed on stderr) unless
 * netns_available(); in CI (ea_test_in_ci(): $CI set) fail it instead. Call first in each test (or
 * in the suite init). Also reaps what earlier test processes that were killed (criterion timeout,
 * SIGKILL) left behind: see below. */
void netns_require(void);

/* Delete namespaces "ea<pid-hex>_*" and root bridges "b<pid-hex>_<n>" whose creating process
 * no longer exists (a killed test process never ran its cleanup). */
void netns_reap_stale(void);

/* Create a namespace named "ea<pid-hex>_<tag>" (tag: [a-z0-9] short, e.g. "h0"); loopback is set
 * up. The name is copied to ret_name (NETNS_NAME_MAX bytes) and registered for cleanup. */
void netns_ns_create(const char *tag, char *ret_name);

/* A veth pair: `ifname` (<= 15 chars) inside namespace `ns`, the other end in the root namespace
 * with a generated unique name copied to ret_root_if (NETNS_NAME_MAX; may be NULL). ns_cidr and
 * root_cidr ("10.1.0.2/24") are assigned when not NULL. Both ends are brought up. */
void netns_veth_root(const char *ns, const char *ifname, const char *ns_cidr, const char *root_cidr,
                     char *ret_root_if);

/* A bridge in the root namespace with a generated unique name (ret_name, NETNS_NAME_MAX), up,
 * with root_cidr assigned when not NULL (the root namespace is then a member of that subnet). */
void netns_bridge_create(char *ret_name, const char *root_cidr);

/* A veth pair: `ifname` inside `ns` (cidr assigned when not NULL, up), the peer enslaved to
 * `bridge` in the root namespace (up). */
void netns_veth_bridge(const char *ns, const char *ifname, const char *cidr, const char *bridge);

/* A bridge named `name` inside namespace `ns` (a "switch" namespace), up. Prefer it to a root
 * bridge for connecting namespaces: frames it forwards see only that namespace's (empty)
 * netfilter rules, whereas a bridge in the root namespace is subject to the host's firewall when
 * br_netfilter is loaded (e.g. Docker's iptables FORWARD policy DROP). */
void netns_bridge_in(const char *ns, const char *name);

/* A veth pair: `ifname` inside `ns` (cidr assigned when not NULL, up), the peer enslaved to
 * `bridge` inside namespace `bridge_ns` (up). */
void netns_veth_bridge_in(const char *ns, const char *ifname, const char *cidr,
                          const char *bridge_ns, const char *bridge);

/* Cut (up=false) or restore the switch port that `ifname` in `ns` (made by
 * netns_veth_bridge_in) is plugged into: a cable pulled at the switch. The host's own interface
 * stays up with its routes, so what it sends is silently lost (its connects time out; it sees no
 * ENETDOWN), and so is what is sent to it. */
void netns_port_set(const char *ns, const char *ifname, bool up);

/* A veth pair directly between two namespaces: if_a in ns_a, if_b in ns_b, cidrs when not NULL. */
void netns_veth_pair(const char *ns_a, const char *if_a, const char *cidr_a, const char *ns_b,
                     const char *if_b, const char *cidr_b);

/* `ip link set IFNAME up|down` in namespace ns (NULL = root namespace). */
void netns_link_set(const char *ns, const char *ifname, bool up);

/* `ip addr add CIDR dev IFNAME` in ns (NULL = root). */
void netns_addr_add(const char *ns, const char *ifname, const char *cidr);

/* `ip route add DST via GW` in ns (NULL = root); dst may be "default". */
void netns_route_add(const char *ns, const char *dst, const char *gw);

/* Run argv (NULL-terminated, argv[0] looked up in PATH) inside ns (NULL = root) and wait:
 * the exit code, 128+signal, or -1 when it could not be started. Output goes to the test's
 * stdout/stderr, or to out_path (both streams, truncated) when out_path is not NULL. */
int netns_run(const char *ns, const char *const *argv, const char *out_path);

/* A socket(domain, type | SOCK_CLOEXEC, 0) created inside namespace ns (NULL = root) while the
 * calling thread stays in its own namespace (a socket belongs to the namespace it was made in):
 * lets a test listen/connect "from a host" without a helper process. -errno on failure. */
int netns_socket(const char *ns, int domain, int type);

/* How netns_spawn runs a process. */
struct netns_spawn_opts {
    const char *ns;          /* network namespace; NULL = root */
    const char *hostname;    /* when set: a new UTS namespace with this host name */
    const char *stdout_path; /* created/truncated; NULL = inherit */
    const char *stderr_path; /* created/truncated; NULL = inherit */
    const char *const *env;  /* "K=V" added to (or replacing in) the inherited environment */
};

/* Start argv (argv[0] an absolute path, or looked up in PATH) as described by opts, without
 * waiting: its pid (a child of this process), registered so netns_cleanup() SIGKILLs and reaps it
 * unless netns_forget() was called (e.g. after the caller reaped it). The child gets
 * PR_SET_PDEATHSIG(SIGKILL). Exec failure makes the child exit 127. */
pid_t netns_spawn(const struct netns_spawn_opts *opts, const char *const *argv);

/* Stop tracking pid (the caller reaped it). */
void netns_forget(pid_t pid);

/* SIGKILL + reap every tracked process, delete every namespace, root-side veth and bridge this
 * process created. Idempotent; safe to call from criterion fini and atexit. */
void netns_cleanup(void);

#endif
