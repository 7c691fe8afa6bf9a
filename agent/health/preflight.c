// SPDX-License-Identifier: Apache-2.0
/* pf: run the --preflight check through the launcher, with a timeout, and say why it failed. */
#include "preflight.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PF_TAIL_LINES 5
#define PF_KILL_GRACE_MS 1000

struct pf {
    const char *cmd;
    int64_t timeout_ms;
    struct launcher *l;
    char *const *envp;
    char out[PATH_MAX]; /* stdout and stderr of the check */
    struct launch_proc *proc;
    enum pf_state state;
    bool timed_out;
    int64_t started_ms, deadline_ms, duration_ms;
    char reason[640];
};

int pf_create(const char *cmd, int64_t timeout_ms, struct launcher *l, const char *workdir,
              char *const *envp, struct pf **ret, struct ea_error *err)
{
    struct pf *p = calloc(1, sizeof(*p));
    if (!p)
        return ea_errorf(err, -ENOMEM, "out of memory");
    p->cmd = cmd;
    p->timeout_ms = timeout_ms;
    p->l = l;
    p->envp = envp;
    snprintf(p->out, sizeof(p->out), "%s/preflight.out", workdir);
    p->deadline_ms = -1;
    *ret = p;
    return 0;
}

void pf_destroy(struct pf *p)
{
    if (!p)
        return;
    if (p->proc)
        launch_signal(p->l, p->proc, SIGKILL);
    launch_release(p->l, p->proc); /* the launcher reaps what it kills when destroyed */
    free(p);
}

/* The last PF_TAIL_LINES non-empty lines of the check's output, joined by "; ". */
static void tail_lines(const char *path, char *buf, size_t size)
{
    buf[0] = '\0';
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char data[4096];
    struct stat st;
    off_t off = fstat(fd, &st) == 0 && st.st_size > (off_t)sizeof(data) - 1
                    ? st.st_size - (off_t)sizeof(data) + 1
                    : 0;
    ssize_t n = pread(fd, data, sizeof(data) - 1, off);
    close(fd);
    if (n <= 0)
        return;
    data[n] = '\0';
    const char *lines[PF_TAIL_LINES];
    int k = 0;
    char *save = NULL;
    for (char *t = strtok_r(off ? strchr(data, '\n') : data, "\n", &save); t;
         t = strtok_r(NULL, "\n", &save)) {
        for (char *c = t; *c; c++)
            if ((unsigned char)*c < 0x20)
                *c = ' ';
        if (strspn(t, " ") == strlen(t))
            continue;
        if (k == PF_TAIL_LINES)
            memmove(lines, lines + 1, sizeof(lines[0]) * (PF_TAIL_LINES - 1)), k--;
        lines[k++] = t;
    }
    size_t used = 0;
    for (int i = 0; i < k && used < size; i++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", i ? "; " : "", lines[i]);
}

static void fail(struct pf *p, const char *what)
{
    char tail[512];
    tail_lines(p->out, tail, sizeof(tail));
    snprintf(p->reason, sizeof(p->reason), "%s%s%s", what, tail[0] ? ": " : "", tail);
    p->state = PF_FAILED;
}

int pf_start(struct pf *p, int64_t now_ms)
{
    unlink(p->out);
    const char *argv[] = {"/bin/sh", "-c", p->cmd, NULL};
    struct launch_spec spec = {.argv = argv,
                               .envp = (const char *const *)p->envp,
                               .label = "preflight",
                               .stdout_path = p->out,
                               .stderr_path = p->out};
    struct ea_error err = {0};
    p->timed_out = false;
    p->started_ms = now_ms;
    p->duration_ms = 0;
    p->reason[0] = '\0';
    if (launch_start(p->l, &spec, &p->proc, &err) < 0) {
        p->proc = NULL;
        fail(p, err.msg);
        return 0;
    }
    p->state = PF_RUNNING;
    p->deadline_ms = now_ms + p->timeout_ms;
    return 0;
}

bool pf_on_exit(struct pf *p, const struct launch_exit *e)
{
    if (!p || !p->proc || e->proc != p->proc)
        return false;
    p->duration_ms = e->end_ms - p->started_ms;
    char what[128];
    if (p->timed_out)
        snprintf(what, sizeof(what), "timed out after %.1f s (--preflight-timeout), killed",
                 (double)p->timeout_ms / 1000.0);
    else if (e->start_error)
        snprintf(what, sizeof(what), "%s", e->start_error);
    else if (e->term_signal)
        snprintf(what, sizeof(what), "killed by signal %d (SIG%s)", e->term_signal,
                 sigabbrev_np(e->term_signal) ? sigabbrev_np(e->term_signal) : "?");
    else
        snprintf(what, sizeof(what), "exit code %d", e->exit_code);
    if (!p->timed_out && !e->term_signal && e->exit_code == 0)
        p->state = PF_PASSED;
    else
        fail(p, what);
    launch_release(p->l, p->proc);
    p->proc = NULL;
    p->deadline_ms = -1;
    return true;
}

void pf_tick(struct pf *p, int64_t now_ms)
{
    if (!p || p->state != PF_RUNNING || p->timed_out || p->deadline_ms < 0 ||
        now_ms < p->deadline_ms)
        return;
    p->timed_out = true;
    p->deadline_ms = -1;
    launch_stop(p->l, p->proc, PF_KILL_GRACE_MS); /* SIGTERM to its group, SIGKILL after */
}

int64_t pf_wake_ms(const struct pf *p)
{
    return p ? p->deadline_ms : -1;
}

enum pf_state pf_state(const struct pf *p)
{
    return p ? p->state : PF_PASSED;
}

const char *pf_reason(const struct pf *p)
{
    return p ? p->reason : "";
}

int64_t pf_duration_ms(const struct pf *p)
{
    return p ? p->duration_ms : 0;
}
