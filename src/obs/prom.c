/*
 * prom.c: the Prometheus text exposition format (0.0.4), written correctly
 * once so every exporter (mesh proxy, agent, server) agrees: escaping,
 * cumulative histogram buckets with +Inf, _sum and _count, special values.
 * Pure: appends to a buffer; never does I/O.
 */
#include "iod/obs.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

static bool name_chars(const char *s, bool colon)
{
	if (!s || !*s)
		return false;
	for (const char *p = s; *p; p++) {
		char c = *p;
		bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
		             (colon && c == ':');
		if (!alpha && !(p != s && c >= '0' && c <= '9'))
			return false;
	}
	return true;
}

bool iod_prom_name_valid(const char *name)
{
	return name_chars(name, true);
}

bool iod_prom_label_name_valid(const char *name)
{
	return name_chars(name, false) && !iod_str_has_prefix(name, "__");
}

int iod_prom_header(struct iod_buf *b, const char *name, const char *type, const char *help)
{
	int rc;
	IOD_ASSERT(iod_prom_name_valid(name));
	if ((rc = iod_buf_printf(b, "# HELP %s ", name)))
		return rc;
	for (const char *p = help; *p; p++) {
		if (*p == '\\')
			rc = iod_buf_append(b, "\\\\", 2);
		else if (*p == '\n')
			rc = iod_buf_append(b, "\\n", 2);
		else
			rc = iod_buf_append(b, p, 1);
		if (rc)
			return rc;
	}
	return iod_buf_printf(b, "\n# TYPE %s %s\n", name, type);
}

int iod_prom_labels(char *buf, size_t len, ...)
{
	va_list ap;
	size_t o = 0;
	int rc = 0;

	if (!len)
		return -ENOSPC;
	buf[0] = 0;
	va_start(ap, len);
	for (;;) {
		const char *k = va_arg(ap, const char *);
		if (!k)
			break;
		const char *v = va_arg(ap, const char *);
		if (!iod_prom_label_name_valid(k)) {
			rc = -EINVAL;
			break;
		}
		int w = snprintf(buf + o, len - o, "%s%s=\"", o ? "," : "", k);
		if (w < 0 || (size_t)w >= len - o) {
			rc = -ENOSPC;
			break;
		}
		o += (size_t)w;
		for (const char *p = v ? v : ""; *p && !rc; p++) {
			const char *esc = *p == '\\'   ? "\\\\"
			                  : *p == '"'  ? "\\\""
			                  : *p == '\n' ? "\\n"
			                               : NULL;
			size_t n = esc ? 2 : 1;
			if (o + n + 1 >= len) {
				rc = -ENOSPC;
				break;
			}
			memcpy(buf + o, esc ? esc : p, n);
			o += n;
		}
		if (rc)
			break;
		if (o + 2 > len) {
			rc = -ENOSPC;
			break;
		}
		buf[o++] = '"';
		buf[o] = 0;
	}
	va_end(ap);
	if (rc)
		buf[0] = 0;
	return rc;
}

static int sample_name(struct iod_buf *b, const char *name, const char *labels)
{
	if (labels && *labels)
		return iod_buf_printf(b, "%s{%s} ", name, labels);
	return iod_buf_printf(b, "%s ", name);
}

int iod_prom_u64(struct iod_buf *b, const char *name, const char *labels, uint64_t v)
{
	int rc = sample_name(b, name, labels);
	return rc ? rc : iod_buf_printf(b, "%" PRIu64 "\n", v);
}

int iod_prom_f64(struct iod_buf *b, const char *name, const char *labels, double v)
{
	int rc = sample_name(b, name, labels);
	if (rc)
		return rc;
	if (isnan(v))
		return iod_buf_printf(b, "NaN\n");
	if (isinf(v))
		return iod_buf_printf(b, "%sInf\n", v > 0 ? "+" : "-");
	return iod_buf_printf(b, "%.15g\n", v);
}

int iod_prom_histogram(struct iod_buf *b, const char *name, const char *labels, const double *le,
                       const uint64_t *counts, uint32_t n, double sum)
{
	uint64_t cum = 0;
	int rc = 0;
	const char *sep = labels && *labels ? "," : "";

	for (uint32_t i = 0; i <= n && !rc; i++) {
		cum += counts[i];
		if (i < n) {
			IOD_ASSERT(i == 0 || le[i] > le[i - 1]);
			rc = iod_buf_printf(b, "%s_bucket{%s%sle=\"%g\"} %" PRIu64 "\n", name,
			                    labels ? labels : "", sep, le[i], cum);
		} else {
			rc = iod_buf_printf(b, "%s_bucket{%s%sle=\"+Inf\"} %" PRIu64 "\n", name,
			                    labels ? labels : "", sep, cum);
		}
	}
	if (rc)
		return rc;
	char nm[128];
	snprintf(nm, sizeof(nm), "%s_sum", name);
	if ((rc = iod_prom_f64(b, nm, labels, sum)))
		return rc;
	snprintf(nm, sizeof(nm), "%s_count", name);
	return iod_prom_u64(b, nm, labels, cum);
}
