// SPDX-License-Identifier: Apache-2.0
/*
 * ssh_remote: what runs on the remote host, and how the agent talks to it (docs/ssh.md).
 *
 * ssh runs ssh_bootstrap, which reads the helper script from stdin and evaluates it in `sh`.
 * The helper then reads one command per line from stdin and `eval`s it: `_ea_s` starts a slot,
 * `_ea_k` signals one. Arguments are single-quoted words, so nothing the user passes is ever
 * interpreted by a shell, and the environment travels on stdin (never on a command line). The
 * helper answers on stdout: "R guard PATH" / "R sh" (ready), "P slot pid" (started), "F slot
 * what errno" (not started), "X slot status" (ended), and the workers' output as tagged records
 * ("O<slot> data", "E<slot> data"; lowercase: a piece of a longer line, no newline after it).
 * `_ea_f SECS` is the agent's fence: its authority lasts SECS more seconds; a watchdog started by
 * the first one stops every worker (SIGTERM, SIGKILL after the grace, then the helper itself)
 * when no newer one arrived in time — a partitioned host's workers end even though sshd never
 * notices that the connection is dead.
 * Every record is written with a single write() of at most ~2 KB, so records never interleave.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ssh_internal.h"

/* No ' or \ in it: it means the same to sh, bash, zsh, fish and csh as the login shell. */
const char ssh_bootstrap[] = "exec sh -c 'read -r n; eval \"$(dd bs=1 count=$n 2>/dev/null)\"'";

/*
 * The helper. Per slot: a subshell (fds 3/4 hold the write ends of the output fifos until the
 * worker has them) starts two awk taggers, changes directory, replaces its environment with the
 * worker's, and starts the middleman in a new session: `elastic-agent exec-guard --watch-stdin`
 * (stdin = the lifeline fifo, pid reported through --report-fd into od), or the worker itself
 * under setsid (sh fallback; leftovers of its group get SIGTERM, then SIGKILL 1 s later). The
 * lifeline fifo is held open for writing by the helper alone: when the helper ends (stdin EOF,
 * or killed), the watcher and the guards see EOF and kill every worker group.
 */
const char ssh_helper_script[] =
    "# elastic-agent ssh helper (POSIX sh): see docs/ssh.md\n"
    "_ea_nl='\n"
    "'\n"
    "_ea_die() { printf 'Z %s\\n' \"$*\"; exit 1; }\n"
    "for _ea_t in setsid awk mkfifo od rm sleep env; do\n"
    "  command -v \"$_ea_t\" >/dev/null 2>&1 || _ea_die \"'$_ea_t' is not installed on "
    "the remote host\"\n"
    "done\n"
    "_ea_setsid=$(command -v setsid) _ea_awk=$(command -v awk) _ea_mkfifo=$(command "
    "-v mkfifo)\n"
    "_ea_od=$(command -v od) _ea_rm=$(command -v rm) _ea_sleep=$(command -v sleep)\n"
    "_ea_env=$(command -v env)\n"
    "# mawk reads a fifo in blocks (a worker's line would wait for the next 4 KiB or its exit)\n"
    "# unless -W interactive, which also makes every piece of a printf a write of its own\n"
    "_ea_awi=\n"
    "case $(\"$_ea_awk\" -W version 2>&1 </dev/null) in *mawk*) _ea_awi='-W interactive' ;; "
    "esac\n"
    "_ea_d=$(mktemp -d \"${TMPDIR:-/tmp}/ea-ssh.XXXXXX\" 2>/dev/null) ||\n"
    "  { _ea_d=\"${TMPDIR:-/tmp}/ea-ssh.$$\" && mkdir -m 700 \"$_ea_d\"; } ||\n"
    "  _ea_die \"cannot create a temporary directory on the remote host\"\n"
    "_ea_g=\n"
    "case ${ELASTIC_SSH_GUARD-} in\n"
    "  none) ;;\n"
    "  /*) _ea_g=$ELASTIC_SSH_GUARD ;;\n"
    "  *) _ea_g=$(command -v elastic-agent-guard) || _ea_g=$(command -v "
    "elastic-agent) || _ea_g= ;;\n"
    "esac\n"
    "_ea_life=\"$_ea_d/life\"\n"
    "\"$_ea_mkfifo\" \"$_ea_life\" || _ea_die \"cannot create a fifo in $_ea_d\"\n"
    "exec 7<>\"$_ea_life\"\n"
    "# the group, or (not yet in it: setsid has not run) the worker itself\n"
    "_ea_kill() { kill -\"$1\" -\"$2\" 2>/dev/null || kill -\"$1\" \"$2\" 2>/dev/null; }\n"
    "_ea_killall() {\n"
    "  for _ea_f in \"$_ea_d\"/w.*; do\n"
    "    [ -f \"$_ea_f\" ] && read -r _ea_w <\"$_ea_f\" && _ea_kill \"$1\" \"$_ea_w\"\n"
    "  done\n"
    "}\n"
    "# the watcher: once no writer holds the lifeline (this shell is gone, however it ended),\n"
    "# every worker group is killed and the directory removed\n"
    "( exec 7>&- 0<&- 1>/dev/null 2>&1; read -r _ea_x <\"$_ea_life\"; _ea_killall 9\n"
    "  \"$_ea_sleep\" 1; _ea_killall 9; \"$_ea_rm\" -rf \"$_ea_d\" ) &\n"
    "# one write per record (two taggers share stdout): printf of one string, never pieces\n"
    "_ea_tag='{ s = $0; while (length(s) > 2000) { r = lo \" \" substr(s, 1, 2000) \"\\n\"; "
    "printf \"%s\", r; fflush(); s = substr(s, 2001) } r = up \" \" s \"\\n\"; printf \"%s\", r; "
    "fflush() }'\n"
    "_ea_fail() { # slot what errno: the pipes' readers are released, the failure reported\n"
    "  exec 3>&- 4>&-; wait \"$_ea_ao\" \"$_ea_ae\"\n"
    "  \"$_ea_rm\" -f \"$_ea_o\" \"$_ea_e\" \"$_ea_d/r.$1\" \"$_ea_d/r.$1r\"\n"
    "  printf 'F %s %s %s\\n' \"$1\" \"$2\" \"$3\"; exit 0\n"
    "}\n"
    "# _ea_run SLOT CWD STRICT NEXPORT K=V... NRAW K=V... ARGV... (in a subshell of its own)\n"
    "_ea_run() {\n"
    "  _ea_n=$1 _ea_cwd=$2 _ea_strict=$3; shift 3\n"
    "  _ea_o=\"$_ea_d/o.$_ea_n\" _ea_e=\"$_ea_d/e.$_ea_n\"\n"
    "  \"$_ea_mkfifo\" \"$_ea_o\" \"$_ea_e\" || { printf 'F %s setup 5\\n' \"$_ea_n\"; exit "
    "0; }\n"
    "  exec 3<>\"$_ea_o\" 4<>\"$_ea_e\" # write ends held until the worker has them\n"
    "  LC_ALL=C \"$_ea_awk\" $_ea_awi -v up=\"O$_ea_n\" -v lo=\"o$_ea_n\" \"$_ea_tag\" "
    "<\"$_ea_o\" 3>&- 4>&- & _ea_ao=$!\n"
    "  LC_ALL=C \"$_ea_awk\" $_ea_awi -v up=\"E$_ea_n\" -v lo=\"e$_ea_n\" \"$_ea_tag\" "
    "<\"$_ea_e\" 3>&- 4>&- & _ea_ae=$!\n"
    "  if ! cd -- \"$_ea_cwd\" 2>/dev/null; then\n"
    "    [ \"$_ea_strict\" = 1 ] && _ea_fail \"$_ea_n\" chdir 2\n"
    "    cd 2>/dev/null || cd /\n"
    "    printf 'E%s elastic-agent: no directory %s on this host: running in %s\\n' "
    "\"$_ea_n\" \"$_ea_cwd\" \"$PWD\"\n"
    "  fi\n"
    "  for _ea_v in $(\"$_ea_awk\" 'BEGIN { for (k in ENVIRON) if (k ~ "
    "/^[A-Za-z_][A-Za-z0-9_]*$/) print k }'); do\n"
    "    case $_ea_v in _ea_*) ;; *) unset \"$_ea_v\" 2>/dev/null ;; esac\n"
    "  done\n"
    "  _ea_i=$1; shift\n"
    "  while [ \"$_ea_i\" -gt 0 ]; do export \"$1\"; shift; _ea_i=$((_ea_i - 1)); done\n"
    "  _ea_i=$1; shift\n"
    "  eval \"_ea_p=\\${$((_ea_i + 1))}\"\n"
    "  [ \"$_ea_i\" -gt 0 ] && set -- \"$_ea_env\" \"$@\"\n"
    "  if [ -n \"$_ea_g\" ]; then\n"
    "    _ea_r=\"$_ea_d/r.$_ea_n\"\n"
    "    \"$_ea_mkfifo\" \"$_ea_r\" || _ea_fail \"$_ea_n\" setup 5\n"
    "    \"$_ea_od\" -An -tu4 -v <\"$_ea_r\" >\"$_ea_r\"r 3>&- 4>&- & _ea_rp=$!\n"
    "    \"$_ea_setsid\" \"$_ea_g\" exec-guard --report-fd 9 --watch-stdin -- \"$@\" \\\n"
    "      <\"$_ea_life\" >&3 2>&4 9>\"$_ea_r\" & _ea_m=$!\n"
    "    wait \"$_ea_rp\"\n"
    "    _ea_k=0 _ea_w=0\n"
    "    IFS=' ' read -r _ea_k _ea_w <\"$_ea_r\"r\n"
    "    \"$_ea_rm\" -f \"$_ea_r\" \"$_ea_r\"r\n"
    "    case $_ea_k in\n"
    "      6) ;;\n"
    "      4) wait \"$_ea_m\"; _ea_fail \"$_ea_n\" exec \"$_ea_w\" ;;\n"
    "      *) wait \"$_ea_m\"; _ea_fail \"$_ea_n\" setup \"${_ea_w:-5}\" ;;\n"
    "    esac\n"
    "  else\n"
    "    case $_ea_p in\n"
    "      */*) [ -f \"$_ea_p\" ] || _ea_fail \"$_ea_n\" exec 2\n"
    "           [ -x \"$_ea_p\" ] || _ea_fail \"$_ea_n\" exec 13 ;;\n"
    "      *) _ea_q=$(command -v -- \"$_ea_p\") || _ea_fail \"$_ea_n\" exec 2 ;;\n"
    "    esac\n"
    "    \"$_ea_setsid\" \"$@\" </dev/null >&3 2>&4 3>&- 4>&- & _ea_m=$!\n"
    "    _ea_w=$_ea_m\n"
    "  fi\n"
    "  exec 3>&- 4>&-\n"
    "  echo \"$_ea_w\" >\"$_ea_d/w.$_ea_n\"\n"
    "  printf 'P %s %s\\n' \"$_ea_n\" \"$_ea_w\"\n"
    "  { wait \"$_ea_m\"; } 2>/dev/null; _ea_st=$?\n"
    "  if [ -z \"$_ea_g\" ] && kill -15 -\"$_ea_w\" 2>/dev/null; then\n"
    "    ( \"$_ea_sleep\" 1; kill -9 -\"$_ea_w\" ) >/dev/null 2>&1 3>&- 4>&- &\n"
    "  fi\n"
    "  wait \"$_ea_ao\" \"$_ea_ae\"\n"
    "  \"$_ea_rm\" -f \"$_ea_o\" \"$_ea_e\" \"$_ea_d/w.$_ea_n\"\n"
    "  printf 'X %s %s\\n' \"$_ea_n\" \"$_ea_st\"\n"
    "}\n"
    "_ea_s() { ( exec 7>&- </dev/null; _ea_run \"$@\" ) & }\n"
    "_ea_k() { [ -f \"$_ea_d/w.$1\" ] && read -r _ea_w <\"$_ea_d/w.$1\" && _ea_kill \"$2\" "
    "\"$_ea_w\"; }\n"
    "# the fence: _ea_f SECS GRACE (see the top of ssh_remote.c)\n"
    "_ea_fq=0 _ea_fw=\n"
    "_ea_fwatch() {\n"
    "  exec 7>&- 0<&- 1>/dev/null 2>&1\n"
    "  _ea_q= _ea_left=\n"
    "  while :; do\n"
    "    _ea_nq= _ea_t= _ea_gr=\n"
    "    read -r _ea_nq _ea_t _ea_gr <\"$_ea_d/fence\"\n"
    "    if [ -n \"$_ea_gr\" ] && [ \"$_ea_nq\" != \"$_ea_q\" ]; then\n"
    "      _ea_q=$_ea_nq _ea_left=$_ea_t _ea_grace=$_ea_gr\n"
    "    fi\n"
    "    if [ -n \"$_ea_left\" ] && [ \"$_ea_left\" -le 0 ]; then\n"
    "      _ea_killall 15; \"$_ea_sleep\" \"$_ea_grace\"; kill -9 $$; exit 0\n"
    "    fi\n"
    "    \"$_ea_sleep\" 1; [ -n \"$_ea_left\" ] && _ea_left=$((_ea_left - 1))\n"
    "  done\n"
    "}\n"
    "_ea_f() {\n"
    "  _ea_fq=$((_ea_fq + 1)); echo \"$_ea_fq $1 $2\" >\"$_ea_d/fence\"\n"
    "  [ -n \"$_ea_fw\" ] || { _ea_fwatch & _ea_fw=$!; }\n"
    "}\n"
    "if [ -n \"$_ea_g\" ]; then printf 'R guard %s\\n' \"$_ea_g\"; else printf 'R sh\\n'; fi\n"
    "while IFS= read -r _ea_l; do eval \"$_ea_l\"; done\n"
    "_ea_killall 9\n"
    "exit 0\n";

int ssh_buf_add(struct ssh_buf *b, const void *data, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p)
            return -ENOMEM;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, data, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

void ssh_buf_free(struct ssh_buf *b)
{
    free(b->p);
    *b = (struct ssh_buf){0};
}

int ssh_quote(struct ssh_buf *b, const char *s)
{
    int r = ssh_buf_add(b, " '", 2);
    for (const char *run = s; r == 0; s++) {
        if (*s && *s != '\'' && *s != '\n')
            continue;
        r = ssh_buf_add(b, run, (size_t)(s - run));
        if (r == 0 && *s == '\'')
            r = ssh_buf_add(b, "'\\''", 4);
        else if (r == 0 && *s == '\n')
            r = ssh_buf_add(b, "'\"$_ea_nl\"'", 11);
        if (!*s)
            break;
        run = s + 1;
    }
    return r ? r : ssh_buf_add(b, "'", 1);
}

/* NAME=VALUE whose NAME sh can export (an identifier); the others go through env(1). */
static bool exportable(const char *kv)
{
    const char *eq = strchr(kv, '=');
    if (!eq || eq == kv || (kv[0] >= '0' && kv[0] <= '9'))
        return false;
    for (const char *c = kv; c < eq; c++)
        if (!(*c == '_' || (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
              (*c >= '0' && *c <= '9')))
            return false;
    return strncmp(kv, "_ea_", 4) != 0; /* the helper's own variables */
}

static int add_num(struct ssh_buf *b, unsigned long v)
{
    char num[32];
    int n = snprintf(num, sizeof(num), " %lu", v);
    return ssh_buf_add(b, num, (size_t)n);
}

int ssh_start_line(struct ssh_buf *b, unsigned slot, const char *cwd, bool strict,
                   const char *const *envp, const char *const *argv)
{
    int r = ssh_buf_add(b, "_ea_s", 5);
    if (r == 0)
        r = add_num(b, slot);
    if (r == 0)
        r = ssh_quote(b, cwd);
    if (r == 0)
        r = add_num(b, strict ? 1 : 0);
    for (int pass = 0; pass < 2 && r == 0; pass++) { /* exportable, then the rest */
        unsigned long n = 0;
        for (size_t i = 0; envp && envp[i]; i++)
            n += exportable(envp[i]) == (pass == 0) && strchr(envp[i], '=');
        r = add_num(b, n);
        for (size_t i = 0; envp && envp[i] && r == 0; i++)
            if (exportable(envp[i]) == (pass == 0) && strchr(envp[i], '='))
                r = ssh_quote(b, envp[i]);
    }
    for (size_t i = 0; argv[i] && r == 0; i++)
        r = ssh_quote(b, argv[i]);
    return r ? r : ssh_buf_add(b, "\n", 1);
}

int ssh_fence_line(char *buf, size_t size, int64_t valid_until_ms, int64_t now_ms,
                   int64_t grace_ms)
{
    /* rounded up: 0 tells the watchdog the deadline has passed, and it stops the workers at
     * once; 0.4 s left rounded to 0 fenced out a node whose lease was still valid (issue 27) */
    int64_t left = valid_until_ms > now_ms ? (valid_until_ms - now_ms + 999) / 1000 : 0;
    int64_t grace = grace_ms > 1000 ? (grace_ms + 999) / 1000 : 1;
    return snprintf(buf, size, "_ea_f %lld %lld\n", (long long)left, (long long)grace);
}
