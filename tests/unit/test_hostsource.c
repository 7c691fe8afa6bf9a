// SPDX-License-Identifier: Apache-2.0
/* Unit tests of agent/hostsource: --hosts lists, hostfiles, discovery output, node ids. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hostsource.h"

static struct host_list ok(const char *text, enum hosts_format fmt)
{
    struct host_list l = {0};
    struct ea_error err = {0};
    int r = hosts_parse(text, strlen(text), fmt, &l, &err);
    cr_assert_eq(r, 0, "'%s': %s", text, err.msg);
    return l;
}

/* Parse must fail with -EINVAL and a message containing `needle`; *ret untouched. */
static void bad(const char *text, enum hosts_format fmt, const char *needle)
{
    struct host_list l = {.v = (void *)0x1, .n = 77};
    struct ea_error err = {0};
    int r = hosts_parse(text, strlen(text), fmt, &l, &err);
    cr_assert_lt(r, 0, "'%s' was accepted", text);
    cr_assert(strstr(err.msg, needle), "'%s': message '%s' lacks '%s'", text, err.msg, needle);
    cr_assert(l.v == (void *)0x1 && l.n == 77, "output touched on failure");
}

Test(hostsource, list_with_and_without_slots)
{
    struct host_list l = ok("a:4, b ,c.example-1_x:16", HOSTS_LIST);
    cr_assert_eq(l.n, 3);
    cr_assert_str_eq(l.v[0].name, "a");
    cr_assert_eq(l.v[0].slots, 4);
    cr_assert_str_eq(l.v[1].name, "b");
    cr_assert_eq(l.v[1].slots, 0, "omitted slots are 0 (the caller's default)");
    cr_assert_str_eq(l.v[2].name, "c.example-1_x");
    cr_assert_eq(l.v[2].slots, 16);
    cr_assert_eq(l.v[2].line, 3);
    hosts_list_free(&l);
    hosts_list_free(&l); /* idempotent */
    hosts_list_free(NULL);
}

Test(hostsource, ipv6_in_brackets)
{
    struct host_list l = ok("[::1]:4,[fe80::1%eth0],127.0.0.1:2", HOSTS_LIST);
    cr_assert_eq(l.n, 3);
    cr_assert_str_eq(l.v[0].name, "::1");
    cr_assert_eq(l.v[0].slots, 4);
    cr_assert_str_eq(l.v[1].name, "fe80::1%eth0");
    cr_assert_eq(l.v[1].slots, 0);
    cr_assert_str_eq(l.v[2].name, "127.0.0.1");
    hosts_list_free(&l);
    bad("::1:4", HOSTS_LIST, "brackets");
    bad("[::1", HOSTS_LIST, "without ']'");
    bad("[]:2", HOSTS_LIST, "empty address");
    bad("[abc]:2", HOSTS_LIST, "not an IPv6");
    bad("[::1]x", HOSTS_LIST, "':SLOTS'");
    bad("[::1%]:2", HOSTS_LIST, "zone");
}

Test(hostsource, list_errors_name_the_entry)
{
    bad("a:4,,b", HOSTS_LIST, "entry 2 '': empty entry");
    bad("a:4,", HOSTS_LIST, "entry 2");
    bad("a:x", HOSTS_LIST, "entry 1 'a:x': slots must be a whole number");
    bad("a:0", HOSTS_LIST, "from 1 to 4096");
    bad("a:4097", HOSTS_LIST, "from 1 to 4096");
    bad("a:99999999999999999999", HOSTS_LIST, "from 1 to 4096");
    bad("a:", HOSTS_LIST, "slots missing");
    bad(":4", HOSTS_LIST, "empty host name");
    bad("-oProxyCommand=x:1", HOSTS_LIST, "cannot start with '-'");
    bad("a b:1", HOSTS_LIST, "only letters");
    bad("user@h:1", HOSTS_LIST, "only letters");
    bad("a:1,b:2,a:3", HOSTS_LIST, "entry 3 'a:3': host listed twice (first at entry 1)");
    bad("", HOSTS_LIST, "empty entry");
}

Test(hostsource, hostfile_forms_comments_blanks)
{
    const char *text = "# cluster\n"
                       "\n"
                       "node1 slots=4\n"
                       "  node2:8   # trailing comment\r\n"
                       "node3\n"
                       "node4\tslots=2";
    struct host_list l = ok(text, HOSTS_FILE);
    cr_assert_eq(l.n, 4);
    cr_assert_str_eq(l.v[0].name, "node1");
    cr_assert_eq(l.v[0].slots, 4);
    cr_assert_eq(l.v[0].line, 3);
    cr_assert_str_eq(l.v[1].name, "node2");
    cr_assert_eq(l.v[1].slots, 8);
    cr_assert_eq(l.v[2].slots, 0);
    cr_assert_str_eq(l.v[3].name, "node4");
    cr_assert_eq(l.v[3].slots, 2);
    hosts_list_free(&l);
}

Test(hostsource, hostfile_garbage_names_line_and_text)
{
    bad("a:1\nb slots=x\n", HOSTS_FILE, "line 2: 'b slots=x': slots must be a whole number");
    bad("a:1\n\nb max_slots=2\n", HOSTS_FILE, "line 3: 'b max_slots=2': expected 'slots=N'");
    bad("a:2 slots=2\n", HOSTS_FILE, "give the slots once");
    bad("# nothing\n\n", HOSTS_FILE, "no hosts");
    bad("a\nb\x01\n", HOSTS_FILE, "line 2: 'b\\x01'");
    char nul[] = "a\nb\0c\n";
    struct host_list l = {0};
    struct ea_error err = {0};
    cr_assert_lt(hosts_parse(nul, sizeof(nul) - 1, HOSTS_FILE, &l, &err), 0);
    cr_assert(strstr(err.msg, "line 2") && strstr(err.msg, "NUL"), "%s", err.msg);
}

Test(hostsource, named_origin_and_file)
{
    char path[] = "/tmp/ea-hostfile-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    const char *text = "good:2\n# c\nbad host here\n";
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    struct host_list l = {0};
    struct ea_error err = {0};
    cr_assert_lt(hosts_parse_file(path, &l, &err), 0);
    char want[128];
    snprintf(want, sizeof(want), "%s:3: 'bad host here'", path);
    cr_assert(strstr(err.msg, want), "%s", err.msg);
    unlink(path);
    cr_assert_eq(hosts_parse_file(path, &l, &err), -ENOENT);
    cr_assert(strstr(err.msg, "cannot read hostfile"), "%s", err.msg);
    cr_assert_lt(hosts_parse_named("--hosts", "a,b c", 5, HOSTS_LIST, &l, &err), 0);
    cr_assert(strstr(err.msg, "--hosts: entry 2 'b c'"), "%s", err.msg);
}

Test(hostsource, script_output)
{
    struct host_list l = ok("h1:2\nh2:3\n", HOSTS_SCRIPT);
    cr_assert_eq(l.n, 2);
    cr_assert_eq(l.v[1].slots, 3);
    hosts_list_free(&l);
    bad("h1:2\nWARNING: something\n", HOSTS_SCRIPT, "line 2: 'WARNING: something'");
}

Test(hostsource, limits)
{
    char name[300];
    memset(name, 'a', 256);
    strcpy(name + 256, ":1");
    bad(name, HOSTS_LIST, "longer than 255");
    name[255] = '\0';
    struct host_list l = ok(name, HOSTS_LIST);
    cr_assert_eq(strlen(l.v[0].name), 255);
    hosts_list_free(&l);
    /* HOSTS_MAX hosts parse; one more does not */
    size_t cap = (HOSTS_MAX + 1) * 12;
    char *big = malloc(cap);
    size_t n = 0;
    for (int i = 0; i < HOSTS_MAX; i++)
        n += (size_t)snprintf(big + n, cap - n, "h%d:1\n", i);
    l = ok(big, HOSTS_SCRIPT);
    cr_assert_eq(l.n, HOSTS_MAX);
    hosts_list_free(&l);
    snprintf(big + n, cap - n, "extra:1\n");
    bad(big, HOSTS_SCRIPT, "more than 4096 hosts");
    free(big);
    struct ea_error err = {0};
    cr_assert_eq(hosts_parse("x", HOSTS_TEXT_MAX + 1, HOSTS_SCRIPT, &l, &err), -E2BIG);
}

Test(hostsource, find)
{
    struct host_list l = ok("a,b,[::1]", HOSTS_LIST);
    cr_assert_eq(hosts_find(&l, "b"), 1);
    cr_assert_eq(hosts_find(&l, "::1"), 2);
    cr_assert_eq(hosts_find(&l, "c"), -1);
    hosts_list_free(&l);
}

Test(hostsource, node_ids_stable_distinct_valid)
{
    char a[96], b[96], c[96];
    hosts_node_id("node1.example", a, sizeof(a));
    cr_assert_str_eq(a, "node1.example");
    hosts_node_id("::1", a, sizeof(a));
    hosts_node_id("::1", b, sizeof(b));
    cr_assert_str_eq(a, b, "stable");
    cr_assert_eq(strncmp(a, "__1-", 4), 0, "%s", a);
    hosts_node_id("::2", c, sizeof(c));
    cr_assert_str_neq(a, c);
    char longname[256];
    memset(longname, 'x', 255);
    longname[255] = '\0';
    hosts_node_id(longname, a, sizeof(a));
    cr_assert_eq(strlen(a), 89);
    for (const char *p = a; *p; p++)
        cr_assert(strchr("abcdefghijklmnopqrstuvwxyz0123456789-_.", *p) ||
                  (*p >= 'A' && *p <= 'Z'));
}
