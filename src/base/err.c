/*
 * err.c: the error convention. A fallible function returns a negative errno
 * and, when the caller passed a struct iod_err, fills in a message that says
 * what, where and what to do. Libraries never print; shells decide.
 */
#include "iod/base.h"

#include <stdlib.h>
#include <string.h>

int iod_err_set(struct iod_err *e, int code, const char *fmt, ...)
{
	char msg[IOD_ERR_MSG_MAX];
	va_list ap;

	if (!e)
		return code;
	/* formatted aside: callers pass e->msg as an argument ("x/%s: %s") */
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	e->code = code;
	memcpy(e->msg, msg, sizeof(e->msg));
	return code;
}

int iod_err_wrap(struct iod_err *e, const char *fmt, ...)
{
	char prefix[IOD_ERR_MSG_MAX], old[IOD_ERR_MSG_MAX];
	va_list ap;

	if (!e)
		return -EINVAL;
	va_start(ap, fmt);
	vsnprintf(prefix, sizeof(prefix), fmt, ap);
	va_end(ap);
	memcpy(old, e->msg, sizeof(old));
	snprintf(e->msg, sizeof(e->msg), "%s: %s", prefix, old);
	return e->code;
}

void iod_err_clear(struct iod_err *e)
{
	if (e) {
		e->code = 0;
		e->msg[0] = 0;
	}
}

void iod_assert_fail(const char *expr, const char *file, int line)
{
	fprintf(stderr, "iod: assertion failed: %s (%s:%d)\n", expr, file, line);
	abort();
}
