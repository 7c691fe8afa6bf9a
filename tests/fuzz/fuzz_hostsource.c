// SPDX-License-Identifier: Apache-2.0
/* Fuzz target: the driver-mode host lists (agent/driver/hostsource.c): --hosts lists, hostfiles and
 * discovery-script output. The first byte picks the format. */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "hostsource.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    static const enum hosts_format fmts[] = {HOSTS_LIST, HOSTS_FILE, HOSTS_SCRIPT};
    enum hosts_format fmt = fmts[data[0] % 3];
    struct host_list l = {0};
    struct ea_error err = {0};
    int r = hosts_parse_named(data[0] & 4 ? "hostfile" : NULL, (const char *)data + 1, size - 1,
                              fmt, &l, &err);
    if (r < 0) {
        FUZZ_CHECK(err.msg[0] && l.n == 0 && l.v == NULL);
        return 0;
    }
    FUZZ_CHECK(l.n >= 1 && l.n <= HOSTS_MAX);
    for (size_t i = 0; i < l.n; i++) {
        const struct host_entry *h = &l.v[i];
        FUZZ_CHECK(h->name[0] && strlen(h->name) <= HOSTS_NAME_MAX);
        FUZZ_CHECK(h->slots >= 0 && h->slots <= HOSTS_SLOTS_MAX);
        FUZZ_CHECK(hosts_find(&l, h->name) == (int)i); /* no duplicates */
        char id[96];
        hosts_node_id(h->name, id, sizeof(id));
        FUZZ_CHECK(id[0] && strlen(id) < sizeof(id));
    }
    hosts_list_free(&l);
    return 0;
}
