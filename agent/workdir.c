// SPDX-License-Identifier: Apache-2.0
#include "workdir.h"

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int workdir_create(const char *run_id, const char *node_id, char *buf, size_t size)
{
    const char *tmp = getenv("TMPDIR");
    if (!tmp || !tmp[0])
        tmp = "/tmp";
    if ((size_t)snprintf(buf, size, "%s/elastic-agent-%s-%s-XXXXXX", tmp, run_id, node_id) >=
        size) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return mkdtemp(buf) ? 0 : -1;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

void workdir_remove(const char *path)
{
    nftw(path, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

int workdir_mkdirs(const char *path)
{
    char buf[PATH_MAX];
    if (snprintf(buf, sizeof(buf), "%s", path) >= (int)sizeof(buf))
        return -ENAMETOOLONG;
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, WORKDIR_MODE) < 0 && errno != EEXIST)
                return -errno;
            *p = '/';
        }
    if (mkdir(buf, WORKDIR_MODE) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

int workdir_log_file(const char *path, struct ea_error *err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, WORKDIR_FILE_MODE);
    if (fd < 0)
        return ea_errorf(err, -errno, "--log-dir: cannot create '%s': %s", path, strerror(errno));
    /* one left by an earlier agent of the same run and round keeps its content, not its mode */
    int r = fchmod(fd, WORKDIR_FILE_MODE) < 0 ? -errno : 0;
    close(fd);
    return r < 0 ? ea_errorf(err, r, "--log-dir: cannot chmod '%s': %s", path, strerror(-r)) : 0;
}

int workdir_check_log_dir(const char *log_dir, const char *run_id, struct ea_error *err)
{
    char dir[PATH_MAX], probe[PATH_MAX];
    if (snprintf(dir, sizeof(dir), "%s/%s", log_dir, run_id) >= (int)sizeof(dir) ||
        snprintf(probe, sizeof(probe), "%s/.elastic-agent-probe-XXXXXX", dir) >= (int)sizeof(probe))
        return ea_errorf(err, -ENAMETOOLONG, "--log-dir: '%s' is too long", log_dir);
    int r = workdir_mkdirs(log_dir);
    if (r < 0)
        return ea_errorf(err, r, "--log-dir: cannot create '%s': %s", log_dir, strerror(-r));
    if (mkdir(dir, WORKDIR_MODE) < 0 && errno != EEXIST)
        return ea_errorf(err, -errno, "--log-dir: cannot create '%s': %s", dir, strerror(errno));
    int fd = mkostemp(probe, O_CLOEXEC);
    if (fd < 0)
        return ea_errorf(err, -errno, "--log-dir: cannot write in '%s': %s", dir, strerror(errno));
    close(fd);
    unlink(probe);
    return 0;
}
