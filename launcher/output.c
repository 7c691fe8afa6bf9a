// SPDX-License-Identifier: Apache-2.0
/* launcher/output: see output.h. */
#include "output.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <unistd.h>

#include "ea_loop.h"
#include "ea_time.h"

void launch_write_all(int fd, struct iovec *iov, int cnt)
{
    while (cnt > 0) {
        ssize_t n = writev(fd, iov, cnt);
        if (n < 0) {
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            if (errno == EINTR || (errno == EAGAIN && ea_wait_fds(&pfd, 1, ea_now_ms() + 1000) > 0))
                continue;
            return;
        }
        while (cnt > 0 && (size_t)n >= iov->iov_len) {
            n -= (ssize_t)iov->iov_len;
            iov++;
            cnt--;
        }
        if (cnt > 0) {
            iov->iov_base = (char *)iov->iov_base + n;
            iov->iov_len -= (size_t)n;
        }
    }
}

void launch_tail_keep(char *tail, size_t cap, size_t *len, const char *data, size_t n)
{
    if (!tail)
        return;
    if (n >= cap) {
        memcpy(tail, data + n - cap, cap);
        *len = cap;
    } else {
        size_t drop = *len + n > cap ? *len + n - cap : 0;
        memmove(tail, tail + drop, *len - drop);
        memcpy(tail + *len - drop, data, n);
        *len += n - drop;
    }
    tail[*len] = '\0';
}
