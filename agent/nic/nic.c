// SPDX-License-Identifier: Apache-2.0
/* nic: ring-probe NIC discovery through the store. */
#include "nic.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ea_time.h"
#include "netif.h"

struct probe {
    int fd; /* -1 once finished */
    char name[RDZV_IFNAME_MAX];
    bool reached;
};

enum phase { PH_IDLE, PH_PROBING, PH_PUBLISH, PH_COLLECT, PH_DONE, PH_FAILED };

struct nic {
    bool enabled; /* not "off": listener open, interfaces published */
    bool always;  /* "on": also when every node is on one host */
    int listen_fd;
    int port;
    struct rdzv_iface ifaces[RDZV_IFACE_MAX];
    size_t n_ifaces;

    /* discovery for one membership signature */
    enum phase phase;
    uint64_t sig;
    int64_t started_ms, took_ms, deadline_ms;
    struct probe probes[RDZV_IFACE_MAX];
    size_t n_probes;
    char successor[RDZV_ID_MAX];
    bool active;      /* discovery applies to the membership of `sig` */
    char result[256]; /* common interfaces, comma list */
    char master[RDZV_ADDR_MAX];
    char report[EA_ERROR_MSG_MAX];
    char warning[EA_ERROR_MSG_MAX]; /* for the agent to log once (nic_warning) */
};

/* Stop waiting: close every probe still in flight (it counts as unreachable). */
static void probes_close(struct nic *n)
{
    for (size_t i = 0; i < n->n_probes; i++)
        if (n->probes[i].fd >= 0) {
            close(n->probes[i].fd);
            n->probes[i].fd = -1;
        }
    n->deadline_ms = -1;
}

/* A listening TCP socket on every address (dual-stack when IPv6 exists), ephemeral port. */
static int listen_any(int *ret_port)
{
    int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    struct sockaddr_storage ss = {0};
    socklen_t len;
    if (fd >= 0) {
        int off = 0;
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
        struct sockaddr_in6 *a = (struct sockaddr_in6 *)&ss;
        a->sin6_family = AF_INET6;
        a->sin6_addr = in6addr_any;
        len = sizeof(*a);
    } else {
        fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0)
            return -errno;
        struct sockaddr_in *a = (struct sockaddr_in *)&ss;
        a->sin_family = AF_INET;
        a->sin_addr.s_addr = htonl(INADDR_ANY);
        len = sizeof(*a);
    }
    if (bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 64) < 0 ||
        getsockname(fd, (struct sockaddr *)&ss, &len) < 0) {
        int e = -errno;
        close(fd);
        return e;
    }
    *ret_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                               : ((struct sockaddr_in *)&ss)->sin_port);
    return fd;
}

int nic_create(const char *discovery, const char *iface, struct nic **ret, struct ea_error *err)
{
    struct nic *n = calloc(1, sizeof(*n));
    if (!n)
        return ea_errorf(err, -ENOMEM, "out of memory");
    n->listen_fd = -1;
    n->deadline_ms = -1;
    n->enabled = !discovery || strcmp(discovery, "off") != 0;
    n->always = discovery && strcmp(discovery, "on") == 0;
    if (n->enabled) {
        size_t skipped = 0;
        char names[256];
        int r = netif_list(iface, n->ifaces, RDZV_IFACE_MAX, &n->n_ifaces, &skipped, names,
                           sizeof(names), err);
        if (r < 0) {
            free(n);
            return r;
        }
        if (skipped)
            snprintf(n->warning, sizeof(n->warning),
                     "NIC discovery: only the first %d addresses are published; %zu more (on "
                     "%s) are left out: choose the interfaces with --iface",
                     RDZV_IFACE_MAX, skipped, names);
        if ((n->listen_fd = listen_any(&n->port)) < 0) {
            r = n->listen_fd;
            free(n);
            return ea_errorf(err, r, "NIC discovery: cannot open the probe listener: %s",
                             strerror(-r));
        }
    }
    *ret = n;
    return 0;
}

void nic_destroy(struct nic *n)
{
    if (!n)
        return;
    probes_close(n);
    if (n->listen_fd >= 0)
        close(n->listen_fd);
    free(n);
}

void nic_fill_self(const struct nic *n, struct rdzv_node *self)
{
    if (!n->enabled)
        return;
    self->probe_port = n->port;
    self->n_ifaces = n->n_ifaces;
    memcpy(self->ifaces, n->ifaces, n->n_ifaces * sizeof(*n->ifaces));
}

static uint64_t fnv(uint64_t h, const void *p, size_t len)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < len; i++)
        h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

static uint64_t fnv_str(uint64_t h, const char *s)
{
    return fnv(h, s, strlen(s) + 1);
}

/* Start a non-blocking connect to addr:port; the probe is finished at once on an immediate
 * answer (connected, or refused/unroutable). */
static void probe_start(struct probe *p, const char *addr, int port)
{
    struct sockaddr_storage ss = {0};
    socklen_t len;
    struct sockaddr_in *a4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)&ss;
    p->fd = -1;
    p->reached = false;
    if (inet_pton(AF_INET, addr, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        len = sizeof(*a4);
    } else if (inet_pton(AF_INET6, addr, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        len = sizeof(*a6);
    } else {
        return;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return;
    if (connect(fd, (struct sockaddr *)&ss, len) == 0)
        p->reached = true;
    else if (errno == EINPROGRESS) {
        p->fd = fd;
        return;
    }
    close(fd);
}

/* Begin discovery for the membership of signature `sig`: probe the ring successor. */
static void begin(struct nic *n, const struct rdzv_node *succ, bool one_host, int64_t now_ms)
{
    probes_close(n);
    n->n_probes = 0;
    n->started_ms = now_ms;
    n->result[0] = n->master[0] = n->report[0] = '\0';
    snprintf(n->successor, sizeof(n->successor), "%s", succ->node_id);
    for (size_t i = 0; i < succ->n_ifaces; i++) {
        const struct rdzv_iface *f = &succ->ifaces[i];
        if (!one_host && netif_is_loopback(f->addr))
            continue; /* another host's loopback address is our own */
        struct probe *p = &n->probes[n->n_probes++];
        snprintf(p->name, sizeof(p->name), "%s", f->name);
        probe_start(p, f->addr, succ->probe_port);
    }
    n->deadline_ms = now_ms + NIC_PROBE_TIMEOUT_MS;
    n->phase = PH_PROBING;
}

static bool probes_pending(const struct nic *n)
{
    for (size_t i = 0; i < n->n_probes; i++)
        if (n->probes[i].fd >= 0)
            return true;
    return false;
}

/* probe/<id>: {"sig": "<hex>", "to": successor, "round": r, "reached": [names...]}; a name is
 * listed once even when several of its addresses answered. */
static int publish(struct nic *n, struct rdzv_session *rdzv, int64_t round, struct ea_error *err)
{
    char sig[32];
    snprintf(sig, sizeof(sig), "%016" PRIx64, n->sig);
    json_t *reached = json_array();
    for (size_t i = 0; i < n->n_probes; i++) {
        bool dup = false;
        for (size_t k = 0; k < json_array_size(reached) && !dup; k++)
            dup = strcmp(json_string_value(json_array_get(reached, k)), n->probes[i].name) == 0;
        if (n->probes[i].reached && !dup)
            json_array_append_new(reached, json_string(n->probes[i].name));
    }
    json_t *root = json_pack("{s:s, s:s, s:I, s:o}", "sig", sig, "to", n->successor, "round",
                             (json_int_t)round, "reached", reached);
    char *v = root ? json_dumps(root, JSON_COMPACT) : NULL;
    json_decref(root);
    if (!v)
        return ea_errorf(err, -ENOMEM, "out of memory");
    int r = rdzv_publish_probe(rdzv, v, err);
    free(v);
    return r;
}

/* Member i's published result for the current signature: its "reached" array, or NULL. The
 * returned value is owned by *ret_root (decref it). */
static json_t *result_of(const struct nic *n, struct rdzv_session *rdzv, const char *node_id,
                         json_t **ret_root)
{
    const char *v = rdzv_probe(rdzv, node_id);
    json_t *root = v ? json_loads(v, 0, NULL) : NULL;
    char sig[32];
    snprintf(sig, sizeof(sig), "%016" PRIx64, n->sig);
    const char *got = json_string_value(json_object_get(root, "sig"));
    json_t *reached = json_object_get(root, "reached");
    bool ok = got && strcmp(got, sig) == 0 && json_is_array(reached);
    for (size_t i = 0; ok && i < json_array_size(reached); i++)
        ok = json_is_string(json_array_get(reached, i));
    if (!ok) {
        json_decref(root);
        return NULL;
    }
    *ret_root = root;
    return reached;
}

static bool has_name(json_t *arr, const char *name)
{
    for (size_t i = 0; i < json_array_size(arr); i++)
        if (json_string_value(json_array_get(arr, i)) &&
            strcmp(json_string_value(json_array_get(arr, i)), name) == 0)
            return true;
    return false;
}

/* Every member's result is in: intersect (in member 0's order). */
static int collect(struct nic *n, struct rdzv_session *rdzv, const struct rdzv_state *s,
                   struct ea_error *err)
{
    json_t **roots = calloc(s->n_members, sizeof(*roots));
    json_t **reach = calloc(s->n_members, sizeof(*reach));
    if (!roots || !reach) {
        free(roots);
        free(reach);
        return ea_errorf(err, -ENOMEM, "out of memory");
    }
    size_t got = 0;
    for (; got < s->n_members; got++)
        if (!(reach[got] = result_of(n, rdzv, s->members[got].node_id, &roots[got])))
            break;
    int status = NIC_WAIT;
    if (got == s->n_members) {
        n->result[0] = '\0';
        for (size_t i = 0; i < json_array_size(reach[0]); i++) {
            const char *name = json_string_value(json_array_get(reach[0], i));
            bool all = name != NULL;
            for (size_t m = 1; m < s->n_members && all; m++)
                all = has_name(reach[m], name);
            size_t len = strlen(n->result);
            if (all && len + strlen(name) + 2 < sizeof(n->result))
                snprintf(n->result + len, sizeof(n->result) - len, "%s%s", len ? "," : "", name);
        }
        if (n->result[0]) {
            /* MASTER_ADDR: group rank 0's address on the first common interface */
            size_t first = strcspn(n->result, ",");
            const struct rdzv_node *r0 = rdzv_node_find(rdzv, s->members[0].node_id);
            for (size_t i = 0; r0 && i < r0->n_ifaces && !n->master[0]; i++)
                if (strlen(r0->ifaces[i].name) == first &&
                    strncmp(r0->ifaces[i].name, n->result, first) == 0)
                    snprintf(n->master, sizeof(n->master), "%s", r0->ifaces[i].addr);
            n->phase = PH_DONE;
            status = NIC_DONE;
        } else {
            size_t off = 0;
            for (size_t m = 0; m < s->n_members && off < sizeof(n->report); m++) {
                const struct rdzv_member *mb = &s->members[m], *nx;
                nx = &s->members[(m + 1) % s->n_members];
                int w =
                    snprintf(n->report + off, sizeof(n->report) - off,
                             "%s%s (%s) -> %s:", m ? "; " : "", mb->node_id, mb->host, nx->node_id);
                off += w > 0 ? (size_t)w : 0;
                for (size_t i = 0; i < json_array_size(reach[m]) && off < sizeof(n->report); i++) {
                    w = snprintf(n->report + off, sizeof(n->report) - off, "%s%s", i ? "," : " ",
                                 json_string_value(json_array_get(reach[m], i)));
                    off += w > 0 ? (size_t)w : 0;
                }
                if (json_array_size(reach[m]) == 0 && off < sizeof(n->report)) {
                    w = snprintf(n->report + off, sizeof(n->report) - off, " nothing");
                    off += w > 0 ? (size_t)w : 0;
                }
            }
            n->phase = PH_FAILED;
            status = NIC_FAILED;
        }
    }
    for (size_t i = 0; i < got; i++)
        json_decref(roots[i]);
    free(roots);
    free(reach);
    if (status == NIC_FAILED)
        return ea_errorf(err, NIC_FAILED,
                         "no network interface is common to all %zu nodes (NIC discovery probes "
                         "each node's ring successor; reached: %s)",
                         s->n_members, n->report);
    return status;
}

int nic_step(struct nic *n, struct rdzv_session *rdzv, const struct rdzv_state *s, int my_index,
             int64_t now_ms, struct ea_error *err)
{
    if (!n->enabled || my_index < 0 || s->n_members == 0) {
        n->active = false;
        return NIC_READY;
    }
    bool one_host = true;
    for (size_t i = 1; i < s->n_members; i++)
        one_host = one_host && strcmp(s->members[i].host, s->members[0].host) == 0;
    if (one_host && !n->always) {
        n->active = false; /* auto: every node is on one host */
        return NIC_READY;
    }
    /* the membership's signature; every member computes the same one from the store */
    uint64_t sig = 1469598103934665603ULL;
    sig = fnv(sig, &one_host, sizeof(one_host));
    for (size_t i = 0; i < s->n_members; i++) {
        const struct rdzv_node *nd = rdzv_node_find(rdzv, s->members[i].node_id);
        if (!nd)
            return NIC_WAIT; /* its record is gone: the run is about to move on */
        if (nd->probe_port <= 0) {
            n->active = true;
            n->phase = PH_FAILED;
            return ea_errorf(err, NIC_FAILED,
                             "node '%s' (host '%s') does not take part in NIC discovery "
                             "(--nic-discovery off there?): use the same --nic-discovery on "
                             "every node",
                             nd->node_id, nd->host);
        }
        sig = fnv_str(sig, nd->node_id);
        sig = fnv(sig, &nd->pid, sizeof(nd->pid));
        sig = fnv(sig, &nd->probe_port, sizeof(nd->probe_port));
        for (size_t k = 0; k < nd->n_ifaces; k++) {
            sig = fnv_str(sig, nd->ifaces[k].name);
            sig = fnv_str(sig, nd->ifaces[k].addr);
        }
    }
    n->active = true;
    if (sig != n->sig || n->phase == PH_IDLE) {
        n->sig = sig;
        const struct rdzv_member *succ = &s->members[((size_t)my_index + 1) % s->n_members];
        begin(n, rdzv_node_find(rdzv, succ->node_id), one_host, now_ms);
    }
    if (n->phase == PH_PROBING) {
        if (probes_pending(n) && now_ms < n->deadline_ms)
            return NIC_WAIT;
        probes_close(n); /* what did not answer in time is unreachable */
        n->phase = PH_PUBLISH;
    }
    if (n->phase == PH_PUBLISH) {
        int r = publish(n, rdzv, s->round, err);
        if (r < 0)
            return r;
        n->phase = PH_COLLECT;
    }
    if (n->phase == PH_COLLECT) {
        int r = collect(n, rdzv, s, err);
        if (r == NIC_DONE)
            n->took_ms = ea_now_ms() - n->started_ms;
        return r;
    }
    if (n->phase == PH_FAILED)
        return ea_errorf(err, NIC_FAILED,
                         "no network interface is common to all %zu nodes (reached: %s)",
                         s->n_members, n->report);
    return NIC_READY; /* PH_DONE for this membership */
}

const char *nic_ifaces(const struct nic *n)
{
    return n->active && n->phase == PH_DONE ? n->result : NULL;
}

const char *nic_master_addr(const struct nic *n)
{
    return n->active && n->phase == PH_DONE && n->master[0] ? n->master : NULL;
}

int64_t nic_last_ms(const struct nic *n)
{
    return n->took_ms;
}

size_t nic_pollfds(const struct nic *n, struct pollfd *fds, size_t max)
{
    size_t k = 0;
    if (n->listen_fd >= 0 && k < max)
        fds[k++] = (struct pollfd){.fd = n->listen_fd, .events = POLLIN};
    for (size_t i = 0; i < n->n_probes && k < max; i++)
        if (n->probes[i].fd >= 0)
            fds[k++] = (struct pollfd){.fd = n->probes[i].fd, .events = POLLOUT};
    return k;
}

void nic_on_poll(struct nic *n, const struct pollfd *fds, size_t nfds)
{
    for (size_t k = 0; k < nfds; k++) {
        if (!fds[k].revents)
            continue;
        if (fds[k].fd == n->listen_fd) {
            int c; /* a probe from our ring predecessor: the handshake was the answer */
            while ((c = accept4(n->listen_fd, NULL, NULL, SOCK_CLOEXEC)) >= 0)
                close(c);
            continue;
        }
        for (size_t i = 0; i < n->n_probes; i++) {
            struct probe *p = &n->probes[i];
            if (p->fd != fds[k].fd || p->fd < 0)
                continue;
            int e = 0;
            socklen_t len = sizeof(e);
            if (getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0)
                e = errno;
            p->reached = e == 0;
            close(p->fd);
            p->fd = -1;
        }
    }
}

int64_t nic_wake_ms(const struct nic *n)
{
    return n->phase == PH_PROBING ? n->deadline_ms : -1;
}

const char *nic_warning(const struct nic *n)
{
    return n && n->warning[0] ? n->warning : NULL;
}
