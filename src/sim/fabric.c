/*
 * fabric.c: the fabric model and its event loop: ports with drop-tail
 * queues and ECN marking, ECMP forwarding over routing tables computed from
 * the topology, link failure and degradation, and packet delivery to the
 * transports (transport.c) at the hosts.
 *
 * It exists so FCT and routing studies run on iod's own edge and policy code
 * in virtual time. It must never read the wall clock, draw randomness other
 * than from the seeded streams it owns, or allocate on the event path:
 * packets come from an iod_pool and events from a fixed heap; running out
 * of either stops the run with an explicit error.
 */
#include "internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

const char *iod_sim_hash_name(enum iod_sim_hash h)
{
	static const char *const names[] = {
#define X(n, s) s,
	    IOD_SIM_HASHES(X)
#undef X
	};
	return (unsigned)h < IOD_ARRAY_LEN(names) ? names[h] : "?";
}

void iod_sim_config_default(struct iod_sim_config *c)
{
	memset(c, 0, sizeof(*c));
	c->seed = 1;
	c->transport = IOD_SIM_DCTCP;
	c->mss_bytes = 1400;
	c->hdr_bytes = 54 + IOD_SIM_VXLAN_OVERHEAD_BYTES; /* inner Eth+IP+TCP, outer */
	c->rto_min_ns = 1 * IOD_NS_PER_MS;
	c->tsq_bytes = 64000;
	c->dctcp_g = 1.0 / 16;
	c->packets_max = IOD_SIM_PACKETS_DEFAULT;
	c->flows_max = IOD_SIM_FLOWS_DEFAULT;
}

/* ---- ECMP hashing -------------------------------------------------------- */

static uint32_t crc_table[256];
static bool crc_ready;

static void crc_init(void)
{
	if (crc_ready)
		return;
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1; /* CRC-32C */
		crc_table[i] = c;
	}
	crc_ready = true;
}

static inline uint32_t rotr32(uint32_t x, unsigned r)
{
	r &= 31;
	return r ? (x >> r) | (x << (32 - r)) : x;
}

uint32_t sim_ecmp_hash(enum iod_sim_hash h, uint64_t seed, uint32_t src, uint32_t dst,
                       uint16_t sport, uint16_t dport, uint8_t proto)
{
	switch (h) {
	case IOD_SIM_HASH_CRC32: {
		unsigned char b[13];
		memcpy(b, &src, 4);
		memcpy(b + 4, &dst, 4);
		memcpy(b + 8, &sport, 2);
		memcpy(b + 10, &dport, 2);
		b[12] = proto;
		uint32_t c = ~(uint32_t)seed;
		for (size_t i = 0; i < sizeof(b); i++)
			c = crc_table[(c ^ b[i]) & 0xff] ^ (c >> 8);
		/* CRC is linear: a different init alone shifts every hash by the
		 * same constant, so switches would still agree on the low bits.
		 * Real ASICs offset which bits they use; rotating does that. */
		return rotr32(~c, (unsigned)(seed >> 32));
	}
	case IOD_SIM_HASH_XOR:
		return rotr32(src ^ dst ^ sport ^ ((uint32_t)dport << 16) ^ proto ^ (uint32_t)seed,
		              (unsigned)(seed >> 32));
	case IOD_SIM_HASH_MIX:
	default: {
		uint64_t x = ((uint64_t)src << 32 | dst) ^ seed;
		x = iod_hash_u64(x) ^ ((uint64_t)sport << 24 | (uint64_t)dport << 8 | proto);
		return (uint32_t)iod_hash_u64(x);
	}
	}
}

/* ---- routing -------------------------------------------------------------- */

/* Shortest-path candidate ports from every node to every host, over links
 * that are up; hosts never transit. Recomputed when a link goes down or up
 * (instant convergence: see docs/simulator.md). */
static int routes_compute(struct iod_sim *s)
{
	uint32_t N = s->n_nodes, H = s->n_hosts;
	uint32_t *dist = malloc(sizeof(uint32_t) * N);
	uint32_t *fifo = malloc(sizeof(uint32_t) * N);
	uint32_t used = 0;

	if (!dist || !fifo) {
		free(dist);
		free(fifo);
		return -ENOMEM;
	}
	for (uint32_t d = 0; d < H; d++) {
		uint32_t hd = s->hosts[d], head = 0, tail = 0;
		for (uint32_t n = 0; n < N; n++)
			dist[n] = UINT32_MAX;
		dist[hd] = 0;
		fifo[tail++] = hd;
		while (head < tail) {
			uint32_t u = fifo[head++];
			if (u != hd && s->nodes[u].kind == IOD_SIM_HOST)
				continue;
			const struct sim_node *nu = &s->nodes[u];
			for (uint32_t p = nu->port_first; p < nu->port_first + nu->port_n; p++) {
				uint32_t v = s->ports[p].peer;
				if (s->ports[p].rate_bps && dist[v] == UINT32_MAX) {
					dist[v] = dist[u] + 1;
					fifo[tail++] = v;
				}
			}
		}
		for (uint32_t n = 0; n < N; n++) {
			size_t slot = (size_t)n * H + d;
			s->route_off[slot] = used;
			s->route_cnt[slot] = 0;
			if (n == hd || dist[n] == UINT32_MAX)
				continue;
			const struct sim_node *nn = &s->nodes[n];
			for (uint32_t p = nn->port_first; p < nn->port_first + nn->port_n; p++) {
				if (!s->ports[p].rate_bps || dist[s->ports[p].peer] + 1 != dist[n])
					continue;
				IOD_ASSERT(used < s->route_cap);
				s->route_ports[used++] = p;
				s->route_cnt[slot]++;
			}
		}
	}
	free(dist);
	free(fifo);
	return 0;
}

static inline uint32_t route_pick(const struct iod_sim *s, uint32_t node, uint32_t dst,
                                  uint32_t src, uint16_t sport)
{
	size_t slot = (size_t)node * s->n_hosts + dst;
	uint32_t cnt = s->route_cnt[slot];
	if (!cnt)
		return SIM_NONE;
	const uint32_t *c = &s->route_ports[s->route_off[slot]];
	if (cnt == 1)
		return c[0];
	uint32_t h =
	    sim_ecmp_hash(s->hash, s->nodes[node].seed, src, dst, sport, IOD_SIM_VXLAN_PORT, 17);
	return c[h % cnt];
}

/* ---- creation ------------------------------------------------------------- */

static uint64_t node_seed(const struct iod_sim_topo *t, uint32_t n)
{
	if (t->seed_mode == IOD_SIM_SEED_SAME)
		return t->hash_seed;
	return iod_hash_u64(t->hash_seed ^ iod_hash_u64((uint64_t)n + 1));
}

int iod_sim_create(struct iod_sim **out, const struct iod_sim_topo *t,
                   const struct iod_sim_config *c, struct iod_err *e)
{
	struct iod_sim *s;
	int rc;

	*out = NULL;
	if (!t->n_nodes || !iod_sim_topo_host_count(t))
		return iod_err_set(e, -EINVAL, "topology %s has no hosts", t->name);
	if (c->mss_bytes < 64 || c->mss_bytes > 9000 || c->hdr_bytes > 1024)
		return iod_err_set(e, -EINVAL, "mss %u must be 64..9000 bytes", c->mss_bytes);
	if (!c->packets_max || !c->flows_max)
		return iod_err_set(e, -EINVAL, "packets_max and flows_max must be > 0");
	s = calloc(1, sizeof(*s));
	if (!s)
		return iod_err_set(e, -ENOMEM, "out of memory");
	crc_init();
	s->cfg = *c;
	if (!s->cfg.max_cwnd_pkts || s->cfg.max_cwnd_pkts > IOD_SIM_CWND_MAX_PKTS)
		s->cfg.max_cwnd_pkts = IOD_SIM_CWND_MAX_PKTS;
	if (!s->cfg.dctcp_g)
		s->cfg.dctcp_g = 1.0 / 16;
	if (!s->cfg.rto_min_ns)
		s->cfg.rto_min_ns = IOD_NS_PER_MS;
	if (!s->cfg.tsq_bytes)
		s->cfg.tsq_bytes = 64000;
	s->policy = c->policy ? c->policy : &iod_sim_path_ecmp;
	s->hash = t->hash;
	iod_rng_seed(&s->rng, c->seed);
	s->n_nodes = t->n_nodes;
	s->n_links = t->n_links;
	s->n_ports = 2 * t->n_links;
	s->nodes = calloc(s->n_nodes, sizeof(*s->nodes));
	s->ports = calloc(s->n_ports ? s->n_ports : 1, sizeof(*s->ports));
	s->port_of_link = calloc(s->n_links ? s->n_links : 1, sizeof(uint32_t));
	s->rev_port = calloc(s->n_ports ? s->n_ports : 1, sizeof(uint32_t));
	s->names = calloc(s->n_nodes, sizeof(*s->names));
	s->hosts = calloc(s->n_nodes, sizeof(uint32_t));
	s->flows = calloc(c->flows_max, sizeof(*s->flows));
	s->arr = calloc(c->flows_max, sizeof(uint32_t));
	s->arr_sorted = true;
	s->raws = calloc(IOD_SIM_RAW_MAX, sizeof(*s->raws));
	s->tevents = calloc(t->n_events ? t->n_events : 1, sizeof(*s->tevents));
	if (!s->nodes || !s->ports || !s->port_of_link || !s->rev_port || !s->names || !s->hosts ||
	    !s->flows || !s->arr || !s->raws || !s->tevents) {
		iod_sim_destroy(s);
		return iod_err_set(e, -ENOMEM, "out of memory for %u flows", c->flows_max);
	}
	/* Nodes, then each node's ports contiguously, in link order. */
	uint32_t *deg = calloc(s->n_nodes, sizeof(uint32_t));
	if (!deg) {
		iod_sim_destroy(s);
		return iod_err_set(e, -ENOMEM, "out of memory");
	}
	for (uint32_t l = 0; l < t->n_links; l++) {
		deg[t->links[l].a]++;
		deg[t->links[l].b]++;
	}
	uint32_t first = 0;
	for (uint32_t n = 0; n < s->n_nodes; n++) {
		struct sim_node *nd = &s->nodes[n];
		nd->kind = t->nodes[n].kind;
		nd->port_first = first;
		nd->port_n = 0;
		nd->seed = node_seed(t, n);
		nd->host = SIM_NONE;
		nd->blk_head = nd->blk_tail = SIM_NONE;
		first += deg[n];
		iod_strlcpy(s->names[n], t->nodes[n].name, IOD_NAME_MAX);
		if (nd->kind == IOD_SIM_HOST) {
			nd->host = s->n_hosts;
			s->hosts[s->n_hosts++] = n;
		}
	}
	free(deg);
	for (uint32_t l = 0; l < t->n_links; l++) {
		const struct iod_sim_topo_link *lk = &t->links[l];
		uint32_t ends[2] = {lk->a, lk->b};
		for (int k = 0; k < 2; k++) {
			struct sim_node *nd = &s->nodes[ends[k]];
			uint32_t p = nd->port_first + nd->port_n++;
			struct sim_port *pt = &s->ports[p];
			pt->node = ends[k];
			pt->peer = ends[1 - k];
			pt->link = l;
			pt->head = pt->tail = SIM_NONE;
			pt->rate_bps = lk->rate_bps;
			pt->delay_ns = lk->delay_ns;
			pt->buffer_bytes =
			    nd->kind == IOD_SIM_HOST ? t->host_buffer_bytes : t->buffer_bytes;
			if (k == 0) {
				s->port_of_link[l] = p;
			} else {
				s->rev_port[p] = s->port_of_link[l];
				s->rev_port[s->port_of_link[l]] = p;
			}
		}
	}
	s->ecn_bytes = t->ecn_bytes;
	s->ecn_pkts = t->ecn_pkts;
	/* Routing tables. */
	uint64_t cap = (uint64_t)s->n_ports * s->n_hosts;
	uint64_t slots = (uint64_t)s->n_nodes * s->n_hosts;
	if (cap > IOD_SIM_ROUTES_MAX || slots > IOD_SIM_ROUTES_MAX) {
		iod_sim_destroy(s);
		return iod_err_set(e, -E2BIG,
		                   "topology %s is too large to route: %" PRIu64
		                   " routing entries (limit %u, IOD_SIM_ROUTES_MAX)",
		                   t->name, cap > slots ? cap : slots, IOD_SIM_ROUTES_MAX);
	}
	s->route_cap = (uint32_t)(cap ? cap : 1);
	s->route_off = malloc(sizeof(uint32_t) * slots);
	s->route_cnt = malloc(sizeof(uint16_t) * slots);
	s->route_ports = malloc(sizeof(uint32_t) * s->route_cap);
	if (!s->route_off || !s->route_cnt || !s->route_ports || routes_compute(s)) {
		iod_sim_destroy(s);
		return iod_err_set(e, -ENOMEM, "out of memory for routing tables");
	}
	/* Packets and events. */
	rc = iod_pool_init(&s->pkts, sizeof(struct sim_pkt), c->packets_max);
	if (rc) {
		iod_sim_destroy(s);
		return iod_err_set(e, rc, "cannot allocate %u packets", c->packets_max);
	}
	uint64_t evs = c->events_max ? c->events_max
	                             : 2ull * c->packets_max + 1ull * c->flows_max +
	                                   IOD_SIM_RAW_MAX + t->n_events + 1024;
	if (evs > UINT32_MAX - 1)
		evs = UINT32_MAX - 1;
	/* the heap while small, the calendar past AUTO_UP pending (bench_sim) */
	rc = iod_sim_queue_init_kind(&s->q, (uint32_t)evs, IOD_SIM_QUEUE_AUTO);
	if (rc) {
		iod_sim_destroy(s);
		return iod_err_set(e, rc, "cannot allocate %" PRIu64 " events", evs);
	}
	for (uint32_t i = 0; i < t->n_events; i++) {
		s->tevents[i] = t->events[i];
		iod_sim_queue_push(&s->q, t->events[i].at_ns, EV_LINK, i, 0);
	}
	s->n_tevents = t->n_events;
	*out = s;
	return 0;
}

void iod_sim_destroy(struct iod_sim *s)
{
	if (!s)
		return;
	iod_sim_queue_destroy(&s->q);
	iod_pool_destroy(&s->pkts);
	free(s->nodes);
	free(s->ports);
	free(s->port_of_link);
	free(s->rev_port);
	free(s->names);
	free(s->hosts);
	free(s->flows);
	free(s->arr);
	free(s->raws);
	free(s->tevents);
	free(s->route_off);
	free(s->route_cnt);
	free(s->route_ports);
	free(s);
}

/* ---- the event path --------------------------------------------------------- */

void sim_fail(struct iod_sim *s, int code, const char *msg)
{
	if (!s->err) {
		s->err = code;
		iod_strlcpy(s->err_msg, msg, sizeof(s->err_msg));
	}
}

void sim_push(struct iod_sim *s, uint64_t t_ns, uint32_t kind, uint32_t arg, uint64_t data)
{
	int rc = iod_sim_queue_push(&s->q, t_ns, kind, arg, data);
	if (IOD_UNLIKELY(rc))
		sim_fail(s, rc,
		         rc == -ENOSPC   ? "event queue full; raise events_max"
		         : rc == -ENOMEM ? "out of memory for the event queue"
		                         : "event scheduled in the past (a bug)");
}

struct sim_pkt *sim_pkt_alloc(struct iod_sim *s)
{
	struct sim_pkt *p = iod_pool_get(&s->pkts);
	if (IOD_UNLIKELY(!p)) {
		sim_fail(s, -ENOMEM, "packet pool exhausted; raise the pool (--packets)");
		return NULL;
	}
	return p;
}

static inline void pkt_free(struct iod_sim *s, struct sim_pkt *p)
{
	iod_pool_put(&s->pkts, p);
}

uint64_t sim_ser_ns(uint64_t bytes, uint64_t rate_bps)
{
	return (bytes * 8 * IOD_NS_PER_S + rate_bps - 1) / rate_bps;
}

static void port_start(struct iod_sim *s, uint32_t pi)
{
	struct sim_port *pt = &s->ports[pi];
	uint32_t idx = pt->head;
	struct sim_pkt *p = iod_pool_at(&s->pkts, idx);

	pt->head = p->next;
	if (pt->head == SIM_NONE)
		pt->tail = SIM_NONE;
	pt->q_bytes -= p->wire_bytes;
	pt->q_pkts--;
	s->nodes[pt->node].host_q_bytes -= p->wire_bytes;
	pt->st.wait_ns_sum += s->now_ns - p->enq_ns;
	uint64_t ser = sim_ser_ns(p->wire_bytes, pt->rate_bps);
	pt->busy = true;
	pt->st.tx_pkts++;
	pt->st.tx_bytes += p->wire_bytes;
	pt->st.busy_ns += ser;
	sim_push(s, s->now_ns + ser, EV_TX_DONE, pi, 0);
	sim_push(s, s->now_ns + ser + pt->delay_ns, EV_ARRIVE, pi, idx);
}

static void port_enqueue(struct iod_sim *s, uint32_t pi, struct sim_pkt *p)
{
	struct sim_port *pt = &s->ports[pi];

	if (IOD_UNLIKELY(!pt->rate_bps) || pt->q_bytes + p->wire_bytes > pt->buffer_bytes) {
		pt->st.drops++;
		pkt_free(s, p);
		return;
	}
	if ((p->flags & PF_ECT) && s->nodes[pt->node].kind == IOD_SIM_SWITCH &&
	    ((s->ecn_pkts && pt->q_pkts >= s->ecn_pkts) ||
	     (s->ecn_bytes && pt->q_bytes >= s->ecn_bytes))) {
		p->flags |= PF_CE;
		pt->st.ecn_marks++;
	}
	uint32_t idx = iod_pool_index(&s->pkts, p);
	p->next = SIM_NONE;
	p->enq_ns = s->now_ns;
	if (pt->tail == SIM_NONE)
		pt->head = idx;
	else
		((struct sim_pkt *)iod_pool_at(&s->pkts, pt->tail))->next = idx;
	pt->tail = idx;
	pt->q_bytes += p->wire_bytes;
	pt->q_pkts++;
	s->nodes[pt->node].host_q_bytes += p->wire_bytes;
	if (pt->q_bytes > pt->st.q_max_bytes)
		pt->st.q_max_bytes = pt->q_bytes;
	if (!pt->busy)
		port_start(s, pi);
}

void sim_forward(struct iod_sim *s, uint32_t node, struct sim_pkt *p)
{
	uint32_t pi = route_pick(s, node, p->dst, p->src, p->sport);
	if (IOD_UNLIKELY(pi == SIM_NONE)) {
		s->drops_noroute++;
		pkt_free(s, p);
		return;
	}
	if (IOD_UNLIKELY(p->type == PKT_PROBE)) {
		/* INT-like: a probe keeps the largest queueing delay it meets
		 * (in seq, which probes do not use otherwise). */
		const struct sim_port *pt = &s->ports[pi];
		uint64_t q_ns = pt->rate_bps ? pt->q_bytes * 8 * IOD_NS_PER_S / pt->rate_bps : 0;
		if (q_ns > p->seq)
			p->seq = q_ns > UINT32_MAX ? UINT32_MAX : (uint32_t)q_ns;
	}
	port_enqueue(s, pi, p);
}

/* The links a packet from src to dst on sport crosses now, as a hash and a
 * 64-bit link signature: the path identity a probe reply reports. */
static void probe_path(const struct iod_sim *s, uint32_t src, uint32_t dst, uint16_t sport,
                       uint64_t *id, uint64_t *links)
{
	uint32_t node = s->hosts[src];
	*id = 0;
	*links = 0;
	for (uint32_t hop = 0; hop < IOD_SIM_PATH_MAX && node != s->hosts[dst]; hop++) {
		uint32_t pi = route_pick(s, node, dst, src, sport);
		if (pi == SIM_NONE)
			break;
		*id = iod_hash_u64(*id ^ ((uint64_t)s->ports[pi].link + 1));
		*links |= 1ull << (iod_hash_u64(s->ports[pi].link) % 64);
		node = s->ports[pi].peer;
	}
}

static void on_arrive(struct iod_sim *s, uint32_t pi, uint32_t idx)
{
	struct sim_pkt *p = iod_pool_at(&s->pkts, idx);
	uint32_t node = s->ports[pi].peer;
	const struct sim_node *nd = &s->nodes[node];

	if (nd->kind == IOD_SIM_SWITCH) {
		sim_forward(s, node, p);
		return;
	}
	if (IOD_UNLIKELY(nd->host != p->dst)) {
		s->drops_noroute++;
		pkt_free(s, p);
		return;
	}
	switch (p->type) {
	case PKT_DATA: sim_transport_data(s, p); break;
	case PKT_ACK: sim_transport_ack(s, p); break;
	case PKT_PROBE: {
		/* reflect it: same outer source port, CE echoed */
		struct sim_pkt *r = sim_pkt_alloc(s);
		if (!r)
			break;
		*r = *p;
		r->type = PKT_PROBE_REPLY;
		r->src = p->dst;
		r->dst = p->src;
		r->data_sport = p->sport;
		r->flags = (p->flags & PF_CE) ? PF_ECE : 0;
		sim_forward(s, node, r);
		break;
	}
	case PKT_PROBE_REPLY:
		if (s->policy->feedback) {
			struct iod_sim_path_feedback fb = {IOD_SIM_FB_PROBE_REPLY,
			                                   p->dst,
			                                   p->src,
			                                   UINT32_MAX,
			                                   p->data_sport,
			                                   (p->flags & PF_ECE) != 0,
			                                   s->now_ns - p->sent_ns,
			                                   s->now_ns,
			                                   0,
			                                   0,
			                                   p->seq};
			probe_path(s, p->dst, p->src, p->data_sport, &fb.path_id, &fb.path_links);
			s->policy->feedback(s->policy->state, &fb);
		}
		break;
	default: break;
	}
	pkt_free(s, p);
}

static void on_link(struct iod_sim *s, uint32_t ti)
{
	const struct iod_sim_topo_event *ev = &s->tevents[ti];
	uint32_t p0 = s->port_of_link[ev->link];
	bool was_up = s->ports[p0].rate_bps != 0;
	bool up = ev->rate_bps != 0;

	for (uint32_t k = 0; k < 2; k++) {
		uint32_t pi = k == 0 ? p0 : s->rev_port[p0];
		struct sim_port *pt = &s->ports[pi];
		pt->rate_bps = ev->rate_bps;
		pt->st.rate_bps = ev->rate_bps;
		if (!up) {
			while (pt->head != SIM_NONE) {
				struct sim_pkt *p = iod_pool_at(&s->pkts, pt->head);
				pt->head = p->next;
				pt->st.drops++;
				pkt_free(s, p);
			}
			pt->tail = SIM_NONE;
			s->nodes[pt->node].host_q_bytes -= pt->q_bytes;
			pt->q_bytes = 0;
			pt->q_pkts = 0;
		}
	}
	if (was_up != up && routes_compute(s))
		sim_fail(s, -ENOMEM, "out of memory recomputing routes");
}

static void on_probe_tick(struct iod_sim *s)
{
	struct iod_sim_probe pr[IOD_SIM_PROBES_PER_TICK_MAX];
	/* keep ticking only while there is other work, so runs still end */
	if (!s->q.n && s->arr_pos >= s->arr_n) {
		s->probe_ticking = false;
		return;
	}
	sim_push(s, s->now_ns + s->policy->probe_interval_ns, EV_PROBE_TICK, 0, 0);
	for (uint32_t h = 0; h < s->n_hosts; h++) {
		uint32_t n = s->policy->probe(s->policy->state, h, s->now_ns, pr,
		                              IOD_SIM_PROBES_PER_TICK_MAX);
		IOD_ASSERT(n <= IOD_SIM_PROBES_PER_TICK_MAX);
		for (uint32_t i = 0; i < n; i++) {
			if (pr[i].dst_host >= s->n_hosts || pr[i].dst_host == h)
				continue;
			struct sim_pkt *p = sim_pkt_alloc(s);
			if (!p)
				return;
			memset(p, 0, sizeof(*p));
			p->type = PKT_PROBE;
			p->flow = UINT32_MAX;
			p->src = h;
			p->dst = pr[i].dst_host;
			p->wire_bytes = 64 + IOD_SIM_VXLAN_OVERHEAD_BYTES;
			p->sent_ns = s->now_ns;
			p->sport = pr[i].sport;
			p->flags = PF_ECT;
			s->probes_sent++;
			sim_forward(s, s->hosts[h], p);
		}
	}
}

static void on_raw(struct iod_sim *s, uint32_t ri)
{
	struct sim_raw *r = &s->raws[ri];
	if (s->now_ns >= r->stop_ns)
		return;
	struct sim_pkt *p = sim_pkt_alloc(s);
	if (!p)
		return;
	memset(p, 0, sizeof(*p));
	p->type = PKT_RAW;
	p->flow = ri;
	p->src = r->src;
	p->dst = r->dst;
	p->wire_bytes = r->wire_bytes;
	p->sport = iod_sim_edge_sport(iod_hash_u64(ri + 1));
	sim_forward(s, s->hosts[r->src], p);
	if (r->period_ns) {
		uint64_t next =
		    s->now_ns + (uint64_t)(r->mean_gap_ns + 0.5) + (r->mean_gap_ns < 0.5);
		uint64_t phase = (next - r->start_ns) % r->period_ns;
		if (phase >= r->on_ns)
			next += r->period_ns - phase; /* off: wait for the next burst */
		sim_push(s, next, EV_RAW, ri, 0);
		return;
	}
	uint64_t gap = (uint64_t)(iod_rng_exp(&r->rng, r->mean_gap_ns) + 0.5);
	sim_push(s, s->now_ns + gap, EV_RAW, ri, 0);
}

int iod_sim_raw_burst(struct iod_sim *s, uint32_t raw, uint64_t on_ns, uint64_t period_ns,
                      struct iod_err *e)
{
	if (raw >= s->n_raws || !on_ns || on_ns > period_ns)
		return iod_err_set(e, -EINVAL, "raw source %u: bad burst %llu ns of %llu ns", raw,
		                   (unsigned long long)on_ns, (unsigned long long)period_ns);
	s->raws[raw].on_ns = on_ns;
	s->raws[raw].period_ns = period_ns;
	return 0;
}

int iod_sim_raw_add(struct iod_sim *s, uint32_t src, uint32_t dst, uint32_t wire_bytes,
                    double rate_pps, uint64_t start_ns, uint64_t stop_ns, struct iod_err *e)
{
	if (s->n_raws >= IOD_SIM_RAW_MAX)
		return iod_err_set(e, -ENOSPC, "more than %d raw sources", IOD_SIM_RAW_MAX);
	if (src >= s->n_hosts || dst >= s->n_hosts || src == dst || !wire_bytes || !(rate_pps > 0))
		return iod_err_set(e, -EINVAL, "raw source: bad hosts %u->%u or rate", src, dst);
	struct sim_raw *r = &s->raws[s->n_raws];
	r->src = src;
	r->dst = dst;
	r->wire_bytes = wire_bytes;
	r->mean_gap_ns = 1e9 / rate_pps;
	r->stop_ns = stop_ns;
	r->start_ns = start_ns;
	r->on_ns = 0;
	r->period_ns = 0;
	iod_rng_fork(&s->rng, &r->rng);
	sim_push(s, start_ns, EV_RAW, s->n_raws, 0);
	s->n_raws++;
	return s->err ? iod_err_set(e, s->err, "%s", s->err_msg) : 0;
}

static const struct iod_sim *sort_ctx;
static int cmp_start(const void *a, const void *b)
{
	const struct iod_sim_flow_rec *x = &sort_ctx->flows[*(const uint32_t *)a].rec;
	const struct iod_sim_flow_rec *y = &sort_ctx->flows[*(const uint32_t *)b].rec;
	if (x->start_ns != y->start_ns)
		return x->start_ns < y->start_ns ? -1 : 1;
	return x->id < y->id ? -1 : x->id > y->id;
}

void sim_arrival_add(struct iod_sim *s, uint32_t id)
{
	IOD_ASSERT(s->arr_n < s->cfg.flows_max);
	if (s->arr_n > s->arr_pos &&
	    s->flows[s->arr[s->arr_n - 1]].rec.start_ns > s->flows[id].rec.start_ns)
		s->arr_sorted = false;
	s->arr[s->arr_n++] = id;
}

int iod_sim_run(struct iod_sim *s, uint64_t until_ns, struct iod_err *e)
{
	struct iod_sim_event ev;
	uint64_t next_progress = s->progress_every ? s->events + s->progress_every : UINT64_MAX;

	if (s->policy->probe && s->policy->probe_interval_ns && !s->probe_ticking) {
		s->probe_ticking = true;
		sim_push(s, s->now_ns + s->policy->probe_interval_ns, EV_PROBE_TICK, 0, 0);
	}
	for (;;) {
		if (IOD_UNLIKELY(!s->arr_sorted)) {
			/* qsort is not stable, but (start, id) is a total order */
			sort_ctx = s;
			qsort(s->arr + s->arr_pos, s->arr_n - s->arr_pos, sizeof(uint32_t),
			      cmp_start);
			s->arr_sorted = true;
		}
		uint64_t t_arr =
		    s->arr_pos < s->arr_n ? s->flows[s->arr[s->arr_pos]].rec.start_ns : UINT64_MAX;
		uint64_t t_q = iod_sim_queue_peek(&s->q);
		if (s->err || (t_arr == UINT64_MAX && t_q == UINT64_MAX) ||
		    (t_arr > until_ns && t_q > until_ns))
			break;
		if (t_arr <= t_q) {
			/* flow starts fire before other events of the same ns */
			IOD_ASSERT_HOT(t_arr >= s->now_ns);
			s->now_ns = t_arr;
			s->events++;
			sim_transport_start(s, s->arr[s->arr_pos++]);
			continue;
		}
		iod_sim_queue_pop(&s->q, &ev);
		IOD_ASSERT_HOT(ev.t_ns >= s->now_ns);
		s->now_ns = ev.t_ns;
		s->events++;
		switch (ev.kind) {
		case EV_TX_DONE: {
			struct sim_port *pt = &s->ports[ev.arg];
			pt->busy = false;
			if (pt->head != SIM_NONE && pt->rate_bps)
				port_start(s, ev.arg);
			if (s->nodes[pt->node].blk_head != SIM_NONE)
				sim_transport_wake(s, pt->node);
			break;
		}
		case EV_ARRIVE: on_arrive(s, ev.arg, (uint32_t)ev.data); break;
		case EV_FLOW_START: sim_transport_start(s, ev.arg); break;
		case EV_RTO: sim_transport_rto(s, ev.arg); break;
		case EV_LINK: on_link(s, ev.arg); break;
		case EV_RAW: on_raw(s, ev.arg); break;
		case EV_PROBE_TICK: on_probe_tick(s); break;
		default: IOD_ASSERT(!"unknown event");
		}
		if (IOD_UNLIKELY(s->events >= next_progress)) {
			s->progress_fn(s->progress_ctx, s);
			next_progress = s->events + s->progress_every;
		}
	}
	if (s->err)
		return iod_err_set(e, s->err, "at %.6f s of simulated time: %s",
		                   (double)s->now_ns / 1e9, s->err_msg);
	if (until_ns != UINT64_MAX && s->now_ns < until_ns)
		s->now_ns = until_ns;
	return 0;
}

void iod_sim_on_flow_done(struct iod_sim *s, iod_sim_flow_done_fn fn, void *ctx)
{
	s->done_fn = fn;
	s->done_ctx = ctx;
}

void iod_sim_on_progress(struct iod_sim *s, iod_sim_progress_fn fn, void *ctx,
                         uint64_t every_events)
{
	s->progress_fn = fn;
	s->progress_ctx = ctx;
	s->progress_every = fn ? every_events : 0;
}

/* ---- queries ------------------------------------------------------------- */

uint64_t iod_sim_now(const struct iod_sim *s)
{
	return s->now_ns;
}
uint64_t iod_sim_events(const struct iod_sim *s)
{
	return s->events;
}
uint32_t iod_sim_host_count(const struct iod_sim *s)
{
	return s->n_hosts;
}
uint32_t iod_sim_host_node(const struct iod_sim *s, uint32_t h)
{
	IOD_ASSERT(h < s->n_hosts);
	return s->hosts[h];
}
uint64_t iod_sim_host_rate_bps(const struct iod_sim *s, uint32_t h)
{
	const struct sim_node *nd = &s->nodes[iod_sim_host_node(s, h)];
	uint64_t r = 0;
	for (uint32_t p = nd->port_first; p < nd->port_first + nd->port_n; p++)
		r += s->ports[p].rate_bps;
	return r;
}
const char *iod_sim_node_name(const struct iod_sim *s, uint32_t node)
{
	return node < s->n_nodes ? s->names[node] : "?";
}
uint32_t iod_sim_port_count(const struct iod_sim *s)
{
	return s->n_ports;
}
void iod_sim_port_stats(const struct iod_sim *s, uint32_t port, struct iod_sim_port_stats *st)
{
	IOD_ASSERT(port < s->n_ports);
	const struct sim_port *pt = &s->ports[port];
	*st = pt->st;
	st->node = pt->node;
	st->peer = pt->peer;
	st->link = pt->link;
	st->rate_bps = pt->rate_bps;
}

uint32_t iod_sim_path(const struct iod_sim *s, uint32_t src, uint32_t dst, uint16_t sport,
                      uint32_t *nodes, uint32_t max)
{
	uint32_t n = 0, node = s->hosts[src];
	while (n < max && n < IOD_SIM_PATH_MAX) {
		nodes[n++] = node;
		if (node == s->hosts[dst])
			break;
		uint32_t pi = route_pick(s, node, dst, src, sport);
		if (pi == SIM_NONE)
			break;
		node = s->ports[pi].peer;
	}
	return n;
}

/* The ports of one path from src to dst (first candidate at each hop). */
static uint32_t path_ports(const struct iod_sim *s, uint32_t src, uint32_t dst, uint32_t *ports)
{
	uint32_t n = 0, node = s->hosts[src];
	while (node != s->hosts[dst] && n < IOD_SIM_PATH_MAX) {
		size_t slot = (size_t)node * s->n_hosts + dst;
		if (!s->route_cnt[slot])
			return 0;
		uint32_t pi = s->route_ports[s->route_off[slot]];
		ports[n++] = pi;
		node = s->ports[pi].peer;
	}
	return node == s->hosts[dst] ? n : 0;
}

uint64_t iod_sim_wire_bytes(const struct iod_sim *s, uint64_t size_bytes)
{
	uint64_t npkts = size_bytes ? (size_bytes + s->cfg.mss_bytes - 1) / s->cfg.mss_bytes : 1;
	return size_bytes + npkts * s->cfg.hdr_bytes;
}

/*
 * Ideal FCT on the empty network, exactly as this model would run it:
 * n packets leave the sender back to back; through a tandem of
 * store-and-forward hops with serialisation s_h and delay p_h, full packet
 * k finishes hop h at sum_{j<=h} s_j + sum_{j<h} p_j + (k-1) max_{j<=h} s_j;
 * the (shorter) last packet is walked hop by hop; then its ACK returns.
 */
uint64_t iod_sim_ideal_fct(const struct iod_sim *s, uint32_t src, uint32_t dst, uint64_t size_bytes)
{
	uint32_t fw[IOD_SIM_PATH_MAX], bw[IOD_SIM_PATH_MAX];
	uint32_t h = path_ports(s, src, dst, fw), hb = path_ports(s, dst, src, bw);
	if (!h || !hb)
		return 0;
	uint64_t mss = s->cfg.mss_bytes, hdr = s->cfg.hdr_bytes;
	uint64_t n = size_bytes ? (size_bytes + mss - 1) / mss : 1;
	uint64_t last = size_bytes - (n - 1) * mss + hdr, full = mss + hdr;
	uint64_t sum_s = 0, sum_p = 0, max_s = 0, d_last = 0;

	for (uint32_t j = 0; j < h; j++) {
		const struct sim_port *pt = &s->ports[fw[j]];
		uint64_t sf = sim_ser_ns(full, pt->rate_bps), sl = sim_ser_ns(last, pt->rate_bps);
		sum_s += sf;
		max_s = sf > max_s ? sf : max_s;
		/* finish of full packet n-1 at this hop (if there is one) */
		uint64_t d_prev = n >= 2 ? sum_s + sum_p + (n - 2) * max_s : 0;
		uint64_t arrive = j == 0 ? 0 : d_last + s->ports[fw[j - 1]].delay_ns;
		d_last = (arrive > d_prev ? arrive : d_prev) + sl;
		sum_p += pt->delay_ns;
	}
	uint64_t t = d_last + s->ports[fw[h - 1]].delay_ns;
	for (uint32_t j = 0; j < hb; j++)
		t += sim_ser_ns(hdr, s->ports[bw[j]].rate_bps) + s->ports[bw[j]].delay_ns;
	return t;
}
