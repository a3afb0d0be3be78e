/*
 * test_obs_top.c: the data model of `iod top` (src/obs/top.c): snapshots
 * built from API answers, filters, sorting, layout, mesh rates.
 */
#include "harness.h"
#include "iod/obs.h"

#include <math.h>
#include <stdlib.h>

static const char *nodes_json =
    "{\"items\": ["
    " {\"name\": \"node-1\", \"lease\": 3, \"value\": {\"addr\": \"10.0.0.1\", \"gpus\": 2,"
    "  \"cpus\": 64, \"model\": \"generic-2\", \"topology\": {\"mem_bytes\": 1000000000,"
    "  \"devices\": [{\"kind\": \"gpu\", \"gpu_index\": 0, \"model\": \"NVIDIA H100\"},"
    "               {\"kind\": \"gpu\", \"gpu_index\": 1, \"model\": \"NVIDIA H100\"},"
    "               {\"kind\": \"nic\", \"name\": \"NIC0\"}]}}},"
    " {\"name\": \"node-2\", \"lease\": 0, \"value\": {\"gpus\": 2, \"cpus\": 64,"
    "  \"topology\": {\"devices\": [{\"kind\": \"gpu\", \"gpu_index\": 0}]}}}]}";
static const char *replicas_json =
    "{\"items\": ["
    " {\"name\": \"ps-0\", \"value\": {\"service\": \"ps\", \"node\": \"node-1\", \"gpus\": "
    "\"0-1\","
    "  \"phase\": \"healthy\", \"restarts\": 2}},"
    " {\"name\": \"w-0\", \"value\": {\"service\": \"w\", \"node\": \"node-2\", \"gpus\": \"\","
    "  \"phase\": \"unhealthy\", \"restarts\": 10}},"
    " {\"name\": \"w-1\", \"value\": {\"service\": \"w\", \"node\": \"node-2\", \"gpus\": \"\","
    "  \"phase\": \"pending\", \"restarts\": 0}}]}";
static const char *services_json =
    "{\"items\": [{\"name\": \"ps\", \"value\": {\"type\": \"stateful\", \"replicas\": 1}},"
    "            {\"name\": \"w\", \"value\": {\"type\": \"stateless\", \"replicas\": 2}}]}";
static const char *endpoints_json =
    "{\"items\": [{\"name\": \"ps-0\", \"value\": {\"service\": \"ps\", \"healthy\": true,"
    "  \"health\": \"healthy\"}},"
    " {\"name\": \"w-0\", \"value\": {\"service\": \"w\", \"healthy\": false, \"health\": "
    "  \"unhealthy\"}}]}";
static const char *status_json = "{\"leader\": 2, \"leader_api\": \"127.0.0.1:7401\", "
                                 "\"term\": 4, \"revision\": 99}";

struct fixture {
	json_t *nodes, *replicas, *services, *endpoints, *status;
	struct iod_top_input in;
};

static void fixture_load(struct fixture *f)
{
	memset(f, 0, sizeof(*f));
	f->nodes = json_loads(nodes_json, 0, NULL);
	f->replicas = json_loads(replicas_json, 0, NULL);
	f->services = json_loads(services_json, 0, NULL);
	f->endpoints = json_loads(endpoints_json, 0, NULL);
	f->status = json_loads(status_json, 0, NULL);
	f->in.nodes = f->nodes;
	f->in.replicas = f->replicas;
	f->in.services = f->services;
	f->in.endpoints = f->endpoints;
	f->in.status = f->status;
	f->in.now_ms = 1000;
}

static void fixture_free(struct fixture *f)
{
	json_decref(f->nodes);
	json_decref(f->replicas);
	json_decref(f->services);
	json_decref(f->endpoints);
	json_decref(f->status);
}

static const struct iod_top_row *row_named(const struct iod_top_table *t, const char *name)
{
	for (uint32_t i = 0; i < t->rows_n; i++)
		if (!strcmp(t->rows[i].cells[0], name))
			return &t->rows[i];
	return NULL;
}

static struct iod_top_snapshot snap, snap2;

TEST(top_views_from_api_answers)
{
	struct fixture f;
	fixture_load(&f);
	CHECK(f.nodes && f.replicas && f.services && f.endpoints && f.status);
	CHECK_EQ(iod_top_snapshot_build(&snap, &f.in, NULL), 0);

	const struct iod_top_table *n = &snap.views[IOD_TOP_NODES];
	CHECK_EQ(n->rows_n, 2);
	const struct iod_top_row *r = row_named(n, "node-1");
	CHECK(r);
	CHECK(!strcmp(r->cells[2], "2/2")); /* ps-0 holds GPUs 0-1 */
	CHECK(!strcmp(r->cells[7], "ready"));
	CHECK_EQ(r->level, IOD_TOP_OK);
	r = row_named(n, "node-2");
	CHECK(r && !strcmp(r->cells[7], "lost") && r->level == IOD_TOP_BAD);

	const struct iod_top_table *g = &snap.views[IOD_TOP_GPUS];
	CHECK_EQ(g->rows_n, 3); /* the NIC is not a GPU */
	CHECK(!strcmp(g->rows[0].cells[2], "H100"));
	CHECK(!strcmp(g->rows[1].cells[3], "ps-0"));
	CHECK(strstr(g->note, "no GPU telemetry"));

	const struct iod_top_table *rep = &snap.views[IOD_TOP_REPLICAS];
	CHECK_EQ(rep->rows_n, 3);
	r = row_named(rep, "w-0");
	CHECK(r && r->level == IOD_TOP_BAD && !strcmp(r->cells[5], "unhealthy"));
	r = row_named(rep, "w-1");
	CHECK(r && r->level == IOD_TOP_WARN);
	r = row_named(rep, "ps-0");
	CHECK(r && r->level == IOD_TOP_OK && r->num[6] == 2);

	const struct iod_top_table *s = &snap.views[IOD_TOP_SERVICES];
	r = row_named(s, "w");
	CHECK(r && !strcmp(r->cells[2], "0/2") && !strcmp(r->cells[3], "0/1"));
	CHECK_EQ(r->level, IOD_TOP_BAD); /* endpoints, none healthy */
	CHECK(strstr(s->note, "--mesh"));

	const struct iod_top_table *c = &snap.views[IOD_TOP_CLUSTER];
	r = row_named(c, "nodes");
	CHECK(r && !strcmp(r->cells[1], "1/2 ready") && r->level == IOD_TOP_BAD);
	r = row_named(c, "leader");
	CHECK(r && !strcmp(r->cells[1], "server 2"));
	r = row_named(c, "replicas");
	CHECK(r && !strcmp(r->cells[1], "1/3 ok"));
	iod_top_snapshot_free(&snap);
	fixture_free(&f);
}

TEST(top_missing_answers_give_notes_not_failures)
{
	struct iod_top_input in = {.now_ms = 5};
	json_t *junk = json_loads("{\"items\": 7}", 0, NULL);
	in.nodes = junk;
	in.replicas = junk;
	CHECK_EQ(iod_top_snapshot_build(&snap, &in, NULL), 0);
	CHECK_EQ(snap.views[IOD_TOP_NODES].rows_n, 0);
	CHECK(strstr(snap.views[IOD_TOP_NODES].note, "no node list"));
	CHECK(strstr(snap.views[IOD_TOP_REPLICAS].note, "no replica list"));
	const struct iod_top_row *r = row_named(&snap.views[IOD_TOP_CLUSTER], "leader");
	CHECK(r && r->level == IOD_TOP_BAD);
	iod_top_snapshot_free(&snap);
	json_decref(junk);
}

TEST(top_filter_any_column_and_by_column)
{
	struct fixture f;
	struct iod_err e = {0};
	struct iod_top_table t;
	fixture_load(&f);
	iod_top_snapshot_build(&snap, &f.in, NULL);
	const struct iod_top_table *rep = &snap.views[IOD_TOP_REPLICAS];

	CHECK_EQ(iod_top_table_copy(&t, rep), 0);
	CHECK_EQ(iod_top_table_filter(&t, "NODE-2", &e), 0); /* any case */
	CHECK_EQ(t.rows_n, 2);
	CHECK_EQ(t.hidden_n, 1);
	iod_top_table_free(&t);

	CHECK_EQ(iod_top_table_copy(&t, rep), 0);
	CHECK_EQ(iod_top_table_filter(&t, "phase=unh", &e), 0);
	CHECK_EQ(t.rows_n, 1);
	CHECK(!strcmp(t.rows[0].cells[0], "w-0"));
	iod_top_table_free(&t);

	CHECK_EQ(iod_top_table_copy(&t, rep), 0);
	CHECK_EQ(iod_top_table_filter(&t, "colour=red", &e), -EINVAL);
	CHECK(strstr(e.msg, "unknown column \"colour\"") && strstr(e.msg, "PHASE"));
	CHECK_EQ(t.rows_n, 3); /* left as it was */
	CHECK_EQ(iod_top_table_filter(&t, "", &e), 0);
	CHECK_EQ(t.rows_n, 3);
	iod_top_table_free(&t);
	iod_top_snapshot_free(&snap);
	fixture_free(&f);
}

TEST(top_sort_numeric_stable_unknown_last)
{
	struct fixture f;
	struct iod_top_table t;
	fixture_load(&f);
	iod_top_snapshot_build(&snap, &f.in, NULL);
	CHECK_EQ(iod_top_table_copy(&t, &snap.views[IOD_TOP_REPLICAS]), 0);
	int col = iod_top_table_column(&t, "restarts");
	CHECK_EQ(col, 6);
	iod_top_table_sort(&t, (uint32_t)col, false);
	/* 0 < 2 < 10: numbers, not text ("10" < "2") */
	CHECK(!strcmp(t.rows[0].cells[0], "w-1"));
	CHECK(!strcmp(t.rows[1].cells[0], "ps-0"));
	CHECK(!strcmp(t.rows[2].cells[0], "w-0"));
	iod_top_table_sort(&t, (uint32_t)col, true);
	CHECK(!strcmp(t.rows[0].cells[0], "w-0"));
	/* CPU% is unknown for all: order kept (stable) */
	iod_top_table_sort(&t, 7, false);
	CHECK(!strcmp(t.rows[0].cells[0], "w-0"));
	CHECK_EQ(iod_top_table_column(&t, "nope"), -1);
	iod_top_table_free(&t);
	iod_top_snapshot_free(&snap);
	fixture_free(&f);
}

TEST(top_format_cuts_to_width)
{
	struct fixture f;
	struct iod_buf b;
	fixture_load(&f);
	iod_top_snapshot_build(&snap, &f.in, NULL);
	iod_buf_init(&b);
	CHECK_EQ(iod_top_table_format(&snap.views[IOD_TOP_REPLICAS], 200, &b), 0);
	CHECK(!strncmp(b.data, "NAME  SERVICE  NODE", 19));
	CHECK(strstr(b.data, "\nps-0  ps       node-1  0-1"));
	iod_buf_free(&b);
	iod_buf_init(&b);
	CHECK_EQ(iod_top_table_format(&snap.views[IOD_TOP_REPLICAS], 7, &b), 0);
	for (char *l = b.data, *nl; l && *l; l = nl + 1) {
		nl = strchr(l, '\n');
		CHECK(nl && nl - l <= 7);
	}
	iod_buf_free(&b);
	iod_buf_init(&b);
	CHECK_EQ(iod_top_table_format(&snap.views[IOD_TOP_REPLICAS], 0, &b), 0);
	iod_buf_free(&b);
	json_t *j = iod_top_table_json(&snap.views[IOD_TOP_REPLICAS]);
	CHECK(json_array_size(j) == 3);
	CHECK(json_real_value(json_object_get(json_array_get(j, 0), "restarts")) == 2);
	CHECK(json_is_null(json_object_get(json_array_get(j, 0), "cpu_")));
	CHECK(!strcmp(json_string_value(json_object_get(json_array_get(j, 1), "level")), "bad"));
	json_decref(j);
	iod_top_snapshot_free(&snap);
	fixture_free(&f);
}

static const char *mesh1 =
    "# HELP iod_mesh_requests_total x\n"
    "iod_mesh_requests_total{service=\"ps\"} 100\n"
    "iod_mesh_errors_total{service=\"ps\"} 4\n"
    "iod_mesh_request_duration_seconds_bucket{service=\"ps\",le=\"0.001\"} 50\n"
    "iod_mesh_request_duration_seconds_bucket{service=\"ps\",le=\"0.01\"} 98\n"
    "iod_mesh_request_duration_seconds_bucket{service=\"ps\",le=\"0.1\"} 100\n"
    "iod_mesh_request_duration_seconds_bucket{service=\"ps\",le=\"+Inf\"} 100\n"
    "iod_mesh_requests_total{service=\"w\"} nonsense\n"
    "garbage line {\n";
static const char *mesh2 = "iod_mesh_requests_total{service=\"ps\"} 300\n"
                           "iod_mesh_errors_total{service=\"ps\"} 4\n";

TEST(top_mesh_rates_and_p99)
{
	struct iod_top_mesh_svc m[4];
	CHECK_EQ(iod_top_mesh_parse(mesh1, strlen(mesh1), m, 4), 1);
	CHECK(!strcmp(m[0].name, "ps"));
	CHECK(m[0].requests == 100 && m[0].errors == 4);
	CHECK(fabs(m[0].p99_s - 0.1) < 1e-12); /* 98 < 99 of 100: the 0.1 bucket */
	CHECK_EQ(iod_top_mesh_parse(mesh1, strlen(mesh1), m, 0), 0);

	struct fixture f;
	fixture_load(&f);
	f.in.mesh_metrics = mesh1;
	iod_top_snapshot_build(&snap, &f.in, NULL);
	f.in.mesh_metrics = mesh2;
	f.in.now_ms = 3000; /* 2 s later: 200 requests */
	iod_top_snapshot_build(&snap2, &f.in, &snap);
	const struct iod_top_row *r = row_named(&snap2.views[IOD_TOP_SERVICES], "ps");
	CHECK(r && !strcmp(r->cells[4], "100.0") && !strcmp(r->cells[5], "0.0"));
	r = row_named(&snap.views[IOD_TOP_SERVICES], "ps");
	CHECK(r && !strcmp(r->cells[4], "-") && !strcmp(r->cells[7], "100.00"));
	/* a counter that went back (restarted proxy) gives no rate */
	f.in.mesh_metrics = mesh1;
	f.in.now_ms = 5000;
	iod_top_snapshot_free(&snap);
	iod_top_snapshot_build(&snap, &f.in, &snap2);
	r = row_named(&snap.views[IOD_TOP_SERVICES], "ps");
	CHECK(r && !strcmp(r->cells[4], "-"));
	iod_top_snapshot_free(&snap);
	iod_top_snapshot_free(&snap2);
	fixture_free(&f);
}

TEST(top_telemetry_fills_gpu_and_replica_columns)
{
	struct fixture f;
	fixture_load(&f);
	json_t *tel = json_loads(
	    "{\"items\": [{\"node\": \"node-1\", \"cpu_pct\": 12.5, \"gpus\": [{\"index\": 1,"
	    " \"util_pct\": 97, \"mem_used_bytes\": 2000000000, \"power_w\": 300, \"temp_c\": 61,"
	    " \"util_hist\": [0, 50, 100], \"stalled\": true}],"
	    " \"replicas\": [{\"name\": \"ps-0\", \"cpu_pct\": 3.25, \"mem_bytes\": 1000}],"
	    " \"links\": [{\"name\": \"eth0\", \"kind\": \"nic\", \"rx_bps\": 1000, \"tx_bps\": 8,"
	    " \"drops\": 1}, {\"name\": \"fabric\", \"kind\": \"fabric\", \"drops\": 0}]}]}",
	    0, NULL);
	CHECK(tel);
	f.in.telemetry = tel;
	iod_top_snapshot_build(&snap, &f.in, NULL);
	const struct iod_top_table *g = &snap.views[IOD_TOP_GPUS];
	CHECK(!strcmp(g->rows[1].cells[4], "97") && !strcmp(g->rows[1].cells[6], "300"));
	CHECK(!strcmp(g->rows[1].cells[8], "stalled") && g->rows[1].level == IOD_TOP_BAD);
	CHECK(!strcmp(g->rows[0].cells[4], "-"));
	const struct iod_top_row *r = row_named(&snap.views[IOD_TOP_REPLICAS], "ps-0");
	CHECK(r && r->num[7] == 3.25);
	CHECK_EQ(snap.views[IOD_TOP_LINKS].rows_n, 2);
	CHECK_EQ(snap.views[IOD_TOP_LINKS].rows[0].level, IOD_TOP_WARN);
	CHECK(!strcmp(snap.views[IOD_TOP_LINKS].rows[0].cells[3], "1.00Kbps") ||
	      strstr(snap.views[IOD_TOP_LINKS].rows[0].cells[3], "K"));
	/* a data-plane port read once has no rate: "-", not a made-up 0 */
	CHECK(!strcmp(snap.views[IOD_TOP_LINKS].rows[1].cells[3], "-"));
	CHECK(!strcmp(snap.views[IOD_TOP_LINKS].rows[1].cells[4], "-"));
	iod_top_snapshot_free(&snap);
	json_decref(tel);
	fixture_free(&f);
}

TEST(top_view_names_and_sparkline)
{
	enum iod_top_view v;
	struct iod_err e = {0};
	CHECK_EQ(iod_top_view_parse("replicas", &v, &e), 0);
	CHECK_EQ(v, IOD_TOP_REPLICAS);
	CHECK_EQ(iod_top_view_parse("g", &v, &e), 0); /* unique prefix */
	CHECK_EQ(v, IOD_TOP_GPUS);
	CHECK_EQ(iod_top_view_parse("nodez", &v, &e), -EINVAL);
	CHECK(strstr(e.msg, "did you mean nodes"));
	CHECK_EQ(iod_top_view_parse("", &v, &e), -EINVAL);
	CHECK(!strcmp(iod_top_view_name(IOD_TOP_LINKS), "links"));

	double vals[] = {0, 100, 50, NAN, 250, -3};
	char buf[64];
	CHECK_EQ(iod_top_sparkline(vals, 6, buf, sizeof(buf)), 0);
	CHECK_EQ(strlen(buf), 18);
	CHECK(!memcmp(buf, "\xe2\x96\x81\xe2\x96\x88", 6));
	CHECK(!memcmp(buf + 12, "\xe2\x96\x88\xe2\x96\x81", 6)); /* clamped both ways */
	CHECK_EQ(iod_top_sparkline(vals, 6, buf, 10), -ENOSPC);
}

/* The TRANSPORT column's inputs (issue 22 step 4): the service's
 * service_mesh.transport and its connections by path, both hops summed. */
TEST(top_mesh_transport_per_connection)
{
	static const char *t =
	    "iod_mesh_requests_total{service=\"web\"} 7\n"
	    "iod_mesh_transport_info{service=\"web\",transport=\"shm\",from=\"config\"} 1\n"
	    "iod_mesh_transport_connections_total{service=\"web\",hop=\"client\",transport=\"tcp\"}"
	    " 2\n"
	    "iod_mesh_transport_connections_total{service=\"web\",hop=\"client\",transport=\"shm\"}"
	    " 5\n"
	    "iod_mesh_transport_connections_total{service=\"web\",hop=\"upstream\",transport="
	    "\"tcp\"} "
	    "1\n"
	    "iod_mesh_transport_connections_total{service=\"web\",hop=\"upstream\",transport="
	    "\"shm\"} "
	    "6\n"
	    "iod_mesh_transport_info{service=\"db\",transport=\"tcp\",from=\"spec\"} 1\n"
	    "iod_mesh_transport_connections_total{service=\"db\",hop=\"client\"} 3\n";
	struct iod_top_mesh_svc m[4];
	CHECK_EQ(iod_top_mesh_parse(t, strlen(t), m, 4), 2);
	CHECK(!strcmp(m[0].name, "web") && !strcmp(m[0].transport, "shm"));
	CHECK(m[0].conns_shm == 11 && m[0].conns_tcp == 3);
	CHECK(!strcmp(m[1].name, "db") && !strcmp(m[1].transport, "tcp"));
	CHECK(m[1].conns_shm == 0 && m[1].conns_tcp == 0); /* no transport label: skipped */
}
