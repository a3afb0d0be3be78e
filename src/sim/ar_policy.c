/*
 * ar_policy.c: net/ar's adaptive routing as the simulator's path policy.
 *
 * It exists so that the fabric simulator runs the very code the data plane
 * runs at the overlay edge: each host gets an iod_ar (sender) and an
 * iod_ar_rx (receiver's ECN relay). The core's probes are actions; this
 * adapter queues them per host and hands them to the simulator at its next
 * probe tick, remembers them, and turns the simulator's probe replies back
 * into struct iod_ar_probe_reply (with the fabric's path identity and its
 * queueing delay as the path load). ECN echoed on ACKs is fed to the
 * receiver's relay, which lets one (port, CE) report through per interval.
 *
 * Like every policy it never sees the simulator, never reads a clock and
 * never allocates after creation; its only state is its own.
 */
#include "iod/ar.h"
#include "iod/sim.h"

#include <stdlib.h>
#include <string.h>

/* A probe handed to the simulator, waiting for its reply. */
struct inflight {
	uint32_t dst;     /* probed edge */
	uint16_t sport;   /* port probed */
	uint8_t kind;     /* enum iod_ar_probe_kind */
	bool used;        /* waiting for a reply */
	uint64_t tick_ns; /* when the simulator sent it (its reply's send time) */
	uint64_t hash;    /* flow the core probed for */
	uint64_t sent_ns; /* the core's own send time (it checks it) */
};

struct edge {
	struct iod_ar *ar;                                   /* the sender's core */
	struct iod_ar_rx *rx;                                /* the receiver's ECN relay */
	struct iod_ar_probe pending[IOD_AR_SIM_PENDING_MAX]; /* ring: to send at the next tick */
	uint32_t pend_head, pend_n;                          /* ring position, count */
	struct inflight fly[IOD_AR_SIM_INFLIGHT_MAX];        /* ring: sent, in time order */
	uint32_t fly_next;                                   /* next slot to write */
	uint64_t next_tick_ns;                               /* when the core's tick is due */
};

struct iod_sim_ar {
	struct edge *edges;    /* one per host */
	uint32_t hosts;        /* how many */
	uint64_t core_tick_ns; /* iod_ar_tick period: half the probe interval */
	uint64_t dropped;      /* probes that found the pending ring full */
	struct iod_ar_out out; /* scratch for one core call (single-threaded) */
};

static void take(struct iod_sim_ar *a, struct edge *ed)
{
	for (uint32_t i = 0; i < a->out.probes_n; i++) {
		if (ed->pend_n == IOD_AR_SIM_PENDING_MAX) {
			a->dropped++;
			continue;
		}
		ed->pending[(ed->pend_head + ed->pend_n++) % IOD_AR_SIM_PENDING_MAX] =
		    a->out.probes[i];
	}
	a->dropped += a->out.probes_dropped;
	a->out.probes_n = 0;
	a->out.probes_dropped = 0;
}

static uint16_t ar_choose(void *state, const struct iod_sim_path_query *q)
{
	struct iod_sim_ar *a = state;
	if (q->is_ack)
		return iod_sim_edge_sport(q->flow_hash);
	struct edge *ed = &a->edges[q->src_host];
	uint16_t sport = iod_ar_select(ed->ar, q->dst_host, q->flow_hash, q->now_ns, &a->out);
	take(a, ed);
	return sport;
}

static void on_reply(struct iod_sim_ar *a, const struct iod_sim_path_feedback *fb)
{
	struct edge *ed = &a->edges[fb->src_host];
	uint64_t tick_ns = fb->now_ns - fb->rtt_ns;
	/* Newest first; the ring is in send order, so stop once older. */
	for (uint32_t k = 1; k <= IOD_AR_SIM_INFLIGHT_MAX; k++) {
		struct inflight *f = &ed->fly[(ed->fly_next + IOD_AR_SIM_INFLIGHT_MAX - k) %
		                              IOD_AR_SIM_INFLIGHT_MAX];
		if (!f->used && !f->tick_ns)
			break;
		if (f->tick_ns < tick_ns)
			break;
		if (!f->used || f->tick_ns != tick_ns || f->dst != fb->dst_host ||
		    f->sport != fb->sport)
			continue;
		f->used = false;
		struct iod_ar_probe_reply r = {
		    .dst = f->dst,
		    .sport = f->sport,
		    .kind = f->kind,
		    .flow_hash = f->hash,
		    .sent_ns = f->sent_ns,
		    .path_id = fb->path_id,
		    .path_links = fb->path_links,
		    /* the fabric reports queueing delay; the core only orders it */
		    .load_ppm =
		        fb->path_queue_ns > UINT32_MAX ? UINT32_MAX : (uint32_t)fb->path_queue_ns};
		iod_ar_on_probe_reply(ed->ar, &r, fb->now_ns);
		return;
	}
}

static void ar_feedback(void *state, const struct iod_sim_path_feedback *fb)
{
	struct iod_sim_ar *a = state;
	if (fb->kind == IOD_SIM_FB_PROBE_REPLY) {
		on_reply(a, fb);
		return;
	}
	/* The receiver saw this data packet's port and CE; its relay may
	 * report one port now on the reverse traffic this ACK stands for. */
	struct iod_ar_rx *rx = a->edges[fb->dst_host].rx;
	uint16_t sport;
	bool ce;
	iod_ar_rx_on_packet(rx, fb->src_host, fb->sport, fb->ecn, fb->now_ns);
	if (iod_ar_rx_feedback(rx, fb->src_host, fb->now_ns, &sport, &ce))
		(void)iod_ar_on_ecn(a->edges[fb->src_host].ar, fb->dst_host, sport, ce, fb->now_ns);
}

bool iod_sim_ar_inner_ecn(void *state, uint32_t src_host, uint32_t dst_host, uint64_t now_ns)
{
	const struct iod_sim_ar *a = state;
	return iod_ar_inner_ecn(a->edges[src_host].ar, dst_host, now_ns);
}

static uint32_t ar_probe(void *state, uint32_t src_host, uint64_t now_ns, struct iod_sim_probe *out,
                         uint32_t max)
{
	struct iod_sim_ar *a = state;
	struct edge *ed = &a->edges[src_host];
	uint32_t n = 0;

	if (now_ns >= ed->next_tick_ns) {
		ed->next_tick_ns = now_ns + a->core_tick_ns;
		iod_ar_tick(ed->ar, now_ns, &a->out);
		take(a, ed);
	}
	while (n < max && ed->pend_n) {
		const struct iod_ar_probe *p = &ed->pending[ed->pend_head];
		ed->pend_head = (ed->pend_head + 1) % IOD_AR_SIM_PENDING_MAX;
		ed->pend_n--;
		ed->fly[ed->fly_next] = (struct inflight){.dst = p->dst,
		                                          .sport = p->sport,
		                                          .kind = p->kind,
		                                          .used = true,
		                                          .tick_ns = now_ns,
		                                          .hash = p->flow_hash,
		                                          .sent_ns = p->sent_ns};
		ed->fly_next = (ed->fly_next + 1) % IOD_AR_SIM_INFLIGHT_MAX;
		out[n++] = (struct iod_sim_probe){p->dst, p->sport};
	}
	return n;
}

int iod_sim_ar_create(const struct iod_ar_config *cfg, uint32_t hosts, uint64_t tick_ns,
                      uint64_t rx_interval_ns, struct iod_sim_ar **out,
                      struct iod_sim_path_policy *policy, struct iod_err *e)
{
	struct iod_sim_ar *a;
	int rc;

	if (!hosts)
		return iod_err_set(e, -EINVAL, "adaptive routing: no hosts");
	a = calloc(1, sizeof(*a));
	if (!a || !(a->edges = calloc(hosts, sizeof(*a->edges)))) {
		free(a);
		return iod_err_set(e, -ENOMEM, "adaptive routing: out of memory for %u edges",
		                   hosts);
	}
	a->hosts = hosts;
	a->core_tick_ns = cfg->probe_interval_ns / 2 ? cfg->probe_interval_ns / 2 : 1;
	for (uint32_t h = 0; h < hosts; h++) {
		struct iod_ar_config c = *cfg;
		c.seed = iod_hash_u64(cfg->seed ^ ((uint64_t)h + 1)); /* own stream per edge */
		rc = iod_ar_create(&c, &a->edges[h].ar, e);
		if (!rc && (rc = iod_ar_rx_create(
		                hosts, rx_interval_ns ? rx_interval_ns : 5 * IOD_NS_PER_US,
		                &a->edges[h].rx)))
			iod_err_set(e, rc, "adaptive routing: out of memory for the ECN relay");
		if (rc) {
			a->hosts = h + 1;
			iod_sim_ar_destroy(a);
			return rc;
		}
	}
	*policy = (struct iod_sim_path_policy){
	    .name = iod_ar_policy_name(cfg->policy),
	    .state = a,
	    .choose = ar_choose,
	    .feedback = ar_feedback,
	    .probe = cfg->policy == IOD_AR_ECMP ? NULL : ar_probe,
	    .probe_interval_ns =
	        cfg->policy == IOD_AR_ECMP ? 0 : (tick_ns ? tick_ns : 2 * IOD_NS_PER_US)};
	*out = a;
	return 0;
}

void iod_sim_ar_destroy(struct iod_sim_ar *a)
{
	if (!a)
		return;
	for (uint32_t h = 0; h < a->hosts; h++) {
		iod_ar_destroy(a->edges[h].ar);
		iod_ar_rx_destroy(a->edges[h].rx);
	}
	free(a->edges);
	free(a);
}

void iod_sim_ar_stats(const struct iod_sim_ar *a, struct iod_ar_stats *sum)
{
	memset(sum, 0, sizeof(*sum));
	for (uint32_t h = 0; h < a->hosts; h++) {
		const struct iod_ar_stats *s = iod_ar_stats(a->edges[h].ar);
		sum->flows_new += s->flows_new;
		sum->flows_pinned += s->flows_pinned;
		sum->flows_aged += s->flows_aged;
		sum->flows_table_full += s->flows_table_full;
		sum->flowlets += s->flowlets;
		sum->probes_sent += s->probes_sent;
		sum->probe_replies += s->probe_replies;
		sum->probe_late += s->probe_late;
		sum->paths_failed += s->paths_failed;
		sum->probe_misses += s->probe_misses;
		sum->probes_suppressed += s->probes_suppressed;
		sum->flows_moved += s->flows_moved;
		sum->ecn_events += s->ecn_events;
		sum->ecn_to_inner += s->ecn_to_inner;
	}
}

void iod_sim_ar_prepare_all(struct iod_sim_ar *a, uint64_t now_ns)
{
	for (uint32_t h = 0; h < a->hosts; h++)
		for (uint32_t d = 0; d < a->hosts; d++) {
			if (d == h)
				continue;
			iod_ar_dest_prepare(a->edges[h].ar, d, now_ns, &a->out);
			take(a, &a->edges[h]);
		}
}

const struct iod_ar *iod_sim_ar_edge(const struct iod_sim_ar *a, uint32_t h)
{
	IOD_ASSERT(h < a->hosts);
	return a->edges[h].ar;
}

uint64_t iod_sim_ar_probes_dropped(const struct iod_sim_ar *a)
{
	return a->dropped;
}
