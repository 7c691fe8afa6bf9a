# Launcher core (issue 37): stop with grace, decided by the fake launcher's clock (no process, no
# real time: the verdict does not depend on load).
# The SIGKILL is due when the grace has passed, not a tick later:
mutant --target test_launcher_fake --filter 'fake/stop_kills_when_the_grace_has_passed' \
  launcher/launch_core.c 's/now_ms >= p->kill_at) {/now_ms > p->kill_at) {/' \
  '^test_launcher_fake_safety$'
# A second stop may only shorten the grace, never put the SIGKILL off:
mutant --target test_launcher_fake --filter 'fake/a_second_stop_only_shortens_the_grace' \
  launcher/launch_core.c 's/} else if (p->kill_at >= 0 \&\& at < p->kill_at) {/} else if (p->kill_at >= 0) {/' \
  '^test_launcher_fake_safety$'
