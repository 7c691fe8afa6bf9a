// SPDX-License-Identifier: Apache-2.0
/*
 * Issue 38's hostile value — a string a store writer or a peer makes to drive the operator's
 * terminal — and the check that a command's output carries none of its control bytes. Shared by
 * the tests of every command that shows such strings (status, status --agent, status --pool,
 * submit, cancel, the failure table).
 */
#ifndef EA_TESTS_UNIT_ESCAPE_CHECK_H
#define EA_TESTS_UNIT_ESCAPE_CHECK_H

#include <criterion/criterion.h>
#include <string.h>

/*
 * Its first line: ESC sequences (clear the screen, home, an OSC retitling the terminal ended by
 * BEL), a CR and a forged table header. Its second: a tab, another C0 (SOH), DEL, a C1 CSI in
 * UTF-8 (U+009B) and raw C1 bytes (0x9b CSI, 0x85 NEL) that are not UTF-8. Octal escapes, so
 * that no hex escape swallows the letter after it.
 */
#define EVIL_A "x\033[2J\033[H\033]0;PWNED\007\rDAEMONS (0)"
#define EVIL_B_UTF8 "FAKE\t\001\177\302\2331m"
#define EVIL_B EVIL_B_UTF8 "\233\205end"
#define EVIL EVIL_A "\n" EVIL_B
/* What a JSON string can carry (valid UTF-8: no raw C1 bytes): a peer's /status answer. */
#define EVIL_UTF8 EVIL_A "\n" EVIL_B_UTF8

/* The same as ea_escape shows them */
#define EVIL_A_ESC "x\\x1b[2J\\x1b[H\\x1b]0;PWNED\\x07\\rDAEMONS (0)"
#define EVIL_B_UTF8_ESC "FAKE\\t\\x01\\x7f\\xc2\\x9b1m"
#define EVIL_B_ESC EVIL_B_UTF8_ESC "\\x9b\\x85end"
#define EVIL_ESC EVIL_A_ESC "\\n" EVIL_B_ESC
#define EVIL_UTF8_ESC EVIL_A_ESC "\\n" EVIL_B_UTF8_ESC

/* `out` (what a command wrote for a terminal) holds printable ASCII and line feeds only: the
 * commands print nothing else of their own, so any other byte came from a foreign string. */
static inline void assert_terminal_safe(const char *out, const char *what)
{
    for (size_t i = 0; out[i]; i++) {
        unsigned char c = (unsigned char)out[i];
        cr_assert((c >= 0x20 && c < 0x7f) || c == '\n',
                  "%s: raw byte 0x%02x reaches the terminal after '%.*s'", what, c,
                  (int)(i < 40 ? i : 40), out + (i < 40 ? 0 : i - 40));
    }
}

#endif
