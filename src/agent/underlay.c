/*
 * underlay.c: the plan of `iod up --netns`'s leaf-spine underlay (pure).
 *
 * Turns the shape (leaves, spines, hosts, rates) into the ordered steps
 * that build it: `ip -batch` texts per namespace, sysctl lines, tc
 * batches. The addresses follow from the shape alone (docs/network.md), so
 * the plan, the agents' flags and `iod down`'s sweep agree without state.
 * The shell (underlay_run.c) runs the steps. It must never do I/O or read
 * the clock.
 */
#include "iod/agent.h"

#include <stdlib.h>
#include <string.h>

#define IP4(a, b, c, d) ((uint32_t)(a) << 24 | (uint32_t)(b) << 16 | (uint32_t)(c) << 8 | (d))

uint32_t iod_agent_underlay_leaf(const struct iod_agent_underlay_cfg *c, uint32_t host)
{
	IOD_ASSERT(host >= 1 && c->leaves >= 1);
	return (host - 1) % c->leaves + 1;
}

uint32_t iod_agent_underlay_host_ip(const struct iod_agent_underlay_cfg *c, uint32_t host)
{
	return IP4(10, 254, iod_agent_underlay_leaf(c, host), (host - 1) / c->leaves + 1);
}

uint32_t iod_agent_underlay_cp_ip(void)
{
	return IP4(10, 254, 0, 1);
}

void iod_agent_underlay_leaf_mac(uint32_t leaf, uint8_t mac[6])
{
	static const uint8_t base[6] = {0x02, 0x1f, 0, 0, 0, 0xfe};
	memcpy(mac, base, 6);
	mac[4] = (uint8_t)leaf;
}

void iod_agent_underlay_host_ns(const struct iod_agent_underlay_cfg *c, uint32_t host, char *buf,
                                size_t len)
{
	snprintf(buf, len, "%s-h%u", c->prefix, host);
}

void iod_agent_underlay_prefix(const char *dir, char *buf, size_t len)
{
	snprintf(buf, len, "iodu%06x", (unsigned)(iod_hash_str(dir) & 0xffffff));
}

int iod_agent_underlay_link(const struct iod_agent_underlay_cfg *c, uint32_t leaf, uint32_t spine,
                            char *ns, size_t ns_len, char *dev, size_t dev_len, struct iod_err *e)
{
	if (leaf < 1 || leaf > c->leaves || spine < 1 || spine > c->spines)
		return iod_err_set(e, -EINVAL,
		                   "no link leaf%u-spine%u: the underlay %s has %u leaves and %u "
		                   "spines (link/leafL-spineS, 1-based)",
		                   leaf, spine, c->prefix, c->leaves, c->spines);
	/* as the plan names them: leaf L's veth to spine S is sS in <prefix>-lL */
	snprintf(ns, ns_len, "%s-l%u", c->prefix, leaf);
	snprintf(dev, dev_len, "s%u", spine);
	return 0;
}

/* A spine link's leaf-side (side 0) or spine-side (1) address. */
static uint32_t link_ip(uint32_t leaf, uint32_t spine, int side)
{
	return IP4(10, 253, leaf, 4 * (spine - 1) + 1 + (uint32_t)side);
}

static void ip4(uint32_t a, char *buf, size_t len)
{
	iod_agent_ipv4_format(a, buf, len);
}

/* Appends to one step's text; a step that overflows is a bug of the limits. */
struct step_w {
	struct iod_agent_underlay_step *s;
	size_t used;
	bool full;
};

static void put(struct step_w *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(struct step_w *w, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	int k = vsnprintf(w->s->text + w->used, sizeof(w->s->text) - w->used, fmt, ap);
	va_end(ap);
	if (k < 0 || (size_t)k >= sizeof(w->s->text) - w->used)
		w->full = true;
	else
		w->used += (size_t)k;
}

struct plan {
	struct iod_agent_underlay_step *steps;
	uint32_t max, n;
	bool overflow;
};

static struct step_w step(struct plan *p, const char *tool, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static struct step_w step(struct plan *p, const char *tool, const char *fmt, ...)
{
	static struct iod_agent_underlay_step spare; /* overflow sink: never run */
	struct step_w w = {&spare, 0, false};
	if (p->n >= p->max) {
		p->overflow = true;
		spare.text[0] = 0;
		return w;
	}
	w.s = &p->steps[p->n++];
	memset(w.s, 0, sizeof(*w.s));
	snprintf(w.s->tool, sizeof(w.s->tool), "%s", tool);
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(w.s->ns, sizeof(w.s->ns), fmt, ap);
	va_end(ap);
	return w;
}

static void done(struct plan *p, struct step_w *w)
{
	p->overflow |= w->full;
}

int iod_agent_underlay_parse(const char *s, struct iod_agent_underlay_cfg *c, struct iod_err *e)
{
	char buf[256];
	if (strlen(s) >= sizeof(buf))
		return iod_err_set(e, -EINVAL, "--underlay: too long");
	snprintf(buf, sizeof(buf), "%s", s);
	for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(t, '=');
		if (!eq)
			return iod_err_set(e, -EINVAL,
			                   "--underlay: \"%s\" is not key=value (keys: leaves, "
			                   "spines, rate, slow)",
			                   t);
		*eq = 0;
		const char *v = eq + 1;
		char *end;
		if (!strcmp(t, "leaves") || !strcmp(t, "spines")) {
			unsigned long n = strtoul(v, &end, 10);
			unsigned long max = !strcmp(t, "leaves") ? IOD_UNDERLAY_LEAVES_MAX
			                                         : IOD_UNDERLAY_SPINES_MAX;
			if (end == v || *end || n < 1 || n > max)
				return iod_err_set(
				    e, -EINVAL, "--underlay: %s must be 1..%lu, not %s", t, max, v);
			if (!strcmp(t, "leaves"))
				c->leaves = (uint32_t)n;
			else
				c->spines = (uint32_t)n;
		} else if (!strcmp(t, "rate")) {
			if (!v[0] || strlen(v) >= sizeof(c->rate) ||
			    strspn(v, "0123456789.kmgbitKMGps") != strlen(v))
				return iod_err_set(
				    e, -EINVAL, "--underlay: rate %s: want a tc rate such as 1gbit",
				    v);
			snprintf(c->rate, sizeof(c->rate), "%s", v);
		} else if (!strcmp(t, "slow")) {
			unsigned long n = strtoul(v, &end, 10);
			if (end == v || *end != ':' || n < 1 || n > IOD_UNDERLAY_SPINES_MAX ||
			    !end[1] || strlen(end + 1) >= sizeof(c->slow_rate) ||
			    strspn(end + 1, "0123456789.kmgbitKMGps") != strlen(end + 1))
				return iod_err_set(e, -EINVAL,
				                   "--underlay: slow=%s: want SPINE:RATE such as "
				                   "2:20mbit",
				                   v);
			c->slow_spine = (uint32_t)n;
			snprintf(c->slow_rate, sizeof(c->slow_rate), "%s", end + 1);
		} else {
			return iod_err_set(
			    e, -EINVAL,
			    "--underlay: unknown key %s (keys: leaves, spines, rate, "
			    "slow)",
			    t);
		}
	}
	if (c->slow_spine > c->spines)
		return iod_err_set(e, -EINVAL, "--underlay: slow spine %u of %u spines",
		                   c->slow_spine, c->spines);
	return 0;
}

int iod_agent_underlay_plan(const struct iod_agent_underlay_cfg *c,
                            struct iod_agent_underlay_step *steps, uint32_t max, uint32_t *n,
                            struct iod_err *e)
{
	struct plan p = {steps, max, 0, false};
	char a[20], b[20];
	const char *P = c->prefix;

	if (c->leaves < 1 || c->leaves > IOD_UNDERLAY_LEAVES_MAX || c->spines < 1 ||
	    c->spines > IOD_UNDERLAY_SPINES_MAX || c->hosts < 1 || c->hosts > IOD_UP_NODES_MAX ||
	    !P[0])
		return iod_err_set(e, -EINVAL,
		                   "underlay: %u leaves, %u spines, %u hosts: out of range",
		                   c->leaves, c->spines, c->hosts);
	/* the namespaces, then every link from the root (veth pairs are made
	 * straight into their namespaces) */
	struct step_w w = step(&p, "ip", "%s", "");
	for (uint32_t s = 1; s <= c->spines; s++)
		put(&w, "netns add %s-s%u\n", P, s);
	for (uint32_t l = 1; l <= c->leaves; l++)
		put(&w, "netns add %s-l%u\n", P, l);
	for (uint32_t h = 1; h <= c->hosts; h++)
		put(&w, "netns add %s-h%u\n", P, h);
	done(&p, &w);
	w = step(&p, "ip", "%s", "");
	for (uint32_t l = 1; l <= c->leaves; l++)
		for (uint32_t s = 1; s <= c->spines; s++)
			put(&w, "link add s%u netns %s-l%u type veth peer name l%u netns %s-s%u\n",
			    s, P, l, l, P, s);
	for (uint32_t h = 1; h <= c->hosts; h++)
		put(&w, "link add u0 netns %s-h%u type veth peer name h%u netns %s-l%u\n", P, h, h,
		    P, iod_agent_underlay_leaf(c, h));
	put(&w, "link add %s type veth peer name cp netns %s-l1\n", P, P);
	ip4(iod_agent_underlay_cp_ip(), a, sizeof(a));
	put(&w, "addr add %s/24 dev %s\nlink set %s up\n", a, P, P);
	put(&w, "route replace 10.254.0.0/16 via 10.254.0.254 dev %s\n", P);
	done(&p, &w);
	/* routers forward and hash the L4 5-tuple over equal-cost paths */
	for (uint32_t k = 0; k < c->leaves + c->spines; k++) {
		bool leaf = k < c->leaves;
		w = step(&p, "sysctl", "%s-%c%u", P, leaf ? 'l' : 's',
		         leaf ? k + 1 : k + 1 - c->leaves);
		put(&w, "net/ipv4/ip_forward=1\nnet/ipv4/conf/all/rp_filter=0\n"
		        "net/ipv4/conf/default/rp_filter=0\nnet/ipv4/fib_multipath_hash_policy=1\n"
		        "net/ipv6/conf/all/disable_ipv6=1\n");
		done(&p, &w);
	}
	for (uint32_t h = 1; h <= c->hosts; h++) {
		w = step(&p, "sysctl", "%s-h%u", P, h);
		put(&w, "net/ipv6/conf/all/disable_ipv6=1\nnet/ipv6/conf/default/disable_ipv6=1\n");
		done(&p, &w);
	}
	for (uint32_t l = 1; l <= c->leaves; l++) {
		uint8_t m[6];
		iod_agent_underlay_leaf_mac(l, m);
		w = step(&p, "ip", "%s-l%u", P, l);
		put(&w, "link set lo up\n");
		put(&w, "link add br0 address %02x:%02x:%02x:%02x:%02x:%02x type bridge\n", m[0],
		    m[1], m[2], m[3], m[4], m[5]);
		put(&w, "addr add 10.254.%u.254/24 dev br0\nlink set br0 up\n", l);
		for (uint32_t h = 1; h <= c->hosts; h++)
			if (iod_agent_underlay_leaf(c, h) == l)
				put(&w, "link set h%u master br0 up\n", h);
		if (l == 1)
			put(&w, "addr add 10.254.0.254/24 dev cp\nlink set cp up\n");
		for (uint32_t s = 1; s <= c->spines; s++) {
			ip4(link_ip(l, s, 0), a, sizeof(a));
			put(&w, "addr add %s/30 dev s%u\nlink set s%u up\n", a, s, s);
		}
		/* every other /24 (other leaves' hosts; the control plane's when it
		 * is not ours) over all spines */
		for (uint32_t o = 0; o <= c->leaves; o++) {
			if (o == l || (o == 0 && l == 1))
				continue;
			put(&w, "route add 10.254.%u.0/24", o);
			for (uint32_t s = 1; s <= c->spines; s++) {
				ip4(link_ip(l, s, 1), b, sizeof(b));
				put(&w, " nexthop via %s", b);
			}
			put(&w, "\n");
		}
		done(&p, &w);
	}
	for (uint32_t s = 1; s <= c->spines; s++) {
		w = step(&p, "ip", "%s-s%u", P, s);
		put(&w, "link set lo up\n");
		for (uint32_t l = 1; l <= c->leaves; l++) {
			ip4(link_ip(l, s, 1), a, sizeof(a));
			ip4(link_ip(l, s, 0), b, sizeof(b));
			put(&w, "addr add %s/30 dev l%u\nlink set l%u up\n", a, l, l);
			put(&w, "route add 10.254.%u.0/24 via %s\n", l, b);
			if (l == 1)
				put(&w, "route add 10.254.0.0/24 via %s\n", b);
		}
		done(&p, &w);
	}
	for (uint32_t h = 1; h <= c->hosts; h++) {
		uint32_t l = iod_agent_underlay_leaf(c, h);
		ip4(iod_agent_underlay_host_ip(c, h), a, sizeof(a));
		w = step(&p, "ip", "%s-h%u", P, h);
		put(&w, "link set lo up\naddr add %s/24 dev u0\nlink set u0 up\n", a);
		put(&w, "route add default via 10.254.%u.254\n", l);
		done(&p, &w);
	}
	/* rates: both directions of every spine link (egress of each end) */
	for (uint32_t k = 0; k < c->spines + c->leaves; k++) {
		bool spine = k < c->spines;
		uint32_t x = spine ? k + 1 : k + 1 - c->spines;
		bool any = false;
		w = step(&p, "tc", "%s-%c%u", P, spine ? 's' : 'l', x);
		for (uint32_t y = 1; y <= (spine ? c->leaves : c->spines); y++) {
			uint32_t sp = spine ? x : y;
			const char *rate = sp == c->slow_spine ? c->slow_rate : c->rate;
			if (!rate[0])
				continue;
			put(&w, "qdisc add dev %c%u root tbf rate %s burst 64kb latency 50ms\n",
			    spine ? 'l' : 's', y, rate);
			any = true;
		}
		done(&p, &w);
		if (!any && p.n && w.s == &p.steps[p.n - 1])
			p.n--; /* nothing limited here */
	}
	if (p.overflow)
		return iod_err_set(e, -E2BIG, "underlay: the plan does not fit its limits");
	*n = p.n;
	return 0;
}
