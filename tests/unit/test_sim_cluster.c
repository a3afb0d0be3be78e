/*
 * test_sim_cluster.c: the whole-cluster simulator (src/sim/cluster.c,
 * train.c, job.c): the ring all-reduce model against the nccl-tests
 * formulas (V1), the ResNet-50 8-GPU prediction from the 1-GPU calibration
 * (V3, reported: the test pins what the model predicts and that the 8-GPU
 * figure never enters it), determinism of the event log (V7), the
 * invariants (V6), a lost node's recovery through the real lease expiry and
 * rescheduling plan, the Kubernetes baseline's timers, and the job and
 * scenario parsers' errors.
 */
#include "harness.h"
#include "iod/sim_cluster.h"
#include "iod/topo.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* iod's production timers as the CLI passes them (agent lease 2 s, check
 * 50 ms, heartbeat 3 ms, stateful grace 30 s, restart 100 ms..10 s). */
static void cfg_small(struct iod_simc_config *c)
{
	iod_simc_config_default(c);
	iod_simc_timers_iod(&c->timers, 2000, 50, 3, 30000, 100 * IOD_NS_PER_MS, 10 * IOD_NS_PER_S);
	c->job.steps = 300;
	c->job.epochs = 0;
	c->job.gpus = 12;
	c->fault_per_gpu_hour = 0;
}

TEST(sim_cluster_ring_allreduce_matches_nccl_tests_formula)
{
	struct iod_simc_edge e[16];
	for (uint32_t n = 2; n <= 16; n *= 2) {
		for (uint32_t i = 0; i < n; i++)
			e[i] = (struct iod_simc_edge){IOD_SIMC_LINK_NVLINK, 2e-6, 150e9};
		uint64_t S = 64ull << 20;
		double t = iod_simc_ring_allreduce_s(e, n, S);
		double want = 2.0 * (n - 1) * 2e-6 + 2.0 * (n - 1) / n * (double)S / 150e9;
		CHECK_MSG(fabs(t - want) <= 0.01 * want, "n=%u: %g vs %g", n, t, want);
		CHECK(fabs(iod_simc_busbw(S, t, n) - iod_simc_algbw(S, t) * 2.0 * (n - 1) / n) <
		      1e-3);
	}
	/* the slowest edge sets every step: one PCIe edge in an NVLink ring */
	e[3].bw_Bps = 10e9;
	double slow = iod_simc_ring_allreduce_s(e, 8, 64ull << 20);
	CHECK(slow > 2.0 * 7 / 8 * (double)(64ull << 20) / 10e9);
	CHECK(iod_simc_ring_allreduce_s(e, 1, 1 << 20) == 0);
}

TEST(sim_cluster_resnet50_8gpu_prediction_uses_only_the_1gpu_figure)
{
	struct iod_simc_config *c = calloc(1, sizeof(*c));
	struct iod_simc_result *r = calloc(1, sizeof(*r));
	struct iod_err e = {0};
	CHECK(c && r);
	cfg_small(c);
	c->nodes = 1;
	snprintf(c->node_model, sizeof(c->node_model), "hgx-a100-8");
	c->gpus_per_node = 8;
	c->job.gpus = 8;
	c->job.steps = 100;
	CHECK_MSG(iod_simc_run(c, r, NULL, NULL, &e) == 0, "%s", e.msg);
	const struct iod_simc_calib *cal = iod_simc_calib_find("resnet50", "a100", IOD_SIMC_AMP);
	CHECK(cal && cal->items_per_s_1gpu == 2470 && cal->items_per_s_8gpu == 16621);
	/* compute of one step is exactly batch / the 1-GPU throughput */
	CHECK(fabs(r->compute_s - 256.0 / 2470) < 1e-9);
	/* an NVSwitch box: all ring edges NVLink, the all-reduce mostly hidden */
	CHECK_CONTAINS(r->ring, "nvlink x8");
	CHECK(r->items_per_s > 8 * 2470 * 0.95 && r->items_per_s <= 8 * 2470);
	/* V3 is reported, not met: the model predicts ~19.7k img/s against the
	 * published 16,621 (+18.7%); docs/simulation.md says why */
	CHECK(r->items_per_s > cal->items_per_s_8gpu * 1.05);
	free(c);
	free(r);
}

TEST(sim_cluster_same_seed_same_log_other_seed_other_log)
{
	struct iod_simc_config *c = calloc(1, sizeof(*c));
	struct iod_simc_result *r = calloc(3, sizeof(*r));
	struct iod_err e = {0};
	CHECK(c && r);
	cfg_small(c);
	c->keep_log = true;
	CHECK_EQ(iod_simc_run(c, &r[0], NULL, NULL, &e), 0);
	CHECK_EQ(iod_simc_run(c, &r[1], NULL, NULL, &e), 0);
	c->seed = 2;
	CHECK_EQ(iod_simc_run(c, &r[2], NULL, NULL, &e), 0);
	CHECK_STR(r[0].log_sha256, r[1].log_sha256);
	CHECK(strcmp(r[0].log_sha256, r[2].log_sha256) != 0);
	CHECK(r[0].log_len == r[1].log_len && !memcmp(r[0].log, r[1].log, r[0].log_len));
	CHECK_EQ(strlen(r[0].log_sha256), 64);
	CHECK(r[0].done && r[0].steps_done == 300);
	for (int i = 0; i < 3; i++)
		iod_simc_result_free(&r[i]);
	free(c);
	free(r);
}

/* A node lost mid-job: its lease expires after the production TTL, the
 * real rescheduling plan moves the replica to the spare node, the agent
 * there starts it, and training resumes from the checkpoint. */
TEST(sim_cluster_lost_node_is_detected_rescheduled_and_resumed)
{
	struct iod_simc_config *c = calloc(1, sizeof(*c));
	struct iod_simc_result *r = calloc(1, sizeof(*r));
	struct iod_err e = {0};
	CHECK(c && r);
	cfg_small(c);
	c->job.ckpt_every_steps = 100;
	c->faults[0] = (struct iod_simc_fault){40 * IOD_NS_PER_S, IOD_SIMC_FAULT_NODE, 1, 0, 0, 0};
	c->faults_n = 1;
	c->keep_log = true;
	CHECK_MSG(iod_simc_run(c, r, NULL, NULL, &e) == 0, "%s", e.msg);
	CHECK(r->done);
	CHECK_EQ(r->rec_n, 1);
	const struct iod_simc_recovery *x = &r->rec[0];
	/* detection: lease TTL 2 s after the last renewal (every 667 ms),
	 * seen at the next 50 ms check */
	CHECK_MSG(x->detect_ns >= 1300 * IOD_NS_PER_MS && x->detect_ns <= 2100 * IOD_NS_PER_MS,
	          "detect %llu", (unsigned long long)x->detect_ns);
	CHECK(x->decide_ns > 0 && x->decide_ns < 50 * IOD_NS_PER_MS);
	/* the new process starts in 20 s +- 25% */
	CHECK(x->start_ns >= 15 * IOD_NS_PER_S && x->start_ns <= 26 * IOD_NS_PER_S);
	CHECK(x->restore_ns > 0); /* a checkpoint existed */
	CHECK_CONTAINS(r->log, "ctrl move train-1 to=n3");
	/* the spare node's proxy sent requests through the mesh's LB; the dead
	 * endpoint was ejected after the outlier detector's 5 connect failures */
	CHECK(r->mesh_requests > 1000);
	CHECK_EQ(r->mesh_failed, 5);
	CHECK_EQ(r->mesh_ejections, 1);
	CHECK_CONTAINS(r->log, "mesh ejected train-1");
	CHECK_EQ(r->invariant_violations, 0);
	iod_simc_result_free(r);

	/* the Kubernetes baseline: 50 s grace, then 300 s toleration */
	c->policy = IOD_SIMC_POLICY_K8S;
	CHECK_MSG(iod_simc_run(c, r, NULL, NULL, &e) == 0, "%s", e.msg);
	CHECK_EQ(r->rec_n, 1);
	x = &r->rec[0];
	CHECK_MSG(x->detect_ns >= 40 * IOD_NS_PER_S && x->detect_ns <= 60 * IOD_NS_PER_S,
	          "k8s detect %llu", (unsigned long long)x->detect_ns);
	CHECK(x->decide_ns >= 300 * IOD_NS_PER_S && x->decide_ns < 310 * IOD_NS_PER_S);
	iod_simc_result_free(r);
	free(c);
	free(r);
}

TEST(sim_cluster_gpu_fault_restarts_in_place)
{
	struct iod_simc_config *c = calloc(1, sizeof(*c));
	struct iod_simc_result *r = calloc(1, sizeof(*r));
	struct iod_err e = {0};
	CHECK(c && r);
	cfg_small(c);
	c->faults[0] = (struct iod_simc_fault){35 * IOD_NS_PER_S, IOD_SIMC_FAULT_GPU, 0, 2, 0, 0};
	c->faults_n = 1;
	CHECK_EQ(iod_simc_run(c, r, NULL, NULL, &e), 0);
	CHECK_EQ(r->rec_n, 1);
	CHECK_EQ(r->rec[0].detect_ns, 0);
	CHECK_EQ(r->rec[0].decide_ns, 0); /* no move */
	/* the reconciler's 100 ms backoff, then a 20 s +- 25% start */
	CHECK(r->rec[0].start_ns >= 15 * IOD_NS_PER_S);
	CHECK(r->done);
	free(c);
	free(r);
}

/* A black-holed fabric link on a used node's path: iod's adaptive routing
 * leaves it after its probe timeout and the ring goes on (no restart, no
 * step lost); the ECMP-only baseline waits for NCCL's transport timeout,
 * then the node's ranks fail and restart in place. */
TEST(sim_cluster_link_fault_reroutes_or_aborts)
{
	struct iod_simc_config *c = calloc(1, sizeof(*c));
	struct iod_simc_result *r = calloc(1, sizeof(*r));
	struct iod_err e = {0};
	struct iod_simc_timers k8s;
	CHECK(c && r);
	cfg_small(c);
	c->job.steps = 800;
	c->faults[0] = (struct iod_simc_fault){40 * IOD_NS_PER_S, IOD_SIMC_FAULT_LINK, 1, 0, 0, 0};
	c->faults_n = 1;
	c->keep_log = true;
	CHECK(c->timers.reroute_ns > 0 && c->timers.reroute_ns < IOD_NS_PER_S);
	CHECK_MSG(iod_simc_run(c, r, NULL, NULL, &e) == 0, "%s", e.msg);
	CHECK(r->done);
	CHECK_EQ(r->rec_n, 1);
	CHECK_EQ(r->rec[0].kind, IOD_SIMC_FAULT_LINK);
	CHECK_EQ(r->rec[0].detect_ns, c->timers.reroute_ns);
	CHECK_EQ(r->rec[0].start_ns, 0);
	CHECK_EQ(r->rec[0].steps_lost, 0);
	CHECK_EQ(r->steps_done, 800);
	CHECK_CONTAINS(r->log, "job rerouted");
	CHECK_EQ(r->invariant_violations, 0);
	iod_simc_result_free(r);

	c->policy = IOD_SIMC_POLICY_K8S;
	iod_simc_timers_k8s(&k8s);
	CHECK_EQ(k8s.reroute_ns, 0);
	CHECK_MSG(iod_simc_run(c, r, NULL, NULL, &e) == 0, "%s", e.msg);
	CHECK(r->done);
	CHECK_EQ(r->rec_n, 1);
	CHECK_EQ(r->rec[0].detect_ns, k8s.transport_timeout_ns);
	CHECK(r->rec[0].start_ns >= 15 * IOD_NS_PER_S); /* restarted in place */
	CHECK_EQ(r->rec[0].decide_ns, 0);
	CHECK(r->rec[0].steps_lost > 0);
	CHECK_CONTAINS(r->log, "nccl abort node=n1");
	CHECK_EQ(r->invariant_violations, 0);
	iod_simc_result_free(r);
	free(c);
	free(r);
}

/* A NIC fails: the node's ranks fail at once and restart in place over the
 * remaining NIC; when the node loses its last NIC it is cut off, its lease
 * expires and the rescheduling plan moves its replica to the spare. */
TEST(sim_cluster_nic_fault_restarts_then_reschedules_when_cut_off)
{
	struct iod_simc_config *c = calloc(1, sizeof(*c));
	struct iod_simc_result *r = calloc(1, sizeof(*r));
	struct iod_err e = {0};
	enum iod_simc_fault_kind k;
	CHECK(c && r);
	CHECK(iod_simc_fault_parse("nic", &k) == 0 && k == IOD_SIMC_FAULT_NIC);
	CHECK(iod_simc_fault_parse("link", &k) == 0 && k == IOD_SIMC_FAULT_LINK);
	CHECK_EQ(iod_simc_fault_parse("switch", &k), -EINVAL);
	cfg_small(c); /* generic-4: two NICs per node */
	c->job.steps = 1500;
	c->faults[0] = (struct iod_simc_fault){40 * IOD_NS_PER_S, IOD_SIMC_FAULT_NIC, 1, 0, 0, 0};
	c->faults[1] = (struct iod_simc_fault){100 * IOD_NS_PER_S, IOD_SIMC_FAULT_NIC, 1, 0, 0, 0};
	c->faults_n = 2;
	c->keep_log = true;
	CHECK_MSG(iod_simc_run(c, r, NULL, NULL, &e) == 0, "%s", e.msg);
	CHECK(r->done);
	CHECK_EQ(r->rec_n, 2);
	CHECK_EQ(r->rec[0].kind, IOD_SIMC_FAULT_NIC);
	CHECK_EQ(r->rec[0].detect_ns, 0);
	CHECK_EQ(r->rec[0].decide_ns, 0);
	CHECK(r->rec[0].start_ns >= 15 * IOD_NS_PER_S);
	/* cut off: found by the lease (2 s TTL), moved by the controller */
	CHECK_MSG(r->rec[1].detect_ns >= 1300 * IOD_NS_PER_MS &&
	              r->rec[1].detect_ns <= 2100 * IOD_NS_PER_MS,
	          "detect %llu", (unsigned long long)r->rec[1].detect_ns);
	CHECK(r->rec[1].decide_ns > 0);
	CHECK_CONTAINS(r->log, "ctrl move train-1 to=n3");
	CHECK_EQ(r->invariant_violations, 0);
	iod_simc_result_free(r);
	free(c);
	free(r);
}

/* 1 iteration in packet_every runs its all-reduce's inter-node steps
 * through the packet-level fabric simulator; the two fidelities are
 * reported side by side, and 0 turns the sampling off. */
TEST(sim_cluster_packet_level_samples)
{
	struct iod_simc_config *c = calloc(1, sizeof(*c));
	struct iod_simc_result *r = calloc(1, sizeof(*r));
	struct iod_err e = {0};
	CHECK(c && r);
	cfg_small(c);
	c->nodes = 2;
	snprintf(c->node_model, sizeof(c->node_model), "hgx-a100-8");
	c->gpus_per_node = 8;
	c->job.gpus = 16;
	c->job.steps = 450;
	c->job.ckpt_every_steps = 200;
	CHECK_EQ(c->packet_every, 100); /* the default */
	CHECK_MSG(iod_simc_run(c, r, NULL, NULL, &e) == 0, "%s", e.msg);
	CHECK(r->done);
	CHECK_EQ(r->steps_done, 450);
	CHECK_EQ(r->packet_samples, 5); /* steps 0, 100, 200, 300, 400 */
	CHECK(r->packet_events > 0);
	CHECK(r->flow_comm_s > 0 && fabs(r->flow_comm_s - r->comm_s) < 1e-12);
	/* the packet level pays headers and transport dynamics the calibrated
	 * alpha-beta edge (90% of line rate) folds into one factor */
	CHECK_MSG(r->packet_comm_s > 0.5 * r->flow_comm_s && r->packet_comm_s < 2 * r->flow_comm_s,
	          "packet %g flow %g", r->packet_comm_s, r->flow_comm_s);
	CHECK(r->packet_diff_pct_max >= 0);
	CHECK_EQ(r->invariant_violations, 0);
	char h1[65];
	memcpy(h1, r->log_sha256, sizeof(h1));
	iod_simc_result_free(r);
	CHECK_EQ(iod_simc_run(c, r, NULL, NULL, &e), 0);
	CHECK_STR(r->log_sha256, h1); /* still deterministic */
	iod_simc_result_free(r);
	c->packet_every = 0;
	CHECK_EQ(iod_simc_run(c, r, NULL, NULL, &e), 0);
	CHECK_EQ(r->packet_samples, 0);
	CHECK_EQ(r->steps_done, 450);
	iod_simc_result_free(r);
	free(c);
	free(r);
}

TEST(sim_cluster_bad_configs_say_what)
{
	struct iod_simc_config *c = calloc(1, sizeof(*c));
	struct iod_simc_result *r = calloc(1, sizeof(*r));
	struct iod_err e = {0};
	CHECK(c && r);
	cfg_small(c);
	c->job.gpus = 100;
	CHECK_EQ(iod_simc_run(c, r, NULL, NULL, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "the cluster has 4 x 4 = 16");
	cfg_small(c);
	snprintf(c->node_model, sizeof(c->node_model), "dgx-h100");
	c->gpus_per_node = 0;
	CHECK_EQ(iod_simc_run(c, r, NULL, NULL, &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "no calibration for resnet50 on h100");
	cfg_small(c);
	memset(&c->timers, 0, sizeof(c->timers));
	CHECK_EQ(iod_simc_run(c, r, NULL, NULL, &e), -EINVAL);
	free(c);
	free(r);
}

TEST(sim_cluster_job_and_scenario_files)
{
	struct iod_simc_job j;
	struct iod_err e = {0};
	const char *ok = "name: rn\nmodel: resnet50\nprecision: tf32\ngpus: 8\nbatch: 128\n"
	                 "steps: 1000\ncheckpoint_every: 200\n";
	iod_simc_job_default(&j);
	CHECK_MSG(iod_simc_job_parse_yaml(&j, ok, strlen(ok), "j.yaml", &e) == 0, "%s", e.msg);
	CHECK_STR(j.name, "rn");
	CHECK(j.prec == IOD_SIMC_TF32 && j.gpus == 8 && j.batch_per_gpu == 128 && j.steps == 1000 &&
	      j.ckpt_every_steps == 200);
	const char *typo = "model: resnet50\ngpu: 8\n";
	CHECK_EQ(iod_simc_job_parse_yaml(&j, typo, strlen(typo), "j.yaml", &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "j.yaml:2:1: job: unknown key \"gpu\"; did you mean \"gpus\"?");
	const char *tp = "gpus: 8\ntp: 2\n";
	CHECK_EQ(iod_simc_job_parse_yaml(&j, tp, strlen(tp), "j.yaml", &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "not modelled");
	const char *neg = "gpus: -3\n";
	CHECK_EQ(iod_simc_job_parse_yaml(&j, neg, strlen(neg), "j.yaml", &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "j.yaml:1:7");

	struct iod_simc_scenario *sc = calloc(1, sizeof(*sc));
	CHECK(sc);
	iod_simc_config_default(&sc->cfg);
	const char *s = "name: t\ncluster: {nodes: 3, node_model: hgx-a100-8}\n"
	                "job: {gpus: 16, epochs: 2}\nfaults:\n  - {at: 30m, kind: node, node: 1}\n"
	                "seeds: 5\nclaim:\n  source: somewhere\n  iod: {task_min: 89}\n"
	                "  k8s: {task_min: 142, recovery_s: 2.3}\n";
	CHECK_MSG(iod_simc_scenario_parse_yaml(sc, s, strlen(s), "s.yaml", &e) == 0, "%s", e.msg);
	CHECK(sc->cfg.nodes == 3 && sc->cfg.job.gpus == 16 && sc->seeds == 5);
	CHECK(sc->cfg.faults_n == 1 && sc->cfg.faults[0].at_ns == 1800 * IOD_NS_PER_S &&
	      sc->cfg.faults[0].kind == IOD_SIMC_FAULT_NODE);
	CHECK(sc->claims.set && sc->claims.task_min[1] == 142 && sc->claims.recovery_s[1] == 2.3);
	const char *badnode = "cluster: {nodes: 2}\nfaults:\n  - {at: 1m, node: 5}\n";
	CHECK_EQ(iod_simc_scenario_parse_yaml(sc, badnode, strlen(badnode), "s.yaml", &e), -EINVAL);
	CHECK_CONTAINS(e.msg, "names node 5");
	free(sc);
}

/* The control plane on Raft's fixture: killing the leader while the deploy
 * is being written costs an election (production timers: T = 30 ms,
 * heartbeat 3 ms), the deploy still lands once, nothing acknowledged is
 * lost and no term has two leaders; the same run without Raft (servers 0)
 * places the job the same way. */
TEST(sim_cluster_leader_killed_during_deploy)
{
	struct iod_simc_config *c = calloc(1, sizeof(*c));
	struct iod_simc_result *r = calloc(2, sizeof(*r));
	struct iod_err e = {0};
	CHECK(c && r);
	cfg_small(c);
	c->faults[0] = (struct iod_simc_fault){2 * IOD_NS_PER_S, IOD_SIMC_FAULT_LEADER, 0, 0, 0, 0};
	c->faults_n = 1;
	c->keep_log = true;
	CHECK_MSG(iod_simc_run(c, &r[0], NULL, NULL, &e) == 0, "%s", e.msg);
	CHECK(r[0].done);
	CHECK_EQ(r[0].server_faults, 1);
	CHECK(r[0].elections >= 2);
	CHECK_MSG(r[0].leaderless_ns_max >= 30 * IOD_NS_PER_MS &&
	              r[0].leaderless_ns_max < 500 * IOD_NS_PER_MS,
	          "leaderless %llu ns", (unsigned long long)r[0].leaderless_ns_max);
	CHECK(r[0].writes_acked >= 3);
	CHECK_EQ(r[0].invariant_violations, 0);
	CHECK(r[0].raft_steps > 1000);
	CHECK_CONTAINS(r[0].log, "raft leader lost");
	c->servers = 0;
	c->faults_n = 0;
	CHECK_EQ(iod_simc_run(c, &r[1], NULL, NULL, &e), 0);
	CHECK(r[1].done && r[1].raft_steps == 0 && r[1].place_n == r[0].place_n);
	for (uint32_t i = 0; i < r[0].place_n; i++)
		CHECK(r[0].place[i].node == r[1].place[i].node &&
		      r[0].place[i].gpus == r[1].place[i].gpus);
	iod_simc_result_free(&r[0]);
	iod_simc_result_free(&r[1]);
	free(c);
	free(r);
}

/* The ring's edges come from the topology models: NVSwitch on a DGX H100
 * (18 NVLinks x 25 GB/s), the NVLink bridge of a generic pair, PCIe across
 * the pairs; V2 compares what they give with nccl-tests' published busbw
 * (reported by --selftest: the model uses line rates, no efficiency). */
TEST(sim_cluster_ring_edges_come_from_the_topology)
{
	struct iod_topo_node *t = calloc(1, sizeof(*t));
	struct iod_simc_edge ed;
	struct iod_err e = {0};
	CHECK(t);
	CHECK_EQ(iod_topo_model_load("dgx-h100", t, &e), 0);
	iod_simc_edge_gpus(t, 0, 5, NULL, &ed);
	CHECK(ed.cls == IOD_SIMC_LINK_NVLINK && fabs(ed.bw_Bps - 450e9) < 1e6);
	CHECK(ed.alpha_s > 0 && ed.alpha_s < 5e-6);
	CHECK(fabs(iod_simc_node_nic_Bps(t) - 8 * 50e9) < 1e6); /* 8 x NDR 400G */
	CHECK_EQ(iod_topo_model_load("generic-4", t, &e), 0);
	iod_simc_edge_gpus(t, 0, 1, NULL, &ed);
	CHECK(ed.cls == IOD_SIMC_LINK_NVLINK && fabs(ed.bw_Bps - 300e9) < 1e6);
	iod_simc_edge_gpus(t, 1, 2, NULL, &ed);
	CHECK(ed.cls == IOD_SIMC_LINK_PCIE && ed.bw_Bps < 32e9);
	free(t);
}

/*
 * The flow model calibrated from the packet samples (issue 18): between
 * samples the job runs at the packet model's pace. 3 x hgx-a100-8, 24 GPUs,
 * 100 steps: with a sample every 50 steps, the calibrated job time is much
 * closer to the job with every step packet by packet than the pure
 * alpha-beta job (calibrate off) is; the samples it predicted match within
 * 0.5 %, and the NIC factor is the packet / alpha-beta step ratio (> 1).
 */
static void calib_run(bool calibrate, uint32_t every, struct iod_simc_result *r)
{
	struct iod_simc_config *c = calloc(1, sizeof(*c));
	struct iod_err e = {0};
	IOD_ASSERT(c);
	iod_simc_config_model(c, "hgx-a100-8", 3, 8);
	c->job.steps = 100;
	c->job.epochs = 0;
	c->fault_per_gpu_hour = 0;
	c->calibrate = calibrate;
	c->packet_every = every;
	if (iod_simc_run(c, r, NULL, NULL, &e))
		fprintf(stderr, "calib_run: %s\n", e.msg);
	free(c);
}

TEST(sim_cluster_flow_model_calibrated_from_packet_samples)
{
	struct iod_simc_result *r = calloc(3, sizeof(*r));
	CHECK(r);
	calib_run(true, 1, &r[0]);   /* every step packet by packet: the reference */
	calib_run(true, 50, &r[1]);  /* calibrated between samples */
	calib_run(false, 50, &r[2]); /* alpha-beta between samples */
	double t_pkt = (double)(r[0].job_end_ns - r[0].job_start_ns);
	double t_cal = (double)(r[1].job_end_ns - r[1].job_start_ns);
	double t_ab = (double)(r[2].job_end_ns - r[2].job_start_ns);
	CHECK(r[0].done && r[1].done && r[2].done);
	CHECK(fabs(t_ab - t_pkt) > 0); /* the two models differ on this fabric */
	CHECK_MSG(fabs(t_cal - t_pkt) < 0.1 * fabs(t_ab - t_pkt),
	          "job: packet %.0f ns, calibrated %.0f, alpha-beta %.0f", t_pkt, t_cal, t_ab);
	CHECK_EQ(r[1].packet_samples, 2);
	CHECK_EQ(r[1].calib_samples, 1);
	CHECK(r[1].calib_abs_pct <= 0.5);
	CHECK(r[1].nic_cal > 1.05 && r[1].nic_cal < 1.5);
	CHECK(r[2].calib_samples == 0 && r[2].nic_cal == 0);
	/* the uncalibrated samples' difference is still reported as before */
	CHECK(fabs(r[1].packet_comm_s - r[1].flow_comm_s) / r[1].flow_comm_s > 0.05);
	free(r);
}

/* Kueue TAS's BestFit: the least capacity that holds everything, else the
 * most and on with the rest. */
TEST(sim_cluster_tas_bestfit_packs_into_fewest_domains)
{
	uint32_t cap[] = {3, 1, 2, 4}, take[4];
	CHECK_EQ(iod_simc_tas_bestfit(cap, 4, 2, take), 0);
	CHECK(take[0] == 0 && take[1] == 0 && take[2] == 2 && take[3] == 0); /* best fit: 2 */
	CHECK_EQ(iod_simc_tas_bestfit(cap, 4, 5, take), 0);
	CHECK(take[3] == 4 && take[1] == 1 && take[0] == 0 && take[2] == 0); /* 4, then 1 */
	CHECK_EQ(iod_simc_tas_bestfit(cap, 4, 10, take), 0);
	CHECK(take[0] == 3 && take[1] == 1 && take[2] == 2 && take[3] == 4);
	CHECK_EQ(iod_simc_tas_bestfit(cap, 4, 11, take), -ENOSPC);
}

/* 8 x hgx-a100-8 in two racks of 4; a fault-free job; the nodes and racks
 * of its first placement. */
static void topo_run(enum iod_simc_policy_kind pol, uint64_t seed, uint32_t gpus, uint32_t gpr,
                     uint32_t *nodes_used, uint32_t *racks_used, struct iod_simc_result *r)
{
	struct iod_simc_config *c = calloc(1, sizeof(*c));
	struct iod_err e = {0};
	IOD_ASSERT(c);
	iod_simc_config_model(c, "hgx-a100-8", 8, 8);
	c->job.gpus = gpus;
	c->job.gpus_per_replica = gpr;
	c->job.steps = 50;
	c->job.epochs = 0;
	c->fault_per_gpu_hour = 0;
	c->packet_every = 0;
	c->rack_nodes = 4;
	c->policy = pol;
	c->seed = seed;
	if (iod_simc_run(c, r, NULL, NULL, &e))
		fprintf(stderr, "topo_run: %s\n", e.msg);
	uint32_t rk = 0;
	for (uint32_t i = 0; i < r->place_n; i++)
		if (r->place[i].node < 8)
			rk |= 1u << (r->place[i].node / 4);
	*nodes_used = r->nodes_used;
	*racks_used = (uint32_t)__builtin_popcount(rk);
	free(c);
}

TEST(sim_cluster_k8s_topo_packs_where_k8s_spreads)
{
	struct iod_simc_result *r = calloc(1, sizeof(*r));
	uint32_t nu, ru, k8s_spread_nodes = 0, k8s_spread_racks = 0;
	CHECK(r);
	CHECK(iod_simc_policy_is_k8s(IOD_SIMC_POLICY_K8S_TOPO));
	enum iod_simc_policy_kind pk;
	CHECK(iod_simc_policy_parse("k8s-topo", &pk) == 0 && pk == IOD_SIMC_POLICY_K8S_TOPO);
	CHECK_STR(iod_simc_policy_name(IOD_SIMC_POLICY_K8S_TOPO), "k8s-topo");
	for (uint64_t seed = 1; seed <= 4; seed++) {
		/* 16 GPUs in 4-GPU pods: TAS puts them on 2 nodes of one rack */
		topo_run(IOD_SIMC_POLICY_K8S_TOPO, seed, 16, 4, &nu, &ru, r);
		CHECK_MSG(r->done && nu == 2 && ru == 1, "seed %llu: k8s-topo %u nodes %u racks",
		          (unsigned long long)seed, nu, ru);
		CHECK_STR(r->ring, "nvlink x14, nic x2");
		iod_simc_result_free(r);
		/* the default scheduler picks a random fitting node per pod */
		topo_run(IOD_SIMC_POLICY_K8S, seed, 16, 4, &nu, &ru, r);
		CHECK(r->done);
		k8s_spread_nodes += nu > 2;
		iod_simc_result_free(r);
		/* 3 whole nodes: TAS keeps them in one rack */
		topo_run(IOD_SIMC_POLICY_K8S_TOPO, seed, 24, 8, &nu, &ru, r);
		CHECK_MSG(nu == 3 && ru == 1, "k8s-topo 24 GPUs: %u nodes %u racks", nu, ru);
		iod_simc_result_free(r);
		topo_run(IOD_SIMC_POLICY_K8S, seed, 24, 8, &nu, &ru, r);
		k8s_spread_racks += ru > 1;
		iod_simc_result_free(r);
	}
	CHECK_MSG(k8s_spread_nodes >= 3, "k8s spread over > 2 nodes in %u of 4 seeds",
	          k8s_spread_nodes);
	CHECK_MSG(k8s_spread_racks >= 2, "k8s crossed racks in %u of 4 seeds", k8s_spread_racks);
	free(r);
}

/* A lost node under k8s-topo: the Kubernetes timers, and the replacement in
 * the rack the job's other pods run in (n3, the rack's free node), where the
 * default scheduler may pick any free node. */
TEST(sim_cluster_k8s_topo_replacement_stays_in_the_rack)
{
	struct iod_simc_config *c = calloc(1, sizeof(*c));
	struct iod_simc_result *r = calloc(1, sizeof(*r));
	struct iod_err e = {0};
	CHECK(c && r);
	iod_simc_config_model(c, "hgx-a100-8", 8, 8);
	c->job.gpus = 24;
	c->job.steps = 6000;
	c->job.epochs = 0;
	c->fault_per_gpu_hour = 0;
	c->packet_every = 0;
	c->servers = 0;
	c->policy = IOD_SIMC_POLICY_K8S_TOPO;
	c->faults[0] = (struct iod_simc_fault){40 * IOD_NS_PER_S, IOD_SIMC_FAULT_NODE, 1, 0, 0, 0};
	c->faults_n = 1;
	c->keep_log = true;
	CHECK_MSG(iod_simc_run(c, r, NULL, NULL, &e) == 0, "%s", e.msg);
	CHECK_CONTAINS(r->log, "placed train-0 node=n0");
	CHECK_CONTAINS(r->log, "placed train-1 node=n1");
	CHECK_CONTAINS(r->log, "placed train-2 node=n2");
	CHECK_CONTAINS(r->log, "ctrl move train-1 to=n3");
	CHECK_EQ(r->rec_n, 1);
	CHECK(r->rec[0].detect_ns >= 40 * IOD_NS_PER_S && r->rec[0].detect_ns <= 60 * IOD_NS_PER_S);
	CHECK(r->rec[0].decide_ns >= 300 * IOD_NS_PER_S);
	CHECK_EQ(r->invariant_violations, 0);
	iod_simc_result_free(r);
	free(c);
	free(r);
}

/* The ASTRA-sim text workload: DATA parallelism maps onto the step; what
 * is not modelled is refused naming the line and the field. */
TEST(sim_cluster_astra_workload_good_and_bad)
{
	struct iod_simc_astra a;
	struct iod_err e = {0};
	const char *good = "DATA\n3\n"
	                   "conv1 -1 100 NONE 0 200 NONE 0 300 ALLREDUCE 4096 10\n"
	                   "\n"
	                   "conv2\t-1 1000 NONE 0 2000 NONE 0 3000 ALLREDUCE 8192 0\r\n"
	                   "fc -1 5 NONE 0 5 NONE 0 5 NONE 0 5\n";
	CHECK_MSG(iod_simc_astra_parse(good, strlen(good), "w.txt", &a, &e) == 0, "%s", e.msg);
	CHECK_STR(a.parallel, "DATA");
	CHECK_EQ(a.layers, 3);
	CHECK_EQ(a.fwd_cycles, 1105);
	CHECK_EQ(a.ig_cycles, 2205);
	CHECK_EQ(a.wg_cycles, 3305);
	CHECK_EQ(a.update_cycles, 15);
	CHECK_EQ(a.allreduce_bytes, 12288);
	CHECK_EQ(a.allreduce_layers, 2);
	struct iod_simc_job j;
	iod_simc_job_default(&j);
	CHECK_EQ(iod_simc_job_apply_astra(&j, &a, 2.0, "w.txt", &e), 0);
	CHECK(fabs(j.step_compute_s - 6630 * 2e-9) < 1e-15);
	CHECK_EQ(j.grad_bytes, 12288);
	CHECK(iod_simc_job_apply_astra(&j, &a, 0, "w.txt", &e) == -EINVAL);

	static const struct {
		const char *text, *want;
	} bad[] = {
	    {"", "empty workload"},
	    {"HYBRID_TRANSFORMER\n1\nl -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 1 1\n",
	     "w.txt:1: field 1 (parallelism): \"HYBRID_TRANSFORMER\" is not modelled"},
	    {"MODEL\n1\n", "w.txt:1: field 1 (parallelism): \"MODEL\" is not modelled"},
	    {"DATAX\n1\n", "\"DATAX\" is not an ASTRA-sim parallelism"},
	    {"DATA\nx\n", "w.txt:2: field 1 (number of layers)"},
	    {"DATA\n2\nl -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 8 1\n", "1 layer lines; line 2 gives 2"},
	    {"DATA\n1\nl -1 1 ALLGATHER 64 1 NONE 0 1 ALLREDUCE 8 1\n",
	     "w.txt:3: field 4 (forward comm type): ALLGATHER is not modelled"},
	    {"DATA\n1\nl -1 1 NONE 0 1 ALLTOALL 9 1 ALLREDUCE 8 1\n",
	     "w.txt:3: field 7 (input-gradient comm type): ALLTOALL is not modelled"},
	    {"DATA\n1\nl -1 1 NONE 0 1 NONE 0 1 REDUCESCATTER 8 1\n",
	     "w.txt:3: field 10 (weight-gradient comm type): REDUCESCATTER is not modelled"},
	    {"DATA\n1\nl -1 1 NONE 0 1 NONE 0 1 BROADCAST 8 1\n",
	     "field 10 (weight-gradient comm type): \"BROADCAST\" is not a collective"},
	    {"DATA\n1\nl -1 1 NONE 0 1 NONE 0 -3 ALLREDUCE 8 1\n",
	     "w.txt:3: field 9 (weight-gradient compute): \"-3\" is not a whole number"},
	    {"DATA\n1\nl -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 8\n", "w.txt:3: 11 fields"},
	    {"DATA\n1\nl -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 8 1 7\n", "w.txt:3: more than 12 fields"},
	    {"DATA\n1\nl x 1 NONE 0 1 NONE 0 1 ALLREDUCE 8 1\n", "field 2 (reserved)"},
	    {"DATA\n1\nl -1 1 NONE 5 1 NONE 0 1 ALLREDUCE 8 1\n",
	     "field 5 (forward comm size): 5 bytes with comm type NONE"},
	    {"DATA\n1\nl -1 1 NONE 0 1 NONE 0 1 ALLREDUCE 8 1\nm -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n",
	     "w.txt:4: more layer lines than the 1"},
	};
	for (size_t i = 0; i < IOD_ARRAY_LEN(bad); i++) {
		memset(&e, 0, sizeof(e));
		CHECK_MSG(iod_simc_astra_parse(bad[i].text, strlen(bad[i].text), "w.txt", &a, &e) ==
		              -EINVAL,
		          "bad[%zu] accepted", i);
		CHECK_MSG(strstr(e.msg, bad[i].want), "bad[%zu]: \"%s\" lacks \"%s\"", i, e.msg,
		          bad[i].want);
	}
	/* no all-reduce at all: nothing for the ring */
	const char *none = "DATA\n1\nl -1 1 NONE 0 1 NONE 0 1 NONE 0 1\n";
	CHECK_EQ(iod_simc_astra_parse(none, strlen(none), "w.txt", &a, &e), 0);
	CHECK(iod_simc_job_apply_astra(&j, &a, 1, "w.txt", &e) == -EINVAL);
}

/* An imported workload with ResNet-50's layers, compute and gradients
 * (examples/sim/resnet50-dp.astra.txt's sums) gives the native job's step,
 * and runs on a GPU with no calibration row (H100). */
TEST(sim_cluster_astra_workload_drives_the_step)
{
	struct iod_simc_config *c = calloc(1, sizeof(*c));
	struct iod_simc_result *r = calloc(2, sizeof(*r));
	struct iod_err e = {0};
	CHECK(c && r);
	iod_simc_config_model(c, "hgx-a100-8", 2, 8);
	c->job.steps = 100;
	c->job.epochs = 0;
	c->fault_per_gpu_hour = 0;
	c->packet_every = 0;
	CHECK_EQ(iod_simc_run(c, &r[0], NULL, NULL, &e), 0);
	struct iod_simc_astra a = {.layers = 1,
	                           .fwd_cycles = 34547896,
	                           .ig_cycles = 34547896,
	                           .wg_cycles = 34547896,
	                           .allreduce_bytes = 25557032ull * 4,
	                           .allreduce_layers = 54};
	CHECK_EQ(iod_simc_job_apply_astra(&c->job, &a, 1.0, "rn50.txt", &e), 0);
	CHECK_EQ(iod_simc_run(c, &r[1], NULL, NULL, &e), 0);
	CHECK_MSG(fabs(r[1].step_s - r[0].step_s) < 1e-6 * r[0].step_s, "%g vs %g", r[1].step_s,
	          r[0].step_s);
	CHECK(fabs(r[1].comm_s - r[0].comm_s) < 1e-12);
	iod_simc_result_free(&r[0]);
	iod_simc_result_free(&r[1]);
	/* half the gradient bytes: a shorter all-reduce */
	c->job.grad_bytes /= 2;
	CHECK_EQ(iod_simc_run(c, &r[1], NULL, NULL, &e), 0);
	CHECK(r[1].comm_s < 0.6 * r[0].comm_s);
	iod_simc_result_free(&r[1]);
	/* dgx-h100 has no calibration row; the workload brings its compute */
	struct iod_simc_job job = c->job;
	iod_simc_config_model(c, "dgx-h100", 1, 8);
	c->job.steps = 20;
	c->job.epochs = 0;
	c->fault_per_gpu_hour = 0;
	c->packet_every = 0;
	CHECK(iod_simc_run(c, &r[1], NULL, NULL, &e) == -EINVAL);
	CHECK_CONTAINS(e.msg, "no calibration");
	c->job.step_compute_s = job.step_compute_s;
	c->job.grad_bytes = job.grad_bytes;
	CHECK_MSG(iod_simc_run(c, &r[1], NULL, NULL, &e) == 0, "%s", e.msg);
	CHECK(r[1].done);
	iod_simc_result_free(&r[1]);
	free(c);
	free(r);
}
