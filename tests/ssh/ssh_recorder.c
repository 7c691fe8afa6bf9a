// SPDX-License-Identifier: Apache-2.0
/*
 * ea-ssh-recorder OUT ARGS...: records exactly what it was started with, for the quoting tests
 * of the ssh launcher: OUT gets its working directory, argc, every argument and every
 * environment entry, each followed by a NUL byte (written to OUT.tmp, then renamed). Exit 0.
 */
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

extern char **environ;

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: ea-ssh-recorder OUT [ARGS...]\n");
        return 2;
    }
    char tmp[PATH_MAX], cwd[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s.tmp", argv[1]);
    if (!getcwd(cwd, sizeof(cwd)))
        return 3;
    FILE *f = fopen(tmp, "w");
    if (!f)
        return 4;
    fprintf(f, "%s%c%d%c", cwd, 0, argc - 2, 0);
    for (int i = 2; i < argc; i++)
        fprintf(f, "%s%c", argv[i], 0);
    for (char **e = environ; *e; e++)
        fprintf(f, "%s%c", *e, 0);
    if (fclose(f) != 0 || rename(tmp, argv[1]) != 0)
        return 5;
    return 0;
}
