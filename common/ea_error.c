// SPDX-License-Identifier: Apache-2.0
#include "ea_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

int ea_errorf(struct ea_error *err, int code, const char *fmt, ...)
{
    if (!err)
        return code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    va_end(ap);
    err->code = code;
    return code;
}

int ea_error_wrap(struct ea_error *err, int code, const char *fmt, ...)
{
    if (!err)
        return code;
    char prefix[EA_ERROR_MSG_MAX];
    char old[EA_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof(prefix), fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof(old));
    if (old[0])
        snprintf(err->msg, sizeof(err->msg), "%s: %s", prefix, old);
    else
        snprintf(err->msg, sizeof(err->msg), "%s", prefix);
    if (!err->code)
        err->code = code;
    return err->code;
}

void ea_error_clear(struct ea_error *err)
{
    if (!err)
        return;
    err->code = 0;
    err->msg[0] = '\0';
}
