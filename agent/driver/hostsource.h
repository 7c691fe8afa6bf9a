// SPDX-License-Identifier: Apache-2.0
/*
 * hostsource: the host lists of driver mode, parsed from text (pure: no I/O except
 * hosts_parse_file, no logging). Three forms: the --hosts option ("a:4,b,[::1]:2"), a hostfile
 * ("host slots=N" or "host:N" lines, '#' comments) and a discovery script's output ("host:slots"
 * lines). Not for: resolving names or deciding which host is this machine.
 */
#ifndef EA_AGENT_HOSTSOURCE_H
#define EA_AGENT_HOSTSOURCE_H

#include <stddef.h>

#include "ea_error.h"

#define HOSTS_NAME_MAX 255       /* longest host name (DNS limit) */
#define HOSTS_SLOTS_MAX 4096     /* as --nproc-per-node */
#define HOSTS_MAX 4096           /* hosts in one list */
#define HOSTS_TEXT_MAX (1 << 20) /* longest input (a hostfile, a script's output) */

enum hosts_format {
    HOSTS_LIST,   /* --hosts: entries "host[:slots]" separated by commas (blanks around ignored) */
    HOSTS_FILE,   /* hostfile: one "host", "host:N" or "host slots=N" a line; '#' to end of
                     line is a comment; blank lines ignored */
    HOSTS_SCRIPT, /* discovery output: same line rules as HOSTS_FILE */
};

struct host_entry {
    char name[HOSTS_NAME_MAX + 1]; /* as given; an IPv6 address without its brackets */
    int slots;                     /* 1..HOSTS_SLOTS_MAX, or 0 when the text gave none (the
                                      caller applies its default: --nproc-per-node) */
    int line;                      /* 1-based line (FILE, SCRIPT) or entry (LIST) it came from */
};

/* A parsed list. Owned by the caller: hosts_list_free(). Entries keep the input order. */
struct host_list {
    struct host_entry *v;
    size_t n;
};

/*
 * Parse `len` bytes of `text` (need not be NUL-terminated; a NUL byte inside is an error) in
 * format `fmt` into *ret. Host names: letters, digits, '-', '.', '_' (not starting with '-' or
 * '.'), or an IPv6 address in brackets ("[fe80::1%eth0]:2"); slots a whole number
 * 1..HOSTS_SLOTS_MAX. A host listed twice, an empty list, more than HOSTS_MAX hosts or text
 * longer than HOSTS_TEXT_MAX are errors. On error: -EINVAL (or -E2BIG, -ENOMEM), *ret untouched,
 * and err names the line (or entry) and quotes its text: "line 3: 'a:b:c': ...".
 */
int hosts_parse(const char *text, size_t len, enum hosts_format fmt, struct host_list *ret,
                struct ea_error *err);

/* The same, with `origin` in front of error messages instead of "line": "FILE:3: 'x': ..." for
 * files, "--hosts: entry 2 'x': ..." for lists (origin may be NULL). */
int hosts_parse_named(const char *origin, const char *text, size_t len, enum hosts_format fmt,
                      struct host_list *ret, struct ea_error *err);

/* Read and parse a hostfile; errors name the file ("cannot read 'F': ...", "F:3: 'x': ..."). */
int hosts_parse_file(const char *path, struct host_list *ret, struct ea_error *err);

/* Free the entries; the list is left empty. NULL is a no-op. */
void hosts_list_free(struct host_list *l);

/* Index of host `name` in l, or -1. */
int hosts_find(const struct host_list *l, const char *name);

/*
 * A node id for host `name`, stable across runs and distinct per host: the name when it is a
 * valid id (letters, digits, '-', '_', '.', at most 80 characters), else a cleaned, cut copy
 * followed by '-' and 8 hex digits of a hash of the name. `size` >= 96.
 */
void hosts_node_id(const char *name, char *buf, size_t size);

#endif
