/*
 * dump.c: the pipeline as JSON for `iod dp dump`: pipes, their templates and
 * forwarding, every live entry with its per-entry counters summed over cores,
 * and (when an offload translator is attached) whether the entry runs in the
 * NIC or in software, and why.
 *
 * Control path only: allocates freely, never called during a burst.
 */
#include "internal.h"

#include <string.h>

static const char *fwd_name(unsigned t)
{
	switch (t) {
	case IOD_FLOW_FWD_PORT: return "port";
	case IOD_FLOW_FWD_PIPE: return "pipe";
	case IOD_FLOW_FWD_DROP: return "drop";
	case IOD_FLOW_FWD_RSS: return "rss";
	default: return "none";
	}
}

static json_t *fwd_json(const struct iod_flow_pipeline *pl, const struct iod_flow_fwd *f)
{
	json_t *o = json_object();
	json_object_set_new(o, "type", json_string(fwd_name(f->type)));
	if (f->type == IOD_FLOW_FWD_PORT)
		json_object_set_new(o, "port", json_integer(f->port));
	if (f->type == IOD_FLOW_FWD_PIPE)
		json_object_set_new(
		    o, "pipe",
		    json_string(f->pipe < pl->pipes_n ? pl->pipes[f->pipe].cfg.name : "?"));
	if (f->type == IOD_FLOW_FWD_RSS)
		json_object_set_new(o, "queues", json_integer(f->rss_queues));
	return o;
}

static json_t *actions_json(const struct iod_flow_actions *a)
{
	static const char *const names[] = {
	    "decap",   "encap",    "set_meta", "set_zone",  "nat_dst", "nat_src",   "dec_ttl",
	    "set_mac", "mac_swap", "set_dscp", "ct_commit", "lb",      "arp_reply", "set_sport"};
	json_t *arr = json_array();
	for (unsigned i = 0; i < IOD_ARRAY_LEN(names); i++)
		if (a->flags & (1u << i))
			json_array_append_new(arr, json_string(names[i]));
	return arr;
}

/* The fields an entry matches on, in words. */
static json_t *match_json(const struct iod_flow_key *v, const struct iod_flow_key *m,
                          uint8_t prefix_len, bool lpm)
{
	json_t *o = json_object();
	char b[64];
	if (m->in_port)
		json_object_set_new(o, "in_port", json_integer(v->in_port));
	if (m->meta)
		json_object_set_new(o, "meta", json_integer(v->meta));
	if (m->vni)
		json_object_set_new(o, "vni", json_integer(v->vni));
	if (m->proto)
		json_object_set_new(o, "proto", json_integer(v->proto));
	if (m->src.v4) {
		iod_net_ipv4_format(v->src.v4, b, sizeof(b));
		json_object_set_new(o, "src", json_string(b));
	}
	if (lpm || m->dst.v4) {
		iod_net_ipv4_format(v->dst.v4, b, sizeof(b));
		if (lpm)
			snprintf(b + strlen(b), sizeof(b) - strlen(b), "/%u", prefix_len);
		json_object_set_new(o, "dst", json_string(b));
	}
	if (m->sport)
		json_object_set_new(o, "sport", json_integer(v->sport));
	if (m->dport)
		json_object_set_new(o, "dport", json_integer(v->dport));
	if (m->outer_dst_ip) {
		iod_net_ipv4_format(v->outer_dst_ip, b, sizeof(b));
		json_object_set_new(o, "outer_dst", json_string(b));
	}
	if (m->ct_state)
		json_object_set_new(o, "ct_state", json_integer(v->ct_state & m->ct_state));
	return o;
}

json_t *iod_flow_dump_json(const struct iod_flow_pipeline *pl, iod_flow_offload_state_fn offload,
                           void *ctx)
{
	json_t *root = json_object(), *pipes = json_array();
	struct iod_flow_engine_stats es;
	iod_flow_engine_stats(pl, &es);
	json_t *eng = json_object();
	json_object_set_new(eng, "packets", json_integer((json_int_t)es.packets));
	json_object_set_new(eng, "drops", json_integer((json_int_t)es.drops));
	json_object_set_new(eng, "fast_path_hits", json_integer((json_int_t)es.fp_hits));
	json_object_set_new(eng, "emc_hits", json_integer((json_int_t)es.emc_hits));
	json_object_set_new(eng, "megaflow_hits", json_integer((json_int_t)es.mf_hits));
	json_object_set_new(eng, "walks", json_integer((json_int_t)es.walks));
	json_object_set_new(eng, "parse_errors", json_integer((json_int_t)es.parse_errors));
	json_object_set_new(eng, "cores", json_integer(pl->cfg.cores));
	json_object_set_new(root, "engine", eng);
	for (uint32_t i = 0; i < pl->pipes_n; i++) {
		const struct pipe *p = &pl->pipes[i];
		json_t *pj = json_object(), *ents = json_array();
		uint64_t hits, misses;
		iod_flow_pipe_stats(pl, i, &hits, &misses);
		json_object_set_new(pj, "name", json_string(p->cfg.name));
		json_object_set_new(pj, "kind", json_string(iod_flow_pipe_kind_name(p->cfg.kind)));
		if (p->cfg.is_root)
			json_object_set_new(pj, "root_of_port", json_integer(p->cfg.port));
		json_object_set_new(pj, "actions", actions_json(&p->cfg.actions));
		json_object_set_new(pj, "fwd", fwd_json(pl, &p->cfg.fwd));
		json_object_set_new(pj, "fwd_miss", fwd_json(pl, &p->cfg.fwd_miss));
		json_object_set_new(pj, "hits", json_integer((json_int_t)hits));
		json_object_set_new(pj, "misses", json_integer((json_int_t)misses));
		json_object_set_new(pj, "entries_max", json_integer(p->cfg.entries_max));
		json_object_set_new(pj, "entries_live", json_integer(p->live_n));
		uint32_t pos = 0, id;
		const struct iod_flow_entry_cfg *ec;
		while (iod_flow_entry_next(pl, i, &pos, &id, &ec)) {
			const struct entry *en = &p->entries[id];
			struct iod_flow_stats st;
			iod_flow_entry_stats(pl, i, id, &st);
			json_t *ej = json_object();
			bool masked = p->cfg.kind == IOD_FLOW_PIPE_CONTROL ||
			              p->cfg.kind == IOD_FLOW_PIPE_ACL;
			json_object_set_new(ej, "id", json_integer(id));
			json_object_set_new(
			    ej, "match",
			    match_json(&ec->match, masked ? &ec->mask : &p->cfg.mask,
			               ec->prefix_len, p->cfg.kind == IOD_FLOW_PIPE_LPM));
			if (masked)
				json_object_set_new(ej, "priority", json_integer(ec->priority));
			if (ec->dport_min || ec->dport_max) {
				char r[32];
				snprintf(r, sizeof(r), "%u-%u", ec->dport_min, ec->dport_max);
				json_object_set_new(ej, "dport_range", json_string(r));
			}
			json_object_set_new(ej, "actions", actions_json(&en->act));
			json_object_set_new(ej, "fwd", fwd_json(pl, &en->fwd));
			json_object_set_new(ej, "packets", json_integer((json_int_t)st.packets));
			json_object_set_new(ej, "bytes", json_integer((json_int_t)st.bytes));
			if (en->mon & IOD_FLOW_MON_METER) {
				json_object_set_new(ej, "green",
				                    json_integer((json_int_t)st.green));
				json_object_set_new(ej, "yellow",
				                    json_integer((json_int_t)st.yellow));
				json_object_set_new(ej, "red", json_integer((json_int_t)st.red));
			}
			if (offload) {
				const char *why = NULL;
				int off = offload(ctx, i, id, &why);
				json_object_set_new(ej, "offloaded", json_boolean(off == 1));
				json_object_set_new(ej, "offload",
				                    json_string(off == 1   ? "hardware"
				                                : off == 2 ? "translates"
				                                           : "software"));
				if (why)
					json_object_set_new(ej, "offload_note", json_string(why));
			}
			json_array_append_new(ents, ej);
		}
		json_object_set_new(pj, "entries", ents);
		json_array_append_new(pipes, pj);
	}
	json_object_set_new(root, "pipes", pipes);
	return root;
}
