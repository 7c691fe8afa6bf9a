/* The benchmarks' trivial worker, the same binary under both agents (elastic-agent and torchrun
 * --no_python). On start it records CLOCK_REALTIME in nanoseconds, atomically, as the file
 *   $BENCH_DIR/starts/<ns>.<pid>   containing "<ns> <RANK> <WORLD_SIZE> <BENCH_NODE> <pid>\n"
 * then sleeps until a signal: SIGUSR1 makes it exit 1 (an injected worker failure), SIGTERM or
 * SIGINT exit 143/130 (how a stopping agent ends it). Nothing else: no CPU, no memory to speak of.
 * Build: cc -O2 -o worker bench/lib/worker.c */
#define _POSIX_C_SOURCE 200809L
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static volatile sig_atomic_t code = -1;
static void on_sig(int s) { code = s == SIGUSR1 ? 1 : 128 + s; }

static const char *env(const char *k) {
    const char *v = getenv(k);
    return v && *v ? v : "-";
}

int main(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long ns = (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGUSR1);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGINT);
    sigprocmask(SIG_BLOCK, &block, &old); /* delivered only inside sigsuspend: no lost wake-up */
    struct sigaction sa = {0};
    sa.sa_handler = on_sig;
    sigaction(SIGUSR1, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGINT, &sa, NULL);
    const char *dir = getenv("BENCH_DIR");
    if (dir) {
        char tmp[4096], fin[4096];
        snprintf(tmp, sizeof tmp, "%s/starts/.%lld.%ld", dir, ns, (long)getpid());
        snprintf(fin, sizeof fin, "%s/starts/%lld.%ld", dir, ns, (long)getpid());
        FILE *f = fopen(tmp, "w");
        if (f) {
            fprintf(f, "%lld %s %s %s %ld\n", ns, env("RANK"), env("WORLD_SIZE"), env("BENCH_NODE"),
                    (long)getpid());
            if (fclose(f) == 0) rename(tmp, fin);
        }
    }
    while (code < 0) sigsuspend(&old);
    return code;
}
