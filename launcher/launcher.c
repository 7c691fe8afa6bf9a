// SPDX-License-Identifier: Apache-2.0
/* launcher: registry and generic wrappers over the launcher ops tables. */
#include "launcher.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

extern const struct launcher_ops launch_local_ops;
extern const struct launcher_ops launch_fake_ops;
#ifdef EA_HAVE_SSH_LAUNCHER
extern const struct launcher_ops launch_ssh_ops;
#endif

const struct launcher_ops *const launcher_impls[] = {
    &launch_local_ops,
#ifdef EA_HAVE_SSH_LAUNCHER
    &launch_ssh_ops,
#endif
    &launch_fake_ops, /* tests only (fake.h); the agent's --launcher does not accept it */
    NULL,
};

const struct launcher_ops *launcher_find(const char *name)
{
    for (size_t i = 0; name && launcher_impls[i]; i++)
        if (strcmp(launcher_impls[i]->name, name) == 0)
            return launcher_impls[i];
    return NULL;
}

int launcher_create(const struct launcher_config *cfg, struct launcher **ret, struct ea_error *err)
{
    const struct launcher_ops *ops = launcher_find(cfg->name ? cfg->name : "local");
    if (!ops)
        return ea_errorf(err, -EINVAL, "unknown launcher '%s'", cfg->name);
    return ops->create(cfg, ret, err);
}

void launcher_destroy(struct launcher *l)
{
    if (l)
        l->ops->destroy(l);
}

int launch_start(struct launcher *l, const struct launch_spec *spec, struct launch_proc **ret,
                 struct ea_error *err)
{
    return l->ops->start(l, spec, ret, err);
}

int launch_signal(struct launcher *l, struct launch_proc *p, int sig)
{
    return l->ops->signal(p, sig);
}

int launch_stop(struct launcher *l, struct launch_proc *p, int64_t grace_ms)
{
    return l->ops->stop(p, grace_ms);
}

int launcher_fd(struct launcher *l)
{
    return l->ops->fd(l);
}

int launcher_dispatch(struct launcher *l, struct launch_exit **ret_exits, size_t *ret_n,
                      struct ea_error *err)
{
    return l->ops->dispatch(l, ret_exits, ret_n, err);
}

pid_t launch_pid(struct launcher *l, const struct launch_proc *p)
{
    return l->ops->pid(p);
}

void launch_release(struct launcher *l, struct launch_proc *p)
{
    if (p)
        l->ops->release(p);
}

void launcher_fence(struct launcher *l, int64_t valid_until_ms)
{
    if (l->ops->fence)
        l->ops->fence(l, valid_until_ms);
}

void launch_relabel(struct launcher *l, struct launch_proc *p, const char *label)
{
    if (p && l->ops->relabel)
        l->ops->relabel(p, label);
}
