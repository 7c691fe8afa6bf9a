// SPDX-License-Identifier: Apache-2.0
/* The worker-group lifecycle decision table, row by row. */
#include <criterion/criterion.h>

#include "lifecycle.h"

static struct lc_input base(void)
{
    return (struct lc_input){.group = LC_IDLE, .have_state = true, .status = RDZV_RUNNING,
                             .generation = 7, .my_index = 1, .master_known = true};
}

Test(lifecycle, starts_workers_of_a_new_round_once_master_known)
{
    struct lc_input in = base();
    cr_assert_eq(lc_decide(&in), LC_START_WORKERS);
    in.master_known = false;
    cr_assert_eq(lc_decide(&in), LC_NOTHING, "non-zero group rank waits for the master");
    in.my_index = 0;
    cr_assert_eq(lc_decide(&in), LC_PUBLISH_MASTER);
}

Test(lifecycle, running_group_of_current_generation_is_left_alone)
{
    struct lc_input in = base();
    in.group = LC_RUNNING;
    in.group_generation = 7;
    in.live_workers = 2;
    cr_assert_eq(lc_decide(&in), LC_NOTHING);
    in.group = LC_FINISHED;
    in.live_workers = 0;
    cr_assert_eq(lc_decide(&in), LC_NOTHING, "finished: wait for the others");
}

Test(lifecycle, stops_when_round_moves_on_or_node_is_dropped)
{
    struct lc_input in = base();
    in.group = LC_RUNNING;
    in.group_generation = 5;
    in.live_workers = 2;
    cr_assert_eq(lc_decide(&in), LC_STOP_WORKERS);
    in.group_generation = 7;
    in.my_index = -1;
    cr_assert_eq(lc_decide(&in), LC_STOP_WORKERS, "became a spare");
    in.my_index = 1;
    in.status = RDZV_WAITING;
    cr_assert_eq(lc_decide(&in), LC_STOP_WORKERS);
    in.group = LC_STOPPING;
    cr_assert_eq(lc_decide(&in), LC_NOTHING, "stop is requested once");
}

Test(lifecycle, local_failure_stops_siblings_then_waits)
{
    struct lc_input in = base();
    in.group = LC_FAILED;
    in.group_generation = 7;
    in.live_workers = 1;
    cr_assert_eq(lc_decide(&in), LC_STOP_WORKERS);
    in.live_workers = 0;
    cr_assert_eq(lc_decide(&in), LC_NOTHING, "same generation: wait for the next round");
    in.generation = 8;
    cr_assert_eq(lc_decide(&in), LC_START_WORKERS);
}

Test(lifecycle, terminal_states_exit_after_workers_are_gone)
{
    struct lc_input in = base();
    in.group = LC_RUNNING;
    in.group_generation = 7;
    in.live_workers = 1;
    in.status = RDZV_FAILED;
    cr_assert_eq(lc_decide(&in), LC_STOP_WORKERS);
    in.live_workers = 0;
    cr_assert_eq(lc_decide(&in), LC_EXIT_FAILED);
    in.status = RDZV_SUCCEEDED;
    cr_assert_eq(lc_decide(&in), LC_EXIT_SUCCESS);
    in.status = RDZV_CLOSED;
    cr_assert_eq(lc_decide(&in), LC_EXIT_CLOSED);
}

Test(lifecycle, signal_stops_then_exits)
{
    struct lc_input in = base();
    in.group = LC_RUNNING;
    in.group_generation = 7;
    in.live_workers = 3;
    in.terminating = true;
    cr_assert_eq(lc_decide(&in), LC_STOP_WORKERS);
    in.live_workers = 0;
    cr_assert_eq(lc_decide(&in), LC_EXIT_INTERRUPTED);
}

Test(lifecycle, no_state_or_waiting_does_nothing)
{
    struct lc_input in = base();
    in.have_state = false;
    cr_assert_eq(lc_decide(&in), LC_NOTHING);
    in.have_state = true;
    in.status = RDZV_WAITING;
    cr_assert_eq(lc_decide(&in), LC_NOTHING);
    cr_assert_str_eq(lc_action_name(LC_START_WORKERS), "start-workers");
}
