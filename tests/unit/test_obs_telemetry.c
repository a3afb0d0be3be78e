/*
 * test_obs_telemetry.c: the agent's telemetry model (src/obs/telemetry.c):
 * rings, the busy-but-stalled rule, the counters protocol, simulated GPU
 * samples, Prometheus names (iod_ and DCGM's) and the summary; the data
 * plane's port counters from a port that moved traffic to /metrics and the
 * summary's links.
 */
#include "harness.h"
#include "iod/io.h"
#include "iod/obs.h"

#include <math.h>
#include <stdlib.h>

static struct iod_tel_node node;

static void push_gpu(struct iod_tel_gpu *g, uint64_t at, double util, uint64_t nvlink)
{
	struct iod_tel_gpu_sample s = {.at_ms = at,
	                               .util_pct = util,
	                               .mem_used_bytes = 1u << 30,
	                               .mem_total_bytes = 4u << 30,
	                               .power_w = 250,
	                               .temp_c = 50,
	                               .nvlink_bytes_total = nvlink};
	iod_tel_gpu_push(g, &s);
}

TEST(tel_ring_is_bounded_and_keeps_the_newest)
{
	struct iod_tel_gpu *g = calloc(1, sizeof(*g));
	CHECK(g);
	CHECK(!iod_tel_gpu_last(g));
	for (uint64_t i = 0; i < 3 * IOD_TEL_RING + 7; i++)
		push_gpu(g, i, 10, i << 30);
	CHECK_EQ(g->n, IOD_TEL_RING);
	CHECK_EQ(iod_tel_gpu_last(g)->at_ms, 3 * IOD_TEL_RING + 6);
	json_t *d = NULL;
	memset(&node, 0, sizeof(node));
	node.gpus_n = 1;
	node.gpus[0] = *g;
	d = iod_tel_detail_json(&node);
	json_t *ss = json_object_get(json_array_get(json_object_get(d, "gpus"), 0), "samples");
	CHECK_EQ(json_array_size(ss), IOD_TEL_RING);
	/* oldest first: the first kept is the one IOD_TEL_RING before the last */
	CHECK_EQ(json_integer_value(json_object_get(json_array_get(ss, 0), "at_ms")),
	         2 * IOD_TEL_RING + 7);
	json_decref(d);
	free(g);
}

TEST(tel_busy_but_stalled)
{
	struct iod_tel_gpu *g = calloc(1, sizeof(*g));
	CHECK(g);
	/* busy and moving bytes: not stalled */
	for (int i = 0; i < 10; i++)
		push_gpu(g, (uint64_t)i, 100, (uint64_t)i << 30);
	CHECK(!g->stalled);
	/* busy, bytes flat: stalled once IOD_TEL_STALL_SAMPLES samples say so */
	for (int i = 0; i < IOD_TEL_STALL_SAMPLES - 1; i++) {
		push_gpu(g, 100 + (uint64_t)i, 99, 10ull << 30);
		CHECK_MSG(!g->stalled, "stalled after %d flat samples", i + 1);
	}
	push_gpu(g, 200, 99, 10ull << 30);
	CHECK(g->stalled);
	/* idle and flat: not stalled (a GPU with nothing to do) */
	push_gpu(g, 201, 3, 9ull << 30);
	CHECK(!g->stalled);
	for (int i = 0; i < 10; i++)
		push_gpu(g, 300 + (uint64_t)i, 0, 9ull << 30);
	CHECK(!g->stalled);
	/* busy with a trickle below the threshold: still stalled */
	for (int i = 0; i < IOD_TEL_STALL_SAMPLES; i++)
		push_gpu(g, 400 + (uint64_t)i, 100, (9ull << 30) + (uint64_t)i * 1000);
	CHECK(g->stalled);
	/* fewer samples than the rule needs */
	memset(g, 0, sizeof(*g));
	push_gpu(g, 1, 100, 0);
	CHECK(!g->stalled);
	free(g);
}

TEST(tel_counters_protocol)
{
	struct iod_tel_counters c;
	struct iod_err e = {0};
	const char *ok = "# from the demo worker\n busy_ns_total 1500000000\ncomm_bytes_total 42 "
	                 "# bytes\n\nsteps_total 7\ngpu_mem_used_bytes 1024\nfuture_counter 9\n";
	CHECK_EQ(iod_tel_counters_parse(ok, strlen(ok), &c, &e), 0);
	CHECK(c.has_busy && c.busy_ns_total == 1500000000ull && c.comm_bytes_total == 42);
	CHECK(c.steps_total == 7 && c.gpu_mem_used_bytes == 1024);
	const char *bad = "busy_ns_total 1\nsteps_total -3\n";
	CHECK_EQ(iod_tel_counters_parse(bad, strlen(bad), &c, &e), -EINVAL);
	CHECK(strstr(e.msg, "line 2") && strstr(e.msg, "steps_total"));
	const char *junk = "busy_ns_total 12abc\n";
	CHECK_EQ(iod_tel_counters_parse(junk, strlen(junk), &c, &e), -EINVAL);
	const char *over = "busy_ns_total 99999999999999999999999\n";
	CHECK_EQ(iod_tel_counters_parse(over, strlen(over), &c, &e), -EINVAL);
	CHECK_EQ(iod_tel_counters_parse("", 0, &c, &e), 0);
	CHECK(!c.has_busy);
	CHECK_EQ(iod_tel_counters_parse(ok, IOD_TEL_COUNTERS_FILE_MAX + 1, &c, &e), -E2BIG);
}

TEST(tel_simulated_gpu_from_counters)
{
	struct iod_tel_counters a = {.busy_ns_total = 1000000000ull, .comm_bytes_total = 100},
	                        b = {.busy_ns_total = 1500000000ull,
	                             .comm_bytes_total = 300,
	                             .gpu_mem_used_bytes = 4000};
	struct iod_tel_gpu_sample s;
	/* 0.5 s busy in 1 s: 50%; two GPUs share the bytes and memory */
	iod_tel_sim_gpu(&a, &b, 1000, 2, 1u << 30, 77, &s);
	CHECK(fabs(s.util_pct - 50) < 1e-9);
	CHECK_EQ(s.nvlink_bytes_total, 150);
	CHECK_EQ(s.mem_used_bytes, 2000);
	CHECK_EQ(s.at_ms, 77);
	CHECK(fabs(s.power_w - 230) < 1e-9 && fabs(s.temp_c - 50) < 1e-9);
	/* more busy time than wall time (clock skew) is clamped; no previous: idle */
	iod_tel_sim_gpu(&a, &b, 100, 1, 0, 1, &s);
	CHECK(s.util_pct == 100);
	iod_tel_sim_gpu(NULL, &b, 1000, 1, 0, 1, &s);
	CHECK(s.util_pct == 0 && s.power_w == 60);
	/* a counter that went back (restarted workload): no utilisation */
	iod_tel_sim_gpu(&b, &a, 1000, 1, 0, 1, &s);
	CHECK(s.util_pct == 0);
}

static void node_fixture(void)
{
	memset(&node, 0, sizeof(node));
	snprintf(node.node, sizeof(node.node), "node-1");
	snprintf(node.hostname, sizeof(node.hostname), "host-a");
	node.gpus_n = 2;
	node.gpus[0].index = 0;
	snprintf(node.gpus[0].uuid, sizeof(node.gpus[0].uuid), "GPU-abc");
	snprintf(node.gpus[0].pci, sizeof(node.gpus[0].pci), "0000:04:00.0");
	snprintf(node.gpus[0].replica, sizeof(node.gpus[0].replica), "w-0");
	snprintf(node.gpus[0].service, sizeof(node.gpus[0].service), "w");
	node.gpus[1].index = 1;
	push_gpu(&node.gpus[0], 5, 87.4, 1);
	struct iod_tel_replica *r = iod_tel_replica_get(&node, "w-0");
	snprintf(r->service, sizeof(r->service), "w");
	r->restarts = 3;
	r->cpu_seconds_total = 1.5;
	struct iod_tel_replica_sample rs = {.at_ms = 5, .cpu_pct = 25, .mem_bytes = 1000};
	iod_tel_replica_push(r, &rs);
}

TEST(tel_prometheus_names_and_dcgm_labels)
{
	struct iod_buf b;
	node_fixture();
	iod_buf_init(&b);
	CHECK_EQ(iod_tel_prom(&node, &b), 0);
	CHECK(strstr(b.data, "# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n"));
	CHECK(strstr(b.data, "DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-abc\",device=\"nvidia0\","
	                     "pci_bus_id=\"0000:04:00.0\",Hostname=\"host-a\",node=\"node-1\","
	                     "replica=\"w-0\",service=\"w\"} 87\n"));
	CHECK(strstr(b.data, "DCGM_FI_DEV_FB_USED{gpu=\"0\""));
	CHECK(strstr(b.data, "} 1024\n")); /* 1 GiB in MiB */
	CHECK(strstr(b.data, "DCGM_FI_DEV_FB_FREE{gpu=\"0\""));
	CHECK(strstr(b.data, "DCGM_FI_DEV_POWER_USAGE{gpu=\"0\""));
	CHECK(strstr(b.data, "DCGM_FI_DEV_GPU_TEMP{gpu=\"0\""));
	CHECK(strstr(b.data, "iod_gpu_utilization_ratio{node=\"node-1\",gpu=\"0\""));
	CHECK(strstr(b.data, "# TYPE iod_gpu_nvlink_bytes_total counter\n"));
	CHECK(strstr(b.data, "iod_replica_restarts_total{node=\"node-1\",replica=\"w-0\","
	                     "service=\"w\"} 3\n"));
	CHECK(strstr(b.data, "iod_replica_cpu_seconds_total{node=\"node-1\",replica=\"w-0\","
	                     "service=\"w\"} 1.5\n"));
	/* a GPU without a sample yet has no series */
	CHECK(!strstr(b.data, "gpu=\"1\""));
	iod_buf_free(&b);
}

TEST(tel_summary_for_the_control_plane)
{
	node_fixture();
	for (int i = 0; i < 40; i++)
		push_gpu(&node.gpus[0], 10 + (uint64_t)i, i, 1);
	json_t *s = iod_tel_summary_json(&node, 99);
	CHECK(s);
	CHECK(!strcmp(json_string_value(json_object_get(s, "node")), "node-1"));
	json_t *g = json_array_get(json_object_get(s, "gpus"), 0);
	CHECK(json_number_value(json_object_get(g, "util_pct")) == 39);
	json_t *h = json_object_get(g, "util_hist");
	CHECK_EQ(json_array_size(h), IOD_TEL_SUMMARY_HIST);
	CHECK(json_number_value(json_array_get(h, IOD_TEL_SUMMARY_HIST - 1)) == 39);
	CHECK(json_number_value(json_array_get(h, 0)) == 40 - IOD_TEL_SUMMARY_HIST);
	json_t *r = json_array_get(json_object_get(s, "replicas"), 0);
	CHECK(!strcmp(json_string_value(json_object_get(r, "name")), "w-0"));
	CHECK(json_number_value(json_object_get(r, "cpu_pct")) == 25);
	CHECK(json_number_value(json_object_get(s, "cpu_pct")) == 25);
	json_decref(s);
}

TEST(tel_replicas_sweep_and_bound)
{
	memset(&node, 0, sizeof(node));
	for (int i = 0; i < IOD_TEL_REPLICAS_MAX; i++) {
		char n[32];
		snprintf(n, sizeof(n), "r-%d", i);
		CHECK(iod_tel_replica_get(&node, n));
	}
	CHECK(!iod_tel_replica_get(&node, "one-too-many"));
	iod_tel_replicas_sweep(&node); /* all seen this round: all kept */
	CHECK_EQ(node.replicas_n, IOD_TEL_REPLICAS_MAX);
	CHECK(iod_tel_replica_get(&node, "r-5"));
	iod_tel_replicas_sweep(&node); /* only r-5 seen */
	CHECK_EQ(node.replicas_n, 1);
	CHECK(!strcmp(node.replicas[0].name, "r-5"));
	CHECK(!iod_tel_replica_get(&node, ""));
}

/* Frames through two mem ports (host -> fabric), as the data-plane loop
 * moves them: the ports' counters, read into telemetry, reach /metrics,
 * and a second reading a second later gives rates. */
static uint32_t forward(struct iod_io_port *in, struct iod_io_port *out)
{
	struct iod_pkt *pkts[IOD_FLOW_BURST_MAX];
	uint32_t n = iod_io_rx(in, pkts, 4, 0); /* the host pool's size */
	if (n)
		iod_io_tx(out, pkts, n);
	return n;
}

TEST(tel_dp_port_counters_move_with_traffic)
{
	struct iod_io_port ports[2];
	struct iod_err e = {0};
	memset(ports, 0, sizeof(ports));
	memset(&node, 0, sizeof(node));
	snprintf(node.node, sizeof(node.node), "node-1");
	/* a host port with 4 buffers: frames beyond them are rx drops */
	struct iod_io_port_cfg hc = {.backend = "mem", .name = "host", .pool_bufs = 4};
	struct iod_io_port_cfg fc = {.backend = "mem", .name = "fabric"};
	CHECK_EQ(iod_io_port_open(&ports[IOD_DP_PORT_HOST], &hc, &e), 0);
	CHECK_EQ(iod_io_port_open(&ports[IOD_DP_PORT_FABRIC], &fc, &e), 0);
	static uint8_t frame[100];
	const uint8_t *frames[1] = {frame};
	uint32_t lens[1] = {100};
	CHECK_EQ(iod_io_mem_load(&ports[IOD_DP_PORT_HOST], frames, lens, 1, true), 0);

	struct iod_tel_port r[2];
	iod_io_port_reading(&ports[IOD_DP_PORT_HOST], "host", "host", "iodp1", 1000, &r[0]);
	iod_io_port_reading(&ports[IOD_DP_PORT_FABRIC], "fabric", "fabric", "eth0", 1000, &r[1]);
	CHECK_EQ(iod_tel_ports_set(&node, r, 2), 0);
	CHECK_EQ(node.ports_n, 2);
	CHECK(!node.ports[0].rated); /* one reading: no rate */
	struct iod_buf b;
	iod_buf_init(&b);
	CHECK_EQ(iod_tel_prom(&node, &b), 0);
	CHECK(strstr(b.data, "# TYPE iod_dp_port_sent_bytes_total counter\n"));
	CHECK(strstr(b.data, "iod_dp_port_sent_bytes_total{node=\"node-1\",port=\"fabric\","
	                     "kind=\"fabric\",iface=\"eth0\"} 0\n"));
	iod_buf_free(&b);

	/* traffic: 10 bursts of 4 (the pool's size), then one with the pool
	 * held, which the port must count as dropped */
	uint32_t moved = 0;
	for (int i = 0; i < 10; i++)
		moved += forward(&ports[IOD_DP_PORT_HOST], &ports[IOD_DP_PORT_FABRIC]);
	CHECK_EQ(moved, 40);
	struct iod_pkt *held[4];
	CHECK_EQ(iod_io_rx(&ports[IOD_DP_PORT_HOST], held, 4, 0), 4);
	CHECK_EQ(iod_io_rx(&ports[IOD_DP_PORT_HOST], held, 1, 0), 0);
	for (int i = 0; i < 4; i++)
		iod_io_pkt_free(held[i]);

	iod_io_port_reading(&ports[IOD_DP_PORT_HOST], "host", "host", "iodp1", 2000, &r[0]);
	iod_io_port_reading(&ports[IOD_DP_PORT_FABRIC], "fabric", "fabric", "eth0", 2000, &r[1]);
	CHECK_EQ(iod_tel_ports_set(&node, r, 2), 0);
	const struct iod_tel_port *h = &node.ports[0], *f = &node.ports[1];
	CHECK_EQ(h->rx_packets, 44);
	CHECK_EQ(h->rx_bytes, 4400);
	CHECK_EQ(h->rx_dropped, 1);
	CHECK_EQ(f->tx_packets, 40);
	CHECK_EQ(f->tx_bytes, 4000);
	CHECK(f->rated && h->rated);
	CHECK(fabs(f->tx_bps - 32000.0) < 1e-6); /* 4000 bytes in 1 s */
	CHECK(fabs(h->rx_bps - 35200.0) < 1e-6);
	CHECK(f->rx_bps == 0);

	iod_buf_init(&b);
	CHECK_EQ(iod_tel_prom(&node, &b), 0);
	CHECK(strstr(b.data, "iod_dp_port_sent_bytes_total{node=\"node-1\",port=\"fabric\","
	                     "kind=\"fabric\",iface=\"eth0\"} 4000\n"));
	CHECK(strstr(b.data, "iod_dp_port_sent_packets_total{node=\"node-1\",port=\"fabric\","
	                     "kind=\"fabric\",iface=\"eth0\"} 40\n"));
	CHECK(strstr(b.data, "iod_dp_port_received_packets_total{node=\"node-1\",port=\"host\","
	                     "kind=\"host\",iface=\"iodp1\"} 44\n"));
	CHECK(strstr(b.data, "iod_dp_port_received_bytes_total{node=\"node-1\",port=\"host\","
	                     "kind=\"host\",iface=\"iodp1\"} 4400\n"));
	CHECK(strstr(b.data, "iod_dp_port_dropped_packets_total{node=\"node-1\",port=\"host\","
	                     "kind=\"host\",iface=\"iodp1\",direction=\"rx\"} 1\n"));
	iod_buf_free(&b);

	json_t *s = iod_tel_summary_json(&node, 2000);
	json_t *links = json_object_get(s, "links");
	CHECK_EQ(json_array_size(links), 2);
	json_t *l = json_array_get(links, 1);
	CHECK(!strcmp(json_string_value(json_object_get(l, "name")), "fabric"));
	CHECK(json_number_value(json_object_get(l, "tx_bps")) == 32000.0);
	CHECK(json_integer_value(json_object_get(json_array_get(links, 0), "drops")) == 1);
	json_decref(s);

	/* a reopened port (counters back at zero) is not rated: nothing made up */
	struct iod_tel_port z;
	iod_io_port_reading(&ports[IOD_DP_PORT_FABRIC], "fabric", "fabric", "eth0", 3000, &z);
	z.tx_bytes = 0;
	CHECK_EQ(iod_tel_ports_set(&node, &z, 1), 0);
	CHECK_EQ(node.ports_n, 1);
	CHECK(!node.ports[0].rated);
	s = iod_tel_summary_json(&node, 3000);
	CHECK(!json_object_get(json_array_get(json_object_get(s, "links"), 0), "tx_bps"));
	json_decref(s);
	/* a node without a data plane serves no iod_dp_port_ family */
	CHECK_EQ(iod_tel_ports_set(&node, NULL, 0), 0);
	iod_buf_init(&b);
	CHECK_EQ(iod_tel_prom(&node, &b), 0);
	CHECK(!b.data || !strstr(b.data, "iod_dp_port_"));
	iod_buf_free(&b);
	iod_io_port_close(&ports[0]);
	iod_io_port_close(&ports[1]);
}
