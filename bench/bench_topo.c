/*
 * bench_topo.c: the cost of what the scheduler and the agent ask of topo/:
 * per-query time of the pure queries (pair score, 8-GPU set score, nearest
 * NIC, NVLink islands, link bandwidth) on dgx-h100, and the time to build a
 * node from a model, to copy one, and to load one from hwloc XML.
 *
 * One `BENCH topo.<figure> key=value ...` line per figure. There are no
 * targets in DESIGN.md for these; the figures show what a scheduler loop
 * over 1,000 nodes pays. The machine is shared: timings vary run to run.
 */
#include "iod/topo.h"
#include "bench.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static volatile uint64_t sink; /* keeps results alive */

int main(void)
{
	static struct iod_topo_node n, copy;
	struct iod_err e = {0};
	const unsigned iters = 2000000;
	double t0, dt;

	printf("bench_topo: model dgx-h100, %u iterations per query\n", iters);
	if (iod_topo_model_load("dgx-h100", &n, &e)) {
		fprintf(stderr, "bench_topo: %s\n", e.msg);
		return 1;
	}
	t0 = bench_now_s();
	for (unsigned i = 0; i < iters; i++)
		sink += iod_topo_gpu_pair_score(&n, i & 7, (i >> 3) & 7);
	dt = bench_now_s() - t0;
	bench_line("BENCH topo.pair_score ns_per_op=%.1f", dt * 1e9 / iters);

	struct iod_bitmap all;
	iod_bitmap_zero(&all);
	iod_bitmap_set_range(&all, 0, 7);
	t0 = bench_now_s();
	for (unsigned i = 0; i < iters / 10; i++) {
		all.w[0] ^= (i & 1) << 8; /* defeat hoisting; GPU 8 does not exist */
		sink += iod_topo_gpu_set_score(&n, &all);
	}
	dt = bench_now_s() - t0;
	bench_line("BENCH topo.set_score_8gpu ns_per_op=%.1f pairs=28", dt * 1e9 / (iters / 10));

	struct iod_bitmap two;
	t0 = bench_now_s();
	for (unsigned i = 0; i < iters / 10; i++) {
		iod_bitmap_zero(&two);
		iod_bitmap_set(&two, i & 7);
		iod_bitmap_set(&two, (i + 1) & 7);
		sink += (uint64_t)iod_topo_nearest_nic(&n, &two);
	}
	dt = bench_now_s() - t0;
	bench_line("BENCH topo.nearest_nic ns_per_op=%.1f nics=9 gpus=2", dt * 1e9 / (iters / 10));

	struct iod_bitmap isl[8];
	t0 = bench_now_s();
	for (unsigned i = 0; i < iters / 100; i++) {
		all.w[0] = 0xff & ~(1u << (i & 7));
		sink += iod_topo_nvlink_islands(&n, &all, isl, 8);
	}
	dt = bench_now_s() - t0;
	bench_line("BENCH topo.nvlink_islands ns_per_op=%.1f gpus=7", dt * 1e9 / (iters / 100));

	t0 = bench_now_s();
	for (unsigned i = 0; i < iters; i++)
		sink += iod_topo_link_bw_bps(&n, i & 15, (i >> 4) & 15);
	dt = bench_now_s() - t0;
	bench_line("BENCH topo.link_bw ns_per_op=%.1f", dt * 1e9 / iters);

	const unsigned builds = 2000;
	t0 = bench_now_s();
	for (unsigned i = 0; i < builds; i++)
		if (iod_topo_model_load(i & 1 ? "dgx-h100" : "generic-4", &copy, &e))
			return 1;
	dt = bench_now_s() - t0;
	bench_line("BENCH topo.model_load us_per_op=%.1f", dt * 1e6 / builds);

	t0 = bench_now_s();
	for (unsigned i = 0; i < builds * 10; i++) {
		memcpy(&copy, &n, sizeof(n));
		sink += copy.ndevices;
	}
	dt = bench_now_s() - t0;
	bench_line("BENCH topo.node_copy us_per_op=%.2f bytes=%zu", dt * 1e6 / (builds * 10),
	           sizeof(n));

	struct iod_buf xml;
	iod_buf_init(&xml);
	if (iod_topo_format_xml(&n, &xml))
		return 1;
	const unsigned loads = 50;
	t0 = bench_now_s();
	for (unsigned i = 0; i < loads; i++)
		if (iod_topo_load_xml_buffer(xml.data, xml.len, &copy, &e)) {
			fprintf(stderr, "bench_topo: %s\n", e.msg);
			return 1;
		}
	dt = bench_now_s() - t0;
	bench_line("BENCH topo.xml_load ms_per_op=%.2f bytes=%zu (child process + 2 hwloc parses)",
	           dt * 1e3 / loads, xml.len);
	iod_buf_free(&xml);
	return sink == 42 ? 2 : 0;
}
