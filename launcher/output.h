// SPDX-License-Identifier: Apache-2.0
/*
 * launcher/output: the byte plumbing both launchers share for worker output — writing whole
 * records to the agent's streams and log files, and keeping the tail of a stream for the failure
 * report. Not for line splitting or prefixes (each launcher frames its own input).
 */
#ifndef EA_LAUNCHER_OUTPUT_H
#define EA_LAUNCHER_OUTPUT_H

#include <stddef.h>
#include <sys/uio.h>

/* Write all of iov[0..cnt) to fd, tolerating EINTR and (for up to 1 s per stall) a non-blocking
 * destination; output that cannot be written is dropped rather than stalling the agent. iov is
 * consumed (modified). */
void launch_write_all(int fd, struct iovec *iov, int cnt);

/* Keep the last `cap` bytes seen in tail[0..*len) (tail has room for cap + 1: it stays
 * NUL-terminated). A NULL tail is a no-op. */
void launch_tail_keep(char *tail, size_t cap, size_t *len, const char *data, size_t n);

#endif
