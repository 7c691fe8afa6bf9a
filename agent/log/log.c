// SPDX-License-Identifier: Apache-2.0
#include "log.h"
#include "ea_escape.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static enum log_level threshold = LOG_INFO;
static char tag[128] = "";
static bool json;
static char run_id[128] = "";
static int64_t cur_round, cur_generation;
static char progress[1024]; /* the updating line shown on a terminal, "" when none */

void log_init(const char *level, const char *t)
{
    static const char *const names[] = {"debug", "info", "warn", "error"};
    for (int i = 0; i < 4; i++)
        if (level && strcmp(level, names[i]) == 0)
            threshold = (enum log_level)i;
    ea_escape(tag, sizeof(tag), t ? t : "", 0);
}

void log_set_json(const char *id)
{
    json = true;
    snprintf(run_id, sizeof(run_id), "%s", id ? id : "");
}

void log_set_round(int64_t round, int64_t generation)
{
    cur_round = round;
    cur_generation = generation;
}

static const char *const level_names[] = {"DEBUG", "INFO", "WARN", "ERROR"};

/* "2024-05-01T12:00:00.123Z" */
static int timestamp(char *buf, size_t size)
{
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    return snprintf(buf, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
                    tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                    ts.tv_nsec / 1000000);
}

static void print_json(enum log_level level, const char *msg)
{
    static const char *const lower[] = {"debug", "info", "warn", "error"};
    char when[40], ascii[2048];
    timestamp(when, sizeof(when));
    /* jansson refuses a string that is not UTF-8: such a message is logged escaped, not lost */
    json_t *probe = json_string(msg);
    if (!probe) {
        ea_escape(ascii, sizeof(ascii), msg, EA_ESCAPE_ASCII);
        msg = ascii;
    }
    json_decref(probe);
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:I, s:I, s:s}", "time", when, "level",
                          lower[level], "run_id", run_id, "node", tag, "round",
                          (json_int_t)cur_round, "generation", (json_int_t)cur_generation, "msg",
                          msg);
    char *line = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (line)
        fprintf(stderr, "%s\n", line);
    free(line);
}

/* Format one text line (without newline) into `line`. */
static void format_text(char *line, size_t size, enum log_level level, const char *fmt,
                        va_list ap) __attribute__((format(printf, 4, 0)));
static void format_text(char *line, size_t size, enum log_level level, const char *fmt,
                        va_list ap)
{
    int n = timestamp(line, size);
    if (n > 0 && (size_t)n < size)
        n += snprintf(line + n, size - (size_t)n, " elastic-agent[%s] %s: ", tag,
                      level_names[level]);
    if (n > 0 && (size_t)n < size) {
        /* a value from a worker or the store (an error file's message, a node id) with a newline
         * or an escape sequence must not make a line of its own, nor rewrite the terminal */
        char raw[2048];
        vsnprintf(raw, sizeof(raw), fmt, ap);
        ea_escape(line + n, size - (size_t)n, raw, EA_ESCAPE_KEEP_TAB);
    }
}

static void vlog(enum log_level level, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
static void vlog(enum log_level level, const char *fmt, va_list ap)
{
    if (json) {
        char msg[2048];
        vsnprintf(msg, sizeof(msg), fmt, ap);
        print_json(level, msg);
        return;
    }
    char line[2048];
    format_text(line, sizeof(line), level, fmt, ap);
    if (progress[0]) /* the message goes above the updating line, which is drawn again */
        fprintf(stderr, "\r\033[K%s\n%s", line, progress);
    else
        fprintf(stderr, "%s\n", line); /* one write per line: concurrent agents never interleave */
}

void log_msg(enum log_level level, const char *fmt, ...)
{
    if (level < threshold)
        return;
    va_list ap;
    va_start(ap, fmt);
    vlog(level, fmt, ap);
    va_end(ap);
}

bool log_progress(const char *fmt, ...)
{
    if (LOG_INFO < threshold)
        return false;
    bool in_place = !json && isatty(STDERR_FILENO) == 1;
    va_list ap;
    va_start(ap, fmt);
    if (!in_place) {
        vlog(LOG_INFO, fmt, ap);
    } else {
        format_text(progress, sizeof(progress), LOG_INFO, fmt, ap);
        fprintf(stderr, "\r\033[K%s", progress);
    }
    va_end(ap);
    return in_place;
}

void log_progress_end(void)
{
    if (!progress[0])
        return;
    progress[0] = '\0';
    fputs("\r\033[K", stderr); /* it was transient: what follows says how the wait ended */
}
