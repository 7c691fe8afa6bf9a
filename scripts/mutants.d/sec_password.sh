# issue 38 item 1 (docs/security.md, "Credentials and process hygiene"): the store password
# handed to a child agent by a socket, which /proc cannot reopen (a pipe here: it can)
mutant --target test_config --filter 'config/password_handover_is_not_reopenable*' \
  agent/cli/config_secret.c \
  's/if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)/if (pipe2(sv, O_CLOEXEC) < 0)/;s/ssize_t n = send(sv\[1\], c->password, len, MSG_NOSIGNAL);/ssize_t n = write(sv[1], c->password, len);/' \
  '^test_config_safety$'
