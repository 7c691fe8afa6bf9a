// SPDX-License-Identifier: Apache-2.0
/*
 * ea_error: the project's error carrier. Functions return 0 or a negative errno; when the caller
 * passes a non-NULL `struct ea_error *err`, the human detail goes there. Not a logger: only agent/
 * prints errors, once.
 */
#ifndef EA_COMMON_EA_ERROR_H
#define EA_COMMON_EA_ERROR_H

#include <stddef.h>

#define EA_ERROR_MSG_MAX 512

struct ea_error {
    int code;                   /* negative errno (or a project code), 0 when unset */
    char msg[EA_ERROR_MSG_MAX]; /* NUL-terminated human text, "" when unset */
};

/* Fill `err` (may be NULL) with `code` and a printf-style message; returns `code`, so callers
 * can write `return ea_errorf(err, -EINVAL, "bad value '%s'", v);`. */
int ea_errorf(struct ea_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Prefix the message already in `err` with more context ("while X: <old msg>"); returns err->code
 * (or `code` when err is NULL). */
int ea_error_wrap(struct ea_error *err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Reset to "no error". NULL is a no-op. */
void ea_error_clear(struct ea_error *err);

#endif
