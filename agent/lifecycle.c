// SPDX-License-Identifier: Apache-2.0
/*
 * lc: decision rules, first match wins:
 *
 *   live workers | condition                                           | action
 *   -------------+-----------------------------------------------------+------------------
 *   > 0          | already stopping                                    | nothing (wait)
 *   > 0          | terminating, or status not RUNNING, or not a member,| stop workers
 *                | or the round moved on, or a local worker failed     |
 *   > 0          | otherwise                                           | nothing (running)
 *   0            | terminating                                         | exit interrupted
 *   0            | SUCCEEDED / FAILED / CLOSED                         | exit 0 / 1 / 4
 *   0            | RUNNING, member, group not of this generation:      |
 *                |   master known                                      | start workers
 *                |   group rank 0                                      | publish master
 *   0            | otherwise (waiting, spare, finished, master unknown)| nothing
 */
#include "lifecycle.h"

static bool round_is_ours(const struct lc_input *in)
{
    return in->have_state && in->status == RDZV_RUNNING && in->my_index >= 0;
}

enum lc_action lc_decide(const struct lc_input *in)
{
    if (in->live_workers > 0) {
        if (in->group == LC_STOPPING)
            return LC_NOTHING;
        if (in->terminating || !round_is_ours(in) || in->group_generation != in->generation ||
            in->group == LC_FAILED)
            return LC_STOP_WORKERS;
        return LC_NOTHING;
    }
    if (in->terminating)
        return LC_EXIT_INTERRUPTED;
    if (in->have_state) {
        switch (in->status) {
        case RDZV_SUCCEEDED:
            return LC_EXIT_SUCCESS;
        case RDZV_FAILED:
            return LC_EXIT_FAILED;
        case RDZV_CLOSED:
            return LC_EXIT_CLOSED;
        default:
            break;
        }
    }
    if (round_is_ours(in) && in->group_generation != in->generation) {
        if (in->master_known)
            return LC_START_WORKERS;
        if (in->my_index == 0)
            return LC_PUBLISH_MASTER;
    }
    return LC_NOTHING;
}

const char *lc_action_name(enum lc_action a)
{
    static const char *const names[] = {
        [LC_NOTHING] = "nothing",
        [LC_STOP_WORKERS] = "stop-workers",
        [LC_PUBLISH_MASTER] = "publish-master",
        [LC_START_WORKERS] = "start-workers",
        [LC_EXIT_SUCCESS] = "exit-success",
        [LC_EXIT_FAILED] = "exit-failed",
        [LC_EXIT_CLOSED] = "exit-closed",
        [LC_EXIT_INTERRUPTED] = "exit-interrupted",
    };
    return (unsigned)a < sizeof(names) / sizeof(*names) ? names[a] : "?";
}
