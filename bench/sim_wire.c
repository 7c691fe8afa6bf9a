// SPDX-License-Identifier: Apache-2.0
/* sim_wire: names, unrelated keys and wire counters for rdzv-sim (sim_wire.h). */
#include "sim_wire.h"

#include "ea_time.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sim_names(int id, bool real, char *node_id, size_t node_size, char *host, size_t host_size)
{
    if (!real) {
        snprintf(node_id, node_size, "sim-%05d", id);
        snprintf(host, host_size, "simhost-%05d", id);
        return;
    }
    /* 10.12.0.0/14-like addresses spread over the octets, as a VPC's */
    unsigned a = 12 + (unsigned)id / 65536 % 4, b = 10 + (unsigned)id / 256 % 256,
             c = (unsigned)id % 256;
    snprintf(host, host_size, "ip-10-%u-%u-%u.ec2.internal", a, b, c);
    snprintf(node_id, node_size, "%s-%06u", host, 100000u + (unsigned)id * 7919u % 900000u);
}

int sim_noise(struct kv *kv, const char *run_id, unsigned *seed, int max, struct ea_error *err)
{
    if (max <= 0)
        return 0;
    int n = rand_r(seed) % (max + 1);
    for (int i = 0; i < n; i++) {
        char key[256], val[128];
        unsigned x = (unsigned)rand_r(seed);
        /* another run of the same fleet, and another program sharing the store */
        if (x % 2)
            snprintf(key, sizeof(key), "/elastic/%s-other/nodes/ip-10-99-%u-%u.ec2.internal-%u",
                     run_id, x % 251, x / 251 % 251, x % 900000 + 100000);
        else
            snprintf(key, sizeof(key), "/registry/leases/kube-node-lease/ip-10-98-%u-%u", x % 251,
                     x / 251 % 251);
        snprintf(val, sizeof(val),
                 "{\"holder\":\"ip-10-98-%u-%u.ec2.internal\",\"renew\":%u,\"pad\":\"%032u\"}",
                 x % 251, x / 251 % 251, x, x);
        int r = kv_put(kv, key, val, strlen(val), 0, NULL, err);
        if (r < 0)
            return r;
    }
    return n;
}

int64_t sim_rx_bytes(const char *iface)
{
    FILE *f = fopen("/proc/self/net/dev", "r");
    if (!f)
        return -1;
    char line[512];
    int64_t rx = -1;
    size_t len = strlen(iface);
    while (fgets(line, sizeof(line), f)) {
        char *p = line;
        while (*p == ' ')
            p++;
        if (strncmp(p, iface, len) == 0 && p[len] == ':') {
            rx = strtoll(p + len + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return rx;
}

double sim_metric(const char *url, const char *name)
{
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "curl -sf --max-time 5 '%s'", url);
    FILE *f = popen(cmd, "r");
    if (!f)
        return -1;
    char line[1024];
    double sum = 0;
    bool found = false;
    size_t len = strlen(name);
    while (fgets(line, sizeof(line), f))
        if (strncmp(line, name, len) == 0 && (line[len] == ' ' || line[len] == '{')) {
            char *v = strrchr(line, ' ');
            if (v) {
                sum += strtod(v + 1, NULL);
                found = true;
            }
        }
    pclose(f);
    return found ? sum : -1;
}

#define GRPC_SENT "etcd_network_client_grpc_sent_bytes_total"

void sim_wire_begin(const char *iface, const char *url, struct sim_wire_mark *ret)
{
    ret->grpc = url ? sim_metric(url, GRPC_SENT) : -1;
    ret->rx = iface ? sim_rx_bytes(iface) : -1;
    ret->t_ms = ea_now_ms();
}

void sim_wire_end(const char *iface, const char *url, const struct sim_wire_mark *m0,
                  const char *tag, int nodes)
{
    int64_t rx = iface ? sim_rx_bytes(iface) : -1, t = ea_now_ms();
    double grpc = url ? sim_metric(url, GRPC_SENT) : -1;
    if (nodes < 1)
        return;
    if (m0->rx >= 0 && rx >= 0)
        printf("%s_wire_rx_bytes_per_node=%.0f\n%s_wire_window_ms=%" PRId64 "\n", tag,
               (double)(rx - m0->rx) / nodes, tag, t - m0->t_ms);
    if (m0->grpc >= 0 && grpc >= 0)
        printf("%s_etcd_grpc_sent_bytes_per_node=%.0f\n", tag, (grpc - m0->grpc) / nodes);
    fflush(stdout);
}
