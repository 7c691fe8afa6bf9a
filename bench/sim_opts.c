// SPDX-License-Identifier: Apache-2.0
/* rdzv-sim's command line (rdzv_sim.h). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rdzv_sim.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: rdzv-sim --endpoints HOST:PORT [--nodes N] [--procs P] [--ttl SEC] "
               "[--kill-one] [--kill-coordinator] [--kill-rack] [--rack-size K] "
               "[--rack-spares-coordinator] [--kill-tenth] [--domains D] [--kill-domain] [--run-id ID] "
               "[--timeout SEC] "
               "[--max-bytes B] [--ring] [--ring-interval MS] [--ring-pass MS] [--ring-no-await] "
               "[--names real] "
               "[--noise K] [--rx-iface IF] [--metrics-url URL] [--hold SEC]\n");
}

int sim_parse_opts(int argc, char **argv, struct opts *o)
{
    static const struct option lo[] = {{"endpoints", required_argument, 0, 'e'},
                                       {"nodes", required_argument, 0, 'n'},
                                       {"procs", required_argument, 0, 'p'},
                                       {"ttl", required_argument, 0, 't'},
                                       {"kill-one", no_argument, 0, 'k'},
                                       {"run-id", required_argument, 0, 'r'},
                                       {"timeout", required_argument, 0, 'T'},
                                       {"help", no_argument, 0, 'h'},
                                       {"kill-coordinator", no_argument, 0, 'c'},
                                       {"kill-tenth", no_argument, 0, 'P'},
                                       {"kill-rack", no_argument, 0, 'R'},
                                       {"rack-size", required_argument, 0, 'K'},
                                       {"rack-spares-coordinator", no_argument, 0, 'Q'},
                                       {"domains", required_argument, 0, 'D'},
                                       {"kill-domain", no_argument, 0, 'G'},
                                       {"max-bytes", required_argument, 0, 'B'},
                                       {"ring", no_argument, 0, 'L'},
                                       {"ring-interval", required_argument, 0, 'I'},
                                       {"ring-pass", required_argument, 0, 'S'},
                                       {"names", required_argument, 0, 'N'},
                                       {"ring-no-await", no_argument, 0, 'W'},
                                       {"noise", required_argument, 0, 'X'},
                                       {"rx-iface", required_argument, 0, 'F'},
                                       {"metrics-url", required_argument, 0, 'M'},
                                       {"hold", required_argument, 0, 'H'},
                                       {0, 0, 0, 0}};
    for (int c; (c = getopt_long(argc, argv, "", lo, NULL)) != -1;) {
        switch (c) {
        case 'e':
            o->endpoints = optarg;
            break;
        case 'n':
            o->nodes = atoi(optarg);
            break;
        case 'p':
            o->procs = atoi(optarg);
            break;
        case 't':
            o->ttl_ms = (int64_t)(atof(optarg) * 1000);
            break;
        case 'k':
            o->kill_one = true;
            break;
        case 'c':
            o->kill_coord = true;
            break;
        case 'P':
            o->kill_tenth = true;
            break;
        case 'R':
            o->kill_rack = true;
            break;
        case 'K':
            o->rack_size = atoi(optarg);
            break;
        case 'Q':
            o->rack_spares_coord = true;
            break;
        case 'D':
            o->domains = atoi(optarg);
            break;
        case 'G':
            o->kill_domain = true;
            break;
        case 'B':
            o->max_bytes = atol(optarg);
            break;
        case 'L':
            o->ring = true;
            break;
        case 'I':
            o->ring_interval_ms = atol(optarg);
            break;
        case 'S':
            o->ring_pass_ms = atol(optarg);
            break;
        case 'W':
            o->ring_no_await = true;
            break;
        case 'N':
            o->real_names = strcmp(optarg, "real") == 0;
            break;
        case 'X':
            o->noise = atoi(optarg);
            break;
        case 'F':
            o->rx_iface = optarg;
            break;
        case 'M':
            o->metrics_url = optarg;
            break;
        case 'H':
            o->hold_ms = (int64_t)(atof(optarg) * 1000);
            break;
        case 'r':
            o->run_id = optarg;
            break;
        case 'T':
            o->timeout_ms = (int64_t)(atof(optarg) * 1000);
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (!o->endpoints || o->nodes < 2 || o->procs < 1 || o->procs > o->nodes || o->ttl_ms < 1000 ||
        o->ring_interval_ms < 10 || o->ring_pass_ms < 1 || o->ring_pass_ms > o->ring_interval_ms ||
        o->hold_ms < 0) {
        fprintf(stderr, "rdzv-sim: need --endpoints, --nodes >= 2, 1 <= --procs <= --nodes, "
                        "--ttl >= 1, --ring-interval >= 10, 1 <= --ring-pass <= --ring-interval, "
                        "--hold >= 0\n");
        usage(stderr);
        return 2;
    }
    if (o->rack_size < 1 || o->rack_size > o->nodes / 2 || o->domains < 0 ||
        o->domains > o->nodes / 2 || (o->kill_domain && (o->domains < 2 || o->real_names))) {
        fprintf(stderr, "rdzv-sim: need 1 <= --rack-size <= --nodes/2, 0 <= --domains <= "
                        "--nodes/2, and --kill-domain needs --domains >= 2 (not --names real)\n");
        usage(stderr);
        return 2;
    }
    return -1;
}
