# The other commands' loops on ea_loop (issue 37): serve's decisions are taken on the loop's
# clock, so a unit test on ea_fake_clock decides them; no verdict depends on the machine's load.
# an idle daemon scans the queue on a write of `next` at most once per POOL_RESCAN_GAP_MS (the
# check that was out of sec_queue.sh: its end-to-end test's bound grew with the elapsed time)
mutant --target test_serve_rescan --filter 'serve_rescan/a_write_of_next_within*' \
  agent/daemon/serve_runs.c 's/if (scan \&\& at > now) {/if (0) {/' '^test_serve_rescan$'
# the same gap through serve's own loop on the fake clock
mutant --target test_serve_rescan --filter 'serve_rescan/the_loop_wakes*' \
  agent/daemon/serve_runs.c 's/if (scan \&\& at > now) {/if (0) {/' '^test_serve_rescan$'
# the loop wakes at the rescan's time (not at the next keepalive)
mutant --target test_serve_rescan --filter 'serve_rescan/the_loop_wakes*' \
  agent/daemon/serve.c 's/    return at ? at : -1;/    return -1;/' '^test_serve_rescan$'
# driver mode's loop wakes at its deadlines (a cooldown's end, --join-timeout), on the loop's clock
mutant --target test_driver_loop --filter 'driver_loop/*' \
  agent/driver/driver.c 's/    return next_deadline(ctx);/    return -1;/' '^test_driver_loop$'
