/*
 * load.c: the spec schema: walks the YAML tree (yaml.c) into struct
 * iod_spec, checking every key, type, unit and cross-reference.
 *
 * The walker never stops at the first problem: each error is recorded with
 * its position (spec_err) and the walk goes on with the next key, so one
 * run reports everything wrong with a file, up to IOD_SPEC_ERRORS_MAX.
 * Defaults are applied here, in one place (see docs/spec.md). This file
 * must never print, exit, or accept a value it did not check: a spec is
 * either fully valid or rejected.
 */
#include "internal.h"

#include "iod/objects.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ---- diagnostics --------------------------------------------------------- */

/*
 * Messages quote user text cut to a width ("%.60s") and may be cut at the
 * end, which can split a UTF-8 sequence; consumers put messages into JSON,
 * which must be valid UTF-8. Replace the bytes of any broken sequence by '?'.
 */
static void utf8_repair(char *s)
{
	unsigned char *p = (unsigned char *)s;

	while (*p) {
		size_t n = *p < 0x80             ? 1
		           : (*p & 0xe0) == 0xc0 ? 2
		           : (*p & 0xf0) == 0xe0 ? 3
		           : (*p & 0xf8) == 0xf0 ? 4
		                                 : 0;
		size_t i = 1;
		while (n > 1 && i < n && (p[i] & 0xc0) == 0x80)
			i++;
		if (n == 0 || i < n) {
			*p++ = '?';
			continue;
		}
		p += n;
	}
}

static void diag_v(struct spec_ld *ld, uint32_t line, uint32_t col, const char *prefix,
                   const char *fmt, va_list ap)
{
	struct iod_spec_diags *d = ld->diags;

	d->total++;
	if (d->n >= IOD_SPEC_ERRORS_MAX)
		return;
	struct iod_spec_diag *x = &d->d[d->n++];
	x->line = line;
	x->col = col;
	size_t plen = strlen(prefix);
	if (plen >= sizeof(x->msg))
		plen = sizeof(x->msg) - 1;
	memcpy(x->msg, prefix, plen);
	vsnprintf(x->msg + plen, sizeof(x->msg) - plen, fmt, ap);
	utf8_repair(x->msg);
}

void spec_diag(struct spec_ld *ld, uint32_t line, uint32_t col, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	diag_v(ld, line, col, "", fmt, ap);
	va_end(ap);
}

void spec_err(struct spec_ld *ld, const struct iod_yaml_node *n, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	diag_v(ld, n ? n->line : 0, n ? n->col : 0, ld->obj, fmt, ap);
	va_end(ap);
}

/* ---- scalar helpers ------------------------------------------------------ */

static bool is_null(const struct iod_yaml_node *n)
{
	if (n->kind != IOD_YAML_SCALAR || !n->plain)
		return false;
	return n->len == 0 || !strcmp(n->str, "~") || !strcmp(n->str, "null") ||
	       !strcmp(n->str, "Null") || !strcmp(n->str, "NULL");
}

/* What a node is, for "must be X, not Y" messages. */
static const char *describe(const struct iod_yaml_node *n, char *buf, size_t len)
{
	if (n->kind == IOD_YAML_MAP)
		return "a mapping";
	if (n->kind == IOD_YAML_SEQ)
		return "a list";
	if (is_null(n))
		return "empty";
	snprintf(buf, len, "%s%.60s%s%s", n->plain ? "" : "\"", n->str, n->len > 60 ? "..." : "",
	         n->plain ? "" : "\"");
	return buf;
}

static bool want_scalar(struct spec_ld *ld, const struct iod_yaml_node *n, const char *what,
                        const char *kind)
{
	char b[80];
	if (n->kind != IOD_YAML_SCALAR) {
		spec_err(ld, n, "%s must be %s, not %s", what, kind, describe(n, b, sizeof(b)));
		return false;
	}
	if (is_null(n)) {
		spec_err(ld, n, "%s has no value; write %s", what, kind);
		return false;
	}
	return true;
}

/* Any non-empty scalar, copied into the spec's arena. */
static bool get_str(struct spec_ld *ld, const struct iod_yaml_node *n, const char *what,
                    const char **out)
{
	if (!want_scalar(ld, n, what, "a string"))
		return false;
	if (n->len > IOD_SPEC_STRING_MAX) {
		spec_err(ld, n, "%s is %zu bytes long; the most is %d (IOD_SPEC_STRING_MAX)", what,
		         n->len, IOD_SPEC_STRING_MAX);
		return false;
	}
	*out = iod_arena_strdup(&ld->spec->arena, n->str);
	if (!*out) {
		spec_err(ld, n, "out of memory");
		return false;
	}
	return true;
}

static bool is_digits(const char *s)
{
	if (!*s)
		return false;
	for (; *s; s++)
		if (!isdigit((unsigned char)*s))
			return false;
	return true;
}

/* Looks like a YAML number (int or float), possibly signed. */
static bool looks_numeric(const char *s)
{
	char *end;
	if (!*s)
		return false;
	(void)strtod(s, &end);
	return *end == 0 &&
	       (isdigit((unsigned char)s[0]) || s[0] == '-' || s[0] == '+' || s[0] == '.');
}

/* A whole number in [0, max]; `limit` names the bound for the message. */
static bool get_uint(struct spec_ld *ld, const struct iod_yaml_node *n, const char *what,
                     uint64_t max, const char *limit, uint64_t *out)
{
	const char *s;
	uint64_t v = 0;

	if (!want_scalar(ld, n, what, "a whole number"))
		return false;
	s = n->str;
	if (!n->plain) {
		spec_err(ld, n,
		         "%s must be a number, not the quoted string \"%s\"; remove the quotes",
		         what, s);
		return false;
	}
	if (s[0] == '-' && looks_numeric(s)) {
		spec_err(ld, n, "%s must not be negative (got %s)", what, s);
		return false;
	}
	if (s[0] == '+')
		s++;
	if (!is_digits(s)) {
		if (looks_numeric(n->str))
			spec_err(ld, n, "%s must be a whole number (got %s)", what, n->str);
		else
			spec_err(ld, n, "%s must be a whole number, not \"%s\"", what, n->str);
		return false;
	}
	for (; *s; s++) {
		if (__builtin_mul_overflow(v, 10, &v) ||
		    __builtin_add_overflow(v, (uint64_t)(*s - '0'), &v)) {
			v = UINT64_MAX;
			break;
		}
	}
	if (v > max) {
		spec_err(ld, n, "%s is %s; the most is %llu (%s)", what, n->str,
		         (unsigned long long)max, limit);
		return false;
	}
	*out = v;
	return true;
}

static bool get_u32(struct spec_ld *ld, const struct iod_yaml_node *n, const char *what,
                    uint32_t max, const char *limit, uint32_t *out)
{
	uint64_t v;
	if (!get_uint(ld, n, what, max, limit, &v))
		return false;
	*out = (uint32_t)v;
	return true;
}

static bool get_bool(struct spec_ld *ld, const struct iod_yaml_node *n, const char *what, bool *out)
{
	static const char *const t[] = {"true", "True", "TRUE"};
	static const char *const f[] = {"false", "False", "FALSE"};

	if (!want_scalar(ld, n, what, "true or false"))
		return false;
	for (size_t i = 0; n->plain && i < 3; i++) {
		if (!strcmp(n->str, t[i])) {
			*out = true;
			return true;
		}
		if (!strcmp(n->str, f[i])) {
			*out = false;
			return true;
		}
	}
	spec_err(ld, n, "%s must be true or false, not %s%s%s", what, n->plain ? "" : "\"", n->str,
	         n->plain ? "" : "\"");
	return false;
}

/* One of names[]; *out is its index. Suggests the closest name. */
static bool get_enum(struct spec_ld *ld, const struct iod_yaml_node *n, const char *what,
                     const char *const *names, size_t nn, int *out)
{
	char list[256] = "";
	size_t off = 0;

	if (!want_scalar(ld, n, what, "a name"))
		return false;
	for (size_t i = 0; i < nn; i++) {
		if (!strcmp(n->str, names[i])) {
			*out = (int)i;
			return true;
		}
	}
	for (size_t i = 0; i < nn && off < sizeof(list); i++)
		off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%s",
		                        i == 0 ? "" : (i + 1 == nn ? " or " : ", "), names[i]);
	const char *s = iod_suggest(n->str, names, nn);
	if (s)
		spec_err(ld, n, "%s \"%s\" is not valid; did you mean \"%s\"? (one of %s)", what,
		         n->str, s, list);
	else
		spec_err(ld, n, "%s \"%s\" is not valid; use %s", what, n->str, list);
	return false;
}

typedef int (*unit_parse_fn)(const char *, uint64_t *, struct iod_err *);

static bool get_unit(struct spec_ld *ld, const struct iod_yaml_node *n, const char *what,
                     unit_parse_fn fn, const char *kind, uint64_t *out)
{
	struct iod_err e = {0};
	if (!want_scalar(ld, n, what, kind))
		return false;
	uint64_t v;
	if (fn(n->str, &v, &e)) {
		spec_err(ld, n, "%s: %s", what, e.msg);
		return false;
	}
	if (v > (uint64_t)INT64_MAX) {
		spec_err(ld, n, "%s %s is too large (the most is 2^63-1 base units)", what, n->str);
		return false;
	}
	*out = v;
	return true;
}

/*
 * A quantity written with units (mem: 32GB) or, as `iod validate -o json`
 * prints it, in base units under the suffixed key (mem_bytes: 32000000000).
 * Writing both is an error. False when neither is written or on error.
 */
static bool get_qty(struct spec_ld *ld, const struct iod_yaml_node *human,
                    const struct iod_yaml_node *base, const char *what, const char *base_what,
                    unit_parse_fn fn, const char *kind, uint64_t *out)
{
	if (human && base) {
		spec_err(ld, base, "%s and %s say the same thing; write one of them", what,
		         base_what);
		return false;
	}
	if (human)
		return get_unit(ld, human, what, fn, kind, out);
	if (base)
		return get_uint(ld, base, base_what, (uint64_t)INT64_MAX, "2^63-1", out);
	return false;
}

static bool get_bound(struct spec_ld *ld, const struct iod_yaml_node *n, const char *what,
                      enum iod_unit_kind kind, const char *example, struct iod_bound *b)
{
	struct iod_err e = {0};
	if (!want_scalar(ld, n, what, example))
		return false;
	struct iod_bound v;
	if (iod_parse_bound(n->str, kind, &v, &e)) {
		spec_err(ld, n, "%s: %s", what, e.msg);
		return false;
	}
	*b = v;
	return true;
}

/* ---- mappings ------------------------------------------------------------ */

/*
 * Match the keys of mapping m against keys[]: vals[i] receives the value of
 * keys[i] (NULL when absent), knodes[i] its key node. Unknown keys and
 * duplicates are reported; the walk goes on. False if m is not a mapping.
 */
static bool get_map(struct spec_ld *ld, const struct iod_yaml_node *m, const char *what,
                    const char *const *keys, size_t nk, const struct iod_yaml_node **vals,
                    const struct iod_yaml_node **knodes)
{
	char b[80];

	for (size_t i = 0; i < nk; i++) {
		vals[i] = NULL;
		if (knodes)
			knodes[i] = NULL;
	}
	if (m->kind != IOD_YAML_MAP) {
		if (is_null(m))
			spec_err(ld, m, "%s has no value; write a mapping (key: value)", what);
		else
			spec_err(ld, m, "%s must be a mapping (key: value), not %s", what,
			         describe(m, b, sizeof(b)));
		return false;
	}
	for (const struct iod_yaml_node *k = m->first; k && k->next; k = k->next->next) {
		const struct iod_yaml_node *v = k->next;
		size_t i;
		if (k->kind != IOD_YAML_SCALAR || is_null(k)) {
			spec_err(ld, k, "keys in %s must be plain names", what);
			continue;
		}
		for (i = 0; i < nk; i++)
			if (!strcmp(k->str, keys[i]))
				break;
		if (i == nk) {
			const char *s = iod_suggest(k->str, keys, nk);
			if (s && !what[0]) {
				spec_err(ld, k, "unknown key \"%.80s\"; did you mean \"%s\"?",
				         k->str, s);
			} else if (s) {
				spec_err(ld, k, "unknown key \"%.80s\" in %s; did you mean \"%s\"?",
				         k->str, what, s);
			} else {
				char list[320] = "";
				size_t off = 0;
				for (size_t j = 0; j < nk && off < sizeof(list); j++)
					off += (size_t)snprintf(list + off, sizeof(list) - off,
					                        "%s%s", j ? ", " : "", keys[j]);
				spec_err(ld, k, "unknown key \"%.80s\"%s%s (valid keys: %s)",
				         k->str, what[0] ? " in " : "", what, list);
			}
			continue;
		}
		if (vals[i]) {
			spec_err(ld, k, "duplicate key \"%s\"%s%s (first written at line %u)",
			         k->str, what[0] ? " in " : "", what, (unsigned)vals[i]->line);
			continue;
		}
		vals[i] = v;
		if (knodes)
			knodes[i] = k;
	}
	return true;
}

static bool want_seq(struct spec_ld *ld, const struct iod_yaml_node *n, const char *what,
                     const char *example, uint32_t max, const char *limit)
{
	char b[80];
	if (n->kind != IOD_YAML_SEQ) {
		if (is_null(n))
			spec_err(ld, n, "%s has no value; write a list, e.g. %s", what, example);
		else
			spec_err(ld, n, "%s must be a list, e.g. %s, not %s", what, example,
			         describe(n, b, sizeof(b)));
		return false;
	}
	if (n->n > max) {
		spec_err(ld, n, "%s has %u entries; the most is %u (%s)", what, (unsigned)n->n,
		         (unsigned)max, limit);
		return false;
	}
	return true;
}

/* A DNS label (RFC 1123): lowercase letters, digits, '-', not at the ends. */
static bool valid_name(const char *s, size_t max)
{
	size_t n = strlen(s);
	if (n == 0 || n > max || s[0] == '-' || s[n - 1] == '-')
		return false;
	for (; *s; s++)
		if (!islower((unsigned char)*s) && !isdigit((unsigned char)*s) && *s != '-')
			return false;
	return true;
}

static bool get_name(struct spec_ld *ld, const struct iod_yaml_node *n, const char *what,
                     const char **out)
{
	const char *name;

	if (!get_str(ld, n, what, &name))
		return false;
	if (!valid_name(name, IOD_SPEC_NAME_LEN_MAX)) {
		spec_err(ld, n,
		         "%s \"%.80s\" is not a valid name: use 1 to %d lowercase letters, digits "
		         "and '-', starting and ending with a letter or digit (e.g. worker-node)",
		         what, name, IOD_SPEC_NAME_LEN_MAX);
		return false;
	}
	*out = name; /* only a valid name is ever stored */
	return true;
}

/* ---- enums and their names ---------------------------------------------- */

static const char *const compute_names[] = {
#define X(n, s) s,
    IOD_COMPUTE_TYPES(X)
#undef X
};

const char *iod_compute_type_name(enum iod_compute_type t)
{
	return (unsigned)t < IOD_ARRAY_LEN(compute_names) ? compute_names[t] : "?";
}

int iod_compute_type_parse(const char *s, enum iod_compute_type *out)
{
	/* "none" is the absent value, not something a user asks for */
	for (size_t i = 1; i < IOD_ARRAY_LEN(compute_names); i++) {
		if (!strcmp(s, compute_names[i])) {
			*out = (enum iod_compute_type)i;
			return 0;
		}
	}
	return -EINVAL;
}

/* ---- resources ----------------------------------------------------------- */

enum { COMPUTE_TYPE, COMPUTE_COUNT, COMPUTE_MEMORY, COMPUTE_MEMORY_BYTES };
static const char *const compute_keys[] = {"type", "count", "memory", "memory_bytes"};

static void load_compute(struct spec_ld *ld, const struct iod_yaml_node *m, const char *what,
                         struct iod_spec_compute *c)
{
	const struct iod_yaml_node *v[IOD_ARRAY_LEN(compute_keys)];
	char p[64];
	int t;

	if (!get_map(ld, m, what, compute_keys, IOD_ARRAY_LEN(compute_keys), v, NULL))
		return;
	c->count = 1;
	if (!v[COMPUTE_TYPE]) {
		spec_err(ld, m, "%s needs a type (one of tensor-core, cuda-core, fpga, dpu, cpu)",
		         what);
	} else {
		snprintf(p, sizeof(p), "%s.type", what);
		if (get_enum(ld, v[COMPUTE_TYPE], p, compute_names + 1,
		             IOD_ARRAY_LEN(compute_names) - 1, &t))
			c->type = (enum iod_compute_type)(t + 1);
	}
	if (v[COMPUTE_COUNT]) {
		snprintf(p, sizeof(p), "%s.count", what);
		get_u32(ld, v[COMPUTE_COUNT], p, IOD_SPEC_UNITS_MAX, "IOD_SPEC_UNITS_MAX",
		        &c->count);
	}
	snprintf(p, sizeof(p), "%s.memory", what);
	get_qty(ld, v[COMPUTE_MEMORY], v[COMPUTE_MEMORY_BYTES], p, "memory_bytes", iod_parse_size,
	        "a size like 64GB", &c->mem_bytes);
}

enum { NET_BANDWIDTH, NET_LATENCY, NET_BANDWIDTH_BPS };
static const char *const network_keys[] = {"bandwidth", "latency", "bandwidth_bps"};

static void load_network(struct spec_ld *ld, const struct iod_yaml_node *m, const char *what,
                         struct iod_spec_network *nw)
{
	const struct iod_yaml_node *v[IOD_ARRAY_LEN(network_keys)];
	char p[64];

	if (!get_map(ld, m, what, network_keys, IOD_ARRAY_LEN(network_keys), v, NULL))
		return;
	if (v[NET_BANDWIDTH] && v[NET_BANDWIDTH_BPS]) {
		spec_err(ld, v[NET_BANDWIDTH_BPS],
		         "%s.bandwidth and bandwidth_bps say the same thing; write one of them",
		         what);
	} else if (v[NET_BANDWIDTH_BPS]) {
		snprintf(p, sizeof(p), "%s.bandwidth_bps", what);
		get_uint(ld, v[NET_BANDWIDTH_BPS], p, (uint64_t)INT64_MAX, "2^63-1",
		         &nw->bandwidth_bps);
	} else if (v[NET_BANDWIDTH]) {
		struct iod_bound b;
		snprintf(p, sizeof(p), "%s.bandwidth", what);
		if (get_bound(ld, v[NET_BANDWIDTH], p, IOD_UNIT_BANDWIDTH,
		              "a bandwidth like 100Gbps", &b)) {
			if (b.op == IOD_CMP_LT || b.op == IOD_CMP_LE)
				spec_err(ld, v[NET_BANDWIDTH],
				         "%s is a minimum; write %s without '<' (or with '>=')", p,
				         v[NET_BANDWIDTH]->str);
			else
				nw->bandwidth_bps = b.value;
		}
	}
	if (v[NET_LATENCY]) {
		struct iod_bound b;
		snprintf(p, sizeof(p), "%s.latency", what);
		if (get_bound(ld, v[NET_LATENCY], p, IOD_UNIT_DURATION, "a bound like <5us", &b)) {
			if (b.op == IOD_CMP_GT || b.op == IOD_CMP_GE) {
				spec_err(ld, v[NET_LATENCY],
				         "%s is a maximum; write <%s or <=%s, not '>'", p,
				         v[NET_LATENCY]->str + strspn(v[NET_LATENCY]->str, " >="),
				         v[NET_LATENCY]->str + strspn(v[NET_LATENCY]->str, " >="));
			} else {
				/* a latency without an operator is a maximum: "5us" = "<=5us" */
				if (b.op == IOD_CMP_EQ)
					b.op = IOD_CMP_LE;
				nw->latency_ns = b;
				nw->has_latency = true;
			}
		}
	}
}

/* cpu: 2, 0.5 or "500m": thousandths of a core. */
static bool get_cpu(struct spec_ld *ld, const struct iod_yaml_node *n, const char *what,
                    uint32_t *millis)
{
	const char *s;
	uint64_t whole = 0, frac = 0;
	int fdigits = 0;
	bool m_suffix;
	size_t len;

	if (!want_scalar(ld, n, what, "a number of cores (2, 0.5 or \"500m\")"))
		return false;
	s = n->str;
	len = n->len;
	if (s[0] == '-' && (looks_numeric(s) || (len > 1 && s[len - 1] == 'm'))) {
		spec_err(ld, n, "%s must not be negative (got %s)", what, s);
		return false;
	}
	m_suffix = len > 1 && s[len - 1] == 'm';
	const char *p = s + (s[0] == '+');
	const char *start = p;
	while (isdigit((unsigned char)*p)) {
		if (whole <= UINT32_MAX)
			whole = whole * 10 + (uint64_t)(*p - '0');
		p++;
	}
	if (!m_suffix && *p == '.' && p > start) {
		p++;
		while (isdigit((unsigned char)*p) && fdigits < 4) {
			frac = frac * 10 + (uint64_t)(*p++ - '0');
			fdigits++;
		}
	}
	if (p == start || (m_suffix ? (size_t)(p - s) != len - 1 : *p != 0) ||
	    (fdigits == 0 && p > start && p[-1] == '.')) {
		spec_err(ld, n,
		         "%s must be a number of cores like 2 or 0.5, or millicores like \"500m\", "
		         "not \"%s\"",
		         what, s);
		return false;
	}
	if (fdigits > 3) {
		spec_err(ld, n, "%s %s is finer than a thousandth of a core", what, s);
		return false;
	}
	while (fdigits < 3) {
		frac *= 10;
		fdigits++;
	}
	uint64_t v = m_suffix ? whole : whole * 1000 + frac;
	if (whole > UINT32_MAX || v > (uint64_t)IOD_SPEC_UNITS_MAX * 1000) {
		spec_err(ld, n, "%s is %s; the most is %d cores (IOD_SPEC_UNITS_MAX)", what, s,
		         IOD_SPEC_UNITS_MAX);
		return false;
	}
	*millis = (uint32_t)v;
	return true;
}

enum {
	RES_GPU,
	RES_CPU,
	RES_MEM,
	RES_GPU_MEM,
	RES_COMPUTE,
	RES_NETWORK,
	RES_CPU_MILLIS,
	RES_MEM_BYTES,
	RES_GPU_MEM_BYTES,
	RES_NKEYS
};
static const char *const res_keys[RES_NKEYS] = {"gpu",        "cpu",       "mem",
                                                "gpu_mem",    "compute",   "network",
                                                "cpu_millis", "mem_bytes", "gpu_mem_bytes"};
/* The top-level resources: block is the seed's unified request only. */
static const char *const top_res_keys[] = {"compute", "network"};

/*
 * Fill r from a resources mapping. The unified form compute: {type:
 * tensor-core|cuda-core, count, memory} also sets gpu and gpu_mem, and
 * type: cpu sets cpu; writing both forms with different values is an error.
 */
static void load_resources(struct spec_ld *ld, const struct iod_yaml_node *m, bool top,
                           struct iod_spec_resources *r, bool *cpu_set, bool *net_set)
{
	const struct iod_yaml_node *v[IOD_ARRAY_LEN(res_keys)];
	const struct iod_yaml_node *tv[IOD_ARRAY_LEN(top_res_keys)];

	if (top) {
		if (!get_map(ld, m, "resources", top_res_keys, IOD_ARRAY_LEN(top_res_keys), tv,
		             NULL))
			return;
		for (size_t i = 0; i < IOD_ARRAY_LEN(v); i++)
			v[i] = NULL;
		v[RES_COMPUTE] = tv[0];
		v[RES_NETWORK] = tv[1];
		if (!tv[0] && !tv[1])
			spec_err(ld, m, "resources is empty; write compute: and/or network:");
	} else if (!get_map(ld, m, "resources", res_keys, IOD_ARRAY_LEN(res_keys), v, NULL)) {
		return;
	}
	if (v[RES_GPU])
		get_u32(ld, v[RES_GPU], "resources.gpu", IOD_SPEC_UNITS_MAX, "IOD_SPEC_UNITS_MAX",
		        &r->gpu);
	if (v[RES_CPU] && v[RES_CPU_MILLIS])
		spec_err(ld, v[RES_CPU_MILLIS],
		         "resources.cpu and cpu_millis say the same thing; write one of them");
	else if (v[RES_CPU] && get_cpu(ld, v[RES_CPU], "resources.cpu", &r->cpu_millis))
		*cpu_set = true;
	else if (v[RES_CPU_MILLIS] &&
	         get_u32(ld, v[RES_CPU_MILLIS], "resources.cpu_millis", IOD_SPEC_UNITS_MAX * 1000,
	                 "IOD_SPEC_UNITS_MAX cores", &r->cpu_millis))
		*cpu_set = true;
	get_qty(ld, v[RES_MEM], v[RES_MEM_BYTES], "resources.mem", "resources.mem_bytes",
	        iod_parse_size, "a size like 32GB", &r->mem_bytes);
	get_qty(ld, v[RES_GPU_MEM], v[RES_GPU_MEM_BYTES], "resources.gpu_mem",
	        "resources.gpu_mem_bytes", iod_parse_size, "a size like 80GB", &r->gpu_mem_bytes);
	if (v[RES_NETWORK]) {
		load_network(ld, v[RES_NETWORK], "resources.network", &r->network);
		*net_set = true;
	}
	if (!v[RES_COMPUTE])
		return;
	load_compute(ld, v[RES_COMPUTE], "resources.compute", &r->compute);
	const struct iod_spec_compute *c = &r->compute;
	if (c->type == IOD_COMPUTE_TENSOR_CORE || c->type == IOD_COMPUTE_CUDA_CORE) {
		if (v[RES_GPU] && r->gpu != c->count)
			spec_err(ld, v[RES_GPU],
			         "resources.gpu (%u) and resources.compute.count (%u) disagree; "
			         "write one of them",
			         (unsigned)r->gpu, (unsigned)c->count);
		r->gpu = c->count;
		if (c->mem_bytes) {
			const struct iod_yaml_node *gm =
			    v[RES_GPU_MEM] ? v[RES_GPU_MEM] : v[RES_GPU_MEM_BYTES];
			if (gm && r->gpu_mem_bytes != c->mem_bytes)
				spec_err(ld, gm,
				         "resources.gpu_mem and resources.compute.memory disagree; "
				         "write one of them");
			r->gpu_mem_bytes = c->mem_bytes;
		}
	} else if (c->type == IOD_COMPUTE_CPU) {
		if ((v[RES_CPU] || v[RES_CPU_MILLIS]) && r->cpu_millis != c->count * 1000u)
			spec_err(ld, v[RES_CPU] ? v[RES_CPU] : v[RES_CPU_MILLIS],
			         "resources.cpu and resources.compute.count (%u cores) disagree; "
			         "write one of them",
			         (unsigned)c->count);
		r->cpu_millis = c->count * 1000u;
		*cpu_set = true;
	}
}

/* ---- services ------------------------------------------------------------ */

/* Positions of a service's parts, needed after all services are loaded. */
struct svc_aux {
	const struct iod_yaml_node *node;                    /* the service mapping */
	const struct iod_yaml_node *name;                    /* its name value */
	const struct iod_yaml_node *deps[IOD_SPEC_LIST_MAX]; /* depends_on entries */
	uint32_t deps_n;                                     /* entries in deps */
	uint8_t color;                                       /* DFS: 0 new, 1 open, 2 done */
};

enum { PL_STRATEGY, PL_ANTI, PL_GPU_LINK, PL_NUMA };
static const char *const placement_keys[] = {"strategy", "anti_affinity", "gpu_link", "numa"};
static const char *const strategy_names[] = {"default", "spread", "pack"};
static const char *const anti_names[] = {"none", "node", "rack", "zone"};
static const char *const gpu_link_names[] = {"any", "nvlink", "pcie"};
/* Kubernetes' names are accepted too: best-effort = any, single-numa-node = single */
static const char *const numa_names[] = {"any",        "single",      "none",
                                         "restricted", "best-effort", "single-numa-node"};

static void load_placement(struct spec_ld *ld, const struct iod_yaml_node *m,
                           struct iod_spec_placement *pl)
{
	const struct iod_yaml_node *v[IOD_ARRAY_LEN(placement_keys)];
	int x;

	if (!get_map(ld, m, "placement", placement_keys, IOD_ARRAY_LEN(placement_keys), v, NULL))
		return;
	/* "default" (the scheduler chooses) is what -o json prints when unset */
	if (v[PL_STRATEGY] && get_enum(ld, v[PL_STRATEGY], "placement.strategy", strategy_names,
	                               IOD_ARRAY_LEN(strategy_names), &x))
		pl->spread = (enum iod_spread)x;
	if (v[PL_ANTI] && get_enum(ld, v[PL_ANTI], "placement.anti_affinity", anti_names,
	                           IOD_ARRAY_LEN(anti_names), &x))
		pl->anti = (enum iod_anti_affinity)x;
	if (v[PL_GPU_LINK] && get_enum(ld, v[PL_GPU_LINK], "placement.gpu_link", gpu_link_names,
	                               IOD_ARRAY_LEN(gpu_link_names), &x))
		pl->gpu_link = (enum iod_gpu_link)x;
	if (v[PL_NUMA] &&
	    get_enum(ld, v[PL_NUMA], "placement.numa", numa_names, IOD_ARRAY_LEN(numa_names), &x))
		pl->numa = x == 4   ? IOD_NUMA_ANY
		           : x == 5 ? IOD_NUMA_SINGLE
		                    : (enum iod_numa_policy)x;
}

static bool get_port(struct spec_ld *ld, const struct iod_yaml_node *n, const char *what,
                     uint16_t *port)
{
	uint64_t v;
	if (!get_uint(ld, n, what, 65535, "the largest TCP/UDP port", &v))
		return false;
	if (v == 0) {
		spec_err(ld, n, "%s must be between 1 and 65535, not 0", what);
		return false;
	}
	*port = (uint16_t)v;
	return true;
}

enum {
	HC_EXEC,
	HC_TCP,
	HC_HTTP,
	HC_INTERVAL,
	HC_TIMEOUT,
	HC_HEALTHY,
	HC_UNHEALTHY,
	HC_INTERVAL_NS,
	HC_TIMEOUT_NS,
	HC_KIND,
	HC_PORT,
	HC_PATH,
	HC_NKEYS
};
static const char *const health_keys[HC_NKEYS] = {"exec",
                                                  "tcp",
                                                  "http",
                                                  "interval",
                                                  "timeout",
                                                  "healthy_threshold",
                                                  "unhealthy_threshold",
                                                  "interval_ns",
                                                  "timeout_ns",
                                                  "kind",
                                                  "port",
                                                  "path"};
static const char *const health_kind_names[] = {"exec", "tcp", "http"};
static const char *const probe_keys[] = {"port", "path"};

/* An HTTP check path as the agent holds it. */
static void check_path_len(struct spec_ld *ld, const struct iod_yaml_node *n, const char *what,
                           const char *path)
{
	if (path && strlen(path) >= IOD_AGENT_PATH_MAX)
		spec_err(ld, n, "%s is %zu bytes long; the most is %d (IOD_AGENT_PATH_MAX)", what,
		         strlen(path), IOD_AGENT_PATH_MAX - 1);
}

static void load_probe(struct spec_ld *ld, const struct iod_yaml_node *m, const char *what,
                       bool http, struct iod_spec_health *h)
{
	const struct iod_yaml_node *v[2];
	char p[48];

	/* tcp: 8080 is short for tcp: {port: 8080} */
	if (!http && m->kind == IOD_YAML_SCALAR && !is_null(m)) {
		get_port(ld, m, "health.tcp", &h->port);
		return;
	}
	if (!get_map(ld, m, what, probe_keys, http ? 2 : 1, v, NULL))
		return;
	snprintf(p, sizeof(p), "%s.port", what);
	if (!v[0])
		spec_err(ld, m, "%s needs a port", what);
	else
		get_port(ld, v[0], p, &h->port);
	if (http) {
		h->path = "/";
		if (v[1] && get_str(ld, v[1], "health.http.path", &h->path) && h->path[0] != '/')
			spec_err(ld, v[1], "health.http.path \"%.60s\" must start with '/'",
			         h->path);
		if (v[1])
			check_path_len(ld, v[1], "health.http.path", h->path);
	}
}

static void get_exec(struct spec_ld *ld, const struct iod_yaml_node *n, struct iod_spec_health *h)
{
	if (!get_str(ld, n, "health.exec", &h->command))
		return;
	if (!h->command[strspn(h->command, " \t")])
		spec_err(ld, n, "health.exec is empty; write a command, e.g. \"test -f /ready\"");
	else if (strlen(h->command) >= IOD_AGENT_CMD_MAX)
		spec_err(ld, n,
		         "health.exec is %zu bytes long; the agent runs at most %d "
		         "(IOD_AGENT_CMD_MAX): put the check in a script and run that",
		         strlen(h->command), IOD_AGENT_CMD_MAX - 1);
}

/*
 * The flat form, which -o json prints: kind: exec|tcp|http with exec:,
 * port: and path: beside it. The nested keys tcp:/http: may not be mixed in.
 */
static void load_health_flat(struct spec_ld *ld, const struct iod_yaml_node **v,
                             struct iod_spec_health *h)
{
	int k;

	if (v[HC_TCP] || v[HC_HTTP]) {
		spec_err(ld, v[HC_TCP] ? v[HC_TCP] : v[HC_HTTP],
		         "health.kind and health.%s say the same thing; write one form",
		         v[HC_TCP] ? "tcp" : "http");
		return;
	}
	if (!get_enum(ld, v[HC_KIND], "health.kind", health_kind_names, 3, &k))
		return;
	h->kind = (enum iod_health_kind)(k + 1);
	if (h->kind == IOD_HEALTH_EXEC) {
		if (!v[HC_EXEC])
			spec_err(ld, v[HC_KIND], "health kind exec needs exec: COMMAND");
		else
			get_exec(ld, v[HC_EXEC], h);
		for (int i = HC_PORT; i <= HC_PATH; i++)
			if (v[i])
				spec_err(ld, v[i], "health.%s does not apply to kind exec",
				         health_keys[i]);
		return;
	}
	if (v[HC_EXEC])
		spec_err(ld, v[HC_EXEC], "health.exec does not apply to kind %s",
		         health_kind_names[k]);
	if (!v[HC_PORT])
		spec_err(ld, v[HC_KIND], "health kind %s needs port:", health_kind_names[k]);
	else
		get_port(ld, v[HC_PORT], "health.port", &h->port);
	if (h->kind == IOD_HEALTH_HTTP) {
		h->path = "/";
		if (v[HC_PATH] && get_str(ld, v[HC_PATH], "health.path", &h->path) &&
		    h->path[0] != '/')
			spec_err(ld, v[HC_PATH], "health.path \"%.60s\" must start with '/'",
			         h->path);
		if (v[HC_PATH])
			check_path_len(ld, v[HC_PATH], "health.path", h->path);
	} else if (v[HC_PATH]) {
		spec_err(ld, v[HC_PATH], "health.path applies to kind http only");
	}
}

static void load_health(struct spec_ld *ld, const struct iod_yaml_node *m,
                        struct iod_spec_health *h)
{
	const struct iod_yaml_node *v[IOD_ARRAY_LEN(health_keys)];
	int kinds = 0;

	if (!get_map(ld, m, "health", health_keys, IOD_ARRAY_LEN(health_keys), v, NULL))
		return;
	if (v[HC_KIND]) {
		load_health_flat(ld, v, h);
	} else {
		for (int i = HC_EXEC; i <= HC_HTTP; i++)
			kinds += v[i] != NULL;
		if (kinds == 0)
			spec_err(ld, m,
			         "health needs one check: exec: COMMAND, tcp: PORT or http: {port, "
			         "path}");
		else if (kinds > 1)
			spec_err(ld, m,
			         "health has %d checks; write exactly one of exec, tcp or http",
			         kinds);
		for (int i = HC_PORT; i <= HC_PATH; i++)
			if (v[i])
				spec_err(
				    ld, v[i],
				    "health.%s without kind:; write tcp: {port} or http: {port, "
				    "path} (or kind: tcp|http with port:)",
				    health_keys[i]);
		if (v[HC_EXEC]) {
			h->kind = IOD_HEALTH_EXEC;
			get_exec(ld, v[HC_EXEC], h);
		}
		if (v[HC_TCP]) {
			h->kind = IOD_HEALTH_TCP;
			load_probe(ld, v[HC_TCP], "health.tcp", false, h);
		}
		if (v[HC_HTTP]) {
			h->kind = IOD_HEALTH_HTTP;
			load_probe(ld, v[HC_HTTP], "health.http", true, h);
		}
	}
	const struct iod_yaml_node *iv = v[HC_INTERVAL] ? v[HC_INTERVAL] : v[HC_INTERVAL_NS];
	const struct iod_yaml_node *tv = v[HC_TIMEOUT] ? v[HC_TIMEOUT] : v[HC_TIMEOUT_NS];
	bool iv_ok =
	    get_qty(ld, v[HC_INTERVAL], v[HC_INTERVAL_NS], "health.interval", "health.interval_ns",
	            iod_parse_duration, "a duration like 10s", &h->interval_ns);
	if (iv_ok && (h->interval_ns < IOD_SPEC_HEALTH_INTERVAL_MIN_NS ||
	              h->interval_ns > IOD_SPEC_HEALTH_INTERVAL_MAX_NS))
		spec_err(ld, iv,
		         "health.interval %s is outside 1ms..1h "
		         "(IOD_SPEC_HEALTH_INTERVAL_MIN_NS/MAX_NS)",
		         iv->str);
	if (!tv) {
		/* the default timeout never outlasts a shorter interval */
		if (h->timeout_ns > h->interval_ns)
			h->timeout_ns = h->interval_ns;
	} else if (get_qty(ld, v[HC_TIMEOUT], v[HC_TIMEOUT_NS], "health.timeout",
	                   "health.timeout_ns", iod_parse_duration, "a duration like 1s",
	                   &h->timeout_ns)) {
		if (h->timeout_ns == 0)
			spec_err(ld, tv, "health.timeout must be above 0");
		else if (h->timeout_ns > h->interval_ns)
			spec_err(ld, tv,
			         "health.timeout %s is longer than health.interval; a check must "
			         "end before the next one starts",
			         tv->str);
	}
	if (v[HC_HEALTHY] &&
	    get_u32(ld, v[HC_HEALTHY], "health.healthy_threshold", IOD_SPEC_THRESHOLD_MAX,
	            "IOD_SPEC_THRESHOLD_MAX", &h->healthy_threshold) &&
	    h->healthy_threshold == 0)
		spec_err(ld, v[HC_HEALTHY], "health.healthy_threshold must be at least 1");
	if (v[HC_UNHEALTHY] &&
	    get_u32(ld, v[HC_UNHEALTHY], "health.unhealthy_threshold", IOD_SPEC_THRESHOLD_MAX,
	            "IOD_SPEC_THRESHOLD_MAX", &h->unhealthy_threshold) &&
	    h->unhealthy_threshold == 0)
		spec_err(ld, v[HC_UNHEALTHY], "health.unhealthy_threshold must be at least 1");
}

enum { PORT_NAME, PORT_PORT, PORT_PROTOCOL };
static const char *const port_keys[] = {"name", "port", "protocol"};
static const char *const proto_names[] = {"tcp", "udp"};

static void load_ports(struct spec_ld *ld, const struct iod_yaml_node *seq,
                       struct iod_spec_service *s)
{
	struct iod_spec_port *ports;
	uint32_t i = 0;

	if (!want_seq(ld, seq, "ports", "[8080, {name: metrics, port: 9100}]", IOD_SPEC_LIST_MAX,
	              "IOD_SPEC_LIST_MAX"))
		return;
	ports = iod_arena_alloc(&ld->spec->arena, sizeof(*ports) * (seq->n + 1));
	if (!ports)
		return;
	for (const struct iod_yaml_node *it = seq->first; it; it = it->next, i++) {
		struct iod_spec_port *p = &ports[i];
		p->proto = IOD_PROTO_TCP;
		if (it->kind == IOD_YAML_SCALAR) {
			get_port(ld, it, "ports entry", &p->port);
		} else {
			const struct iod_yaml_node *v[IOD_ARRAY_LEN(port_keys)];
			int x;
			if (!get_map(ld, it, "ports entry", port_keys, IOD_ARRAY_LEN(port_keys), v,
			             NULL))
				continue;
			if (!v[PORT_PORT])
				spec_err(ld, it, "ports entry needs a port");
			else
				get_port(ld, v[PORT_PORT], "ports.port", &p->port);
			if (v[PORT_NAME])
				get_name(ld, v[PORT_NAME], "ports.name", &p->name);
			if (v[PORT_PROTOCOL] &&
			    get_enum(ld, v[PORT_PROTOCOL], "ports.protocol", proto_names, 2, &x))
				p->proto = x ? IOD_PROTO_UDP : IOD_PROTO_TCP;
		}
		for (uint32_t j = 0; j < i && p->port; j++) {
			if (ports[j].port == p->port && ports[j].proto == p->proto)
				spec_err(ld, it, "port %u/%s is listed twice", (unsigned)p->port,
				         proto_names[p->proto]);
			else if (p->name && ports[j].name && !strcmp(p->name, ports[j].name))
				spec_err(ld, it, "port name \"%s\" is used twice", p->name);
		}
	}
	s->ports = ports;
	s->ports_n = i;
}

static bool valid_env_name(const char *s)
{
	if (!isalpha((unsigned char)*s) && *s != '_')
		return false;
	for (; *s; s++)
		if (!isalnum((unsigned char)*s) && *s != '_')
			return false;
	return true;
}

static void load_env(struct spec_ld *ld, const struct iod_yaml_node *m, struct iod_spec_service *s)
{
	struct iod_spec_env *env;
	char b[80];
	uint32_t i = 0;

	if (m->kind != IOD_YAML_MAP) {
		spec_err(ld, m, "env must be a mapping of NAME: value, not %s",
		         describe(m, b, sizeof(b)));
		return;
	}
	if (m->n / 2 > IOD_SPEC_LIST_MAX) {
		spec_err(ld, m, "env has %u variables; the most is %d (IOD_SPEC_LIST_MAX)",
		         (unsigned)(m->n / 2), IOD_SPEC_LIST_MAX);
		return;
	}
	env = iod_arena_alloc(&ld->spec->arena, sizeof(*env) * (m->n / 2 + 1));
	if (!env)
		return;
	for (const struct iod_yaml_node *k = m->first; k && k->next; k = k->next->next) {
		const struct iod_yaml_node *v = k->next;
		struct iod_spec_env *e = &env[i];
		if (k->kind != IOD_YAML_SCALAR || !valid_env_name(k->str)) {
			spec_err(
			    ld, k,
			    "env name %s is not valid: use letters, digits and '_', not starting "
			    "with a digit",
			    describe(k, b, sizeof(b)));
			continue;
		}
		bool dup = false;
		for (uint32_t j = 0; j < i; j++)
			if (!strcmp(env[j].name, k->str))
				dup = true;
		if (dup) {
			spec_err(ld, k, "env %s is set twice", k->str);
			continue;
		}
		char what[IOD_NAME_MAX + 8];
		snprintf(what, sizeof(what), "env %.60s", k->str);
		if (is_null(v)) {
			spec_err(ld, v, "%s has no value; write \"\" for an empty value", what);
			continue;
		}
		if (!get_str(ld, v, what, &e->value))
			continue;
		e->name = iod_arena_strdup(&ld->spec->arena, k->str);
		if (e->name)
			i++;
	}
	s->env = env;
	s->env_n = i;
}

/* A list of scalars as strings; NULL on error (reported). */
static const char **load_strings(struct spec_ld *ld, const struct iod_yaml_node *seq,
                                 const char *what, const char *example, uint32_t *n)
{
	const char **out;
	uint32_t i = 0;

	*n = 0;
	if (!want_seq(ld, seq, what, example, IOD_SPEC_LIST_MAX, "IOD_SPEC_LIST_MAX"))
		return NULL;
	out = iod_arena_alloc(&ld->spec->arena, sizeof(*out) * (seq->n + 1));
	if (!out)
		return NULL;
	for (const struct iod_yaml_node *it = seq->first; it; it = it->next) {
		char w[48];
		snprintf(w, sizeof(w), "%s entry %u", what, (unsigned)(i + 1));
		if (get_str(ld, it, w, &out[i]))
			i++;
	}
	*n = i;
	return out;
}

/*
 * command: "prog arg arg" (split at spaces) or [prog, arg, ...]. Quotes in
 * the string form are refused: we do not guess shell quoting.
 */
static void load_command(struct spec_ld *ld, const struct iod_yaml_node *n,
                         struct iod_spec_service *s, const char ***pre, uint32_t *pre_n)
{
	const char **words;
	uint32_t wn = 0;

	*pre = NULL;
	*pre_n = 0;
	if (n->kind == IOD_YAML_SEQ) {
		words = load_strings(ld, n, "command", "[iod, demo-worker, --role, worker]", &wn);
		if (!words)
			return;
		if (wn == 0 || n->n == 0) {
			spec_err(ld, n, "command is an empty list; name a program");
			return;
		}
		if (!words[0][0]) {
			spec_err(ld, n->first, "command names an empty program");
			return;
		}
	} else {
		const char *str;
		if (!get_str(ld, n, "command", &str))
			return;
		if (strpbrk(str, "\"'\\`$")) {
			spec_err(
			    ld, n,
			    "command \"%.80s\" contains quotes or shell characters; use the list "
			    "form command: [program, arg, ...] (it is not run by a shell)",
			    str);
			return;
		}
		words = iod_arena_alloc(&ld->spec->arena, sizeof(*words) * (IOD_SPEC_LIST_MAX + 1));
		char *copy = iod_arena_strdup(&ld->spec->arena, str);
		if (!words || !copy)
			return;
		for (char *tok = strtok(copy, " \t\n"); tok; tok = strtok(NULL, " \t\n")) {
			if (wn >= IOD_SPEC_LIST_MAX) {
				spec_err(ld, n,
				         "command has more than %d words (IOD_SPEC_LIST_MAX)",
				         IOD_SPEC_LIST_MAX);
				return;
			}
			words[wn++] = tok;
		}
		if (wn == 0) {
			spec_err(ld, n, "command is empty; name a program");
			return;
		}
	}
	s->command = words[0];
	*pre = words + 1;
	*pre_n = wn - 1;
}

/* ---- sandbox ------------------------------------------------------------- */

/* A YAML subtree as JSON (a seccomp profile written inline): plain numbers
 * become integers, plain true/false/null what they say, everything else a
 * string. Depth is already bounded by the tree (IOD_SPEC_DEPTH_MAX). */
static json_t *tree_json(const struct iod_yaml_node *n)
{
	if (n->kind == IOD_YAML_MAP) {
		json_t *o = json_object();
		for (const struct iod_yaml_node *k = n->first; o && k && k->next;
		     k = k->next->next) {
			json_t *v = tree_json(k->next);
			if (!v || k->kind != IOD_YAML_SCALAR || json_object_get(o, k->str) ||
			    json_object_set_new(o, k->str, v)) {
				json_decref(v);
				json_decref(o);
				return NULL;
			}
		}
		return o;
	}
	if (n->kind == IOD_YAML_SEQ) {
		json_t *a = json_array();
		for (const struct iod_yaml_node *it = n->first; a && it; it = it->next) {
			json_t *v = tree_json(it);
			if (!v || json_array_append_new(a, v)) {
				json_decref(a);
				return NULL;
			}
		}
		return a;
	}
	if (n->plain) {
		if (is_null(n))
			return json_null();
		if (!strcmp(n->str, "true"))
			return json_true();
		if (!strcmp(n->str, "false"))
			return json_false();
		const char *p = n->str + (n->str[0] == '-');
		if (is_digits(p) && strlen(p) <= 18)
			return json_integer(strtoll(n->str, NULL, 10));
	}
	return json_string(n->str);
}

static void load_seccomp(struct spec_ld *ld, const struct iod_yaml_node *n,
                         struct iod_spec_sandbox *sb)
{
	struct iod_seccomp_profile *p = NULL;
	struct iod_err e = {0};
	json_t *j = NULL;

	if (n->kind == IOD_YAML_SCALAR && !is_null(n) && n->str[0] != '{') {
		static const char *const modes[] = {"default", "unconfined"};
		int x;
		if (get_enum(ld, n, "sandbox.seccomp", modes, 2, &x))
			sb->seccomp = x ? IOD_SPEC_SECCOMP_UNCONFINED : IOD_SPEC_SECCOMP_DEFAULT;
		return;
	}
	/* a profile: written inline as a mapping, or as JSON text */
	if (n->kind == IOD_YAML_MAP) {
		j = tree_json(n);
	} else if (n->kind == IOD_YAML_SCALAR && !is_null(n)) {
		if (n->len > IOD_SECCOMP_PROFILE_BYTES_MAX) {
			spec_err(ld, n,
			         "sandbox.seccomp profile is %zu bytes; the most is %d "
			         "(IOD_SECCOMP_PROFILE_BYTES_MAX)",
			         n->len, IOD_SECCOMP_PROFILE_BYTES_MAX);
			return;
		}
		if (iod_json_parse(n->str, n->len, &j, &e)) {
			spec_err(ld, n, "sandbox.seccomp profile: %s", e.msg);
			return;
		}
	}
	if (!j) {
		spec_err(ld, n,
		         "sandbox.seccomp must be default, unconfined or an OCI/Docker seccomp "
		         "profile (a mapping with defaultAction and syscalls)");
		return;
	}
	if (iod_seccomp_profile_from_json(j, &p, &e)) {
		spec_err(ld, n, "sandbox.seccomp profile: %s", e.msg);
		json_decref(j);
		return;
	}
	iod_seccomp_profile_free(p);
	char *text = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);
	json_decref(j);
	if (text && strlen(text) > IOD_SECCOMP_PROFILE_BYTES_MAX)
		spec_err(ld, n,
		         "sandbox.seccomp profile is %zu bytes as JSON; the most is %d "
		         "(IOD_SECCOMP_PROFILE_BYTES_MAX)",
		         strlen(text), IOD_SECCOMP_PROFILE_BYTES_MAX);
	else if (text)
		sb->seccomp_profile = iod_arena_strdup(&ld->spec->arena, text);
	free(text);
	if (!sb->seccomp_profile)
		return;
	sb->seccomp = IOD_SPEC_SECCOMP_PROFILE;
}

/* A uid or gid: 1..10 digits below 4294967295 ((uid_t)-1 means "no id"). */
static bool parse_id(const char *p, size_t len, uint32_t *out)
{
	char buf[12];
	if (len == 0 || len > 10)
		return false;
	memcpy(buf, p, len);
	buf[len] = 0;
	if (!is_digits(buf))
		return false;
	unsigned long long v = strtoull(buf, NULL, 10);
	if (v >= UINT32_MAX)
		return false;
	*out = (uint32_t)v;
	return true;
}

/* user: dynamic | root | UID | "UID:GID" */
static void load_user(struct spec_ld *ld, const struct iod_yaml_node *n,
                      struct iod_spec_sandbox *sb)
{
	if (!want_scalar(ld, n, "sandbox.user", "dynamic, root, a uid or \"uid:gid\""))
		return;
	if (!strcmp(n->str, "dynamic")) {
		sb->user = IOD_SPEC_USER_DYNAMIC;
		return;
	}
	if (!strcmp(n->str, "root")) {
		sb->user = IOD_SPEC_USER_ROOT;
		return;
	}
	const char *colon = strchr(n->str, ':');
	size_t ulen = colon ? (size_t)(colon - n->str) : n->len;
	uint32_t uid = 0, gid = 0;
	if (!parse_id(n->str, ulen, &uid) ||
	    (colon && !parse_id(colon + 1, strlen(colon + 1), &gid))) {
		spec_err(ld, n,
		         "sandbox.user \"%.40s\" is not valid; write dynamic, root, a uid (1000) "
		         "or \"uid:gid\" (\"1000:1000\"), ids below 4294967295",
		         n->str);
		return;
	}
	if (uid == 0) {
		sb->user = IOD_SPEC_USER_ROOT; /* uid 0 is root, whatever the gid */
		return;
	}
	sb->user = IOD_SPEC_USER_ID;
	sb->uid = uid;
	sb->gid = colon ? gid : uid;
}

enum { SB_USER, SB_CAPS, SB_SECCOMP, SB_NETWORK, SB_BEST_EFFORT, SB_NKEYS };
static const char *const sandbox_keys[SB_NKEYS] = {"user", "capabilities", "seccomp", "network",
                                                   "best_effort"};
static const char *const netmode_names[] = {"auto", "node", "private", "none"};

static void load_sandbox(struct spec_ld *ld, const struct iod_yaml_node *m,
                         struct iod_spec_sandbox *sb)
{
	const struct iod_yaml_node *v[SB_NKEYS];
	int x;

	if (!get_map(ld, m, "sandbox", sandbox_keys, SB_NKEYS, v, NULL))
		return;
	sb->set = true;
	if (v[SB_USER])
		load_user(ld, v[SB_USER], sb);
	if (v[SB_CAPS] && want_seq(ld, v[SB_CAPS], "sandbox.capabilities", "[NET_BIND_SERVICE]",
	                           IOD_CAPS_N, "the number of Linux capabilities")) {
		for (const struct iod_yaml_node *it = v[SB_CAPS]->first; it; it = it->next) {
			unsigned cap;
			if (!want_scalar(ld, it, "sandbox.capabilities entry", "a capability name"))
				continue;
			if (!strcasecmp(it->str, "ALL")) {
				sb->caps |= (1ull << IOD_CAPS_N) - 1;
				continue;
			}
			if (iod_cap_parse(it->str, &cap)) {
				spec_err(
				    ld, it,
				    "sandbox.capabilities: \"%.40s\" is not a Linux capability "
				    "(e.g. NET_BIND_SERVICE, SYS_PTRACE; see capabilities(7))",
				    it->str);
				continue;
			}
			if (sb->caps & (1ull << cap))
				spec_err(ld, it, "sandbox.capabilities lists %s twice",
				         iod_cap_name(cap));
			sb->caps |= 1ull << cap;
		}
	}
	if (v[SB_SECCOMP])
		load_seccomp(ld, v[SB_SECCOMP], sb);
	if (v[SB_NETWORK] && get_enum(ld, v[SB_NETWORK], "sandbox.network", netmode_names,
	                              IOD_ARRAY_LEN(netmode_names), &x))
		sb->network = (enum iod_spec_netmode)x;
	if (v[SB_BEST_EFFORT])
		get_bool(ld, v[SB_BEST_EFFORT], "sandbox.best_effort", &sb->best_effort);
}

enum {
	SV_NAME,
	SV_TYPE,
	SV_REPLICAS,
	SV_RESOURCES,
	SV_CPU,
	SV_NETWORK,
	SV_COMMAND,
	SV_ARGS,
	SV_ENV,
	SV_PORTS,
	SV_HEALTH,
	SV_DEPENDS,
	SV_PLACEMENT,
	SV_RESTART,
	SV_GANG,
	SV_SANDBOX,
	SV_SECRETS,
	SV_TENANT,
	SV_MESH,
	SV_NKEYS
};
static const char *const service_keys[SV_NKEYS] = {
    "name", "type",    "replicas", "resources", "cpu",         "network",   "command",
    "args", "env",     "ports",    "health",    "depends_on",  "placement", "restart",
    "gang", "sandbox", "secrets",  "tenant",    "service_mesh"};
static const char *const service_type_names[] = {"stateless", "stateful"};
static const char *const restart_names[] = {"always", "on-failure", "never"};

/*
 * secrets: [db-password, tls-key]: the names of Secret objects (`iod secret
 * create`), each handed to the replica as the file /run/secrets/<name> in a
 * tmpfs of its sandbox (docs/security.md). Values never appear in a spec.
 */
static void load_secrets(struct spec_ld *ld, const struct iod_yaml_node *v,
                         struct iod_spec_service *s)
{
	if (!want_seq(ld, v, "secrets", "[db-password]", IOD_SEC_SECRETS_PER_SERVICE_MAX,
	              "IOD_SEC_SECRETS_PER_SERVICE_MAX"))
		return;
	const char **names = iod_arena_alloc(&ld->spec->arena, sizeof(*names) * (v->n + 1));
	uint32_t n = 0;
	for (const struct iod_yaml_node *it = v->first; names && it; it = it->next) {
		const char *d;
		if (it->kind == IOD_YAML_MAP) {
			spec_err(ld, it,
			         "a secrets entry is the name of a secret (`iod secret create NAME "
			         "--from-file F`), never its value");
			continue;
		}
		if (!get_name(ld, it, "secrets entry", &d))
			continue;
		bool dup = false;
		for (uint32_t j = 0; j < n; j++)
			dup |= !strcmp(names[j], d);
		if (dup) {
			spec_err(ld, it, "secrets lists \"%s\" twice", d);
			continue;
		}
		names[n++] = d;
	}
	s->secrets = names;
	s->secrets_n = n;
}

/*
 * A service's service_mesh: {mode: l4 | l7, transport: tcp | shm | rdma}:
 * which path a replica's connection to its VIP takes on iod's overlay
 * (docs/network.md), and the mesh transport of calls to it (docs/mesh.md,
 * "Transport"; unset: the spec's top level, else the cluster's iod config).
 */
static const char *const mesh_mode_names[] = {"l4", "l7"};
static const char *const transport_names[] = {"tcp", "shm", "rdma"};

static void load_service_mesh(struct spec_ld *ld, const struct iod_yaml_node *m,
                              struct iod_spec_service *s)
{
	static const char *const keys[] = {"mode", "transport"};
	const struct iod_yaml_node *v[2];
	int x;
	if (!get_map(ld, m, "service_mesh", keys, 2, v, NULL))
		return;
	if (!v[0] && !v[1]) {
		spec_err(ld, m,
		         "service_mesh needs a mode: l4 (the VIP balanced in the node's virtual "
		         "switch) or l7 (through the node's mesh proxy), or a transport: tcp, shm "
		         "or rdma");
		return;
	}
	if (v[0] && get_enum(ld, v[0], "service_mesh.mode", mesh_mode_names,
	                     IOD_ARRAY_LEN(mesh_mode_names), &x)) {
		s->mesh_mode = (enum iod_spec_mesh_path)x;
		s->mesh_mode_set = true;
	}
	if (v[1] && get_enum(ld, v[1], "service_mesh.transport", transport_names,
	                     IOD_ARRAY_LEN(transport_names), &x)) {
		s->transport = (enum iod_transport)x;
		s->transport_set = true;
	}
}

static void load_service(struct spec_ld *ld, const struct iod_yaml_node *m, uint32_t index,
                         struct iod_spec_service *s, struct svc_aux *aux)
{
	const struct iod_yaml_node *v[SV_NKEYS], *k[SV_NKEYS];
	bool cpu_set = false, net_set = false;
	int x;

	snprintf(ld->obj, sizeof(ld->obj), "service #%u: ", (unsigned)index + 1);
	aux->node = m;
	s->line = m->line;
	s->col = m->col;
	/* defaults (docs/spec.md) */
	s->replicas = 1;
	s->restart = IOD_RESTART_ALWAYS;
	s->health.interval_ns = 10 * IOD_NS_PER_S;
	s->health.timeout_ns = 1 * IOD_NS_PER_S;
	s->health.healthy_threshold = 1;
	s->health.unhealthy_threshold = 3;
	s->tenant = "default";
	/* name the service in every message, even those about keys before name: */
	for (const struct iod_yaml_node *p = m->kind == IOD_YAML_MAP ? m->first : NULL;
	     p && p->next; p = p->next->next) {
		if (p->kind == IOD_YAML_SCALAR && !strcmp(p->str, "name") &&
		    p->next->kind == IOD_YAML_SCALAR &&
		    valid_name(p->next->str, IOD_SPEC_NAME_LEN_MAX))
			snprintf(ld->obj, sizeof(ld->obj), "service \"%s\": ", p->next->str);
	}
	if (!get_map(ld, m, ld->obj[0] == 's' && ld->obj[8] == '#' ? "the service" : "",
	             service_keys, SV_NKEYS, v, k))
		return;
	if (!v[SV_NAME]) {
		spec_err(ld, m, "service needs a name (name: worker-node)");
	} else if (get_name(ld, v[SV_NAME], "name", &s->name)) {
		aux->name = v[SV_NAME];
		snprintf(ld->obj, sizeof(ld->obj), "service \"%s\": ", s->name);
	}
	if (!v[SV_TYPE])
		spec_err(ld, m, "service needs a type: stateful or stateless");
	else if (get_enum(ld, v[SV_TYPE], "type", service_type_names, 2, &x))
		s->type = (enum iod_service_type)x;
	if (v[SV_REPLICAS])
		get_u32(ld, v[SV_REPLICAS], "replicas", IOD_SPEC_REPLICAS_MAX,
		        "IOD_SPEC_REPLICAS_MAX", &s->replicas);
	if (v[SV_RESOURCES])
		load_resources(ld, v[SV_RESOURCES], false, &s->res, &cpu_set, &net_set);
	if (v[SV_CPU]) {
		if (cpu_set)
			spec_err(ld, k[SV_CPU], "cpu is also set in resources; write it once");
		else
			get_cpu(ld, v[SV_CPU], "cpu", &s->res.cpu_millis);
	}
	if (v[SV_NETWORK]) {
		if (net_set)
			spec_err(ld, k[SV_NETWORK],
			         "network is also set in resources; write it once");
		else
			load_network(ld, v[SV_NETWORK], "network", &s->res.network);
	}
	const char **pre = NULL, **args = NULL;
	uint32_t pre_n = 0, args_n = 0;
	if (v[SV_COMMAND])
		load_command(ld, v[SV_COMMAND], s, &pre, &pre_n);
	if (v[SV_ARGS])
		args = load_strings(ld, v[SV_ARGS], "args", "[--port, \"8080\"]", &args_n);
	if (pre_n + args_n > IOD_SPEC_LIST_MAX) {
		spec_err(ld, v[SV_ARGS] ? v[SV_ARGS] : v[SV_COMMAND],
		         "command and args have %u arguments together; the most is %d "
		         "(IOD_SPEC_LIST_MAX)",
		         (unsigned)(pre_n + args_n), IOD_SPEC_LIST_MAX);
	} else if (pre_n + args_n > 0) {
		const char **all =
		    iod_arena_alloc(&ld->spec->arena, sizeof(*all) * (pre_n + args_n + 1));
		if (all) {
			for (uint32_t i = 0; i < pre_n; i++)
				all[i] = pre[i];
			for (uint32_t i = 0; i < args_n; i++)
				all[pre_n + i] = args[i];
			s->args = all;
			s->args_n = pre_n + args_n;
		}
	}
	if (v[SV_ARGS] && args_n && !v[SV_COMMAND])
		spec_err(ld, k[SV_ARGS], "args without a command; add command: PROGRAM");
	if (s->command) {
		/* the agent holds the program and its arguments in a fixed buffer:
		 * refuse here what no agent could run (issue: a deploy reported
		 * "placed" for replicas that never started) */
		size_t bytes = strlen(s->command) + 1;
		for (uint32_t i = 0; i < s->args_n; i++)
			bytes += strlen(s->args[i]) + 1;
		if (bytes > IOD_AGENT_ARGV_BYTES_MAX)
			spec_err(ld, v[SV_ARGS] ? v[SV_ARGS] : v[SV_COMMAND],
			         "command and args take %zu bytes; an agent runs at most %d "
			         "(IOD_AGENT_ARGV_BYTES_MAX)",
			         bytes, IOD_AGENT_ARGV_BYTES_MAX);
	}
	if (v[SV_ENV])
		load_env(ld, v[SV_ENV], s);
	if (v[SV_PORTS])
		load_ports(ld, v[SV_PORTS], s);
	if (v[SV_HEALTH])
		load_health(ld, v[SV_HEALTH], &s->health);
	if (v[SV_DEPENDS] && want_seq(ld, v[SV_DEPENDS], "depends_on", "[parameter-server]",
	                              IOD_SPEC_LIST_MAX, "IOD_SPEC_LIST_MAX")) {
		const char **deps =
		    iod_arena_alloc(&ld->spec->arena, sizeof(*deps) * (v[SV_DEPENDS]->n + 1));
		uint32_t dn = 0;
		for (const struct iod_yaml_node *it = v[SV_DEPENDS]->first; deps && it;
		     it = it->next) {
			const char *d;
			if (!get_name(ld, it, "depends_on entry", &d))
				continue;
			bool dup = false;
			for (uint32_t j = 0; j < dn; j++)
				dup |= !strcmp(deps[j], d);
			if (dup) {
				spec_err(ld, it, "depends_on lists \"%s\" twice", d);
				continue;
			}
			aux->deps[dn] = it;
			deps[dn++] = d;
		}
		s->depends_on = deps;
		s->depends_n = dn;
		aux->deps_n = dn;
	}
	if (v[SV_PLACEMENT])
		load_placement(ld, v[SV_PLACEMENT], &s->placement);
	if (v[SV_RESTART] &&
	    get_enum(ld, v[SV_RESTART], "restart", restart_names, IOD_ARRAY_LEN(restart_names), &x))
		s->restart = (enum iod_restart)x;
	if (v[SV_GANG])
		get_bool(ld, v[SV_GANG], "gang", &s->gang);
	if (v[SV_SANDBOX])
		load_sandbox(ld, v[SV_SANDBOX], &s->sandbox);
	if (v[SV_SECRETS])
		load_secrets(ld, v[SV_SECRETS], s);
	if (v[SV_TENANT])
		get_name(ld, v[SV_TENANT], "tenant", &s->tenant);
	if (v[SV_MESH])
		load_service_mesh(ld, v[SV_MESH], s);
}

/* ---- cross-service checks ------------------------------------------------ */

static int find_index(const struct iod_spec *sp, const char *name)
{
	for (uint32_t i = 0; i < sp->services_n; i++)
		if (sp->services[i].name && !strcmp(sp->services[i].name, name))
			return (int)i;
	return -1;
}

/*
 * Depth-first search for depends_on cycles. path[] holds the open services
 * (bounded by IOD_SPEC_SERVICES_MAX, so the recursion is too). A back edge
 * to an open service is a cycle: report it at the entry that closes it.
 */
static void dfs(struct spec_ld *ld, struct svc_aux *aux, uint32_t u, uint32_t *path, uint32_t depth)
{
	const struct iod_spec *sp = ld->spec;
	const struct iod_spec_service *s = &sp->services[u];

	IOD_ASSERT(depth < IOD_SPEC_SERVICES_MAX);
	aux[u].color = 1;
	path[depth] = u;
	for (uint32_t i = 0; i < s->depends_n; i++) {
		int w = find_index(sp, s->depends_on[i]);
		if (w < 0)
			continue; /* reported as unknown */
		if (aux[w].color == 1) {
			char chain[IOD_ERR_MSG_MAX] = "";
			size_t off = 0;
			uint32_t start = depth;
			while (path[start] != (uint32_t)w)
				start--;
			for (uint32_t j = start; j <= depth && off < sizeof(chain); j++)
				off += (size_t)snprintf(chain + off, sizeof(chain) - off, "%s -> ",
				                        sp->services[path[j]].name);
			if (off < sizeof(chain))
				snprintf(chain + off, sizeof(chain) - off, "%s",
				         sp->services[w].name);
			if ((uint32_t)w == u)
				spec_err(ld, aux[u].deps[i], "service \"%s\" depends on itself",
				         s->name);
			else
				spec_err(ld, aux[u].deps[i], "depends_on cycle: %s", chain);
		} else if (aux[w].color == 0) {
			dfs(ld, aux, (uint32_t)w, path, depth + 1);
		}
	}
	aux[u].color = 2;
}

static void check_services(struct spec_ld *ld, struct svc_aux *aux)
{
	struct iod_spec *sp = ld->spec;
	const char *names[IOD_SPEC_SERVICES_MAX];
	uint32_t nn = 0;
	uint32_t path[IOD_SPEC_SERVICES_MAX];

	ld->obj[0] = 0;
	for (uint32_t i = 0; i < sp->services_n; i++) {
		const struct iod_spec_service *s = &sp->services[i];
		if (!s->name)
			continue;
		names[nn++] = s->name;
		for (uint32_t j = 0; j < i; j++) {
			if (sp->services[j].name && !strcmp(sp->services[j].name, s->name)) {
				spec_err(
				    ld, aux[i].name,
				    "duplicate service name \"%s\": first declared at %s:%u:%u",
				    s->name, ld->name, (unsigned)aux[j].name->line,
				    (unsigned)aux[j].name->col);
				break;
			}
		}
	}
	if (ld->standalone)
		return; /* one stored service: its dependencies live elsewhere */
	for (uint32_t i = 0; i < sp->services_n; i++) {
		const struct iod_spec_service *s = &sp->services[i];
		for (uint32_t d = 0; d < s->depends_n; d++) {
			if (find_index(sp, s->depends_on[d]) >= 0)
				continue;
			const char *sug = iod_suggest(s->depends_on[d], names, nn);
			snprintf(ld->obj, sizeof(ld->obj),
			         "service \"%s\": ", s->name ? s->name : "?");
			if (sug)
				spec_err(ld, aux[i].deps[d],
				         "depends_on \"%s\": no such service; did you mean \"%s\"?",
				         s->depends_on[d], sug);
			else
				spec_err(ld, aux[i].deps[d],
				         "depends_on \"%s\": no such service in this file",
				         s->depends_on[d]);
		}
	}
	ld->obj[0] = 0;
	if (ld->diags->total)
		return; /* names must be sound before cycles mean anything */
	for (uint32_t i = 0; i < sp->services_n; i++)
		if (aux[i].color == 0)
			dfs(ld, aux, i, path, 0);
	/* the environment each replica gets must fit its agent's buffer */
	for (uint32_t i = 0; i < sp->services_n; i++) {
		char why[IOD_ERR_MSG_MAX - IOD_NAME_MAX - 40];
		if (iod_spec_service_env_check(sp, i, 15, NULL, NULL, why, sizeof(why))) {
			snprintf(ld->obj, sizeof(ld->obj),
			         "service \"%s\": ", sp->services[i].name);
			spec_err(ld, aux[i].name ? aux[i].name : aux[i].node, "%s", why);
		}
	}
	ld->obj[0] = 0;
}

static void load_services(struct spec_ld *ld, const struct iod_yaml_node *seq)
{
	struct iod_spec *sp = ld->spec;
	struct svc_aux *aux;
	uint32_t i = 0;

	if (!want_seq(ld, seq, "services", "[{name: worker, type: stateless}]",
	              IOD_SPEC_SERVICES_MAX, "IOD_SPEC_SERVICES_MAX"))
		return;
	if (seq->n == 0) {
		spec_err(ld, seq, "services is an empty list; add a service or remove the key");
		return;
	}
	sp->services = iod_arena_alloc(&sp->arena, sizeof(*sp->services) * seq->n);
	aux = iod_arena_alloc(&ld->tree, sizeof(*aux) * seq->n);
	if (!sp->services || !aux) {
		spec_err(ld, seq, "out of memory");
		return;
	}
	for (const struct iod_yaml_node *it = seq->first; it; it = it->next)
		load_service(ld, it, i, &sp->services[i], &aux[i]), i++;
	sp->services_n = i;
	ld->obj[0] = 0;
	check_services(ld, aux);
}

/* ---- storage and mesh ---------------------------------------------------- */

static const char *const media[] = {"DRAM", "PMem", "NVMe", "SSD", "HDD", "object"};

/* A medium name, case-insensitively; suggests the closest one. */
static const char *get_medium(struct spec_ld *ld, const struct iod_yaml_node *n)
{
	char low[32], lbuf[IOD_ARRAY_LEN(media)][16];
	const char *lm[IOD_ARRAY_LEN(media)];
	size_t j, c;

	if (!want_scalar(ld, n, "storage tier medium", "a medium like NVMe"))
		return NULL;
	for (j = 0; j < IOD_ARRAY_LEN(media); j++)
		if (!strcasecmp(n->str, media[j]))
			return media[j];
	for (j = 0; j < IOD_ARRAY_LEN(media); j++) {
		for (c = 0; c < sizeof(lbuf[j]) - 1 && media[j][c]; c++)
			lbuf[j][c] = (char)tolower((unsigned char)media[j][c]);
		lbuf[j][c] = 0;
		lm[j] = lbuf[j];
	}
	for (c = 0; c < sizeof(low) - 1 && n->str[c]; c++)
		low[c] = (char)tolower((unsigned char)n->str[c]);
	low[c] = 0;
	const char *sg = iod_suggest(low, lm, IOD_ARRAY_LEN(media));
	for (j = 0; sg && j < IOD_ARRAY_LEN(media); j++) {
		if (lm[j] == sg) {
			spec_err(ld, n,
			         "storage medium \"%.60s\" is not known; did you mean \"%s\"?",
			         n->str, media[j]);
			return NULL;
		}
	}
	spec_err(ld, n,
	         "storage medium \"%.60s\" is not known; use DRAM, PMem, NVMe, SSD, HDD or object",
	         n->str);
	return NULL;
}

static void load_storage(struct spec_ld *ld, const struct iod_yaml_node *m)
{
	static const char *const storage_keys[] = {"tiers", "replicas", "volume"};
	static const char *const tier_keys[] = {"medium", "quota", "quota_bp"};
	static const char *const volume_keys[] = {"replicas"};
	const struct iod_yaml_node *v[3];
	struct iod_spec *sp = ld->spec;
	uint32_t sum = 0, i = 0;
	bool all = true;

	if (!get_map(ld, m, "storage", storage_keys, 3, v, NULL))
		return;
	if (v[1] &&
	    get_u32(ld, v[1], "storage.replicas", IOD_STOR_REPLICAS_MAX, "IOD_STOR_REPLICAS_MAX",
	            &sp->storage_replicas) &&
	    sp->storage_replicas == 0)
		spec_err(ld, v[1],
		         "storage.replicas must be at least 1 (one copy, no replication)");
	/* a volume: the stateful replicas' data directories, synced inside each
	 * checkpoint, so with the checkpoint's copies (docs/storage.md "Volumes") */
	if (v[2]) {
		const struct iod_yaml_node *vr[1];
		uint32_t n = 0;
		if (get_map(ld, v[2], "storage.volume", volume_keys, 1, vr, NULL)) {
			if (!vr[0])
				spec_err(ld, v[2],
				         "storage.volume needs replicas (e.g. {replicas: 3})");
			else if (get_u32(ld, vr[0], "storage.volume.replicas",
			                 IOD_STOR_REPLICAS_MAX, "IOD_STOR_REPLICAS_MAX", &n) &&
			         n == 0)
				spec_err(ld, vr[0], "storage.volume.replicas must be at least 1");
			else if (n && v[1] && sp->storage_replicas && n != sp->storage_replicas)
				spec_err(
				    ld, vr[0],
				    "storage.volume.replicas is %u and storage.replicas is %u: a "
				    "volume is synced inside each checkpoint and has its copies; "
				    "make them equal or write one of them",
				    n, sp->storage_replicas);
			else if (n) {
				sp->storage_volume_replicas = n;
				if (!v[1])
					sp->storage_replicas = n;
			}
		}
		if (!v[0] && sp->storage_volume_replicas) {
			/* a volume alone: one NVMe tier holds the checkpoints it rides in */
			sp->tiers = iod_arena_alloc(&sp->arena, sizeof(*sp->tiers));
			if (!sp->tiers)
				return;
			sp->tiers[0] = (struct iod_spec_tier){.medium = "NVMe", .quota_bp = 10000};
			sp->tiers_n = 1;
			return;
		}
	}
	if (!v[0]) {
		if (!v[2])
			spec_err(ld, m, "storage needs tiers: [{medium: NVMe, quota: 100%%}]");
		return;
	}
	if (!want_seq(ld, v[0], "storage.tiers", "[{medium: PMem, quota: 20%}]", IOD_SPEC_TIERS_MAX,
	              "IOD_SPEC_TIERS_MAX"))
		return;
	if (v[0]->n == 0) {
		spec_err(ld, v[0], "storage.tiers is empty; add at least one tier");
		return;
	}
	sp->tiers = iod_arena_alloc(&sp->arena, sizeof(*sp->tiers) * v[0]->n);
	if (!sp->tiers)
		return;
	for (const struct iod_yaml_node *it = v[0]->first; it; it = it->next) {
		const struct iod_yaml_node *t[3];
		struct iod_spec_tier *tier = &sp->tiers[i++];
		struct iod_err e = {0};
		if (!get_map(ld, it, "storage tier", tier_keys, 3, t, NULL)) {
			all = false;
			continue;
		}
		if (!t[0]) {
			spec_err(ld, it, "storage tier needs a medium (PMem, NVMe, SSD, ...)");
			all = false;
		} else if ((tier->medium = get_medium(ld, t[0])) != NULL) {
			for (uint32_t j = 0; j + 1 < i; j++)
				if (sp->tiers[j].medium == tier->medium)
					spec_err(ld, t[0], "storage medium %s is listed twice",
					         tier->medium);
		}
		if (t[1] && t[2]) {
			spec_err(ld, t[2],
			         "quota and quota_bp say the same thing; write one of them");
			all = false;
		} else if (t[2]) {
			if (!get_u32(ld, t[2], "storage tier quota_bp", 10000,
			             "100% in basis points", &tier->quota_bp)) {
				all = false;
			} else if (tier->quota_bp == 0) {
				spec_err(ld, t[2], "storage tier quota_bp must be above 0");
				all = false;
			} else {
				sum += tier->quota_bp;
			}
		} else if (!t[1]) {
			spec_err(ld, it, "storage tier needs a quota (e.g. quota: 20%%)");
			all = false;
		} else if (!want_scalar(ld, t[1], "storage tier quota", "a percentage like 20%")) {
			all = false;
		} else if (iod_parse_percent(t[1]->str, &tier->quota_bp, &e)) {
			spec_err(ld, t[1], "storage tier quota: %s", e.msg);
			all = false;
		} else if (tier->quota_bp == 0) {
			spec_err(ld, t[1], "storage tier quota must be above 0%%; remove the tier");
			all = false;
		} else {
			sum += tier->quota_bp;
		}
	}
	sp->tiers_n = i;
	if (all && sum != 10000)
		spec_err(ld, v[0],
		         "storage tier quotas add up to %u.%02u%%; they must add up to 100%%",
		         (unsigned)(sum / 100), (unsigned)(sum % 100));
}

static void load_mesh(struct spec_ld *ld, const struct iod_yaml_node *m)
{
	static const char *const mesh_keys[] = {"transport"};
	const struct iod_yaml_node *v[1];
	int x;

	ld->spec->has_mesh = true;
	ld->spec->transport = IOD_TRANSPORT_TCP;
	if (!get_map(ld, m, "service_mesh", mesh_keys, 1, v, NULL))
		return;
	if (v[0] && get_enum(ld, v[0], "service_mesh.transport", transport_names,
	                     IOD_ARRAY_LEN(transport_names), &x)) {
		ld->spec->transport = (enum iod_transport)x;
		ld->spec->transport_set = true;
		/* the default of the spec's services: one naming its own keeps it */
		for (uint32_t i = 0; i < ld->spec->services_n; i++) {
			struct iod_spec_service *s = &ld->spec->services[i];
			if (!s->transport_set) {
				s->transport = ld->spec->transport;
				s->transport_set = true;
			}
		}
	}
}

/* ---- security groups ------------------------------------------------------ */

/*
 * A rule's YAML mapping as NetPolicy JSON, checked by the objects' own rule
 * parser (one home for what a rule means); errors at the rule's keys.
 */
static const char *const sg_rule_keys[] = {"name", "action",   "service",
                                           "cidr", "protocol", "ports"};

static json_t *load_sg_rule(struct spec_ld *ld, const struct iod_yaml_node *m, const char *what)
{
	const struct iod_yaml_node *v[IOD_ARRAY_LEN(sg_rule_keys)];
	if (!get_map(ld, m, what, sg_rule_keys, IOD_ARRAY_LEN(sg_rule_keys), v, NULL))
		return NULL;
	json_t *r = json_object();
	bool ok = true;
	for (size_t i = 0; i < IOD_ARRAY_LEN(sg_rule_keys) && r; i++) {
		const char *str;
		if (!v[i])
			continue;
		if (!get_str(ld, v[i], sg_rule_keys[i], &str)) {
			ok = false;
			continue;
		}
		/* ports: 80 stays a number, "8000-8100" a string */
		if (i == 5 && v[i]->plain && is_digits(str) && strlen(str) <= 5)
			json_object_set_new(r, "ports", json_integer(strtol(str, NULL, 10)));
		else
			json_object_set_new(r, sg_rule_keys[i], json_string(str));
	}
	if (!v[0]) {
		spec_err(ld, m, "%s needs a name (it names the rule's drops and counters)", what);
		ok = false;
	}
	struct iod_obj_netpolicy_rule pr;
	struct iod_err e = {0};
	if (r && ok && iod_obj_netpolicy_rule_parse(r, &pr, &e)) {
		const struct iod_yaml_node *at = m;
		/* point at the key the message is about */
		for (size_t i = 1; i < IOD_ARRAY_LEN(sg_rule_keys); i++)
			if (v[i] && strstr(e.msg, sg_rule_keys[i]))
				at = v[i];
		spec_err(ld, at, "%s: %s", what, e.msg);
		ok = false;
	}
	if (!ok) {
		json_decref(r);
		return NULL;
	}
	return r;
}

/* The spec's service of that name; services with errors (no name) are skipped. */
static const struct iod_spec_service *sg_service(const struct spec_ld *ld, const char *name)
{
	for (uint32_t i = 0; name && i < ld->spec->services_n; i++)
		if (ld->spec->services[i].name && !strcmp(ld->spec->services[i].name, name))
			return &ld->spec->services[i];
	return NULL;
}

enum { SG_NAME, SG_SERVICE, SG_TENANT, SG_INGRESS, SG_EGRESS };
static const char *const sg_keys[] = {"name", "service", "tenant", "ingress", "egress"};

static void load_sg(struct spec_ld *ld, const struct iod_yaml_node *m, struct iod_spec_sg *g)
{
	const struct iod_yaml_node *v[IOD_ARRAY_LEN(sg_keys)];
	g->line = m->line;
	g->col = m->col;
	if (!get_map(ld, m, "security_groups entry", sg_keys, IOD_ARRAY_LEN(sg_keys), v, NULL))
		return;
	if (!v[SG_NAME])
		spec_err(ld, m, "a security group needs a name (its NetPolicy object's)");
	else
		get_name(ld, v[SG_NAME], "security group name", &g->name);
	if (!v[SG_SERVICE])
		spec_err(ld, m, "security group %s needs the service it guards (service: NAME)",
		         g->name ? g->name : "?");
	else
		get_name(ld, v[SG_SERVICE], "security group service", &g->service);
	if (v[SG_TENANT])
		get_name(ld, v[SG_TENANT], "security group tenant", &g->tenant);
	const struct iod_spec_service *sv = sg_service(ld, g->service);
	if (g->service && ld->spec->services_n && !sv)
		spec_err(ld, v[SG_SERVICE],
		         "security group %s guards service \"%s\", which this spec does not "
		         "declare (`iod policy apply` attaches one to a deployed service)",
		         g->name ? g->name : "?", g->service);
	if (sv && g->tenant && strcmp(sv->tenant, g->tenant))
		spec_err(ld, v[SG_TENANT],
		         "security group %s: service %s is tenant %s's, not %s's (a group "
		         "guards its own tenant's services)",
		         g->name ? g->name : "?", g->service, sv->tenant, g->tenant);
	if (sv)
		g->tenant = sv->tenant;
	if (!g->tenant)
		g->tenant = "default";
	if (!v[SG_INGRESS] && !v[SG_EGRESS])
		spec_err(ld, m, "security group %s has no ingress: or egress: rules",
		         g->name ? g->name : "?");
	uint32_t total = 0;
	for (int d = 0; d < 2; d++) {
		const struct iod_yaml_node *seq = v[d ? SG_EGRESS : SG_INGRESS];
		const char *dn = d ? "egress" : "ingress";
		char what[48];
		if (!seq || !want_seq(ld, seq, dn, "[{name: http, service: web, ports: 80}]",
		                      IOD_NET_SG_RULES_MAX, "IOD_NET_SG_RULES_MAX"))
			continue;
		json_t *a = json_array();
		uint32_t i = 0;
		for (const struct iod_yaml_node *it = seq->first; it; it = it->next, i++) {
			snprintf(what, sizeof(what), "%s[%u]", dn, (unsigned)i);
			json_t *r = load_sg_rule(ld, it, what);
			if (!r)
				continue;
			const char *nm = json_string_value(json_object_get(r, "name"));
			/* unique names across both directions: each names its counter */
			for (int d2 = 0; d2 <= d; d2++) {
				const json_t *prev = d2 == d ? a : g->ingress;
				size_t k;
				json_t *x;
				json_array_foreach(prev, k, x)
				{
					if (!strcmp(json_string_value(json_object_get(x, "name")),
					            nm))
						spec_err(ld, it,
						         "%s: rule name \"%s\" is used twice in "
						         "security "
						         "group %s",
						         what, nm, g->name ? g->name : "?");
				}
			}
			if (!strcmp(nm, "default-deny"))
				spec_err(ld, it,
				         "%s: \"default-deny\" names what no rule allows; choose "
				         "another "
				         "name",
				         what);
			const char *peer = json_string_value(json_object_get(r, "service"));
			const struct iod_spec_service *ps = sg_service(ld, peer);
			if (ps && strcmp(ps->tenant, g->tenant))
				spec_err(
				    ld, it,
				    "%s: peer service %s is tenant %s's, not %s's (peers are "
				    "services of the same tenant; use a cidr for anything else)",
				    what, peer, ps->tenant, g->tenant);
			json_array_append_new(a, r);
		}
		total += i;
		if (d)
			g->egress = a;
		else
			g->ingress = a;
	}
	if (total > IOD_NET_SG_RULES_MAX)
		spec_err(ld, m,
		         "security group %s has %u rules; the most is %d (IOD_NET_SG_RULES_MAX)",
		         g->name ? g->name : "?", (unsigned)total, IOD_NET_SG_RULES_MAX);
}

static void load_sgs(struct spec_ld *ld, const struct iod_yaml_node *seq)
{
	struct iod_spec *sp = ld->spec;
	if (!want_seq(ld, seq, "security_groups",
	              "[{name: web-in, service: web, ingress: [{name: http, ports: 80}]}]",
	              IOD_SPEC_SERVICES_MAX, "IOD_SPEC_SERVICES_MAX"))
		return;
	sp->sgs = iod_arena_alloc(&sp->arena, sizeof(*sp->sgs) * (seq->n + 1));
	if (!sp->sgs) {
		spec_err(ld, seq, "out of memory");
		return;
	}
	memset(sp->sgs, 0, sizeof(*sp->sgs) * (seq->n + 1));
	for (const struct iod_yaml_node *it = seq->first; it; it = it->next) {
		struct iod_spec_sg *g = &sp->sgs[sp->sgs_n++]; /* counted first: freed on errors */
		load_sg(ld, it, g);
		for (uint32_t j = 0; g->name && j + 1 < sp->sgs_n; j++)
			if (sp->sgs[j].name && !strcmp(sp->sgs[j].name, g->name))
				spec_err(
				    ld, it,
				    "security group name \"%s\" is used twice (first at line %u)",
				    g->name, (unsigned)sp->sgs[j].line);
	}
}

/* ---- the top level ------------------------------------------------------- */

enum { TOP_SERVICES, TOP_RESOURCES, TOP_STORAGE, TOP_MESH, TOP_SGS };
static const char *const top_keys[] = {"services", "resources", "storage", "service_mesh",
                                       "security_groups"};

int spec_build(struct spec_ld *ld, const struct iod_yaml_node *root)
{
	const struct iod_yaml_node *v[IOD_ARRAY_LEN(top_keys)];
	uint32_t before = ld->diags->total;

	ld->obj[0] = 0;
	if (!root || is_null(root)) {
		spec_diag(ld, root ? root->line : 1, root ? root->col : 1,
		          "the spec is empty; write at least one of services:, resources:, "
		          "storage: or service_mesh:");
		return -EINVAL;
	}
	if (!get_map(ld, root, "the spec", top_keys, IOD_ARRAY_LEN(top_keys), v, NULL))
		return -EINVAL;
	if (!v[0] && !v[1] && !v[2] && !v[3] && !v[4] && ld->diags->total == before)
		spec_err(ld, root,
		         "the spec has none of services:, resources:, storage:, service_mesh: or "
		         "security_groups:");
	if (v[TOP_SERVICES])
		load_services(ld, v[TOP_SERVICES]);
	if (v[TOP_RESOURCES]) {
		bool c = false, n = false;
		ld->spec->has_resources = true;
		load_resources(ld, v[TOP_RESOURCES], true, &ld->spec->resources, &c, &n);
	}
	if (v[TOP_STORAGE])
		load_storage(ld, v[TOP_STORAGE]);
	if (v[TOP_MESH])
		load_mesh(ld, v[TOP_MESH]);
	if (v[TOP_SGS]) /* after the services: a group names them */
		load_sgs(ld, v[TOP_SGS]);
	return ld->diags->total == before ? 0 : -EINVAL;
}
