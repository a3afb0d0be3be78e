/*
 * test_chaos_fault.c: the pure half of `iod chaos <action>` (src/chaos/
 * fault.c): input parsing and its bounds, Jepsen's partition shapes as
 * grudges, fault records round-tripping through JSON, and the nft script of
 * a record (one named table, per-cgroup and per-port-pair rules).
 */
#include "harness.h"
#include "iod/agent.h"
#include "iod/chaos.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

static struct iod_err err;

TEST(actions_and_the_seed_alias)
{
	enum iod_chaos_action a;
	CHECK_EQ(iod_chaos_action_parse("partition", &a, &err), 0);
	CHECK_EQ(a, IOD_CHAOS_ACT_PARTITION);
	CHECK_EQ(iod_chaos_action_parse("network_partition", &a, &err), 0);
	CHECK_EQ(a, IOD_CHAOS_ACT_PARTITION);
	CHECK_EQ(iod_chaos_action_parse("pause", &a, &err), 0);
	CHECK_EQ(a, IOD_CHAOS_ACT_PAUSE);
	CHECK_EQ(iod_chaos_action_parse("explode", &a, &err), -EINVAL);
	CHECK(strstr(err.msg, "explode") && strstr(err.msg, "partition"));
	CHECK_EQ(iod_chaos_action_parse("", &a, &err), -EINVAL);
}

TEST(shapes_directions_signals_percent)
{
	enum iod_chaos_shape sh;
	enum iod_chaos_direction d;
	uint32_t p;
	int sig;
	CHECK_EQ(iod_chaos_shape_parse("majorities-ring", &sh, &err), 0);
	CHECK_EQ(sh, IOD_CHAOS_SHAPE_MAJORITIES_RING);
	/* "explicit" is how a record spells --between, not a shape to ask for */
	CHECK_EQ(iod_chaos_shape_parse("explicit", &sh, &err), -EINVAL);
	CHECK_EQ(iod_chaos_shape_parse("triangle", &sh, &err), -EINVAL);
	CHECK_EQ(iod_chaos_direction_parse("from", &d, &err), 0);
	CHECK_EQ(d, IOD_CHAOS_DIR_FROM);
	CHECK_EQ(iod_chaos_direction_parse("sideways", &d, &err), -EINVAL);
	CHECK_EQ(iod_chaos_signal_parse("SIGTERM", &sig, &err), 0);
	CHECK_EQ(sig, 15);
	CHECK_EQ(iod_chaos_signal_parse("kill", &sig, &err), 0);
	CHECK_EQ(sig, 9);
	CHECK_EQ(iod_chaos_signal_parse("2", &sig, &err), 0);
	CHECK_EQ(sig, 2);
	CHECK_EQ(iod_chaos_signal_parse("0", &sig, &err), -EINVAL);
	CHECK_EQ(iod_chaos_signal_parse("64", &sig, &err), -EINVAL);
	CHECK_EQ(iod_chaos_percent_parse("30", &p, &err), 0);
	CHECK_EQ(p, 30u);
	CHECK_EQ(iod_chaos_percent_parse("0", &p, &err), -EINVAL);
	CHECK_EQ(iod_chaos_percent_parse("101", &p, &err), -EINVAL);
	CHECK_EQ(iod_chaos_percent_parse("-5", &p, &err), -EINVAL);
	CHECK_EQ(iod_chaos_percent_parse("5.5", &p, &err), -EINVAL);
}

TEST(durations_are_bounded)
{
	uint64_t ms = 0;
	CHECK_EQ(iod_chaos_duration_parse("30s", &ms, &err), 0);
	CHECK_EQ(ms, 30000u);
	CHECK_EQ(iod_chaos_duration_parse("1500ms", &ms, &err), 0);
	CHECK_EQ(ms, 1500u);
	CHECK_EQ(iod_chaos_duration_parse("24h", &ms, &err), 0);
	CHECK_EQ(iod_chaos_duration_parse("-5s", &ms, &err), -EINVAL);
	CHECK(strstr(err.msg, "negative"));
	CHECK_EQ(iod_chaos_duration_parse("25h", &ms, &err), -EINVAL);
	CHECK(strstr(err.msg, "out of range"));
	CHECK_EQ(iod_chaos_duration_parse("99999999999h", &ms, &err), -EINVAL);
	CHECK_EQ(iod_chaos_duration_parse("1ms", &ms, &err), -EINVAL);
	CHECK_EQ(iod_chaos_duration_parse("0s", &ms, &err), -EINVAL);
	CHECK_EQ(iod_chaos_duration_parse("30", &ms, &err), -EINVAL); /* no unit */
	CHECK_EQ(iod_chaos_duration_parse("", &ms, &err), -EINVAL);
}

TEST(targets_and_lists)
{
	struct iod_chaos_target t[4];
	CHECK_EQ(iod_chaos_target_parse("server-2", &t[0], &err), 0);
	CHECK_EQ(t[0].kind, IOD_CHAOS_SERVER);
	CHECK_EQ(t[0].index, 2u);
	CHECK_EQ(iod_chaos_target_parse("node-10", &t[0], &err), 0);
	CHECK_EQ(t[0].kind, IOD_CHAOS_NODE);
	CHECK_EQ(iod_chaos_target_parse("replica/web-0", &t[0], &err), 0);
	CHECK_EQ(t[0].kind, IOD_CHAOS_REPLICA);
	CHECK(!strcmp(t[0].name, "web-0"));
	CHECK_EQ(iod_chaos_target_parse("server-0", &t[0], &err), -EINVAL);
	CHECK_EQ(iod_chaos_target_parse("server-x", &t[0], &err), -EINVAL);
	CHECK_EQ(iod_chaos_target_parse("database", &t[0], &err), -EINVAL);
	CHECK_EQ(iod_chaos_target_parse("replica/", &t[0], &err), -EINVAL);
	CHECK_EQ(iod_chaos_target_parse("replica/a b", &t[0], &err), -EINVAL);
	CHECK_EQ(iod_chaos_target_list_parse("server-1,node-2", t, 4, &err), 2);
	CHECK_EQ(t[1].kind, IOD_CHAOS_NODE);
	CHECK_EQ(iod_chaos_target_list_parse("server-1,,node-2", t, 4, &err), -EINVAL);
	CHECK_EQ(iod_chaos_target_list_parse("server-1,server-1", t, 4, &err), -EINVAL);
	CHECK_EQ(iod_chaos_target_list_parse("server-1,server-2,server-3", t, 2, &err), -EINVAL);
}

static uint32_t count_cut(const struct iod_chaos_grudge *g)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < g->n; i++)
		for (uint32_t j = 0; j < g->n; j++)
			n += g->cut[i][j];
	return n;
}

static uint32_t side_a(const struct iod_chaos_grudge *g)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < g->n; i++)
		n += g->side_a[i];
	return n;
}

TEST(shapes_as_grudges)
{
	struct iod_chaos_grudge g;
	/* one: a single server cut both ways from the other two: 4 edges */
	CHECK_EQ(iod_chaos_shape_grudge(IOD_CHAOS_SHAPE_ONE, 3, IOD_CHAOS_NONE, 7,
	                                IOD_CHAOS_DIR_BOTH, &g, &err),
	         0);
	CHECK_EQ(side_a(&g), 1u);
	CHECK_EQ(count_cut(&g), 4u);
	/* majority of 5: 2 | 3 */
	CHECK_EQ(iod_chaos_shape_grudge(IOD_CHAOS_SHAPE_MAJORITY, 5, IOD_CHAOS_NONE, 7,
	                                IOD_CHAOS_DIR_BOTH, &g, &err),
	         0);
	CHECK_EQ(side_a(&g), 2u);
	CHECK_EQ(count_cut(&g), 12u);
	/* minority-third of 9: 3 alone; of 3: still one */
	CHECK_EQ(iod_chaos_shape_grudge(IOD_CHAOS_SHAPE_MINORITY_THIRD, 9, IOD_CHAOS_NONE, 1,
	                                IOD_CHAOS_DIR_BOTH, &g, &err),
	         0);
	CHECK_EQ(side_a(&g), 3u);
	CHECK_EQ(iod_chaos_shape_grudge(IOD_CHAOS_SHAPE_MINORITY_THIRD, 3, IOD_CHAOS_NONE, 1,
	                                IOD_CHAOS_DIR_BOTH, &g, &err),
	         0);
	CHECK_EQ(side_a(&g), 1u);
	/* primaries: exactly the leader; without one, a clear error */
	CHECK_EQ(iod_chaos_shape_grudge(IOD_CHAOS_SHAPE_PRIMARIES, 3, 2, 1, IOD_CHAOS_DIR_BOTH, &g,
	                                &err),
	         0);
	CHECK(g.side_a[2] && !g.side_a[0] && !g.side_a[1]);
	CHECK_EQ(iod_chaos_shape_grudge(IOD_CHAOS_SHAPE_PRIMARIES, 3, IOD_CHAOS_NONE, 1,
	                                IOD_CHAOS_DIR_BOTH, &g, &err),
	         -EINVAL);
	CHECK(strstr(err.msg, "leader"));
	/* a one-way cut: only B -> A */
	CHECK_EQ(
	    iod_chaos_shape_grudge(IOD_CHAOS_SHAPE_PRIMARIES, 3, 0, 1, IOD_CHAOS_DIR_TO, &g, &err),
	    0);
	CHECK(g.cut[1][0] && g.cut[2][0] && !g.cut[0][1] && !g.cut[0][2]);
	CHECK_EQ(count_cut(&g), 2u);
	/* the same seed draws the same servers */
	struct iod_chaos_grudge h;
	iod_chaos_shape_grudge(IOD_CHAOS_SHAPE_ONE, 5, IOD_CHAOS_NONE, 42, IOD_CHAOS_DIR_BOTH, &g,
	                       &err);
	iod_chaos_shape_grudge(IOD_CHAOS_SHAPE_ONE, 5, IOD_CHAOS_NONE, 42, IOD_CHAOS_DIR_BOTH, &h,
	                       &err);
	CHECK(!memcmp(&g, &h, sizeof(g)));
	CHECK_EQ(iod_chaos_shape_grudge(IOD_CHAOS_SHAPE_ONE, 1, IOD_CHAOS_NONE, 1,
	                                IOD_CHAOS_DIR_BOTH, &g, &err),
	         -EINVAL);
}

TEST(majorities_ring_each_sees_a_majority_none_the_same)
{
	struct iod_chaos_grudge g;
	CHECK_EQ(iod_chaos_shape_grudge(IOD_CHAOS_SHAPE_MAJORITIES_RING, 3, IOD_CHAOS_NONE, 1,
	                                IOD_CHAOS_DIR_BOTH, &g, &err),
	         -EINVAL);
	CHECK(strstr(err.msg, "at least 4"));
	CHECK_EQ(iod_chaos_shape_grudge(IOD_CHAOS_SHAPE_MAJORITIES_RING, 5, IOD_CHAOS_NONE, 1,
	                                IOD_CHAOS_DIR_TO, &g, &err),
	         -EINVAL);
	for (uint32_t n = 4; n <= 9; n++) {
		CHECK_EQ(iod_chaos_shape_grudge(IOD_CHAOS_SHAPE_MAJORITIES_RING, n, IOD_CHAOS_NONE,
		                                n, IOD_CHAOS_DIR_BOTH, &g, &err),
		         0);
		uint32_t seen[IOD_CHAOS_MEMBERS_MAX] = {0};
		for (uint32_t i = 0; i < n; i++) {
			CHECK(!g.cut[i][i]);
			for (uint32_t j = 0; j < n; j++) {
				CHECK_EQ(g.cut[i][j], g.cut[j][i]); /* symmetric */
				seen[i] += !g.cut[i][j];
			}
			CHECK_MSG(seen[i] >= n / 2 + 1, "n=%u: member %u sees %u", n, i, seen[i]);
			CHECK_MSG(seen[i] < n, "n=%u: member %u sees everyone", n, i);
		}
	}
}

TEST(explicit_groups)
{
	struct iod_chaos_grudge g;
	bool a[4] = {true, false, false, false}, b[4] = {false, true, true, false};
	CHECK_EQ(iod_chaos_groups_grudge(4, a, b, IOD_CHAOS_DIR_FROM, &g, &err), 0);
	CHECK(g.cut[0][1] && g.cut[0][2] && !g.cut[1][0] && !g.cut[0][3]);
	bool both[4] = {true, true, false, false};
	CHECK_EQ(iod_chaos_groups_grudge(4, a, both, IOD_CHAOS_DIR_BOTH, &g, &err), -EINVAL);
	bool none[4] = {0};
	CHECK_EQ(iod_chaos_groups_grudge(4, a, none, IOD_CHAOS_DIR_BOTH, &g, &err), -EINVAL);
}

static void sample(struct iod_chaos_fault *f)
{
	memset(f, 0, sizeof(*f));
	snprintf(f->id, sizeof(f->id), "c0123456789ab");
	f->action = IOD_CHAOS_ACT_PARTITION;
	f->shape = IOD_CHAOS_SHAPE_EXPLICIT;
	f->dir = IOD_CHAOS_DIR_FROM;
	f->start_ms = 1000;
	f->deadline_ms = 31000;
	f->n = 3;
	for (uint32_t i = 0; i < 3; i++) {
		struct iod_chaos_member *m = &f->m[i];
		snprintf(m->name, sizeof(m->name), "server-%u", i + 1);
		m->pid = 100 + (int)i;
		m->start_ticks = 5000 + i;
		m->ports[0] = (uint16_t)(7300 + i);
		m->ports[1] = (uint16_t)(7400 + i);
		m->nports = 2;
		memcpy(m->argv, "iod\0server\0--id\0", 16);
		m->argv_len = 16;
	}
	snprintf(f->m[0].cgroup, sizeof(f->m[0].cgroup), "iod-chaos/c0123456789ab-server-1");
	f->m[0].cgroup_level = 2;
	f->m[0].socks[0][0] = 40000;
	f->m[0].socks[0][1] = 7301;
	f->m[0].socks[1][0] = 40001;
	f->m[0].socks[1][1] = 9999; /* not to a peer: no rule */
	f->m[0].nsocks = 2;
	bool a[3] = {true, false, false}, b[3] = {false, true, true};
	iod_chaos_groups_grudge(3, a, b, IOD_CHAOS_DIR_FROM, &f->g, &err);
	iod_chaos_fault_describe(f);
}

TEST(records_round_trip_and_are_checked)
{
	struct iod_chaos_fault *f = calloc(2, sizeof(*f)), *g = f + 1;
	sample(f);
	CHECK(strstr(f->desc, "server-1 | server-2,server-3 (from)"));
	json_t *j = iod_chaos_fault_to_json(f);
	CHECK(j != NULL);
	CHECK_EQ(iod_chaos_fault_from_json(j, g, &err), 0);
	CHECK(!strcmp(g->id, f->id));
	CHECK_EQ(g->deadline_ms, 31000u);
	CHECK_EQ(g->n, 3u);
	CHECK_EQ(g->m[2].start_ticks, 5002u);
	CHECK_EQ(g->m[0].nsocks, 2u);
	CHECK_EQ(g->m[1].argv_len, 16u);
	CHECK(!memcmp(g->m[1].argv, f->m[1].argv, 16));
	CHECK(!memcmp(&g->g, &f->g, sizeof(g->g)));
	/* a record that would make the healer touch the wrong thing is refused */
	json_object_set_new(j, "id", json_string("../../etc"));
	CHECK_EQ(iod_chaos_fault_from_json(j, g, &err), -EINVAL);
	json_object_set_new(j, "id", json_string("c1"));
	json_array_append_new(json_object_get(j, "cut"), json_pack("[i,i]", 0, 7));
	CHECK_EQ(iod_chaos_fault_from_json(j, g, &err), -EINVAL);
	json_decref(j);
	free(f);
}

TEST(member_records_round_trip_and_are_checked)
{
	struct iod_chaos_fault *f = calloc(2, sizeof(*f)), *g = f + 1;
	struct iod_err e2 = {0};
	CHECK_EQ(iod_chaos_action_parse("member", &f->action, &err), 0);
	CHECK_EQ(f->action, IOD_CHAOS_ACT_MEMBER);
	snprintf(f->id, sizeof(f->id), "c00000000000a");
	f->n = 1;
	snprintf(f->m[0].name, sizeof(f->m[0].name), "server-2");
	f->member_id = 2;
	snprintf(f->member_raft, sizeof(f->member_raft), "127.0.0.1:7301");
	snprintf(f->member_api, sizeof(f->member_api), "127.0.0.1:7401");
	snprintf(f->apis, sizeof(f->apis), "127.0.0.1:7400,127.0.0.1:7401");
	f->deadline_ms = 5000;
	iod_chaos_fault_describe(f);
	CHECK_CONTAINS(f->desc, "member remove server-2 (Raft id 2");
	json_t *j = iod_chaos_fault_to_json(f);
	CHECK_EQ(iod_chaos_fault_from_json(j, g, &err), 0);
	CHECK_EQ(g->member_id, 2u);
	CHECK_STR(g->member_raft, "127.0.0.1:7301");
	CHECK_STR(g->member_api, "127.0.0.1:7401");
	CHECK_STR(g->apis, f->apis);
	/* a member record names one server and how to reach the cluster */
	json_object_set_new(json_object_get(j, "raft_member"), "raft", json_string("nowhere"));
	CHECK_EQ(iod_chaos_fault_from_json(j, g, &e2), -EINVAL);
	CHECK_CONTAINS(e2.msg, "raft HOST:PORT");
	json_object_del(j, "raft_member");
	CHECK_EQ(iod_chaos_fault_from_json(j, g, &e2), -EINVAL);
	CHECK_CONTAINS(e2.msg, "needs raft_member");
	json_decref(j);
	/* no nft table for it */
	struct iod_buf b;
	iod_buf_init(&b);
	CHECK_EQ(iod_chaos_nft_script(f, &b, &err), -EINVAL);
	iod_buf_free(&b);
	uint32_t m;
	CHECK_EQ(iod_chaos_nemesis_parse("partition+member", &m, &err), 0);
	CHECK_EQ(m, IOD_CHAOS_NEM_PARTITION | IOD_CHAOS_NEM_MEMBER);
	free(f);
}

TEST(delay_record_and_script)
{
	struct iod_chaos_fault *f = calloc(2, sizeof(*f)), *g = f + 1;
	sample(f); /* server-1 | server-2,server-3 from: server-1's sends are held */
	f->action = IOD_CHAOS_ACT_DELAY;
	f->latency_ms = 200;
	struct iod_buf b;
	iod_buf_init(&b);
	CHECK_EQ(iod_chaos_nft_script(f, &b, &err), -EINVAL); /* no relay port yet */
	f->relay_port = 45678;
	f->relay_pid = 4321;
	f->relay_ticks = 77;
	CHECK_EQ(iod_chaos_nft_script(f, &b, &err), 0);
	CHECK_CONTAINS(b.data, "type nat hook output");
	CHECK_CONTAINS(b.data, "\"iod-chaos/c0123456789ab-server-1\" tcp dport { 7301, 7401 } "
	                       "redirect to :45678");
	/* its socket from before, to a peer: reset once; the one elsewhere not */
	CHECK_CONTAINS(b.data, "tcp sport 40000 tcp dport 7301 reject with tcp reset");
	CHECK(strstr(b.data, "9999") == NULL);
	iod_buf_free(&b);
	iod_chaos_fault_describe(f);
	CHECK_CONTAINS(f->desc, "delay 200 ms of what server-1 sends");
	json_t *j = iod_chaos_fault_to_json(f);
	CHECK_EQ(iod_chaos_fault_from_json(j, g, &err), 0);
	CHECK_EQ(g->latency_ms, 200u);
	CHECK_EQ(g->relay_port, 45678);
	CHECK_EQ(g->relay_pid, 4321);
	CHECK_EQ(g->relay_ticks, 77u);
	json_object_set_new(json_object_get(j, "relay"), "latency_ms", json_integer(600001));
	CHECK_EQ(iod_chaos_fault_from_json(j, g, &err), -EINVAL);
	json_decref(j);
	free(f);
}

TEST(nft_script_one_named_table)
{
	struct iod_chaos_fault *f = calloc(1, sizeof(*f));
	struct iod_buf b;
	sample(f);
	iod_buf_init(&b);
	CHECK_EQ(iod_chaos_nft_script(f, &b, &err), 0);
	CHECK(strstr(b.data, "table inet iod_chaos_c0123456789ab {"));
	CHECK(strstr(b.data, "hook output"));
	/* from: server-1's sockets to the others' ports, never the reverse */
	CHECK(strstr(b.data, "socket cgroupv2 level 2 \"iod-chaos/c0123456789ab-server-1\" tcp "
	                     "dport { 7301, 7401 } reject with tcp reset"));
	CHECK(strstr(b.data, "tcp sport 40000 tcp dport 7301 reject"));
	CHECK(!strstr(b.data, "9999"));
	CHECK(!strstr(b.data, "dport { 7300, 7400 }"));
	iod_buf_free(&b);
	/* loss: a numgen drop on everything the member sends */
	f->action = IOD_CHAOS_ACT_LOSS;
	f->percent = 30;
	f->n = 1;
	iod_buf_init(&b);
	CHECK_EQ(iod_chaos_nft_script(f, &b, &err), 0);
	CHECK(strstr(b.data, "numgen random mod 100 < 30 drop"));
	CHECK(strstr(b.data, "tcp sport { 7300, 7400 } numgen"));
	iod_buf_free(&b);
	/* loss 100 of a process: a plain drop (nft refused "< 100": a regression) */
	f->percent = 100;
	iod_buf_init(&b);
	CHECK_EQ(iod_chaos_nft_script(f, &b, &err), 0);
	CHECK(!strstr(b.data, "numgen"));
	CHECK(strstr(b.data, "tcp sport { 7300, 7400 } drop"));
	iod_buf_free(&b);
	f->action = IOD_CHAOS_ACT_PAUSE;
	iod_buf_init(&b);
	CHECK_EQ(iod_chaos_nft_script(f, &b, &err), -EINVAL);
	iod_buf_free(&b);
	free(f);
}

TEST(link_targets_parse_and_map_to_the_leaf)
{
	uint32_t l = 0, s = 0;
	CHECK_EQ(iod_chaos_link_parse("link/leaf1-spine2", &l, &s, &err), 0);
	CHECK_EQ(l, 1u);
	CHECK_EQ(s, 2u);
	CHECK_EQ(iod_chaos_link_parse("link/leaf16-spine16", &l, &s, &err), 0);
	CHECK_EQ(l, 16u);
	static const char *const bad[] = {
	    "link/leaf0-spine1",
	    "link/leaf1-spine0",
	    "link/leaf17-spine1",
	    "link/leaf1-spine17",
	    "link/leaf-spine1",
	    "link/leaf1-spine",
	    "link/leaf1spine1",
	    "link/spine1-leaf1",
	    "link/leaf1-spine1x",
	    "link/leaf1-spine-1",
	    "link/",
	    "leaf1-spine1",
	    "link/leafa-spine1",
	    "link/leaf1-spine99999999999999999999",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		CHECK_EQ(iod_chaos_link_parse(bad[i], &l, &s, &err), -EINVAL);
		CHECK_CONTAINS(err.msg, "link/leafL-spineS");
	}
	CHECK_EQ(iod_chaos_link_parse(NULL, &l, &s, &err), -EINVAL);
	/* the mapping: leaf L's veth to spine S is sS in <prefix>-lL (the plan's names) */
	struct iod_agent_underlay_cfg c = {.leaves = 2, .spines = 2, .hosts = 2};
	iod_agent_underlay_prefix("/tmp/x/state", c.prefix, sizeof(c.prefix));
	CHECK_EQ(strncmp(c.prefix, "iodu", 4), 0);
	CHECK_EQ(strlen(c.prefix), 10u);
	char ns[IOD_CHAOS_LINK_MAX], dev[16], want[32];
	CHECK_EQ(iod_agent_underlay_link(&c, 2, 1, ns, sizeof(ns), dev, sizeof(dev), &err), 0);
	snprintf(want, sizeof(want), "%s-l2", c.prefix);
	CHECK_STR(ns, want);
	CHECK_STR(dev, "s1");
	CHECK_EQ(iod_agent_underlay_link(&c, 3, 1, ns, sizeof(ns), dev, sizeof(dev), &err),
	         -EINVAL);
	CHECK_CONTAINS(err.msg, "no link leaf3-spine1");
	CHECK_CONTAINS(err.msg, "2 leaves and 2 spines");
	CHECK_EQ(iod_agent_underlay_link(&c, 1, 3, ns, sizeof(ns), dev, sizeof(dev), &err),
	         -EINVAL);
	/* those names are the plan's: the leaf's namespace has an "sS" link */
	struct iod_agent_underlay_step *st = calloc(IOD_UNDERLAY_STEPS_MAX, sizeof(*st));
	uint32_t n = 0;
	CHECK_EQ(iod_agent_underlay_plan(&c, st, IOD_UNDERLAY_STEPS_MAX, &n, &err), 0);
	bool found = false;
	for (uint32_t i = 0; i < n; i++)
		found |= !strcmp(st[i].ns, want) && strstr(st[i].text, "dev s1\n") != NULL;
	CHECK(found);
	free(st);
}

TEST(link_record_and_script)
{
	struct iod_chaos_fault *f = calloc(2, sizeof(*f)), *g = f + 1;
	snprintf(f->id, sizeof(f->id), "c00aa");
	f->action = IOD_CHAOS_ACT_PARTITION;
	f->shape = IOD_CHAOS_SHAPE_EXPLICIT;
	f->start_ms = 1000;
	f->deadline_ms = 4000;
	snprintf(f->link, sizeof(f->link), "leaf1-spine2");
	snprintf(f->link_ns, sizeof(f->link_ns), "iodu00abcd-l1");
	snprintf(f->link_dev, sizeof(f->link_dev), "s2");
	struct iod_buf b;
	iod_buf_init(&b);
	CHECK_EQ(iod_chaos_nft_script(f, &b, &err), 0);
	CHECK_CONTAINS(b.data, "table inet iod_chaos_c00aa {");
	CHECK_CONTAINS(b.data, "chain link_forward {");
	CHECK_CONTAINS(b.data, "type filter hook forward");
	CHECK_CONTAINS(b.data, "iifname \"s2\" drop");
	CHECK_CONTAINS(b.data, "oifname \"s2\" drop");
	CHECK_CONTAINS(b.data, "type filter hook input");
	CHECK_CONTAINS(b.data, "type filter hook output");
	CHECK(!strstr(b.data, "cgroupv2"));
	iod_buf_free(&b);
	iod_chaos_fault_describe(f);
	CHECK_CONTAINS(f->desc, "partition of link leaf1-spine2 (both ways: s2 in iodu00abcd-l1)");
	json_t *j = iod_chaos_fault_to_json(f);
	CHECK_EQ(iod_chaos_fault_from_json(j, g, &err), 0);
	CHECK_STR(g->link, "leaf1-spine2");
	CHECK_STR(g->link_ns, "iodu00abcd-l1");
	CHECK_STR(g->link_dev, "s2");
	CHECK_EQ(g->n, 0u);
	/* the record's names reach `ip netns exec` and nft: checked */
	json_object_set_new(json_object_get(j, "link"), "ns", json_string("x; rm -rf /"));
	CHECK_EQ(iod_chaos_fault_from_json(j, g, &err), -EINVAL);
	json_object_set_new(json_object_get(j, "link"), "ns", json_string("iodu00abcd-l1"));
	json_object_set_new(json_object_get(j, "link"), "dev", json_string("s2\"; flush"));
	CHECK_EQ(iod_chaos_fault_from_json(j, g, &err), -EINVAL);
	json_object_set_new(json_object_get(j, "link"), "dev", json_string("s2"));
	json_object_set_new(json_object_get(j, "link"), "name", json_string("leaf0-spine2"));
	CHECK_EQ(iod_chaos_fault_from_json(j, g, &err), -EINVAL);
	json_object_set_new(json_object_get(j, "link"), "name", json_string("leaf1-spine2"));
	json_object_set_new(j, "action", json_string("pause"));
	CHECK_EQ(iod_chaos_fault_from_json(j, g, &err), -EINVAL);
	json_decref(j);
	/* loss: the same matches, a numgen drop */
	f->action = IOD_CHAOS_ACT_LOSS;
	f->percent = 40;
	iod_buf_init(&b);
	CHECK_EQ(iod_chaos_nft_script(f, &b, &err), 0);
	CHECK_CONTAINS(b.data, "iifname \"s2\" numgen random mod 100 < 40 drop");
	CHECK_CONTAINS(b.data, "oifname \"s2\" numgen random mod 100 < 40 drop");
	iod_buf_free(&b);
	iod_chaos_fault_describe(f);
	CHECK_CONTAINS(f->desc, "loss 40% of link leaf1-spine2");
	/* 100 %: nft refuses "numgen random mod 100 < 100" (values 0..99) */
	f->percent = 100;
	iod_buf_init(&b);
	CHECK_EQ(iod_chaos_nft_script(f, &b, &err), 0);
	CHECK(!strstr(b.data, "numgen"));
	CHECK_CONTAINS(b.data, "iifname \"s2\" drop");
	iod_buf_free(&b);
	/* one way: to = toward the spine (out of the leaf on s2), from = from it */
	f->action = IOD_CHAOS_ACT_PARTITION;
	f->dir = IOD_CHAOS_DIR_TO;
	iod_buf_init(&b);
	CHECK_EQ(iod_chaos_nft_script(f, &b, &err), 0);
	CHECK_CONTAINS(b.data, "oifname \"s2\" drop");
	CHECK(!strstr(b.data, "iifname"));
	CHECK(!strstr(b.data, "hook input"));
	CHECK_CONTAINS(b.data, "type filter hook output");
	iod_buf_free(&b);
	iod_chaos_fault_describe(f);
	CHECK_CONTAINS(f->desc, "partition of link leaf1-spine2 (toward the spine: s2 in");
	f->dir = IOD_CHAOS_DIR_FROM;
	iod_buf_init(&b);
	CHECK_EQ(iod_chaos_nft_script(f, &b, &err), 0);
	CHECK_CONTAINS(b.data, "iifname \"s2\" drop");
	CHECK(!strstr(b.data, "oifname"));
	CHECK(!strstr(b.data, "hook output"));
	CHECK_CONTAINS(b.data, "type filter hook input");
	iod_buf_free(&b);
	iod_chaos_fault_describe(f);
	CHECK_CONTAINS(f->desc, "(from the spine: s2 in");
	j = iod_chaos_fault_to_json(f);
	CHECK_EQ(iod_chaos_fault_from_json(j, g, &err), 0);
	CHECK_EQ(g->dir, IOD_CHAOS_DIR_FROM);
	json_decref(j);
	free(f);
}

TEST(workload_nemesis_percentile)
{
	enum iod_chaos_workload w;
	uint32_t m;
	CHECK_EQ(iod_chaos_workload_parse("set", &w, &err), 0);
	CHECK_EQ(w, IOD_CHAOS_WL_SET);
	CHECK_EQ(iod_chaos_workload_parse("bank", &w, &err), 0);
	CHECK_EQ(w, IOD_CHAOS_WL_BANK);
	CHECK_EQ(iod_chaos_workload_parse("append", &w, &err), 0);
	CHECK_EQ(w, IOD_CHAOS_WL_APPEND);
	CHECK_STR(iod_chaos_workload_name(IOD_CHAOS_WL_APPEND), "append");
	CHECK_EQ(iod_chaos_workload_parse("ledger", &w, &err), -EINVAL);
	CHECK_CONTAINS(err.msg, "register, set, bank or append");
	CHECK_EQ(iod_chaos_workload_parse(NULL, &w, &err), -EINVAL);
	CHECK_EQ(iod_chaos_nemesis_parse("partition+kill", &m, &err), 0);
	CHECK_EQ(m, IOD_CHAOS_NEM_PARTITION | IOD_CHAOS_NEM_KILL);
	CHECK_EQ(iod_chaos_nemesis_parse("none", &m, &err), 0);
	CHECK_EQ(m, 0u);
	CHECK_EQ(iod_chaos_nemesis_parse("kill+kill", &m, &err), -EINVAL);
	CHECK_EQ(iod_chaos_nemesis_parse("kill+", &m, &err), -EINVAL);
	CHECK_EQ(iod_chaos_nemesis_parse("flood", &m, &err), -EINVAL);
	uint64_t v[] = {50, 10, 40, 20, 30};
	CHECK_EQ(iod_chaos_percentile(v, 5, 50), 30u);
	CHECK_EQ(iod_chaos_percentile(v, 5, 99), 50u);
	CHECK_EQ(iod_chaos_percentile(v, 5, 0), 10u);
	CHECK_EQ(iod_chaos_percentile(v, 0, 50), 0u);
}
