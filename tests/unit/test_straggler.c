// SPDX-License-Identifier: Apache-2.0
/* agent/straggler: the scoring on synthetic timings (no clock): a node 1.5x slower is named
 * within the window, an even run (with noise, and with bursts of slowness on every node as
 * stress-ng gives) is never reported, two nodes are enough, no samples say nothing. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "straggler.h"

#define NODES 4
#define RANKS 2

/* A synthetic sample around `base` seconds: +-jitter uniformly, and with probability `burst`
 * `burst_x` times slower (a noisy neighbour, stress-ng on every core). */
static double sample(unsigned *seed, double base, double jitter, double burst, double burst_x)
{
    double u = (double)rand_r(seed) / RAND_MAX;
    double v = base * (1 + jitter * (2 * u - 1));
    if ((double)rand_r(seed) / RAND_MAX < burst)
        v *= burst_x;
    return v;
}

/* Run `seconds` of one sample per rank per second; node `slow` (-1 none) is `factor` times
 * slower. The time (s) of the first report and its node in *ret_node, or -1. */
static int run(unsigned seed, int seconds, int slow, double factor, double jitter, double burst,
               double burst_x, double threshold, int64_t window_ms, int *ret_reports, int *ret_node)
{
    struct sg_rank ranks[NODES][RANKS];
    struct sg_track track[NODES];
    memset(ranks, 0, sizeof(ranks));
    for (int i = 0; i < NODES; i++)
        track[i] = (struct sg_track){.above_since = -1};
    int first = -1, reports = 0;
    for (int t = 0; t < seconds; t++) {
        double times[NODES], scores[NODES];
        for (int i = 0; i < NODES; i++) {
            for (int r = 0; r < RANKS; r++)
                sg_rank_add(&ranks[i][r], sample(&seed, 0.100 * (i == slow ? factor : 1), jitter,
                                                 burst, burst_x));
            times[i] = sg_node_time(ranks[i], RANKS);
        }
        sg_scores(times, NODES, scores);
        for (int i = 0; i < NODES; i++)
            if (sg_observe(&track[i], scores[i], threshold, window_ms, (int64_t)t * 1000)) {
                reports++;
                if (first < 0) {
                    first = t;
                    *ret_node = i;
                }
            }
    }
    *ret_reports = reports;
    return first;
}

Test(straggler, a_node_1_5x_slower_is_named_within_30_s)
{
    for (unsigned seed = 1; seed <= 20; seed++) {
        int reports = 0, node = -1;
        int first = run(seed, 600, 2, 1.5, 0.2, 0, 1, 1.3, 20000, &reports, &node);
        cr_assert_geq(first, 0, "seed %u: never named", seed);
        cr_assert_eq(node, 2);
        cr_assert_leq(first, 30, "seed %u: named after %d s", seed, first);
        cr_assert_eq(reports, 1, "reported once while it stays slow, not %d times", reports);
    }
}

Test(straggler, an_even_run_is_never_reported)
{
    int reports = 0, node = -1;
    for (unsigned seed = 1; seed <= 20; seed++) { /* 20 runs of 10 minutes */
        cr_assert_eq(run(seed, 600, -1, 1, 0.2, 0, 1, 1.3, 20000, &reports, &node), -1,
                     "seed %u: node %d", seed, node);
        cr_assert_eq(reports, 0);
        /* bursts on every node: one sample in five 3x slower, anywhere */
        cr_assert_eq(run(seed, 600, -1, 1, 0.3, 0.2, 3, 1.3, 20000, &reports, &node), -1,
                     "seed %u, bursts: node %d", seed, node);
        cr_assert_eq(reports, 0);
    }
}

Test(straggler, a_slow_node_under_noise_is_still_named)
{
    for (unsigned seed = 1; seed <= 20; seed++) {
        int reports = 0, node = -1;
        int first = run(seed, 600, 1, 1.5, 0.3, 0.2, 3, 1.3, 20000, &reports, &node);
        cr_assert_geq(first, 0, "seed %u: never named", seed);
        cr_assert_eq(node, 1);
        cr_assert_leq(first, 30, "seed %u: named after %d s", seed, first);
    }
}

Test(straggler, the_window_must_pass_above_the_threshold)
{
    struct sg_track t = {.above_since = -1};
    cr_assert_eq(sg_observe(&t, 1.5, 1.3, 20000, 0), 0);
    cr_assert_eq(sg_observe(&t, 1.5, 1.3, 20000, 19999), 0);
    cr_assert_eq(sg_observe(&t, 1.3, 1.3, 20000, 20000), 1, "at the threshold counts");
    cr_assert_eq(sg_observe(&t, 1.6, 1.3, 20000, 40000), 0, "once per stretch");
    cr_assert_eq(sg_observe(&t, 1.2, 1.3, 20000, 40500), 0, "above halfway back: still in it");
    cr_assert_neq(t.above_since, -1);
    cr_assert_eq(sg_observe(&t, 1.14, 1.3, 20000, 41000), 0, "below halfway: the stretch ends");
    cr_assert_eq(t.above_since, -1);
    cr_assert_eq(sg_observe(&t, 1.2, 1.3, 20000, 41500), 0, "a stretch begins at the threshold");
    cr_assert_eq(t.above_since, -1);
    cr_assert_eq(sg_observe(&t, 1.5, 1.3, 20000, 42000), 0);
    cr_assert_eq(sg_observe(&t, 1.5, 1.3, 20000, 61999), 0, "a new window from 42 s");
    cr_assert_eq(sg_observe(&t, 1.5, 1.3, 20000, 62000), 1);
    cr_assert_eq(sg_observe(&t, 0, 1.3, 20000, 63000), 0, "no samples end it too");
    cr_assert_eq(t.above_since, -1);
}

Test(straggler, scores_are_over_the_other_nodes_median)
{
    double t2[2] = {0.15, 0.10}, s2[2];
    sg_scores(t2, 2, s2);
    cr_assert_float_eq(s2[0], 1.5, 1e-9, "two nodes: the slow one is not hidden");
    cr_assert_float_eq(s2[1], 0.10 / 0.15, 1e-9);
    double t4[4] = {0.10, 0.11, 0.15, 0.09}, s4[4];
    sg_scores(t4, 4, s4);
    cr_assert_float_eq(s4[2], 0.15 / 0.10, 1e-9);
    double t3[3] = {0.10, 0, 0.20}, s3[3];
    sg_scores(t3, 3, s3);
    cr_assert_float_eq(s3[1], 0, 1e-12, "no samples: no score");
    cr_assert_float_eq(s3[2], 2.0, 1e-9, "the node without samples is left out");
    double t1[1] = {0.1}, s1[1];
    sg_scores(t1, 1, s1);
    cr_assert_float_eq(s1[0], 0, 1e-12, "alone: nothing to compare with");
}

Test(straggler, a_node_time_is_the_median_of_its_ranks_recent_samples)
{
    struct sg_rank r[2];
    memset(r, 0, sizeof(r));
    cr_assert_float_eq(sg_node_time(r, 2), 0, 1e-12);
    for (int i = 0; i < 40; i++)
        sg_rank_add(&r[0], i < 24 ? 9.0 : 0.1); /* old samples fall out of the ring */
    sg_rank_add(&r[1], 0.2);
    sg_rank_add(&r[1], -1); /* ignored */
    sg_rank_add(&r[1], NAN);
    cr_assert_eq(r[0].n, SG_SAMPLES);
    cr_assert_eq(r[1].n, 1);
    cr_assert_float_eq(sg_node_time(r, 2), 0.1, 1e-12);
}

Test(straggler, a_rank_file_says_its_compute_time)
{
    cr_assert_float_eq(sg_parse_compute("12 0.25\n", 8), 0.25, 1e-12);
    cr_assert_float_eq(sg_parse_compute("12 1e-3", 7), 0.001, 1e-12);
    cr_assert_float_eq(sg_parse_compute("12\n", 3), 0, 1e-12, "no compute time");
    cr_assert_float_eq(sg_parse_compute("12 -1\n", 6), 0, 1e-12);
    cr_assert_float_eq(sg_parse_compute("12 nan\n", 7), 0, 1e-12);
    cr_assert_float_eq(sg_parse_compute("12 0.5x\n", 8), 0, 1e-12);
    cr_assert_float_eq(sg_parse_compute("12 1e9\n", 7), 0, 1e-12, "not a step's time");
}

/* include/elastic_agent_heartbeat.h: what a C worker writes is what the agent parses. */
#include "elastic_agent_heartbeat.h"
#include <stdio.h>

Test(straggler, the_c_header_beats_step_and_compute_time)
{
    char path[] = "/tmp/test_straggler_hb.XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    setenv("ELASTIC_HEARTBEAT_FILE", path, 1);
    ea_compute_begin();
    ea_compute_end();
    ea_beat_compute(41, 0.125);
    char buf[96] = "";
    FILE *f = fopen(path, "r");
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    cr_assert_str_eq(buf, "41 0.125000\n");
    cr_assert_float_eq(sg_parse_compute(buf, n), 0.125, 1e-9);
    ea_beat(42); /* the section's time (tiny, maybe 0: then none) is used once */
    ea_beat(43);
    f = fopen(path, "r");
    n = fread(buf, 1, sizeof(buf) - 1, f);
    buf[n] = '\0';
    fclose(f);
    cr_assert_str_eq(buf, "43\n");
    unsetenv("ELASTIC_HEARTBEAT_FILE");
    unlink(path);
}
