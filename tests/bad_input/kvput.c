// SPDX-License-Identifier: Apache-2.0
/*
 * ea-bad-kvput: write one key of a file-backend store, or of etcd with STATE_DIR 'etcd:ENDPOINTS'
 * (for values over etcdctl's 2 MiB send limit), for the bad-input table.
 *   ea-bad-kvput STATE_DIR KEY VALUE_FILE   (VALUE_FILE '-' = standard input)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv.h"

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: ea-bad-kvput STATE_DIR KEY VALUE_FILE\n");
        return 2;
    }
    FILE *f = strcmp(argv[3], "-") == 0 ? stdin : fopen(argv[3], "rb");
    if (!f) {
        perror(argv[3]);
        return 2;
    }
    size_t cap = 1 << 16, len = 0, n;
    char *buf = malloc(cap);
    while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0)
        if ((len += n) == cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb)
                free(buf);
            buf = nb;
        }
    if (f != stdin)
        fclose(f);
    if (!buf)
        return 1;
    struct kv_config cfg = {.backend = "file", .state_dir = argv[1]};
    if (strncmp(argv[1], "etcd:", 5) == 0)
        cfg = (struct kv_config){.backend = "etcd", .endpoints = argv[1] + 5};
    struct kv *kv = NULL;
    struct ea_error err = {0};
    int r = kv_open(&cfg, &kv, &err);
    if (r == 0)
        r = kv_put(kv, argv[2], buf, len, 0, NULL, &err);
    free(buf);
    kv_close(kv);
    if (r < 0) {
        fprintf(stderr, "ea-bad-kvput: %s\n", err.msg);
        return 1;
    }
    return 0;
}
