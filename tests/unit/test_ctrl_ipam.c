/*
 * test_ctrl_ipam.c: overlay addresses from the control plane's IPAM
 * (src/ctrl/ipam.c) across deploys and moves, and the agent's allocator
 * taking them (src/agent/ipam.c, iod_agent_ipam_claim). Before: the deploy
 * plan gave no address, so a replica that started before its peers
 * reported theirs had IOD_DEP_* / IOD_PEERS naming the peers' node
 * (underlay) address, which the overlay does not route; the rescheduling
 * plan cleared the address, so a stateful replica lost its address on its
 * new node.
 */
#include "harness.h"
#include "iod/agent.h"
#include "iod/ctrl.h"
#include "iod/net.h"
#include "iod/state.h"

#include <stdlib.h>
#include <string.h>

static uint32_t ip(const char *s)
{
	uint32_t a = 0;
	iod_net_ipv4_parse(s, &a);
	return a;
}

static const char *fmt(uint32_t a)
{
	static char buf[4][20];
	static int k;
	k = (k + 1) % 4;
	iod_agent_ipv4_format(a, buf[k], sizeof(buf[k]));
	return buf[k];
}

/* The rules of one assignment: keep, stateful anywhere, lowest free. */
TEST(ctrl_ipam_keeps_moves_and_skips_held_addresses)
{
	struct iod_ctrl_ipam m;
	struct iod_err e = {0};
	uint32_t a = 0, net = 0, pfx = 0;
	json_t *reps = json_loads("{\"items\":["
	                          "{\"name\":\"db-0\",\"value\":{\"addr\":\"10.200.1.2\"}},"
	                          "{\"name\":\"web-0\",\"value\":{\"addr\":\"10.200.1.3\"}},"
	                          "{\"name\":\"web-1\",\"value\":{\"addr\":\"10.200.2.2\"}},"
	                          "{\"name\":\"x\",\"value\":{}}]}",
	                          0, NULL);
	CHECK(reps);
	CHECK_EQ(iod_ctrl_ipam_init(&m, reps), 0);
	CHECK_EQ(m.n, 3);
	json_t *nv = json_pack("{s:s}", "subnet", "10.200.2.0/24");
	CHECK_EQ(iod_ctrl_ipam_subnet(nv, &net, &pfx), 0);
	CHECK_STR(fmt(net), "10.200.2.0");
	CHECK_U64(pfx, 24);
	json_object_set_new(nv, "subnet", json_string("10.200.2.1/24"));
	CHECK_EQ(iod_ctrl_ipam_subnet(nv, &net, &pfx), -EINVAL); /* host bits */
	json_object_del(nv, "subnet");
	CHECK_EQ(iod_ctrl_ipam_subnet(nv, &net, &pfx), -ENOENT);
	json_decref(nv);
	net = ip("10.200.2.0");
	/* stays on its node: keeps its address */
	CHECK_EQ(iod_ctrl_ipam_assign(&m, "web-1", net, 24, ip("10.200.2.2"), false, &a, &e), 0);
	CHECK_STR(fmt(a), "10.200.2.2");
	/* stateful, moved from node 1: keeps its node-1 address on node 2 */
	CHECK_EQ(iod_ctrl_ipam_assign(&m, "db-0", net, 24, ip("10.200.1.2"), true, &a, &e), 0);
	CHECK_STR(fmt(a), "10.200.1.2");
	/* stateless, moved: node 2's lowest free (.2 is web-1's) */
	CHECK_EQ(iod_ctrl_ipam_assign(&m, "web-0", net, 24, ip("10.200.1.3"), false, &a, &e), 0);
	CHECK_STR(fmt(a), "10.200.2.3");
	/* its old address is free now; a new replica takes node 2's next one */
	CHECK_EQ(iod_ctrl_ipam_assign(&m, "web-2", net, 24, 0, false, &a, &e), 0);
	CHECK_STR(fmt(a), "10.200.2.4");
	/* a stateful replica whose address another replica took: a fresh one */
	CHECK_EQ(iod_ctrl_ipam_assign(&m, "db-1", net, 24, ip("10.200.2.3"), true, &a, &e), 0);
	CHECK_STR(fmt(a), "10.200.2.5");
	/* a full /29 (5 replica addresses) says so */
	for (int i = 0; i < 5; i++) {
		char n[16];
		snprintf(n, sizeof(n), "f-%d", i);
		CHECK_EQ(iod_ctrl_ipam_assign(&m, n, ip("10.9.0.0"), 29, 0, false, &a, &e), 0);
	}
	CHECK_STR(fmt(a), "10.9.0.6");
	CHECK_EQ(iod_ctrl_ipam_assign(&m, "f-5", ip("10.9.0.0"), 29, 0, false, &a, &e), -ENOSPC);
	CHECK_CONTAINS(e.msg, "10.9.0.0/29");
	iod_ctrl_ipam_free(&m);
	json_decref(reps);
}

static int put_node(struct iod_state *s, const char *name, const char *addr, const char *subnet)
{
	struct iod_state_result r;
	json_t *v = json_pack("{s:s, s:i, s:s}", "model", "dgx-h100", "gpus", 8, "addr", addr);
	if (subnet)
		json_object_set_new(v, "subnet", json_string(subnet));
	char *cmd = iod_state_cmd_put(IOD_STATE_NODE, name, v, 0, -1);
	int rc = iod_state_apply(s, cmd, strlen(cmd), &r);
	free(cmd);
	json_decref(v);
	return rc;
}

/* The value of var in r's environment ("" when absent). */
static const char *env_of(const struct iod_agent_replica *r, const char *var)
{
	size_t l = strlen(var);
	for (uint32_t i = 0; i < r->envc; i++) {
		const char *kv = iod_agent_strv_at(r->env_buf, sizeof(r->env_buf), r->envc, i);
		if (kv && !strncmp(kv, var, l) && kv[l] == '=')
			return kv + l + 1;
	}
	return "";
}

static const char *addr_of(const json_t *reps, const char *name)
{
	size_t i;
	json_t *x;
	json_array_foreach(reps, i, x)
	{
		const char *n = NULL, *a = "";
		if (!iod_json_get_str(x, "name", &n) && !strcmp(n, name)) {
			iod_json_get_str(json_object_get(x, "value"), "addr", &a);
			return a;
		}
	}
	return NULL;
}

static const char *spec = "services:\n"
                          "  - name: ps\n    type: stateful\n    replicas: 2\n"
                          "    placement: {anti_affinity: node}\n"
                          "    command: sleep 100\n"
                          "  - name: worker\n    type: stateless\n    replicas: 2\n"
                          "    placement: {anti_affinity: node}\n"
                          "    depends_on: [ps]\n    command: sleep 100\n"
                          "  - name: hostnet\n    type: stateless\n    replicas: 1\n"
                          "    sandbox: {network: node}\n    command: sleep 100\n";

/*
 * The deploy plan gives each replica on a node with a subnet an address of
 * that subnet (and none to a replica on the node's network), so a worker
 * built before any agent reported has IOD_DEP_PS at the parameter servers'
 * overlay addresses, not at their nodes' underlay addresses. A redeploy
 * keeps every address.
 */
TEST(deploy_plan_addresses_replicas_and_peers_use_them)
{
	struct iod_state *s;
	struct iod_state_result r;
	struct iod_err e = {0};
	char *cmd = NULL;
	json_t *answer = NULL;
	CHECK_EQ(iod_state_new(&s), 0);
	CHECK_EQ(put_node(s, "node-1", "10.254.1.1", "10.200.1.0/24"), 0);
	CHECK_EQ(put_node(s, "node-2", "10.254.2.1", "10.200.2.0/24"), 0);
	CHECK_MSG(iod_ctrl_deploy_plan(s, spec, strlen(spec), &cmd, &answer, &e) == 0, "%s", e.msg);
	json_t *c = json_loads(cmd, 0, NULL), *reps = json_object_get(c, "replicas");
	CHECK_EQ(json_array_size(reps), 5);
	size_t i;
	json_t *x;
	json_array_foreach(reps, i, x)
	{
		const char *n = "", *node = "", *a = NULL;
		iod_json_get_str(x, "name", &n);
		iod_json_get_str(json_object_get(x, "value"), "node", &node);
		a = addr_of(reps, n);
		if (!strcmp(n, "hostnet-0")) {
			CHECK_STR(a, "");
			continue;
		}
		char want[20];
		snprintf(want, sizeof(want), "10.200.%c.", node[5]);
		CHECK_MSG(!strncmp(a, want, strlen(want)), "%s on %s has addr '%s'", n, node, a);
	}
	CHECK(strcmp(addr_of(reps, "ps-0"), addr_of(reps, "worker-0")) ||
	      strcmp(addr_of(reps, "ps-0"), "") == 0);
	/* a worker's view before any agent reported: the plan's addresses */
	json_t *nodes =
	    json_pack("{s:[{s:s,s:{s:s,s:s}},{s:s,s:{s:s,s:s}}]}", "items", "name", "node-1",
	              "value", "addr", "10.254.1.1", "subnet", "10.200.1.0/24", "name", "node-2",
	              "value", "addr", "10.254.2.1", "subnet", "10.200.2.0/24");
	json_t *rl = json_pack("{s:O}", "items", reps);
	json_t *sl = json_pack("{s:O}", "items", json_object_get(c, "services"));
	struct iod_agent_replica *out = calloc(8, sizeof(*out));
	uint32_t n = 0;
	CHECK(out);
	CHECK_MSG(iod_agent_desired_from_state("node-1", nodes, sl, rl, NULL, out, 8, &n, &e) == 0,
	          "%s", e.msg);
	bool seen = false;
	for (uint32_t k = 0; k < n; k++) {
		if (strcmp(out[k].service, "worker"))
			continue;
		seen = true;
		const char *dep = env_of(&out[k], "IOD_DEP_PS");
		CHECK_MSG(dep[0] && !strstr(dep, "10.254."), "IOD_DEP_PS=%s", dep);
		char p0[64], p1[64];
		snprintf(p0, sizeof(p0), "%s:%u", addr_of(reps, "ps-0"),
		         iod_agent_replica_port("ps-0"));
		snprintf(p1, sizeof(p1), "%s:%u", addr_of(reps, "ps-1"),
		         iod_agent_replica_port("ps-1"));
		CHECK_CONTAINS(dep, p0);
		CHECK_CONTAINS(dep, p1);
		/* and the agent is told its own address */
		CHECK_STR(out[k].addr, addr_of(reps, out[k].name));
	}
	CHECK(seen);
	/* a redeploy keeps the addresses */
	CHECK_EQ(iod_state_apply(s, cmd, strlen(cmd), &r), 0);
	char *cmd2 = NULL;
	json_t *answer2 = NULL;
	CHECK_EQ(iod_ctrl_deploy_plan(s, spec, strlen(spec), &cmd2, &answer2, &e), 0);
	json_t *c2 = json_loads(cmd2, 0, NULL), *reps2 = json_object_get(c2, "replicas");
	json_array_foreach(reps2, i, x)
	{
		const char *nm = "";
		iod_json_get_str(x, "name", &nm);
		CHECK_STR(addr_of(reps2, nm), addr_of(reps, nm));
	}
	json_decref(c2);
	free(cmd2);
	json_decref(answer2);
	free(out);
	json_decref(nodes);
	json_decref(rl);
	json_decref(sl);
	json_decref(c);
	free(cmd);
	json_decref(answer);
	iod_state_free(s);
}

/*
 * A lost node's replicas: the stateful one keeps its address on its new
 * node; the stateless one takes the new node's lowest free address (not
 * none, and not its old node's); a node without a subnet gives none.
 */
TEST(reschedule_keeps_stateful_address_and_readdresses_stateless)
{
	json_t *nodes = json_loads("{\"items\":[{\"name\":\"node-2\",\"value\":{\"model\":"
	                           "\"dgx-h100\",\"gpus\":8,\"addr\":\"10.254.2.1\","
	                           "\"subnet\":\"10.200.2.0/24\"}}]}",
	                           0, NULL);
	json_t *reps = json_loads(
	    "{\"items\":["
	    "{\"name\":\"db-0\",\"rev\":3,\"value\":{\"service\":\"db\",\"ordinal\":0,"
	    "\"node\":\"node-1\",\"addr\":\"10.200.1.2\",\"phase\":\"lost\",\"lost_ms\":1}},"
	    "{\"name\":\"web-0\",\"rev\":4,\"value\":{\"service\":\"web\",\"ordinal\":0,"
	    "\"node\":\"node-1\",\"addr\":\"10.200.1.3\",\"phase\":\"running\"}},"
	    "{\"name\":\"web-1\",\"rev\":5,\"value\":{\"service\":\"web\",\"ordinal\":1,"
	    "\"node\":\"node-2\",\"addr\":\"10.200.2.2\",\"phase\":\"running\"}}]}",
	    0, NULL);
	json_t *svcs = json_loads(
	    "{\"items\":[{\"name\":\"db\",\"value\":{\"name\":\"db\",\"type\":\"stateful\","
	    "\"replicas\":1,\"command\":\"sleep 1\"}},"
	    "{\"name\":\"web\",\"value\":{\"name\":\"web\",\"type\":\"stateless\","
	    "\"replicas\":2,\"command\":\"sleep 1\"}}]}",
	    0, NULL);
	json_t *unplaced = NULL;
	CHECK(nodes && reps && svcs);
	json_t *w = iod_ctrl_resched_plan(nodes, reps, svcs, 100000, 1000, &unplaced);
	CHECK_MSG(json_array_size(w) == 2, "writes %s", json_dumps(w, 0));
	json_t *vals = json_array();
	size_t i;
	json_t *x;
	json_array_foreach(w, i, x)
	{
		const char *node = "";
		iod_json_get_str(json_object_get(x, "value"), "node", &node);
		CHECK_STR(node, "node-2");
		json_array_append_new(vals,
		                      json_pack("{s:O, s:O}", "name", json_object_get(x, "name"),
		                                "value", json_object_get(x, "value")));
	}
	CHECK_STR(addr_of(vals, "db-0"), "10.200.1.2");
	CHECK_STR(addr_of(vals, "web-0"), "10.200.2.3");
	json_decref(w);
	json_decref(unplaced);
	json_decref(vals);
	/* a node without a subnet: the agent chooses (nothing kept) */
	json_object_del(
	    json_object_get(json_array_get(json_object_get(nodes, "items"), 0), "value"), "subnet");
	w = iod_ctrl_resched_plan(nodes, reps, svcs, 100000, 1000, &unplaced);
	CHECK_EQ(json_array_size(w), 2);
	for (i = 0; i < json_array_size(w); i++)
		CHECK(!json_object_get(json_object_get(json_array_get(w, i), "value"), "addr"));
	json_decref(w);
	json_decref(unplaced);
	json_decref(nodes);
	json_decref(reps);
	json_decref(svcs);
}

/*
 * The agent takes the control plane's address: one outside its subnet (a
 * stateful replica from another node) in a slot of its own, an address
 * another replica holds refused, and its own allocations skip claimed
 * addresses; IOD_DEP_* of a local peer name the claimed address.
 */
TEST(agent_ipam_claims_the_control_planes_address)
{
	struct iod_agent_ipam *m = calloc(1, sizeof(*m));
	struct iod_err e = {0};
	uint32_t a = 0, i = 0;
	CHECK(m);
	CHECK_EQ(iod_agent_ipam_init(m, "10.200.2.0/24", &e), 0);
	CHECK_EQ(iod_agent_ipam_claim(m, "web-0", ip("10.200.2.2"), &i, &e), 0);
	CHECK_U64(i, 0);
	CHECK_EQ(iod_agent_ipam_claim(m, "db-0", ip("10.200.1.2"), &i, &e), 0);
	CHECK_U64(i, 1);
	CHECK_EQ(iod_agent_ipam_find(m, "db-0", &a, NULL), 0);
	CHECK_STR(fmt(a), "10.200.1.2");
	CHECK_EQ(iod_agent_ipam_claim(m, "web-1", ip("10.200.1.2"), &i, &e), -EADDRINUSE);
	CHECK_CONTAINS(e.msg, "db-0");
	CHECK_EQ(iod_agent_ipam_claim(m, "web-1", ip("10.200.2.1"), &i, &e), -EINVAL); /* gw */
	/* slot 1's own address (.3) is free: an allocation takes it; the next
	 * skips .4 when a claim holds it */
	CHECK_EQ(iod_agent_ipam_claim(m, "web-2", ip("10.200.2.4"), &i, &e), 0);
	CHECK_EQ(iod_agent_ipam_alloc(m, "w-0", &a, &i, &e), 0);
	CHECK_STR(fmt(a), "10.200.2.3");
	CHECK_U64(i, 3);
	CHECK_EQ(iod_agent_ipam_alloc(m, "w-1", &a, &i, &e), 0);
	CHECK_STR(fmt(a), "10.200.2.5");
	/* a claim again (a restart) keeps slot and address */
	CHECK_EQ(iod_agent_ipam_claim(m, "db-0", ip("10.200.1.2"), &i, &e), 0);
	CHECK_U64(i, 1);
	CHECK_EQ(iod_agent_ipam_alloc(m, "db-0", &a, &i, &e), 0);
	CHECK_STR(fmt(a), "10.200.1.2");
	/* localize: a peer on this node at its claimed address */
	struct iod_agent_replica *r = calloc(1, sizeof(*r));
	CHECK(r);
	char dep[64];
	snprintf(dep, sizeof(dep), "10.254.2.1:%u", iod_agent_replica_port("db-0"));
	CHECK_EQ(iod_agent_replica_add_env(r, "IOD_DEP_DB", dep), 0);
	CHECK_EQ(iod_agent_env_localize(r, "10.254.2.1", m), 0);
	snprintf(dep, sizeof(dep), "10.200.1.2:%u", iod_agent_replica_port("db-0"));
	CHECK_STR(env_of(r, "IOD_DEP_DB"), dep);
	/* released: its address and slot free */
	CHECK_EQ(iod_agent_ipam_release(m, "db-0"), 0);
	CHECK_EQ(iod_agent_ipam_alloc(m, "w-2", &a, &i, &e), 0);
	CHECK_U64(i, 1);
	CHECK_STR(fmt(a), "10.200.2.6");
	free(r);
	free(m);
}
