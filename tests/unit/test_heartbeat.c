// SPDX-License-Identifier: Apache-2.0
/* hb (agent/health/heartbeat.c) on real files with a synthetic clock, and the health options. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config.h"
#include "ea_time.h"
#include "heartbeat.h"

static char dir[64];

static void setup(void)
{
    snprintf(dir, sizeof(dir), "/tmp/ea-hb-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(hb, .init = setup, .fini = teardown);

static void beat(struct hb *h, int local_rank, const char *text)
{
    char path[256];
    FILE *f = fopen(hb_file(h, local_rank, path, sizeof(path)), "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

Test(hb, off_is_null_and_every_call_a_no_op)
{
    struct hb *h = (struct hb *)1;
    cr_assert_eq(hb_create(0, 0, &h, NULL), 0);
    cr_assert_null(h);
    cr_assert_eq(hb_fd(h), -1);
    cr_assert_eq(hb_wake_ms(h), -1);
    struct hb_hang hang;
    cr_assert_eq(hb_check(h, 1, &hang), 0);
    hb_destroy(h);
}

/* mutation: refresh() not taking a newer mtime as a beat → a hang reported at the deadline */
Test(hb, first_beats_make_ready_then_a_silent_rank_hangs)
{
    struct hb *h;
    cr_assert_eq(hb_create(5000, 20000, &h, NULL), 0);
    char hbdir[128];
    snprintf(hbdir, sizeof(hbdir), "%s/heartbeat", dir);
    int64_t t0 = ea_now_ms();
    cr_assert_eq(hb_arm(h, hbdir, 2, 6, t0, NULL), 0); /* global ranks 6 and 7 */
    cr_assert_eq(hb_wake_ms(h), t0 + 20000, "the startup timeout bounds the first beat");
    cr_assert_geq(hb_fd(h), 0);
    beat(h, 0, "12\n");
    beat(h, 1, "warmup\n");
    hb_on_events(h, t0 + 100);
    cr_assert_eq(hb_ready_ms(h), t0 + 100);
    cr_assert_eq(hb_fd(h), -1, "the watch is dropped once every rank beat");
    cr_assert_eq(hb_wake_ms(h), t0 + 5100);
    struct hb_hang hang;
    cr_assert_eq(hb_check(h, t0 + 5000, &hang), 0, "not due yet");
    /* at the deadline the files are looked at: their mtime is now, so both beat lately */
    cr_assert_eq(hb_check(h, t0 + 5100, &hang), 0, "a beat seen through the mtime");
    /* ten seconds later with no beat: the first rank past its deadline is named */
    cr_assert_eq(hb_check(h, t0 + 5100 + 10000, &hang), 1);
    cr_assert_eq(hang.rank, 6);
    cr_assert_not(hang.first);
    cr_assert(strstr(hang.message, "rank 6 hung: no heartbeat for 1") &&
                  strstr(hang.message, "(last: step 12)"),
              "%s", hang.message);
    cr_assert_eq(hb_wake_ms(h), -1, "disarmed after a hang");
    hb_destroy(h);
}

/* mutation: hb_forget() a no-op → the exited rank is called hung */
Test(hb, a_rank_that_exited_is_not_watched)
{
    struct hb *h;
    cr_assert_eq(hb_create(1000, 0, &h, NULL), 0);
    char hbdir[128];
    snprintf(hbdir, sizeof(hbdir), "%s/hb", dir);
    int64_t t0 = ea_now_ms();
    cr_assert_eq(hb_arm(h, hbdir, 1, 0, t0, NULL), 0);
    hb_forget(h, 0, t0 + 10);
    struct hb_hang hang;
    cr_assert_eq(hb_check(h, t0 + 60000, &hang), 0);
    cr_assert_eq(hb_ready_ms(h), t0 + 10);
    hb_destroy(h);
}

/* Round 2 in the directory round 1 used: round 1's heartbeat files are gone when it is armed,
 * so a rank of round 2 that never beats is caught at its startup deadline, not taken for
 * having beaten through the file its predecessor left.
 * mutation: prepare_dir() keeping the old files -> rank 1's old file counts as its first beat */
Test(hb, a_new_round_starts_without_the_last_rounds_beats)
{
    struct hb *h;
    cr_assert_eq(hb_create(5000, 20000, &h, NULL), 0);
    char hbdir[128], path[256];
    snprintf(hbdir, sizeof(hbdir), "%s/heartbeat", dir);
    int64_t t0 = ea_now_ms();
    cr_assert_eq(hb_arm(h, hbdir, 2, 0, t0, NULL), 0);
    beat(h, 0, "100\n");
    beat(h, 1, "100\n");
    hb_on_events(h, t0 + 10);
    cr_assert_eq(hb_ready_ms(h), t0 + 10);
    /* round 2: the same ranks, the same directory */
    int64_t t1 = t0 + 1000;
    cr_assert_eq(hb_arm(h, hbdir, 2, 0, t1, NULL), 0);
    beat(h, 0, "1\n");
    hb_on_events(h, t1 + 10);
    cr_assert_eq(hb_ready_ms(h), -1, "rank 1 of round 2 has not beaten");
    struct hb_hang hang;
    cr_assert_eq(hb_check(h, t1 + 20000, &hang), 1, "rank 1 never beat in round 2: no hang");
    cr_assert_eq(hang.rank, 1);
    cr_assert(hang.first, "%s", hang.message);
    cr_assert(strstr(hang.message, "rank 1 hung: no first heartbeat within 20 s"), "%s",
              hang.message);
    cr_assert_eq(access(hb_file(h, 1, path, sizeof(path)), F_OK), -1, "round 1's file is left");
    hb_destroy(h);
}

static int parse(const char *const *args, struct ea_error *err)
{
    char *argv[32] = {"elastic-agent"};
    int n = 1;
    for (; args[n - 1]; n++)
        argv[n] = (char *)args[n - 1];
    struct cfg c;
    char *envp[] = {NULL};
    return cfg_parse(n, argv, envp, &c, err);
}

/* mutation: resolve_health() returning 0 at once → both bad combinations accepted */
Test(hb, health_options_are_checked)
{
    struct ea_error err = {0};
    const char *ok[] = {"--worker-heartbeat-timeout", "5",  "--preflight", "true",
                        "--preflight-every-round",    "--", "true",        NULL};
    cr_assert_eq(parse(ok, &err), 0, "%s", err.msg);
    const char *driver[] = {"--hosts", "a:1", "--worker-heartbeat-timeout", "5", "--",
                            "true",    NULL};
    cr_assert_eq(parse(driver, &err), -EINVAL);
    cr_assert(strstr(err.msg, "need the workers on this machine"), "%s", err.msg);
    const char *lone[] = {"--preflight-cooldown", "5", "--", "true", NULL};
    cr_assert_eq(parse(lone, &err), -EINVAL);
    cr_assert(strstr(err.msg, "--preflight-cooldown needs --preflight CMD"), "%s", err.msg);
}
