// SPDX-License-Identifier: Apache-2.0
/*
 * ea_escape: the one place that makes a foreign string safe to show on a terminal. A value read
 * from the store, a peer or a worker (a node id, a queue key, an error message) may hold ESC, BEL,
 * CR, LF, C1 controls: printed raw they clear the screen, retitle the terminal or forge lines.
 * The daemon's log lines and every command's human-readable output pass such values through it.
 * Not for JSON output (jansson escapes what JSON requires) nor for data kept as bytes.
 */
#ifndef EA_COMMON_EA_ESCAPE_H
#define EA_COMMON_EA_ESCAPE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

/* ea_escape flags */
#define EA_ESCAPE_ASCII 1u    /* every byte above 0x7e too (a log line jansson refused) */
#define EA_ESCAPE_KEEP_TAB 2u /* a tab stays a tab (worker output in log lines keeps its own) */

/* The most bytes ea_escape writes for n input bytes (each becomes at most "\xNN"), NUL included. */
#define EA_ESCAPED_SIZE(n) (4 * (n) + 1)

/*
 * Copy `src` into dst (NUL-terminated; cut before an escape or a UTF-8 character that does not
 * fit) with every control character escaped: \n \r \t, "\xNN" for the other C0 controls (ESC,
 * BEL...), DEL, the C1 controls U+0080-U+009F (both bytes of their UTF-8 form) and every byte
 * that is not part of valid UTF-8 (a raw 0x9b is a CSI on an 8-bit terminal). Valid UTF-8
 * otherwise passes unchanged, backslashes included. Returns the length written.
 */
size_t ea_escape(char *dst, size_t size, const char *src, unsigned flags);

/* Length of the valid UTF-8 sequence at p (at most `left` bytes): 1-4, or 0 when invalid (an
 * overlong form, a UTF-16 surrogate, past U+10FFFF, cut short). */
size_t ea_utf8_len(const unsigned char *p, size_t left);

/*
 * fprintf for human-readable output that shows foreign strings: the format is the program's and
 * is printed as it is; every %s and %c argument goes through ea_escape (a %s precision cuts the
 * raw string first, a width pads the escaped one). Supports the flags, width and precision
 * (also `*`), the length modifiers hh h l ll j z t L and the conversions d i u o x X c s p
 * e E f F g G a A; anything else (%n, %ls) ends the output there with -EINVAL. 0, or -EIO when
 * `out` failed.
 */
int ea_fprintf(FILE *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int ea_vfprintf(FILE *out, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

#endif
