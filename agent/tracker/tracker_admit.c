// SPDX-License-Identifier: Apache-2.0
/* tracker admit: member hosts only, a connection cap per host (tracker_admit.h). */
#include "tracker_admit.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>

/* The family and bytes of a numeric address; 0 when it does not parse. */
static int parse(const char *addr, unsigned char bin[16])
{
    if (inet_pton(AF_INET, addr, bin) == 1)
        return AF_INET;
    if (inet_pton(AF_INET6, addr, bin) == 1)
        return AF_INET6;
    return 0;
}

static bool is_loopback(int family, const unsigned char *bin)
{
    static const unsigned char v6_loop[16] = {[15] = 1};
    return (family == AF_INET && bin[0] == 127) ||
           (family == AF_INET6 && memcmp(bin, v6_loop, 16) == 0);
}

static int find(const struct tracker_admit *a, int family, const unsigned char *bin)
{
    if (is_loopback(family, bin))
        family = 0;
    for (size_t i = 0; i < a->n; i++)
        if (a->b[i].family == family &&
            (family == 0 || memcmp(a->b[i].bin, bin, family == AF_INET ? 4 : 16) == 0))
            return (int)i;
    return -1;
}

int tracker_admit_init(struct tracker_admit *a, const struct tracker_params *p,
                       struct ea_error *err)
{
    memset(a, 0, sizeof(*a));
    a->b = calloc(p->n_hosts + 1, sizeof(*a->b));
    if (!a->b)
        return ea_errorf(err, -ENOMEM, "out of memory");
    for (size_t i = 0; i < p->n_hosts; i++) {
        unsigned char bin[16] = {0};
        int family = p->hosts[i].addr ? parse(p->hosts[i].addr, bin) : 0;
        if (!family || p->hosts[i].workers < 1)
            continue; /* a host name or nothing: no connection comes from it */
        int k = find(a, family, bin);
        if (k < 0) { /* (a loopback address joins the loopback bucket) */
            k = (int)a->n++;
            a->b[k].family = is_loopback(family, bin) ? 0 : family;
            memcpy(a->b[k].bin, bin, sizeof(bin));
        }
        a->b[k].workers += p->hosts[i].workers;
    }
    if (p->loopback || p->n_hosts == 0) {
        static const unsigned char lo[4] = {127, 0, 0, 1};
        int k = find(a, AF_INET, lo);
        if (k < 0) {
            k = (int)a->n++;
            a->b[k].family = 0;
        }
        /* every member is on this host: all of the world may come over loopback */
        a->b[k].workers = p->world_size;
    }
    return 0;
}

void tracker_admit_free(struct tracker_admit *a)
{
    free(a->b);
    a->b = NULL;
    a->n = 0;
}

int tracker_admit_bucket(const struct tracker_admit *a, const struct sockaddr_storage *ss)
{
    if (ss->ss_family == AF_INET)
        return find(a, AF_INET, (const unsigned char *)&((const struct sockaddr_in *)ss)->sin_addr);
    if (ss->ss_family != AF_INET6)
        return -1;
    const unsigned char *b = ((const struct sockaddr_in6 *)ss)->sin6_addr.s6_addr;
    static const unsigned char mapped[12] = {[10] = 0xff, [11] = 0xff};
    if (memcmp(b, mapped, 12) == 0)
        return find(a, AF_INET, b + 12);
    return find(a, AF_INET6, b);
}

bool tracker_admit_take(struct tracker_admit *a, int i)
{
    struct tracker_bucket *b = &a->b[i];
    if (b->open >= TRACKER_CONNS_PER_WORKER * b->workers)
        return false;
    b->open++;
    return true;
}

void tracker_admit_release(struct tracker_admit *a, int i)
{
    if (i >= 0 && (size_t)i < a->n && a->b[i].open > 0)
        a->b[i].open--;
}
