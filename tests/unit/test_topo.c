/*
 * test_topo.c: the topology module: every built-in model prints the matrix
 * docs/topology.md defines for it (read from the doc, so the doc cannot
 * drift), XML round trips and the shipped fixtures give the built-in models,
 * the scheduler's queries (scores, nearest NIC/NUMA, islands, bandwidth),
 * limits and bad input, and discovery on this machine.
 */
#include "harness.h"
#include "iod/topo.h"
#include "topo/internal.h" /* iod_topo_pci_classify */

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static struct iod_topo_node *load(const char *name)
{
	static struct iod_topo_node nodes[4];
	static unsigned next;
	struct iod_topo_node *n = &nodes[next++ % 4];
	struct iod_err e = {0};
	int rc = iod_topo_model_load(name, n, &e);
	if (rc) {
		fprintf(stderr, "model %s: %s\n", name, e.msg);
		return NULL;
	}
	return n;
}

static struct iod_bitmap set_of(const char *list)
{
	struct iod_bitmap b;
	iod_bitmap_parse(list, &b, NULL);
	return b;
}

/* The matrix block for `model` in docs/topology.md, tokens per line. */
static int doc_matrix(const char *model, struct iod_buf *out)
{
	struct iod_buf doc;
	char marker[96];
	iod_buf_init(&doc);
	if (iod_buf_read_file(&doc, "docs/topology.md", 1 << 20, NULL))
		return -ENOENT;
	snprintf(marker, sizeof(marker), "<!-- matrix:%s -->\n```text\n", model);
	const char *p = strstr(doc.data, marker);
	if (!p) {
		iod_buf_free(&doc);
		return -ENOENT;
	}
	p += strlen(marker);
	const char *end = strstr(p, "```");
	iod_buf_append(out, p, end ? (size_t)(end - p) : strlen(p));
	iod_buf_free(&doc);
	return 0;
}

/* Normalise a matrix: one line per row, cells separated by one space. */
static void normalise(const char *in, struct iod_buf *out)
{
	bool space = false;
	for (const char *p = in; *p; p++) {
		if (*p == '\n') {
			if (out->len && out->data[out->len - 1] == ' ')
				out->data[--out->len] = '\0';
			iod_buf_append(out, "\n", 1);
			space = false;
		} else if (*p == ' ' || *p == '\t') {
			space = out->len && out->data[out->len - 1] != '\n';
		} else {
			if (space)
				iod_buf_append(out, " ", 1);
			space = false;
			iod_buf_append(out, p, 1);
		}
	}
}

static void check_matrix(const char *model)
{
	struct iod_topo_node *n = load(model);
	struct iod_buf doc, got, a, b;
	iod_buf_init(&doc);
	iod_buf_init(&got);
	iod_buf_init(&a);
	iod_buf_init(&b);
	CHECK_MSG(n, "model %s loads", model);
	CHECK_MSG(doc_matrix(model, &doc) == 0, "docs/topology.md has a matrix for %s", model);
	CHECK(iod_topo_format_matrix(n, &got) == 0);
	/* the printed matrix up to the legend */
	char *legend = strstr(got.data, "\n\nLegend:");
	CHECK(legend);
	legend[1] = '\0';
	normalise(doc.data, &a);
	normalise(got.data, &b);
	CHECK_MSG(strcmp(a.data, b.data) == 0,
	          "%s matrix differs from docs/topology.md:\n%s\nvs\n%s", model, b.data, a.data);
	iod_buf_free(&doc);
	iod_buf_free(&got);
	iod_buf_free(&a);
	iod_buf_free(&b);
}

TEST(matrix_dgx_h100)
{
	check_matrix("dgx-h100");
}
TEST(matrix_hgx_a100_8)
{
	check_matrix("hgx-a100-8");
}
TEST(matrix_pcie_8gpu)
{
	check_matrix("pcie-8gpu");
}
TEST(matrix_pcie_4gpu_nvlink_pairs)
{
	check_matrix("pcie-4gpu-nvlink-pairs");
}
TEST(matrix_bf3_dpu)
{
	check_matrix("bf3-dpu");
}
TEST(matrix_generic_4)
{
	check_matrix("generic-4");
}
TEST(matrix_generic_8)
{
	check_matrix("generic-8");
}

TEST(matrix_cells_spot_checks)
{
	/* independent of the doc: a few cells the issue spells out */
	struct iod_topo_node *n = load("dgx-h100");
	char cell[16];
	CHECK(n);
	iod_topo_link_label(n, n->gpu[0], n->gpu[7], cell, sizeof(cell));
	CHECK_STR(cell, "NV18");
	iod_topo_link_label(n, n->gpu[3], n->gpu[3], cell, sizeof(cell));
	CHECK_STR(cell, " X ");
	n = load("pcie-8gpu");
	CHECK(n);
	iod_topo_link_label(n, n->gpu[0], n->gpu[1], cell, sizeof(cell));
	CHECK_STR(cell, "PIX");
	iod_topo_link_label(n, n->gpu[0], n->gpu[2], cell, sizeof(cell));
	CHECK_STR(cell, "PHB");
	iod_topo_link_label(n, n->gpu[0], n->gpu[4], cell, sizeof(cell));
	CHECK_STR(cell, "SYS");
	n = load("pcie-4gpu-nvlink-pairs");
	CHECK(n);
	iod_topo_link_label(n, n->gpu[0], n->gpu[1], cell, sizeof(cell));
	CHECK_STR(cell, "NV2");
	iod_topo_link_label(n, n->gpu[1], n->gpu[2], cell, sizeof(cell));
	CHECK_STR(cell, "PXB");
}

TEST(models_shape)
{
	struct iod_topo_node *n = load("dgx-h100");
	CHECK(n);
	CHECK_EQ(n->npackages, 2);
	CHECK_EQ(n->nnuma, 2);
	CHECK_EQ(n->cores, 112);
	CHECK_EQ(n->pus, 224);
	CHECK_EQ(iod_topo_gpu_count(n), 8);
	CHECK_EQ(n->nnics, 9);
	CHECK_EQ(n->nislands, 1);
	CHECK_EQ(n->devices[n->nic[8]].kind, IOD_TOPO_DEV_DPU);
	CHECK_EQ(iod_topo_units_count(n, IOD_COMPUTE_TENSOR_CORE), 8);
	CHECK_EQ(iod_topo_units_count(n, IOD_COMPUTE_CUDA_CORE), 8);
	CHECK_EQ(iod_topo_units_count(n, IOD_COMPUTE_DPU), 1);
	CHECK_EQ(iod_topo_units_count(n, IOD_COMPUTE_CPU), 112);
	CHECK_U64(n->devices[n->gpu[0]].mem_bytes, 80ull << 30);

	n = load("bf3-dpu");
	CHECK(n);
	CHECK(n->is_dpu);
	CHECK_EQ(n->cores, 16);
	CHECK_EQ(iod_topo_units_count(n, IOD_COMPUTE_DPU), 16);
	CHECK_EQ(iod_topo_units_count(n, IOD_COMPUTE_CPU), 0);
	CHECK_EQ(n->devices[n->nic[0]].ports, 2);
	CHECK_U64(n->devices[n->nic[0]].port_bps, 200000000000ull);

	n = load("hgx-a100-8");
	CHECK(n);
	CHECK_EQ(n->ncaches, 32);
	CHECK_EQ(n->link[n->gpu[0]][n->gpu[5]].nvlinks, 12);
	CHECK_EQ(n->link[n->gpu[0]][n->gpu[5]].nvswitch, 1);
}

TEST(generic_for_gpus_and_nodes)
{
	/* --gpus 16 --nodes 4: four nodes of four GPUs */
	static struct iod_topo_node n;
	struct iod_err e = {0};
	CHECK(iod_topo_model_generic(16 / 4, &n, &e) == 0);
	CHECK_EQ(n.ngpus, 4);
	CHECK_EQ(n.npackages, 2);
	CHECK_EQ(n.nislands, 2);
	CHECK_STR(n.model, "generic-4");
	for (unsigned g = 0; g <= IOD_TOPO_GENERIC_GPUS_MAX; g++) {
		CHECK_MSG(iod_topo_model_generic(g, &n, &e) == 0, "generic-%u: %s", g, e.msg);
		CHECK_EQ(n.ngpus, g);
		/* NVLink pairs per socket; an odd GPU is an island of its own */
		unsigned s0 = g >= 4 ? (g + 1) / 2 : g, s1 = g >= 4 ? g / 2 : 0;
		CHECK_EQ(n.nislands, (s0 + 1) / 2 + (s1 + 1) / 2);
	}
	CHECK(iod_topo_model_generic(IOD_TOPO_GENERIC_GPUS_MAX + 1, &n, &e) == -EINVAL);
	CHECK_CONTAINS(e.msg, "at most 16");
	CHECK(iod_topo_model_load("generic-2", &n, &e) == 0);
	CHECK_EQ(n.ngpus, 2);
}

TEST(models_are_values)
{
	/* loading twice gives byte-identical nodes: copy and memcmp work */
	static struct iod_topo_node a, b;
	struct iod_err e = {0};
	const char *const *names = iod_topo_model_names();
	for (; *names; names++) {
		CHECK(iod_topo_model_load(*names, &a, &e) == 0);
		CHECK(iod_topo_model_load(*names, &b, &e) == 0);
		CHECK_MSG(memcmp(&a, &b, sizeof(a)) == 0, "%s differs between two loads", *names);
	}
}

TEST(unknown_model_suggests)
{
	static struct iod_topo_node n;
	struct iod_err e = {0};
	CHECK(iod_topo_model_load("dgx-h10", &n, &e) == -ENOENT);
	CHECK_CONTAINS(e.msg, "did you mean \"dgx-h100\"");
	CHECK(iod_topo_model_load("quantum-box", &n, &e) == -ENOENT);
	CHECK_CONTAINS(e.msg, "list-models");
}

/* ---- scores and queries ---------------------------------------------------- */

TEST(pair_and_set_scores)
{
	struct iod_topo_node *n = load("dgx-h100");
	CHECK(n);
	CHECK_EQ(iod_topo_gpu_pair_score(n, 0, 1), 50 + 1800);
	CHECK_EQ(iod_topo_gpu_pair_score(n, 0, 2), 20 + 1800);
	CHECK_EQ(iod_topo_gpu_pair_score(n, 0, 4), 10 + 1800);
	CHECK_EQ(iod_topo_gpu_pair_score(n, 3, 3), 0);

	n = load("pcie-8gpu");
	CHECK(n);
	struct iod_bitmap s = set_of("0-2");
	CHECK_U64(iod_topo_gpu_set_score(n, &s), 50 + 30 + 30);
	s = set_of("0,4");
	CHECK_U64(iod_topo_gpu_set_score(n, &s), 10);
	s = set_of("0-7");
	/* 4 PIX pairs, 8 PHB pairs (2 per socket x 2 x 2), 16 SYS pairs */
	CHECK_U64(iod_topo_gpu_set_score(n, &s), 4 * 50 + 8 * 30 + 16 * 10);

	n = load("pcie-4gpu-nvlink-pairs");
	CHECK(n);
	CHECK_EQ(iod_topo_gpu_pair_score(n, 0, 1), 50 + 200);
	CHECK_EQ(iod_topo_gpu_pair_score(n, 0, 2), 40);
	/* the NVLink pair beats any other pair: what a 2-GPU placement wants */
	s = set_of("0-1");
	struct iod_bitmap t = set_of("1-2");
	CHECK(iod_topo_gpu_set_score(n, &s) > iod_topo_gpu_set_score(n, &t));
}

TEST(same_board_scores_60)
{
	static struct iod_topo_node n;
	struct iod_err e = {0};
	struct iod_bitmap cpus = set_of("0-3");
	iod_topo_node_init(&n, "k80");
	CHECK(iod_topo_add_package(&n, 0, &cpus, "cpu", &e) == 0);
	CHECK(iod_topo_add_numa(&n, 0, 0, 1ull << 30, &cpus, &e) == 0);
	int h = iod_topo_add_bridge(&n, IOD_TOPO_BRIDGE_HOST, -1, 0, 0, &e);
	CHECK(h == 0);
	struct iod_topo_device d;
	iod_topo_device_init(&d, IOD_TOPO_DEV_GPU);
	d.bridge = (int16_t)h;
	d.board = 7;
	d.pci_addr = IOD_TOPO_PCI_ADDR(0, 1, 0, 0);
	CHECK(iod_topo_add_device(&n, &d, &e) == 0);
	d.pci_addr = IOD_TOPO_PCI_ADDR(0, 2, 0, 0);
	CHECK(iod_topo_add_device(&n, &d, &e) == 1);
	CHECK(iod_topo_node_finalize(&n, &e) == 0);
	CHECK_EQ(iod_topo_gpu_pair_score(&n, 0, 1), 60);
	char cell[16];
	iod_topo_link_label(&n, 0, 1, cell, sizeof(cell));
	CHECK_STR(cell, "PIX");
}

TEST(nearest_nic_numa_cpus)
{
	struct iod_topo_node *n = load("dgx-h100");
	CHECK(n);
	struct iod_bitmap s = set_of("4-5");
	int nic = iod_topo_nearest_nic(n, &s);
	CHECK(nic >= 0);
	CHECK_STR(n->devices[nic].name, "NIC4");
	s = set_of("3");
	nic = iod_topo_nearest_nic(n, &s);
	CHECK_STR(n->devices[nic].name, "NIC2");
	CHECK_EQ(iod_topo_nearest_numa(n, &s), 0);
	s = set_of("5-7");
	CHECK_EQ(iod_topo_nearest_numa(n, &s), 1);
	struct iod_bitmap cpus;
	char buf[64];
	iod_topo_nearest_cpuset(n, &s, &cpus);
	iod_bitmap_format(&cpus, buf, sizeof(buf));
	CHECK_STR(buf, "56-111,168-223");
	s = set_of("0,4"); /* spans sockets: both sockets' CPUs */
	iod_topo_nearest_cpuset(n, &s, &cpus);
	CHECK_EQ(iod_bitmap_count(&cpus), 224);
	iod_bitmap_zero(&s);
	CHECK_EQ(iod_topo_nearest_nic(n, &s), -1);
	CHECK_EQ(iod_topo_nearest_numa(n, &s), -1);

	n = load("pcie-8gpu");
	CHECK(n);
	s = set_of("6");
	nic = iod_topo_nearest_nic(n, &s);
	CHECK_STR(n->devices[nic].name, "NIC1");
	n = load("generic-8");
	CHECK(n);
	s = set_of("2-3");
	nic = iod_topo_nearest_nic(n, &s);
	CHECK_STR(n->devices[nic].name, "NIC1");
}

TEST(nvlink_islands)
{
	struct iod_topo_node *n = load("pcie-4gpu-nvlink-pairs");
	struct iod_bitmap isl[8], s;
	char buf[32];
	CHECK(n);
	CHECK_EQ(n->nislands, 2);
	CHECK_EQ(n->gpu_island[1], 0);
	CHECK_EQ(n->gpu_island[2], 1);
	s = set_of("0,2-3");
	CHECK_EQ(iod_topo_nvlink_islands(n, &s, isl, 8), 2);
	iod_bitmap_format(&isl[0], buf, sizeof(buf));
	CHECK_STR(buf, "2-3"); /* largest first */
	iod_bitmap_format(&isl[1], buf, sizeof(buf));
	CHECK_STR(buf, "0");
	/* only max are written, all are counted */
	CHECK_EQ(iod_topo_nvlink_islands(n, &s, isl, 1), 2);

	n = load("pcie-8gpu");
	CHECK(n);
	s = set_of("0-7");
	CHECK_EQ(iod_topo_nvlink_islands(n, &s, isl, 8), 8);
	n = load("dgx-h100");
	CHECK(n);
	CHECK_EQ(iod_topo_nvlink_islands(n, &s, isl, 8), 1);
	iod_bitmap_format(&isl[0], buf, sizeof(buf));
	CHECK_STR(buf, "0-7");
}

TEST(link_bandwidth_and_latency)
{
	struct iod_topo_node *n = load("dgx-h100");
	CHECK(n);
	/* 18 links x 25 GB/s per direction */
	CHECK_U64(iod_topo_link_bw_bps(n, n->gpu[0], n->gpu[1]), 18ull * 25 * 8000000000ull);
	CHECK_EQ(iod_topo_link_class(n, n->gpu[0], n->gpu[1]), IOD_TOPO_LINK_NVLINK);
	CHECK(iod_topo_link_latency_ns(n, n->gpu[0], n->gpu[1]) <
	      iod_topo_link_latency_ns(n, n->gpu[0], n->nic[4]));
	n = load("pcie-8gpu");
	CHECK(n);
	uint64_t pix = iod_topo_link_bw_bps(n, n->gpu[0], n->gpu[1]);
	uint64_t sys = iod_topo_link_bw_bps(n, n->gpu[0], n->gpu[4]);
	CHECK_U64(pix, n->devices[n->gpu[0]].pcie_bps); /* Gen4 x16 */
	CHECK_U64(sys, pix / 2);
	CHECK(pix > 250000000000ull && pix < 260000000000ull); /* ~31.5 GB/s */
	CHECK_EQ(iod_topo_link_class(n, n->gpu[0], n->gpu[4]), IOD_TOPO_LINK_SYS);
	CHECK_EQ(iod_topo_link_bw_bps(n, 3, 3), 0);
}

/* ---- XML --------------------------------------------------------------------- */

static void round_trip(const char *model)
{
	static struct iod_topo_node back;
	struct iod_topo_node *n = load(model);
	struct iod_buf xml;
	struct iod_err e = {0};
	char why[256] = "";
	CHECK(n);
	iod_buf_init(&xml);
	int wrote = iod_topo_format_xml(n, &xml);
	bool header = wrote == 0 && strstr(xml.data, "<topology version=\"2.0\">") != NULL;
	int loaded = wrote ? -1 : iod_topo_load_xml_buffer(xml.data, xml.len, &back, &e);
	iod_buf_free(&xml);
	CHECK_MSG(wrote == 0 && header, "%s: format_xml", model);
	CHECK_MSG(loaded == 0, "%s: %s", model, e.msg);
	CHECK_EQ(back.source, IOD_TOPO_SRC_XML);
	CHECK_MSG(iod_topo_node_same(n, &back, why, sizeof(why)), "%s: XML differs: %s", model,
	          why);
}

TEST(xml_round_trip_every_model)
{
	const char *const *names = iod_topo_model_names();
	for (; *names; names++) {
		round_trip(*names);
		if (iod_test_failed())
			return;
	}
	round_trip("generic-3");
	round_trip("generic-0");
}

TEST(xml_has_nvlink_bandwidth_matrix)
{
	struct iod_topo_node *n = load("pcie-4gpu-nvlink-pairs");
	struct iod_buf xml;
	iod_buf_init(&xml);
	CHECK(n);
	CHECK(iod_topo_format_xml(n, &xml) == 0);
	CHECK_CONTAINS(xml.data, "name=\"NVLinkBandwidth\"");
	CHECK_CONTAINS(xml.data, "50000"); /* NV2 = 2 x 25000 MB/s */
	iod_buf_free(&xml);
}

static void fixture_is_model(const char *file, const char *model)
{
	static struct iod_topo_node x;
	struct iod_err e = {0};
	char path[256], why[256];
	snprintf(path, sizeof(path), "examples/topologies/%s", file);
	CHECK_MSG(iod_topo_load_xml_file(path, &x, &e) == 0, "%s: %s", path, e.msg);
	struct iod_topo_node *n = load(model);
	CHECK(n);
	CHECK_MSG(iod_topo_node_same(n, &x, why, sizeof(why)), "%s vs model %s: %s", file, model,
	          why);
}

TEST(fixtures_equal_models)
{
	fixture_is_model("dgx-h100.xml", "dgx-h100");
	fixture_is_model("hgx-a100-8.xml", "hgx-a100-8");
	fixture_is_model("pcie-8gpu.xml", "pcie-8gpu");
	fixture_is_model("pcie-4gpu-nvlink-pairs.xml", "pcie-4gpu-nvlink-pairs");
	fixture_is_model("bf3-dpu.xml", "bf3-dpu");
	fixture_is_model("generic-8.xml", "generic-8");
}

TEST(plain_hwloc_xml_two_sockets_eight_gpus)
{
	/* no iod attributes: PCI ids, NUMA and the NVLinkBandwidth matrix only */
	static struct iod_topo_node x;
	struct iod_err e = {0};
	struct iod_buf got, want, a, b;
	CHECK(iod_topo_load_xml_file("examples/topologies/two-socket-8gpu-nvml.xml", &x, &e) == 0);
	CHECK_EQ(x.ngpus, 8);
	CHECK_EQ(x.nnuma, 2);
	CHECK_EQ(x.nislands, 4);
	CHECK_EQ(x.devices[x.gpu[0]].nvlinks, 12);
	CHECK_U64(x.devices[x.gpu[0]].nvlink_bps, 25ull * 8000000000ull);
	iod_buf_init(&got);
	iod_buf_init(&want);
	iod_buf_init(&a);
	iod_buf_init(&b);
	CHECK(iod_topo_format_matrix(&x, &got) == 0);
	strstr(got.data, "\n\nLegend:")[1] = '\0';
	CHECK(doc_matrix("generic-8", &want) == 0);
	normalise(want.data, &a);
	normalise(got.data, &b);
	CHECK_MSG(!strcmp(a.data, b.data), "plain XML matrix:\n%s\nwant:\n%s", b.data, a.data);
	iod_buf_free(&got);
	iod_buf_free(&want);
	iod_buf_free(&a);
	iod_buf_free(&b);
}

TEST(xml_bad_input)
{
	static struct iod_topo_node n;
	struct iod_err e = {0};
	const char *nonuma =
	    "<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n"
	    "<object type=\"Machine\" os_index=\"0\" cpuset=\"0x1\" gp_index=\"1\">\n"
	    "<object type=\"PU\" os_index=\"0\" cpuset=\"0x1\" gp_index=\"2\"/>\n"
	    "</object>\n</topology>\n";
	CHECK(iod_topo_load_xml_buffer(nonuma, strlen(nonuma), &n, &e) == -EINVAL);
	CHECK_CONTAINS(e.msg, "no NUMA node");

	const char *trunc = "<?xml version=\"1.0\"?>\n<topology version=\"2.0\">\n<object type=";
	CHECK(iod_topo_load_xml_buffer(trunc, strlen(trunc), &n, &e) == -EINVAL);
	CHECK_CONTAINS(e.msg, "truncated");

	CHECK(iod_topo_load_xml_buffer("hello", 5, &n, &e) == -EINVAL);
	CHECK_CONTAINS(e.msg, "not XML");
	CHECK(iod_topo_load_xml_buffer("", 0, &n, &e) == -EINVAL);
	CHECK_CONTAINS(e.msg, "empty");

	/* has the words but hwloc cannot make a topology of it (hwloc 2.9
	 * crashes on some of these: the child process turns that into an error) */
	const char *junk = "<topology version=\"2.0\"><object type=\"Machine\" cpuset=\"0x1\">"
	                   "<object type=\"NUMANode\" os_index=\"0\"/></object></topology>";
	CHECK(iod_topo_load_xml_buffer(junk, strlen(junk), &n, &e) < 0);
	CHECK(e.msg[0] != '\0');

	CHECK(iod_topo_load_xml_file("/nonexistent/topo.xml", &n, &e) == -ENOENT);
	CHECK_CONTAINS(e.msg, "/nonexistent/topo.xml");
	CHECK_CONTAINS(e.msg, "no such file");
}

/* ---- builder limits ---------------------------------------------------------- */

TEST(limits_are_errors)
{
	static struct iod_topo_node n;
	struct iod_err e = {0};
	struct iod_bitmap cpus = set_of("0");
	struct iod_topo_device d;
	iod_topo_node_init(&n, "big");
	CHECK(iod_topo_add_package(&n, 0, &cpus, "", &e) == 0);
	CHECK(iod_topo_add_numa(&n, 0, 0, 1, &cpus, &e) == 0);
	iod_topo_device_init(&d, IOD_TOPO_DEV_GPU);
	for (unsigned i = 0; i < IOD_TOPO_GPUS_MAX; i++)
		CHECK(iod_topo_add_device(&n, &d, &e) == (int)i);
	CHECK(iod_topo_add_device(&n, &d, &e) == -ENOSPC);
	CHECK_CONTAINS(e.msg, "IOD_TOPO_GPUS_MAX");
	iod_topo_device_init(&d, IOD_TOPO_DEV_NVME);
	for (unsigned i = IOD_TOPO_GPUS_MAX; i < IOD_TOPO_DEVICES_MAX; i++)
		CHECK(iod_topo_add_device(&n, &d, &e) == (int)i);
	CHECK(iod_topo_add_device(&n, &d, &e) == -ENOSPC);
	CHECK_CONTAINS(e.msg, "IOD_TOPO_DEVICES_MAX");
	CHECK(iod_topo_add_nvlink(&n, 0, 0, 1, false, &e) == -EINVAL);
	CHECK(iod_topo_add_nvlink(&n, 0, 999, 1, false, &e) == -EINVAL);
	for (unsigned i = 0; i < IOD_TOPO_BRIDGES_MAX; i++)
		CHECK(iod_topo_add_bridge(&n, IOD_TOPO_BRIDGE_HOST, -1, 0, 0, &e) == (int)i);
	CHECK(iod_topo_add_bridge(&n, IOD_TOPO_BRIDGE_HOST, -1, 0, 0, &e) == -ENOSPC);
	CHECK(iod_topo_node_finalize(&n, &e) == 0);
	CHECK_EQ(n.ngpus, IOD_TOPO_GPUS_MAX);

	iod_topo_node_init(&n, "no-numa");
	CHECK(iod_topo_add_package(&n, 0, &cpus, "", &e) == 0);
	CHECK(iod_topo_node_finalize(&n, &e) == -EINVAL);
	CHECK_CONTAINS(e.msg, "no NUMA node");

	iod_topo_node_init(&n, "orphan-switch");
	CHECK(iod_topo_add_bridge(&n, IOD_TOPO_BRIDGE_SWITCH, 5, -1, 0, &e) == -EINVAL);
}

TEST(pci_addresses)
{
	uint32_t a;
	char buf[24];
	CHECK(iod_topo_pci_parse("0000:1b:00.0", &a) == 0);
	CHECK_EQ(a, IOD_TOPO_PCI_ADDR(0, 0x1b, 0, 0));
	iod_topo_pci_format(IOD_TOPO_PCI_ADDR(1, 0xab, 0x1f, 7), buf, sizeof(buf));
	CHECK_STR(buf, "0001:ab:1f.7");
	CHECK(iod_topo_pci_parse("0000:1b:20.0", &a) == -EINVAL);
	CHECK(iod_topo_pci_parse("0000:1b:00.0x", &a) == -EINVAL);
	CHECK(iod_topo_pci_parse("garbage", &a) == -EINVAL);
	CHECK(iod_topo_pci_parse("00000000:1B:00.0", &a) == 0); /* NVML's spelling */
	CHECK_EQ(a, IOD_TOPO_PCI_ADDR(0, 0x1b, 0, 0));
	CHECK(iod_topo_pci_parse("0000:1b:00.8", &a) == -EINVAL);
}

/* ---- output formats -------------------------------------------------------------- */

TEST(text_json_dot)
{
	struct iod_topo_node *n = load("dgx-h100");
	struct iod_buf b;
	iod_buf_init(&b);
	CHECK(n);
	CHECK(iod_topo_format_text(n, &b) == 0);
	CHECK_CONTAINS(b.data, "Machine dgx-h100: 2 packages, 112 cores, 224 PUs, 2 NUMA nodes");
	CHECK_CONTAINS(b.data, "PCIeSwitch");
	CHECK_CONTAINS(b.data, "NVLink islands: 1 {GPU 0-7}");
	b.len = 0;
	CHECK(iod_topo_format_dot(n, &b) == 0);
	CHECK_CONTAINS(b.data, "subgraph cluster_pkg0");
	CHECK_CONTAINS(b.data, "nvswitch [label=\"NVSwitch\"");
	CHECK_CONTAINS(b.data, "dev7 -- nvswitch [label=\"NV18 450 GB/s\"");
	b.len = 0;
	CHECK(iod_topo_format_dot(load("pcie-4gpu-nvlink-pairs"), &b) == 0);
	CHECK_CONTAINS(b.data, "dev0 -- dev1 [label=\"NV2 50 GB/s\"");
	iod_buf_free(&b);

	json_t *j = iod_topo_to_json(n);
	CHECK(j);
	CHECK_EQ(json_array_size(json_object_get(j, "devices")), 17);
	json_t *gpu0 = json_array_get(json_object_get(j, "devices"), 0);
	json_t *l = json_object_get(json_object_get(gpu0, "links"), "NIC0");
	CHECK_STR(json_string_value(json_object_get(l, "class")), "PIX");
	l = json_object_get(json_object_get(gpu0, "links"), "GPU5");
	CHECK_STR(json_string_value(json_object_get(l, "class")), "NV18");
	CHECK_EQ(json_integer_value(json_object_get(gpu0, "numa")), 0);
	json_decref(j);
}

/* ---- this machine ------------------------------------------------------------- */

static bool has_pci_netdev(void)
{
	DIR *d = opendir("/sys/class/net");
	struct dirent *de;
	bool found = false;
	char path[512];
	if (!d)
		return false;
	while ((de = readdir(d)) && !found) {
		if (de->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/sys/class/net/%s/device/subsystem", de->d_name);
		char target[256];
		ssize_t k = readlink(path, target, sizeof(target) - 1);
		if (k > 0) {
			target[k] = '\0';
			found = strstr(target, "/pci") != NULL;
		}
	}
	closedir(d);
	return found;
}

TEST(discover_this_machine)
{
	static struct iod_topo_node a, b;
	struct iod_err e = {0};
	if (getenv("HWLOC_XMLFILE"))
		SKIP("HWLOC_XMLFILE is set: discovery would read that file");
	CHECK_MSG(iod_topo_discover(&a, &e) == 0, "%s", e.msg);
	CHECK_EQ(a.source, IOD_TOPO_SRC_HOST);
	CHECK(a.nnuma >= 1);
	CHECK(a.npackages >= 1);
	CHECK(a.pus >= 1);
	CHECK(a.cores >= 1 && a.cores <= a.pus);
	CHECK(a.mem_bytes > 0);
	CHECK(iod_topo_units_count(&a, IOD_COMPUTE_CPU) == a.cores ||
	      iod_topo_units_count(&a, IOD_COMPUTE_DPU) >= a.cores);
	if (has_pci_netdev()) {
		bool nic = false;
		for (unsigned i = 0; i < a.nnics; i++)
			nic |= a.devices[a.nic[i]].os_name[0] != '\0';
		CHECK_MSG(nic, "a PCI network interface exists but no NIC was found");
	}
	/* stable: a second discovery gives the same node and the same text
	 * (memory aside: a VM's memory can grow between two readings) */
	CHECK(iod_topo_discover(&b, &e) == 0);
	CHECK_EQ(a.nnuma, b.nnuma);
	b.mem_bytes = a.mem_bytes;
	for (unsigned m = 0; m < a.nnuma; m++)
		b.numa[m].mem_bytes = a.numa[m].mem_bytes;
	for (unsigned u = 0; u < a.nunits && u < b.nunits; u++)
		b.units[u].cap.mem_bytes = a.units[u].cap.mem_bytes;
	char why[256];
	CHECK_MSG(iod_topo_node_same(&a, &b, why, sizeof(why)), "%s", why);
	struct iod_buf ta, tb;
	iod_buf_init(&ta);
	iod_buf_init(&tb);
	CHECK(iod_topo_format_text(&a, &ta) == 0);
	CHECK(iod_topo_format_text(&b, &tb) == 0);
	CHECK_STR(ta.data, tb.data);
	iod_buf_free(&ta);
	iod_buf_free(&tb);
}

TEST(pci_classification_from_plain_hwloc)
{
	/* tests/fixtures/pci-classes.xml: a BMC VGA (not a GPU), an H100, a
	 * virtio NIC, a BlueField-3 with one PCI function per port, an NVMe */
	static struct iod_topo_node n;
	struct iod_err e = {0};
	CHECK_MSG(iod_topo_load_xml_file("tests/fixtures/pci-classes.xml", &n, &e) == 0, "%s",
	          e.msg);
	CHECK_STR(n.name, "pci-classes");
	CHECK_EQ(n.ngpus, 1);
	CHECK_EQ(n.devices[n.gpu[0]].pci_device, 0x2330);
	CHECK_EQ(n.nnics, 2);
	const struct iod_topo_device *dpu = &n.devices[n.nic[1]];
	CHECK_EQ(dpu->kind, IOD_TOPO_DEV_DPU);
	CHECK_EQ(dpu->ports, 2); /* two functions, one DPU */
	CHECK_EQ(dpu->cores, 16);
	CHECK_STR(dpu->os_name, "mlx5_0");
	CHECK_STR(n.devices[n.nic[0]].os_name, "eth0");
	CHECK_EQ(iod_topo_units_count(&n, IOD_COMPUTE_DPU), 1);
	CHECK_EQ(iod_topo_units_count(&n, IOD_COMPUTE_TENSOR_CORE), 1);
	unsigned nvme = 0;
	for (unsigned i = 0; i < n.ndevices; i++)
		nvme += n.devices[i].kind == IOD_TOPO_DEV_NVME;
	CHECK_EQ(nvme, 1);
	CHECK_EQ(n.ndevices, 4); /* the ASPEED VGA is not modelled */
	CHECK_EQ(iod_topo_link_class(&n, n.gpu[0], n.nic[1]), IOD_TOPO_LINK_PHB);
	/* the classifier itself */
	CHECK_EQ(iod_topo_pci_classify(0x1a03, 0x2000, 0x0300), IOD_TOPO_DEV_OTHER);
	CHECK_EQ(iod_topo_pci_classify(0x10de, 0x22a3, 0x0680), IOD_TOPO_DEV_OTHER); /* NVSwitch */
	CHECK_EQ(iod_topo_pci_classify(0x15b3, 0x1021, 0x0207), IOD_TOPO_DEV_NIC);
	CHECK_EQ(iod_topo_pci_classify(0x15b3, 0xa2d6, 0x0200), IOD_TOPO_DEV_DPU);
	CHECK_EQ(iod_topo_pci_classify(0x10ee, 0x5000, 0x1200), IOD_TOPO_DEV_FPGA);
}

/* Real hwloc exports (tests/fixtures/hwloc, hwloc's own test files). */
TEST(power8_nvlink_to_cpu_is_not_nvswitch)
{
	/* A POWER8 with 4 P100: each GPU has 2 NVLink-1 links (40,000 MB/s) to
	 * its neighbour and 2 to its CPU (a Package in the NVLinkBandwidth
	 * matrix). GPU0-GPU1 is NV2; GPU0-GPU2 meet only through the CPUs: SYS.
	 * It was read as an NVSwitch: NV4 and NV2 all to all. */
	static struct iod_topo_node n;
	struct iod_err e = {0};
	CHECK_MSG(iod_topo_load_xml_file("tests/fixtures/hwloc/power8gpudistances.xml", &n, &e) ==
	              0,
	          "%s", e.msg);
	CHECK_EQ(n.ngpus, 4);
	const struct iod_topo_link *l01 = &n.link[n.gpu[0]][n.gpu[1]];
	const struct iod_topo_link *l02 = &n.link[n.gpu[0]][n.gpu[2]];
	CHECK_EQ(l01->nvlinks, 2);
	CHECK_EQ(l01->nvswitch, 0);
	CHECK_EQ(l02->nvlinks, 0);
	CHECK_EQ(iod_topo_link_class(&n, n.gpu[0], n.gpu[2]), IOD_TOPO_LINK_SYS);
	CHECK_EQ(n.link[n.gpu[2]][n.gpu[3]].nvlinks, 2);
	/* the DGX-2's NVSwitches still join its 16 GPUs all to all */
	CHECK_MSG(iod_topo_load_xml_file("tests/fixtures/hwloc/nvidiaDGX2.xml", &n, &e) == 0, "%s",
	          e.msg);
	CHECK_EQ(n.ngpus, 16);
	CHECK(n.link[n.gpu[0]][n.gpu[15]].nvswitch);
	CHECK_EQ(n.link[n.gpu[0]][n.gpu[15]].nvlinks, 6);
}

TEST(display_controllers_are_not_gpus)
{
	/* by vendor, class and known ids (docs/topology.md) */
	CHECK_EQ(iod_topo_pci_classify(0x1002, 0x515e, 0x0300), IOD_TOPO_DEV_OTHER); /* ES1000 */
	CHECK_EQ(iod_topo_pci_classify(0x1002, 0x5969, 0x0300), IOD_TOPO_DEV_OTHER); /* ES1000 */
	CHECK_EQ(iod_topo_pci_classify(0x102b, 0x0532, 0x0300), IOD_TOPO_DEV_OTHER); /* Matrox */
	CHECK_EQ(iod_topo_pci_classify(0x1a03, 0x2000, 0x0300), IOD_TOPO_DEV_OTHER); /* ASPEED */
	CHECK_EQ(iod_topo_pci_classify(0x1234, 0x1111, 0x0300), IOD_TOPO_DEV_OTHER); /* QEMU */
	CHECK_EQ(iod_topo_pci_classify(0x1af4, 0x1050, 0x0380), IOD_TOPO_DEV_OTHER); /* virtio */
	CHECK_EQ(iod_topo_pci_classify(0x1002, 0x740c, 0x0380), IOD_TOPO_DEV_GPU);   /* MI250X */
	CHECK_EQ(iod_topo_pci_classify(0x1002, 0x6798, 0x0300), IOD_TOPO_DEV_GPU);   /* Radeon */
	CHECK_EQ(iod_topo_pci_classify(0x10de, 0x1db8, 0x0302), IOD_TOPO_DEV_GPU);   /* V100 */
	CHECK_EQ(iod_topo_pci_classify(0x10de, 0x11ba, 0x0300), IOD_TOPO_DEV_GPU);   /* Quadro */
	/* three Tesla M2070 beside an ATI ES1000: three GPUs (it was four) */
	static struct iod_topo_node n;
	struct iod_err e = {0};
	CHECK_MSG(iod_topo_load_xml_file("tests/fixtures/hwloc/24em64t-2n6c2t-pci.xml", &n, &e) ==
	              0,
	          "%s", e.msg);
	CHECK_EQ(n.ngpus, 3);
	for (unsigned i = 0; i < n.ngpus; i++)
		CHECK_EQ(n.devices[n.gpu[i]].pci_vendor, 0x10de);
}

/* ---- JSON ------------------------------------------------------------------ */

static int json_back(const struct iod_topo_node *n, struct iod_topo_node *back, struct iod_err *e)
{
	/* through text, as it travels */
	json_t *j = iod_topo_to_json(n);
	char *text = j ? iod_json_string(j, true) : NULL;
	json_decref(j);
	json_t *parsed = NULL;
	int rc = text ? iod_json_parse(text, strlen(text), &parsed, e) : -ENOMEM;
	free(text);
	if (!rc)
		rc = iod_topo_from_json(parsed, back, e);
	json_decref(parsed);
	return rc;
}

TEST(json_round_trip)
{
	static struct iod_topo_node back, host;
	struct iod_err e = {0};
	char why[256];
	const char *const *names = iod_topo_model_names();
	for (; *names; names++) {
		struct iod_topo_node *n = load(*names);
		CHECK(n);
		CHECK_MSG(json_back(n, &back, &e) == 0, "%s: %s", *names, e.msg);
		CHECK_MSG(iod_topo_node_same(n, &back, why, sizeof(why)), "%s: %s", *names, why);
		CHECK_EQ(back.source, IOD_TOPO_SRC_MODEL);
		CHECK_STR(back.model, *names);
		CHECK(memcmp(back.pu_core, n->pu_core, sizeof(n->pu_core)) == 0);
	}
	if (!getenv("HWLOC_XMLFILE")) {
		CHECK(iod_topo_discover(&host, &e) == 0);
		CHECK_MSG(json_back(&host, &back, &e) == 0, "this machine: %s", e.msg);
		CHECK_MSG(iod_topo_node_same(&host, &back, why, sizeof(why)), "this machine: %s",
		          why);
	}
}

static int from_text(const char *text, struct iod_err *e)
{
	static struct iod_topo_node n;
	json_t *j = NULL;
	int rc = iod_json_parse(text, strlen(text), &j, e);
	if (!rc)
		rc = iod_topo_from_json(j, &n, e);
	json_decref(j);
	return rc;
}

TEST(json_bad_input)
{
	struct iod_err e = {0};
	CHECK(from_text("[]", &e) == -EINVAL);
	CHECK_CONTAINS(e.msg, "expected an object");
	CHECK(from_text("{\"packages\": [], \"numa\": []}", &e) == -EINVAL);
	CHECK_CONTAINS(e.msg, "caches");
	const char *no_numa = "{\"packages\":[{\"os_index\":0,\"cpuset\":\"0\"}],\"numa\":[],"
	                      "\"caches\":[],\"core_pus\":[],\"bridges\":[],\"devices\":[]}";
	CHECK(from_text(no_numa, &e) == -EINVAL);
	CHECK_CONTAINS(e.msg, "no NUMA node");
	const char *bad_set = "{\"packages\":[{\"os_index\":0,\"cpuset\":\"0-x\"}],\"numa\":[],"
	                      "\"caches\":[],\"core_pus\":[],\"bridges\":[],\"devices\":[]}";
	CHECK(from_text(bad_set, &e) == -EINVAL);
	CHECK_CONTAINS(e.msg, "packages[0].cpuset");
	const char *bad_dev =
	    "{\"packages\":[{\"os_index\":0,\"cpuset\":\"0\"}],"
	    "\"numa\":[{\"os_index\":0,\"package\":0,\"mem_bytes\":1,\"cpuset\":\"0\"}],"
	    "\"caches\":[],\"core_pus\":[],\"bridges\":[],"
	    "\"devices\":[{\"kind\":\"gpu\",\"pci\":\"0000:01:00.0\",\"cpuset\":\"0\",\"bridge\":3}"
	    "]}";
	CHECK(from_text(bad_dev, &e) == -EINVAL);
	CHECK_CONTAINS(e.msg, "devices[0].bridge");
	const char *bad_link =
	    "{\"packages\":[{\"os_index\":0,\"cpuset\":\"0\"}],"
	    "\"numa\":[{\"os_index\":0,\"package\":0,\"mem_bytes\":1,\"cpuset\":\"0\"}],"
	    "\"caches\":[],\"core_pus\":[],\"bridges\":[],"
	    "\"devices\":[{\"kind\":\"gpu\",\"name\":\"GPU0\",\"pci\":\"0000:01:00.0\","
	    "\"cpuset\":\"0\",\"links\":{\"GPU9\":{\"nvlinks\":2}}}]}";
	CHECK(from_text(bad_link, &e) == -EINVAL);
	CHECK_CONTAINS(e.msg, "GPU9");
	/* PCI ids and classes are plain hex: no sign, no trailing junk (fuzzing
	 * found "-302r" read as 0xfffffcfe, which did not write back the same) */
	static const char *const bad_hex[][2] = {
	    {"pci_class", "-302"}, {"pci_class", "0302r"}, {"pci_class", "1234567"},
	    {"pci_id", "10de:-1"}, {"pci_id", "10de20b5"}, {"pci_id", "10de:20b5x"}};
	for (unsigned i = 0; i < IOD_ARRAY_LEN(bad_hex); i++) {
		char text[512], want[64];
		snprintf(
		    text, sizeof(text),
		    "{\"packages\":[{\"os_index\":0,\"cpuset\":\"0\"}],"
		    "\"numa\":[{\"os_index\":0,\"package\":0,\"mem_bytes\":1,\"cpuset\":\"0\"}],"
		    "\"caches\":[],\"core_pus\":[],\"bridges\":[],"
		    "\"devices\":[{\"kind\":\"gpu\",\"name\":\"GPU0\",\"pci\":\"0000:01:00.0\","
		    "\"cpuset\":\"0\",\"%s\":\"%s\"}]}",
		    bad_hex[i][0], bad_hex[i][1]);
		snprintf(want, sizeof(want), "devices[0].%s", bad_hex[i][0]);
		CHECK_MSG(from_text(text, &e) == -EINVAL, "%s=%s accepted", bad_hex[i][0],
		          bad_hex[i][1]);
		CHECK_CONTAINS(e.msg, want);
	}
	const char *loop =
	    "{\"packages\":[],\"numa\":[],\"caches\":[],\"core_pus\":[],"
	    "\"bridges\":[{\"kind\":\"switch\",\"parent\":0,\"pci\":\"0000:00:00.0\"}],"
	    "\"devices\":[]}";
	CHECK(from_text(loop, &e) == -EINVAL);
}

TEST(xml_round_trip_two_numa_nodes_per_socket)
{
	/* sub-NUMA clustering: one package, one L3, two NUMA nodes, a root
	 * complex on each; the XML must keep each bridge on its NUMA node */
	static struct iod_topo_node n, back;
	struct iod_err e = {0};
	struct iod_bitmap all = set_of("0-7"), lo = set_of("0-3"), hi = set_of("4-7");
	char why[256];
	iod_topo_node_init(&n, "snc2");
	CHECK(iod_topo_add_package(&n, 0, &all, "SNC CPU", &e) == 0);
	CHECK(iod_topo_add_numa(&n, 0, 0, 64ull << 30, &lo, &e) == 0);
	CHECK(iod_topo_add_numa(&n, 1, 0, 64ull << 30, &hi, &e) == 1);
	CHECK(iod_topo_add_cache(&n, 3, 32ull << 20, &all, &e) == 0);
	for (int m = 0; m < 2; m++) {
		int h = iod_topo_add_bridge(&n, IOD_TOPO_BRIDGE_HOST, -1, m, 0, &e);
		int s = iod_topo_add_bridge(&n, IOD_TOPO_BRIDGE_SWITCH, h, -1, 0, &e);
		CHECK(h >= 0 && s >= 0);
		struct iod_topo_device d;
		iod_topo_device_init(&d, IOD_TOPO_DEV_GPU);
		d.pci_vendor = 0x10de;
		d.pci_class = 0x0302;
		snprintf(d.vendor, sizeof(d.vendor), "NVIDIA");
		snprintf(d.model, sizeof(d.model), "Test GPU");
		d.bridge = (int16_t)s;
		CHECK(iod_topo_add_device(&n, &d, &e) >= 0);
	}
	iod_topo_assign_pci(&n);
	CHECK(iod_topo_node_finalize(&n, &e) == 0);
	CHECK_EQ(iod_topo_link_class(&n, n.gpu[0], n.gpu[1]), IOD_TOPO_LINK_SYS);
	struct iod_buf xml;
	iod_buf_init(&xml);
	CHECK(iod_topo_format_xml(&n, &xml) == 0);
	int rc = iod_topo_load_xml_buffer(xml.data, xml.len, &back, &e);
	iod_buf_free(&xml);
	CHECK_MSG(rc == 0, "%s", e.msg);
	CHECK_MSG(iod_topo_node_same(&n, &back, why, sizeof(why)), "%s", why);
	CHECK_EQ(back.devices[back.gpu[1]].numa, 1);
	CHECK_EQ(iod_topo_link_class(&back, back.gpu[0], back.gpu[1]), IOD_TOPO_LINK_SYS);
}
