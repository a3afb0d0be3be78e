/*
 * units.c: parsing and printing of the quantities users write in specs:
 * sizes, bandwidths, durations, percentages and bounds such as "<5us".
 *
 * Arithmetic is exact integer arithmetic on the written decimal digits, so
 * "1.5GB" is exactly 1500000000 bytes and "0.1ns" is an error (not a whole
 * nanosecond) rather than a silent rounding. Overflow, negative numbers and
 * missing numbers are errors. Decimal vs binary sizes: see base.h.
 */
#include "iod/base.h"

#include <string.h>
#include <strings.h>

struct unit {
	const char *name; /* as written */
	uint64_t mult;    /* base units per unit */
};

static const struct unit size_units[] = {
    {"B", 1},
    {"KB", 1000ull},
    {"MB", 1000000ull},
    {"GB", 1000000000ull},
    {"TB", 1000000000000ull},
    {"PB", 1000000000000000ull},
    {"K", 1000ull},
    {"M", 1000000ull},
    {"G", 1000000000ull},
    {"T", 1000000000000ull},
    {"KiB", 1ull << 10},
    {"MiB", 1ull << 20},
    {"GiB", 1ull << 30},
    {"TiB", 1ull << 40},
    {"PiB", 1ull << 50},
    {"Ki", 1ull << 10},
    {"Mi", 1ull << 20},
    {"Gi", 1ull << 30},
    {"Ti", 1ull << 40},
};

static const struct unit bw_units[] = {
    {"bps", 1},
    {"b/s", 1},
    {"Kbps", 1000ull},
    {"Kb/s", 1000ull},
    {"Mbps", 1000000ull},
    {"Mb/s", 1000000ull},
    {"Gbps", 1000000000ull},
    {"Gb/s", 1000000000ull},
    {"Tbps", 1000000000000ull},
    {"Tb/s", 1000000000000ull},
};

static const struct unit dur_units[] = {
    {"ns", 1},
    {"us", 1000ull},
    {"\xc2\xb5s", 1000ull},
    {"ms", 1000000ull},
    {"s", 1000000000ull},
    {"m", 60000000000ull},
    {"min", 60000000000ull},
    {"h", 3600000000000ull},
};

static const char *kind_name(enum iod_unit_kind k)
{
	switch (k) {
	case IOD_UNIT_SIZE: return "size";
	case IOD_UNIT_BANDWIDTH: return "bandwidth";
	case IOD_UNIT_DURATION: return "duration";
	}
	return "quantity";
}

static const char *kind_hint(enum iod_unit_kind k)
{
	switch (k) {
	case IOD_UNIT_SIZE: return "e.g. 64GB (decimal) or 64GiB (binary)";
	case IOD_UNIT_BANDWIDTH: return "e.g. 100Gbps";
	case IOD_UNIT_DURATION: return "e.g. 5us, 100ms, 2s";
	}
	return "";
}

/*
 * Parse "<int>[.<frac>]<spaces><unit>" into int and frac digits. Returns the
 * unit text in *unit. Errors carry the kind for the message.
 */
static int parse_quantity(const char *s, enum iod_unit_kind kind, const struct unit *units,
                          size_t n_units, bool case_fold, uint64_t *out, struct iod_err *e)
{
	const char *p = s;
	uint64_t ip = 0, frac = 0, frac_scale = 1;
	int digits = 0;

	while (*p == ' ' || *p == '\t')
		p++;
	if (*p == '-')
		return iod_err_set(e, -ERANGE, "%s \"%s\" is negative", kind_name(kind), s);
	if (*p == '+')
		p++;
	while (*p >= '0' && *p <= '9') {
		if (__builtin_mul_overflow(ip, 10, &ip) ||
		    __builtin_add_overflow(ip, (uint64_t)(*p - '0'), &ip))
			return iod_err_set(e, -ERANGE, "%s \"%s\" is too large", kind_name(kind),
			                   s);
		p++;
		digits++;
	}
	if (*p == '.') {
		p++;
		while (*p >= '0' && *p <= '9') {
			if (frac_scale < 1000000000000000000ull) {
				frac = frac * 10 + (uint64_t)(*p - '0');
				frac_scale *= 10;
			} else if (*p != '0') {
				return iod_err_set(e, -EINVAL, "%s \"%s\" has too many decimals",
				                   kind_name(kind), s);
			}
			p++;
			digits++;
		}
	}
	if (!digits)
		return iod_err_set(e, -EINVAL, "%s \"%s\" has no number (%s)", kind_name(kind), s,
		                   kind_hint(kind));
	while (*p == ' ')
		p++;
	const char *unit = p;
	size_t ulen = strlen(unit);
	while (ulen && unit[ulen - 1] == ' ')
		ulen--;
	const struct unit *u = NULL;
	for (size_t i = 0; i < n_units && !u; i++) {
		if (strlen(units[i].name) == ulen && !strncmp(units[i].name, unit, ulen))
			u = &units[i];
	}
	for (size_t i = 0; i < n_units && !u && case_fold; i++) {
		if (strlen(units[i].name) == ulen && !strncasecmp(units[i].name, unit, ulen))
			u = &units[i];
	}
	if (!u) {
		if (!ulen && kind == IOD_UNIT_SIZE)
			u = &units[0]; /* a bare number of bytes */
		else if (!ulen)
			return iod_err_set(e, -EINVAL, "%s \"%s\" has no unit (%s)",
			                   kind_name(kind), s, kind_hint(kind));
		else
			return iod_err_set(e, -EINVAL, "%s \"%s\": unknown unit \"%.*s\" (%s)",
			                   kind_name(kind), s, (int)ulen, unit, kind_hint(kind));
	}
	uint64_t whole, part;
	if (__builtin_mul_overflow(ip, u->mult, &whole))
		return iod_err_set(e, -ERANGE, "%s \"%s\" is too large", kind_name(kind), s);
	/* frac/frac_scale * mult must be whole. Compute with 128-bit. */
	unsigned __int128 fp = (unsigned __int128)frac * u->mult;
	if (fp % frac_scale)
		return iod_err_set(e, -EINVAL, "%s \"%s\" is not a whole number of %s",
		                   kind_name(kind), s, units[0].name);
	part = (uint64_t)(fp / frac_scale);
	if (__builtin_add_overflow(whole, part, out))
		return iod_err_set(e, -ERANGE, "%s \"%s\" is too large", kind_name(kind), s);
	return 0;
}

int iod_parse_size(const char *s, uint64_t *bytes, struct iod_err *e)
{
	return parse_quantity(s, IOD_UNIT_SIZE, size_units, IOD_ARRAY_LEN(size_units), true, bytes,
	                      e);
}

int iod_parse_bandwidth(const char *s, uint64_t *bps, struct iod_err *e)
{
	return parse_quantity(s, IOD_UNIT_BANDWIDTH, bw_units, IOD_ARRAY_LEN(bw_units), true, bps,
	                      e);
}

int iod_parse_duration(const char *s, uint64_t *ns, struct iod_err *e)
{
	/* Case matters: "m" is minutes, "M" is nothing. */
	return parse_quantity(s, IOD_UNIT_DURATION, dur_units, IOD_ARRAY_LEN(dur_units), false, ns,
	                      e);
}

int iod_parse_percent(const char *s, uint32_t *bp, struct iod_err *e)
{
	static const struct unit pct[] = {{"%", 100}};
	uint64_t v;
	size_t n = strlen(s);

	while (n && s[n - 1] == ' ')
		n--;
	if (!n || s[n - 1] != '%')
		return iod_err_set(e, -EINVAL, "percentage \"%s\" must end in %% (e.g. 20%%)", s);
	int rc = parse_quantity(s, IOD_UNIT_SIZE, pct, 1, false, &v, e);
	if (rc) {
		if (e)
			snprintf(e->msg, sizeof(e->msg),
			         "percentage \"%s\" is not a number of at most two decimals", s);
		return rc;
	}
	if (v > 10000)
		return iod_err_set(e, -ERANGE, "percentage \"%s\" is above 100%%", s);
	*bp = (uint32_t)v;
	return 0;
}

static const char *const cmp_names[] = {
#define X(n, s) s,
    IOD_CMP_OPS(X)
#undef X
};

const char *iod_cmp_name(enum iod_cmp op)
{
	return (unsigned)op < IOD_ARRAY_LEN(cmp_names) ? cmp_names[op] : "?";
}

int iod_parse_bound(const char *s, enum iod_unit_kind kind, struct iod_bound *b, struct iod_err *e)
{
	const char *p = s;

	while (*p == ' ')
		p++;
	b->op = IOD_CMP_EQ;
	if (p[0] == '<' && p[1] == '=') {
		b->op = IOD_CMP_LE;
		p += 2;
	} else if (p[0] == '>' && p[1] == '=') {
		b->op = IOD_CMP_GE;
		p += 2;
	} else if (p[0] == '<') {
		b->op = IOD_CMP_LT;
		p++;
	} else if (p[0] == '>') {
		b->op = IOD_CMP_GT;
		p++;
	} else if (p[0] == '=') {
		p++;
	}
	switch (kind) {
	case IOD_UNIT_SIZE: return iod_parse_size(p, &b->value, e);
	case IOD_UNIT_BANDWIDTH: return iod_parse_bandwidth(p, &b->value, e);
	case IOD_UNIT_DURATION: return iod_parse_duration(p, &b->value, e);
	}
	return iod_err_set(e, -EINVAL, "unknown quantity kind");
}

bool iod_bound_holds(const struct iod_bound *b, uint64_t v)
{
	switch (b->op) {
	case IOD_CMP_EQ: return v == b->value;
	case IOD_CMP_LT: return v < b->value;
	case IOD_CMP_LE: return v <= b->value;
	case IOD_CMP_GT: return v > b->value;
	case IOD_CMP_GE: return v >= b->value;
	}
	return false;
}

/* Print v in the largest unit it reaches, with up to two decimals, trimmed. */
static void format_units(uint64_t v, const struct unit *units, size_t n, char *buf, size_t len)
{
	const struct unit *best = &units[0];

	for (size_t i = 0; i < n; i++)
		if (units[i].mult <= v && units[i].mult > best->mult)
			best = &units[i];
	if (v % best->mult == 0) {
		snprintf(buf, len, "%llu %s", (unsigned long long)(v / best->mult), best->name);
		return;
	}
	char num[48];
	snprintf(num, sizeof(num), "%.2f", (double)v / (double)best->mult);
	size_t l = strlen(num);
	while (l && num[l - 1] == '0')
		num[--l] = 0;
	if (l && num[l - 1] == '.')
		num[--l] = 0;
	snprintf(buf, len, "%s %s", num, best->name);
}

void iod_format_size(uint64_t bytes, char *buf, size_t len)
{
	static const struct unit u[] = {{"B", 1},
	                                {"KB", 1000ull},
	                                {"MB", 1000000ull},
	                                {"GB", 1000000000ull},
	                                {"TB", 1000000000000ull}};
	format_units(bytes, u, IOD_ARRAY_LEN(u), buf, len);
}

void iod_format_bandwidth(uint64_t bps, char *buf, size_t len)
{
	static const struct unit u[] = {{"bps", 1},
	                                {"Kbps", 1000ull},
	                                {"Mbps", 1000000ull},
	                                {"Gbps", 1000000000ull},
	                                {"Tbps", 1000000000000ull}};
	format_units(bps, u, IOD_ARRAY_LEN(u), buf, len);
}

void iod_format_duration(uint64_t ns, char *buf, size_t len)
{
	static const struct unit u[] = {
	    {"ns", 1}, {"us", 1000ull}, {"ms", 1000000ull}, {"s", 1000000000ull}};
	format_units(ns, u, IOD_ARRAY_LEN(u), buf, len);
}
