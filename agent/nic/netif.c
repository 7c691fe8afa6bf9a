// SPDX-License-Identifier: Apache-2.0
/* netif: interface enumeration for NIC discovery. */
#include "netif.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

int netif_check_list(const char *list, struct ea_error *err)
{
    const char *p = list ? list : "";
    for (;;) {
        size_t len = strcspn(p, ",");
        bool ok = len > 0 && len < RDZV_IFNAME_MAX;
        for (size_t i = 0; ok && i < len; i++)
            ok = isgraph((unsigned char)p[i]) && p[i] != '/' && p[i] != ':';
        if (!ok)
            return ea_errorf(err, -EINVAL,
                             "--iface: '%s' is not a comma list of interface names (1-15 "
                             "characters each, e.g. eth0,ib0)",
                             list ? list : "");
        if (!p[len])
            return 0;
        p += len + 1;
    }
}

bool netif_in_list(const char *list, const char *name)
{
    if (!list)
        return true;
    size_t nlen = strlen(name);
    for (const char *p = list;;) {
        size_t len = strcspn(p, ",");
        if (len == nlen && strncmp(p, name, len) == 0)
            return true;
        if (!p[len])
            return false;
        p += len + 1;
    }
}

bool netif_is_loopback(const char *addr)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, addr, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    return inet_pton(AF_INET6, addr, &a6) == 1 && IN6_IS_ADDR_LOOPBACK(&a6);
}

static int prefix_len(const struct sockaddr *mask)
{
    const unsigned char *b;
    size_t n;
    if (!mask)
        return 0;
    if (mask->sa_family == AF_INET) {
        b = (const unsigned char *)&((const struct sockaddr_in *)mask)->sin_addr;
        n = 4;
    } else {
        b = (const unsigned char *)&((const struct sockaddr_in6 *)mask)->sin6_addr;
        n = 16;
    }
    int bits = 0;
    for (size_t i = 0; i < n; i++)
        for (int k = 7; k >= 0 && (b[i] >> k) & 1; k--)
            bits++;
    return bits;
}

int netif_list(const char *filter, struct rdzv_iface *out, size_t max, size_t *ret_n,
               size_t *ret_skipped, char *skipped_names, size_t names_size,
               struct ea_error *err)
{
    size_t skipped = 0;
    if (skipped_names && names_size)
        skipped_names[0] = '\0';
    struct ifaddrs *ifs = NULL;
    if (getifaddrs(&ifs) < 0)
        return ea_errorf(err, -errno, "cannot list network interfaces: %s", strerror(errno));
    size_t n = 0;
    char seen[512] = ""; /* names that exist, for the error message */
    for (struct ifaddrs *i = ifs; i; i = i->ifa_next) {
        if (!i->ifa_addr || !(i->ifa_flags & IFF_UP))
            continue;
        int fam = i->ifa_addr->sa_family;
        if (fam != AF_INET && fam != AF_INET6)
            continue;
        if (fam == AF_INET6 &&
            IN6_IS_ADDR_LINKLOCAL(&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr))
            continue;
        if (!netif_in_list(seen, i->ifa_name) || !seen[0])
            snprintf(seen + strlen(seen), sizeof(seen) - strlen(seen), "%s%s", seen[0] ? "," : "",
                     i->ifa_name);
        if (!netif_in_list(filter, i->ifa_name) || strlen(i->ifa_name) >= RDZV_IFNAME_MAX)
            continue;
        if (n >= max) { /* said, never silently: the agent warns */
            skipped++;
            if (skipped_names && names_size && !netif_in_list(skipped_names, i->ifa_name)) {
                size_t used = strlen(skipped_names);
                snprintf(skipped_names + used, names_size - used, "%s%s", used ? "," : "",
                         i->ifa_name);
            }
            continue;
        }
        struct rdzv_iface *f = &out[n];
        memset(f, 0, sizeof(*f));
        snprintf(f->name, sizeof(f->name), "%s", i->ifa_name);
        const void *a = fam == AF_INET
                            ? (const void *)&((struct sockaddr_in *)i->ifa_addr)->sin_addr
                            : (const void *)&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
        if (!inet_ntop(fam, a, f->addr, sizeof(f->addr)))
            continue;
        f->prefix = prefix_len(i->ifa_netmask);
        n++;
    }
    freeifaddrs(ifs);
    /* every name the user asked for must be there */
    for (const char *p = filter; p && *p;) {
        size_t len = strcspn(p, ",");
        bool found = false;
        for (size_t k = 0; k < n && !found; k++)
            found = strlen(out[k].name) == len && strncmp(out[k].name, p, len) == 0;
        if (!found)
            return ea_errorf(err, -ENODEV,
                             "--iface: no interface '%.*s' with an address on this host (have: "
                             "%s)",
                             (int)len, p, seen[0] ? seen : "none");
        p += len + (p[len] == ',');
    }
    *ret_n = n;
    if (ret_skipped)
        *ret_skipped = skipped;
    return 0;
}
