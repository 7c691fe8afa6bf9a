# shellcheck shell=bash
# Issue 38, items 4 and 5 (docs/security.md, "Signed submissions"): a spec's time rules
# (specsig_check_time, decided by test_specsig without a clock) and a daemon's allowed signers
# file that is gone or broken trusting no key (test_sshsig drives daemon_trust's reload).
mutant --target test_specsig --filter 'specsig/submitted_in_the_future*' agent/daemon/specsig.c \
  's/if (now_ms < s->submitted_ms - SPECSIG_CLOCK_SKEW_MS) {/if (0) {/' '^test_specsig$'
mutant --target test_specsig --filter 'specsig/negative_submit_time*' agent/daemon/specsig.c \
  's/if (s->submitted_ms < 0)$/if (0)/' '^test_specsig$'
mutant --target test_specsig --filter 'specsig/expiry_not_after*' agent/daemon/specsig.c \
  's/if (s->expires_ms <= s->submitted_ms) {/if (0) {/' '^test_specsig$'
mutant --target test_specsig --filter 'specsig/expired_and_too_long*' agent/daemon/specsig.c \
  's/if (now_ms > s->expires_ms) {/if (0) {/' '^test_specsig$'
mutant --target test_specsig --filter 'specsig/expired_and_too_long*' agent/daemon/specsig.c \
  's/if (s->expires_ms - s->submitted_ms > SPECSIG_VALID_MAX_MS)/if (0)/' '^test_specsig$'
mutant --target test_sshsig --filter 'sshsig/spec_decisions*' agent/daemon/specsig.c \
  's/if (specsig_check_time(s, now_ms, &err) < 0)/if (0)/' '^test_sshsig$'
mutant --target test_sshsig --filter 'sshsig/allowed_signers_gone*' agent/daemon/daemon_trust.c \
  's/^        distrust(t, why);$/        (void)why; \/* mutant: the keys read before stay *\//' \
  '^test_sshsig$'
mutant --target test_sshsig --filter 'sshsig/allowed_signers_gone*' agent/daemon/daemon_trust.c \
  's/^        distrust(t, err.msg);$/        (void)0; \/* mutant: the keys read before stay *\//' \
  '^test_sshsig$'
mutant --target test_sshsig --filter 'sshsig/allowed_signers_gone*' agent/daemon/daemon_trust.c \
  's/t->policy.signers = &no_keys;/t->policy.signers = NULL;/' '^test_sshsig$'
mutant --target test_sshsig --filter 'sshsig/allowed_signers_gone*' agent/daemon/daemon_trust.c \
  's/if (strcmp(t->unusable, why) != 0)/if (1)/' '^test_sshsig$'
