// SPDX-License-Identifier: Apache-2.0
/* hostsel: see the header. */
#include "hostsel.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

static bool same_addr(const struct sockaddr *a, const struct sockaddr *b)
{
    if (a->sa_family != b->sa_family)
        return false;
    if (a->sa_family == AF_INET)
        return ((const struct sockaddr_in *)a)->sin_addr.s_addr ==
               ((const struct sockaddr_in *)b)->sin_addr.s_addr;
    if (a->sa_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                      &((const struct sockaddr_in6 *)b)->sin6_addr, sizeof(struct in6_addr)) == 0;
    return false;
}

static bool is_loopback(const struct sockaddr *sa)
{
    if (sa->sa_family == AF_INET)
        return (ntohl(((const struct sockaddr_in *)sa)->sin_addr.s_addr) >> 24) == 127;
    if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        return IN6_IS_ADDR_LOOPBACK(a) || (IN6_IS_ADDR_V4MAPPED(a) && a->s6_addr[12] == 127);
    }
    return false;
}

bool hostsel_is_local(const char *host)
{
    if (!host || !host[0] || strcasecmp(host, "localhost") == 0)
        return true;
    char self[256] = "";
    gethostname(self, sizeof(self) - 1);
    if (strcasecmp(host, self) == 0)
        return true;
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(host, NULL, &hints, &res) != 0)
        return false; /* unresolvable: not something we are */
    struct ifaddrs *ifs = NULL;
    getifaddrs(&ifs);
    bool local = false;
    for (struct addrinfo *r = res; r && !local; r = r->ai_next) {
        local = is_loopback(r->ai_addr);
        for (struct ifaddrs *i = ifs; i && !local; i = i->ifa_next)
            local = i->ifa_addr && same_addr(i->ifa_addr, r->ai_addr);
    }
    if (ifs)
        freeifaddrs(ifs);
    freeaddrinfo(res);
    return local;
}

int hostsel_resolve(const char *host, char *addr, size_t size, struct ea_error *err)
{
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    int g = getaddrinfo(host, NULL, &hints, &res);
    if (g != 0)
        return ea_errorf(err, -EINVAL, "--host '%s': cannot resolve it: %s", host, gai_strerror(g));
    const struct addrinfo *pick = res;
    for (const struct addrinfo *r = res; r; r = r->ai_next)
        if (r->ai_family == AF_INET) {
            pick = r;
            break;
        }
    char buf[INET6_ADDRSTRLEN] = "";
    const void *src = pick->ai_family == AF_INET
                          ? (const void *)&((struct sockaddr_in *)pick->ai_addr)->sin_addr
                          : (const void *)&((struct sockaddr_in6 *)pick->ai_addr)->sin6_addr;
    inet_ntop(pick->ai_family, src, buf, sizeof(buf));
    freeaddrinfo(res);
    if (!buf[0] || strlen(buf) >= size)
        return ea_errorf(err, -EINVAL, "--host '%s': no usable address", host);
    snprintf(addr, size, "%s", buf);
    return 0;
}

/* $XDG_RUNTIME_DIR/elastic-agent-ssh, else /tmp/elastic-agent-ssh-<uid>; "" when a directory of
 * that name exists but is not ours (then connection setups are not bounded). */
static void lock_dir_path(char *buf, size_t size)
{
    const char *run = getenv("XDG_RUNTIME_DIR");
    if (run && run[0] == '/')
        snprintf(buf, size, "%s/elastic-agent-ssh", run);
    else
        snprintf(buf, size, "/tmp/elastic-agent-ssh-%u", (unsigned)getuid());
    struct stat st;
    if (lstat(buf, &st) == 0 && (!S_ISDIR(st.st_mode) || st.st_uid != getuid()))
        buf[0] = '\0';
}

int hostsel_config(const struct cfg *c, struct launcher_config *lc, char *lock_dir,
                   size_t lock_size, struct ea_error *err)
{
    const char *name = c->launcher ? c->launcher : "auto";
    if (strcmp(name, "auto") == 0)
        name = c->host && !hostsel_is_local(c->host) ? "ssh" : "local";
    if (strcmp(name, "ssh") == 0 && !c->host)
        return ea_errorf(err, -EINVAL,
                         "--launcher ssh needs --host HOST (the machine to run "
                         "this node's workers on)");
    *lc = (struct launcher_config){.name = name};
    if (strcmp(name, "ssh") != 0)
        return 0;
    lock_dir_path(lock_dir, lock_size);
    lc->host = c->host;
    lc->user = c->ssh_user;
    lc->identity = c->ssh_identity;
    lc->port = c->ssh_port;
    lc->ssh_options = c->ssh_options;
    lc->conn_lock_dir = lock_dir[0] ? lock_dir : NULL;
    lc->conn_parallel = c->ssh_parallel;
    return 0;
}
