// SPDX-License-Identifier: Apache-2.0
#include "preempt.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

int preempt_open(struct preempt *p, const char *path, struct ea_error *err)
{
    p->fd = -1;
    p->path[0] = '\0';
    if (!path)
        return 0;
    if (snprintf(p->path, sizeof(p->path), "%s", path) >= (int)sizeof(p->path))
        return ea_errorf(err, -ENAMETOOLONG, "--preemption-file: path too long");
    char dir[PATH_MAX];
    snprintf(dir, sizeof(dir), "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash)
        snprintf(dir, sizeof(dir), ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (fd < 0)
        return ea_errorf(err, -errno, "inotify: %s", strerror(errno));
    if (inotify_add_watch(fd, dir, IN_CREATE | IN_MOVED_TO | IN_CLOSE_WRITE | IN_ATTRIB) < 0) {
        int e = errno;
        close(fd);
        return ea_errorf(err, -e, "--preemption-file: cannot watch directory '%s': %s", dir,
                         strerror(e));
    }
    p->fd = fd;
    return 0;
}

bool preempt_check(struct preempt *p)
{
    if (p->fd < 0)
        return false;
    char buf[4096];
    while (read(p->fd, buf, sizeof(buf)) > 0)
        ;
    return access(p->path, F_OK) == 0;
}

void preempt_close(struct preempt *p)
{
    if (p->fd >= 0)
        close(p->fd);
    p->fd = -1;
}
