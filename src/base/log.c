/*
 * log.c: levelled, component-tagged log lines to one stream, as text
 * ("2026-11-29T15:25:32.123Z info  sched: placed 10 replicas") or JSON lines
 * (--log-format json). Used by shells only; pure cores return events.
 * A line is written with one fwrite so concurrent threads do not interleave.
 */
#include "iod/base.h"

#include <string.h>
#include <time.h>

static enum iod_log_level log_level = IOD_LOG_INFO;
static enum iod_log_format log_format = IOD_LOG_TEXT;
static FILE *log_stream;

static const char *const level_names[] = {
#define X(n, s) s,
    IOD_LOG_LEVELS(X)
#undef X
};

void iod_log_set_level(enum iod_log_level level)
{
	log_level = level;
}
void iod_log_set_format(enum iod_log_format fmt)
{
	log_format = fmt;
}
void iod_log_set_stream(FILE *f)
{
	log_stream = f;
}
bool iod_log_enabled(enum iod_log_level level)
{
	return level >= log_level;
}

const char *iod_log_level_name(enum iod_log_level level)
{
	if ((unsigned)level >= IOD_ARRAY_LEN(level_names))
		return "?";
	return level_names[level];
}

int iod_log_level_parse(const char *s, enum iod_log_level *out)
{
	for (unsigned i = 0; i < IOD_ARRAY_LEN(level_names); i++) {
		if (strcmp(s, level_names[i]) == 0) {
			*out = (enum iod_log_level)i;
			return 0;
		}
	}
	return -EINVAL;
}

/* Escape s as the inside of a JSON string into out. */
static size_t json_escape(char *out, size_t cap, const char *s)
{
	size_t n = 0;

	for (; *s && n + 7 < cap; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\') {
			out[n++] = '\\';
			out[n++] = (char)c;
		} else if (c < 0x20) {
			n += (size_t)snprintf(out + n, cap - n, "\\u%04x", c);
		} else {
			out[n++] = (char)c;
		}
	}
	out[n] = 0;
	return n;
}

void iod_log(enum iod_log_level level, const char *component, const char *fmt, ...)
{
	char msg[IOD_LOG_LINE_MAX], line[IOD_LOG_LINE_MAX * 2], ts[40];
	struct timespec now;
	struct tm tm;
	va_list ap;
	int n;

	if (!iod_log_enabled(level))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	clock_gettime(CLOCK_REALTIME, &now);
	gmtime_r(&now.tv_sec, &tm);
	n = (int)strftime(ts, sizeof(ts), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(ts + n, sizeof(ts) - (size_t)n, ".%03ldZ", now.tv_nsec / 1000000);
	if (log_format == IOD_LOG_JSON) {
		char esc[IOD_LOG_LINE_MAX * 2 - 128];
		json_escape(esc, sizeof(esc), msg);
		n = snprintf(line, sizeof(line),
		             "{\"ts\":\"%s\",\"level\":\"%s\",\"component\":\"%s\","
		             "\"msg\":\"%s\"}\n",
		             ts, iod_log_level_name(level), component, esc);
	} else {
		n = snprintf(line, sizeof(line), "%s %-5s %s: %s\n", ts, iod_log_level_name(level),
		             component, msg);
	}
	if (n >= (int)sizeof(line)) {
		n = (int)sizeof(line) - 1;
		line[n - 1] = '\n';
	}
	fwrite(line, 1, (size_t)n, log_stream ? log_stream : stderr);
}
