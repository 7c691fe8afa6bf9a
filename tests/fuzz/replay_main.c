// SPDX-License-Identifier: Apache-2.0
/* Replays fuzz inputs without libFuzzer: every regular file under each DIR-or-FILE argument. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        return -1;
    }
    size_t cap = 4096, len = 0;
    uint8_t *buf = malloc(cap);
    size_t n;
    while (buf && (n = fread(buf + len, 1, cap - len, f)) > 0) {
        len += n;
        if (len == cap) {
            uint8_t *nb = realloc(buf, cap *= 2);
            if (!nb)
                free(buf);
            buf = nb;
        }
    }
    fclose(f);
    if (!buf) {
        fprintf(stderr, "%s: out of memory\n", path);
        return -1;
    }
    /* a copy of exactly `len` bytes, so ASan sees reads past the end as libFuzzer would */
    uint8_t *exact = malloc(len ? len : 1);
    if (!exact) {
        free(buf);
        return -1;
    }
    memcpy(exact, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    return 0;
}

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    int files = 0, failed = 0;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st) < 0) {
            perror(argv[i]);
            return 2;
        }
        if (!S_ISDIR(st.st_mode)) {
            failed += replay_file(argv[i]) < 0;
            files++;
            continue;
        }
        struct dirent **ents;
        int n = scandir(argv[i], &ents, NULL, alphasort);
        if (n < 0) {
            perror(argv[i]);
            return 2;
        }
        char **paths = calloc((size_t)n + 1, sizeof(*paths));
        int np = 0;
        for (int k = 0; k < n; k++) {
            char p[4096];
            snprintf(p, sizeof(p), "%s/%s", argv[i], ents[k]->d_name);
            if (paths && ents[k]->d_name[0] != '.' && stat(p, &st) == 0 && S_ISREG(st.st_mode))
                paths[np++] = strdup(p);
            free(ents[k]);
        }
        free(ents);
        if (!paths)
            return 2;
        qsort(paths, (size_t)np, sizeof(*paths), cmp);
        for (int k = 0; k < np; k++) {
            failed += !paths[k] || replay_file(paths[k]) < 0;
            files++;
            free(paths[k]);
        }
        free(paths);
    }
    printf("replayed %d inputs, %d unreadable\n", files, failed);
    return failed || files == 0 ? 1 : 0;
}
