// SPDX-License-Identifier: Apache-2.0
/* tracker proto: rabit tracker messages, parsed and encoded over byte buffers. */
#include "tracker_proto.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int tracker_get_int(const uint8_t *buf, size_t len, size_t *off, int32_t *ret)
{
    if (len < *off + sizeof(int32_t))
        return 0;
    memcpy(ret, buf + *off, sizeof(int32_t)); /* rabit sends host order ("@i") */
    *off += sizeof(int32_t);
    return 1;
}

int tracker_get_str(const uint8_t *buf, size_t len, size_t *off, size_t max, char *ret)
{
    size_t o = *off;
    int32_t n;
    if (tracker_get_int(buf, len, &o, &n) == 0)
        return 0;
    if (n < 0 || (size_t)n > max)
        return -EMSGSIZE;
    if (len < o + (size_t)n)
        return 0;
    memcpy(ret, buf + o, (size_t)n);
    ret[n] = '\0';
    *off = o + (size_t)n;
    return 1;
}

int tracker_parse_hello(const uint8_t *buf, size_t len, size_t *off, struct tracker_hello *ret)
{
    static const struct {
        const char *name;
        enum tracker_cmd cmd;
    } cmds[] = {{"start", TRACKER_START},
                {"recover", TRACKER_RECOVER},
                {"shutdown", TRACKER_SHUTDOWN},
                {"print", TRACKER_PRINT}};
    struct tracker_hello h;
    size_t o = *off;
    int r;
    if ((r = tracker_get_int(buf, len, &o, &h.rank)) <= 0 ||
        (r = tracker_get_int(buf, len, &o, &h.world_size)) <= 0 ||
        (r = tracker_get_str(buf, len, &o, TRACKER_STR_MAX, h.task_id)) <= 0 ||
        (r = tracker_get_str(buf, len, &o, TRACKER_STR_MAX, h.cmd_name)) <= 0)
        return r;
    for (size_t i = 0; i < sizeof(cmds) / sizeof(*cmds); i++)
        if (strcmp(h.cmd_name, cmds[i].name) == 0) {
            h.cmd = cmds[i].cmd;
            *ret = h;
            *off = o;
            return 1;
        }
    memcpy(ret->cmd_name, h.cmd_name, sizeof(h.cmd_name));
    return -EPROTO;
}

int tracker_hello_rank(const struct tracker_hello *h, int world)
{
    long r = h->rank;
    if (r < 0) {
        char *end;
        errno = 0;
        r = strtol(h->task_id, &end, 10);
        if (end == h->task_id || *end || errno)
            return -EINVAL;
    }
    return r >= 0 && r < world ? (int)r : -ERANGE;
}

static int add_unique(int *nn, int n, int v)
{
    for (int i = 0; i < n; i++)
        if (nn[i] == v)
            return n;
    nn[n] = v;
    return n + 1;
}

int tracker_neighbors(const struct rdzv_link *links, int r, int nn[TRACKER_NEIGHBORS_MAX],
                      int *ret_prev, int *ret_next)
{
    const struct rdzv_link *l = &links[r];
    int n = 0;
    if (l->parent >= 0)
        n = add_unique(nn, n, l->parent);
    for (int i = 0; i < l->n_children; i++)
        n = add_unique(nn, n, l->children[i]);
    int prev = l->ring_prev != r ? l->ring_prev : -1;
    int next = l->ring_next != r ? l->ring_next : -1;
    if (prev >= 0)
        n = add_unique(nn, n, prev);
    if (next >= 0)
        n = add_unique(nn, n, next);
    *ret_prev = prev;
    *ret_next = next;
    return n;
}

int tracker_put_int(uint8_t *out, size_t cap, size_t *len, int32_t v)
{
    if (cap - *len < sizeof(v))
        return -ENOBUFS;
    memcpy(out + *len, &v, sizeof(v));
    *len += sizeof(v);
    return 0;
}

int tracker_put_str(uint8_t *out, size_t cap, size_t *len, const char *s)
{
    size_t n = strlen(s);
    if (n > INT32_MAX || cap - *len < sizeof(int32_t) + n)
        return -ENOBUFS;
    tracker_put_int(out, cap, len, (int32_t)n);
    memcpy(out + *len, s, n);
    *len += n;
    return 0;
}

int tracker_put_assignment(uint8_t *out, size_t cap, size_t *len, const struct rdzv_link *links,
                           int world, int r)
{
    const struct rdzv_link *l = &links[r];
    size_t n = *len;
    int tree = (l->parent >= 0) + l->n_children;
    int nn[TRACKER_NEIGHBORS_MAX], prev, next;
    tracker_neighbors(links, r, nn, &prev, &next);
    int bad = tracker_put_int(out, cap, &n, r) || tracker_put_int(out, cap, &n, l->parent) ||
              tracker_put_int(out, cap, &n, world) || tracker_put_int(out, cap, &n, tree);
    for (int i = 0; i < tree && !bad; i++) /* nn starts with the tree neighbours */
        bad = tracker_put_int(out, cap, &n, nn[i]);
    bad = bad || tracker_put_int(out, cap, &n, prev) || tracker_put_int(out, cap, &n, next);
    if (bad)
        return -ENOBUFS;
    *len = n;
    return 0;
}
