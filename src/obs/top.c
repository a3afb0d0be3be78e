/*
 * top.c: the data model of `iod top`: tables built from the API's answers.
 *
 * Every view (cluster, nodes, gpus, replicas, services, links) is a table
 * of text cells with numeric sort keys and a level per row (ok, warn,
 * bad). Building one is pure: it reads the JSON the caller fetched, and the
 * time comes in with it; filtering, sorting and laying out lines are pure
 * too, so the ncurses shell only fetches and paints, and `iod top --once`
 * prints exactly what the screen shows. A malformed or missing answer
 * leaves its views empty with a note; it never fails a refresh.
 */
#include "iod/objects.h"
#include "iod/obs.h"

#include <ctype.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static const char *const view_names[] = {
#define X(n, s) s,
    IOD_TOP_VIEWS(X)
#undef X
};

const char *iod_top_view_name(enum iod_top_view v)
{
	return (unsigned)v < IOD_TOP_VIEW_COUNT ? view_names[v] : "?";
}

int iod_top_view_parse(const char *s, enum iod_top_view *out, struct iod_err *e)
{
	int hit = -1, hits = 0;
	size_t n = s ? strlen(s) : 0;
	for (int i = 0; n && i < IOD_TOP_VIEW_COUNT; i++) {
		if (!strcmp(s, view_names[i])) {
			*out = (enum iod_top_view)i;
			return 0;
		}
		if (!strncmp(s, view_names[i], n)) {
			hit = i;
			hits++;
		}
	}
	if (hits == 1) {
		*out = (enum iod_top_view)hit;
		return 0;
	}
	const char *sug = s ? iod_suggest(s, view_names, IOD_TOP_VIEW_COUNT) : NULL;
	return iod_err_set(e, -EINVAL,
	                   "unknown view \"%.64s\"%s%s%s; views: cluster, nodes, gpus, replicas, "
	                   "services, links",
	                   s ? s : "", sug ? " (did you mean " : "", sug ? sug : "",
	                   sug ? "?)" : "");
}

/* ---- tables --------------------------------------------------------------- */

static void table_init(struct iod_top_table *t, enum iod_top_view v, const char *const *cols,
                       const bool *numeric, uint32_t n)
{
	IOD_ASSERT(n <= IOD_TOP_COLS_MAX);
	memset(t, 0, sizeof(*t));
	t->view = v;
	t->cols_n = n;
	for (uint32_t i = 0; i < n; i++) {
		t->cols[i] = cols[i];
		t->numeric[i] = numeric[i];
	}
}

/* A new zeroed row, or NULL when the table is full (counted in hidden_n). */
static struct iod_top_row *row_add(struct iod_top_table *t)
{
	if (t->rows_n >= IOD_TOP_ROWS_MAX) {
		t->hidden_n++;
		return NULL;
	}
	if (t->rows_n == t->rows_cap) {
		uint32_t cap = t->rows_cap ? t->rows_cap * 2 : 16;
		if (cap > IOD_TOP_ROWS_MAX)
			cap = IOD_TOP_ROWS_MAX;
		struct iod_top_row *r = realloc(t->rows, cap * sizeof(*r));
		if (!r) {
			t->hidden_n++;
			return NULL;
		}
		t->rows = r;
		t->rows_cap = cap;
	}
	struct iod_top_row *r = &t->rows[t->rows_n++];
	memset(r, 0, sizeof(*r));
	for (uint32_t i = 0; i < IOD_TOP_COLS_MAX; i++)
		r->num[i] = NAN;
	return r;
}

static void cell(struct iod_top_row *r, uint32_t col, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void cell(struct iod_top_row *r, uint32_t col, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(r->cells[col], sizeof(r->cells[col]), fmt, ap);
	va_end(ap);
	/* a cell is one line of printable text: the screen never gets control bytes */
	for (char *p = r->cells[col]; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7f)
			*p = '?';
}

static void cell_num(struct iod_top_row *r, uint32_t col, double v, const char *fmt)
{
	r->num[col] = v;
	if (isnan(v) || v < 0) {
		cell(r, col, "-");
		return;
	}
	char buf[IOD_TOP_CELL_MAX];
	snprintf(buf, sizeof(buf), fmt, v);
	cell(r, col, "%s", buf);
}

static void cell_size(struct iod_top_row *r, uint32_t col, double bytes)
{
	r->num[col] = bytes;
	if (isnan(bytes) || bytes < 0) {
		cell(r, col, "-");
		return;
	}
	char buf[32];
	iod_format_size((uint64_t)bytes, buf, sizeof(buf));
	cell(r, col, "%s", buf);
}

/* ---- JSON access ---------------------------------------------------------- */

static const json_t *items(const json_t *answer)
{
	const json_t *a = json_object_get(answer, "items");
	return json_is_array(a) ? a : NULL;
}

static const char *sval(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);
	return json_is_string(v) ? json_string_value(v) : "";
}

/* A number field, NAN when absent. */
static double nval(const json_t *o, const char *key)
{
	const json_t *v = json_object_get(o, key);
	return json_is_number(v) ? json_number_value(v) : NAN;
}

/* A field of a stored Replica or Node: objects.h owns the keys. */
#define RS(v, f) iod_obj_peek_text(IOD_OBJ_KIND_REPLICA, v, IOD_OBJ_REPLICA_##f)
#define NS(v, f) iod_obj_peek_text(IOD_OBJ_KIND_NODE, v, IOD_OBJ_NODE_##f)

static const json_t *value(const json_t *obj)
{
	return json_object_get(obj, "value");
}

/* The object of an {"items": [...]} answer named name, or NULL. */
static const json_t *find(const json_t *answer, const char *name)
{
	size_t i;
	const json_t *x;
	json_array_foreach(items(answer), i, x)
	{
		if (!strcmp(sval(x, "name"), name))
			return x;
	}
	return NULL;
}

/* Bits of a "0,2-3" GPU list; 0 when empty or unreadable. */
static unsigned gpu_count(const char *list, struct iod_bitmap *out)
{
	struct iod_bitmap b;
	struct iod_err e = {0};
	iod_bitmap_zero(&b);
	if (list && list[0] && iod_bitmap_parse(list, &b, &e))
		iod_bitmap_zero(&b);
	if (out)
		*out = b;
	return iod_bitmap_count(&b);
}

static bool phase_is(const char *phase, const char *const *set)
{
	for (; *set; set++)
		if (!strcmp(phase, *set))
			return true;
	return false;
}

static const char *const phases_bad[] = {"unhealthy", "failed", "exited", NULL};
static const char *const phases_ok[] = {"healthy", "running", NULL};
/* Phases that hold the replica's GPUs on its node. */
static const char *const phases_live[] = {"pending",   "starting", "running", "healthy",
                                          "unhealthy", "stopping", NULL};

/* The endpoint of a replica ("healthy"/"unhealthy"), "" when it has none. */
static const char *endpoint_health(const struct iod_top_input *in, const char *replica)
{
	const json_t *ep = find(in->endpoints, replica);
	if (!ep)
		return "";
	struct iod_obj_endpoint o; /* old "health" strings read as healthy too */
	iod_obj_endpoint_from_json(value(ep), &o, NULL);
	bool healthy = o.healthy;
	iod_obj_endpoint_free(&o);
	return healthy ? "healthy" : "unhealthy";
}

/* The telemetry summary of a node: {"node": N, "gpus": [...], "replicas": [...]} */
static const json_t *telemetry_of(const struct iod_top_input *in, const char *node)
{
	size_t i;
	const json_t *x;
	json_array_foreach(items(in->telemetry), i, x)
	{
		const json_t *v = value(x) ? value(x) : x;
		if (!strcmp(sval(v, "node"), node))
			return v;
	}
	return NULL;
}

/* An element of a telemetry array whose key equals (string or index). */
static const json_t *telemetry_item(const json_t *tel, const char *array, const char *key,
                                    const char *s, double n)
{
	size_t i;
	const json_t *x;
	json_array_foreach(json_object_get(tel, array), i, x)
	{
		const json_t *k = json_object_get(x, key);
		if (s && json_is_string(k) && !strcmp(json_string_value(k), s))
			return x;
		if (!s && json_is_number(k) && json_number_value(k) == n)
			return x;
	}
	return NULL;
}

/* ---- views ------------------------------------------------------------------ */

enum { N_NAME, N_MODEL, N_GPUS, N_CPUS, N_CPU, N_MEM, N_REPL, N_HEALTH, N_ADDR, N_COLS };

static void build_nodes(struct iod_top_table *t, const struct iod_top_input *in)
{
	static const char *const cols[] = {"NAME", "MODEL",    "GPUS",   "CPUS", "CPU%",
	                                   "MEM",  "REPLICAS", "HEALTH", "ADDR"};
	static const bool num[] = {0, 0, 1, 1, 1, 1, 1, 0, 0};
	size_t i, j;
	const json_t *n, *r;

	table_init(t, IOD_TOP_NODES, cols, num, N_COLS);
	if (!items(in->nodes)) {
		snprintf(t->note, sizeof(t->note), "no node list from the API");
		return;
	}
	json_array_foreach(items(in->nodes), i, n)
	{
		const char *name = sval(n, "name");
		const json_t *v = value(n);
		unsigned used = 0, repl = 0;
		json_array_foreach(items(in->replicas), j, r)
		{
			const json_t *rv = value(r);
			if (strcmp(RS(rv, NODE), name) || !phase_is(RS(rv, PHASE), phases_live))
				continue;
			repl++;
			used += gpu_count(RS(rv, GPUS), NULL);
		}
		struct iod_top_row *row = row_add(t);
		if (!row)
			break;
		double gpus = iod_obj_peek_num(IOD_OBJ_KIND_NODE, v, IOD_OBJ_NODE_GPUS);
		cell(row, N_NAME, "%s", name);
		cell(row, N_MODEL, "%s", NS(v, MODEL)[0] ? NS(v, MODEL) : "-");
		row->num[N_GPUS] = used;
		if (isnan(gpus))
			cell(row, N_GPUS, "%u/-", used);
		else
			cell(row, N_GPUS, "%u/%.0f", used, gpus);
		cell_num(row, N_CPUS, iod_obj_peek_num(IOD_OBJ_KIND_NODE, v, IOD_OBJ_NODE_CPUS),
		         "%.0f");
		const json_t *tel = telemetry_of(in, name);
		cell_num(row, N_CPU, tel ? nval(tel, "cpu_pct") : NAN, "%.1f");
		double mem = nval(iod_obj_peek_json(IOD_OBJ_KIND_NODE, v, IOD_OBJ_NODE_TOPOLOGY),
		                  "mem_bytes");
		if (tel && !isnan(nval(tel, "mem_used_bytes")))
			mem = nval(tel, "mem_used_bytes");
		cell_size(row, N_MEM, mem);
		cell_num(row, N_REPL, repl, "%.0f");
		bool ready = json_integer_value(json_object_get(n, "lease")) != 0;
		cell(row, N_HEALTH, "%s", ready ? "ready" : "lost");
		row->level = ready ? IOD_TOP_OK : IOD_TOP_BAD;
		cell(row, N_ADDR, "%s", NS(v, ADDR)[0] ? NS(v, ADDR) : "-");
	}
}

enum { G_NODE, G_GPU, G_MODEL, G_REPLICA, G_UTIL, G_MEM, G_POWER, G_TEMP, G_TREND, G_COLS };

/* The replica holding GPU index idx on node, or NULL. */
static const char *gpu_owner(const struct iod_top_input *in, const char *node, unsigned idx)
{
	size_t j;
	const json_t *r;
	json_array_foreach(items(in->replicas), j, r)
	{
		const json_t *rv = value(r);
		struct iod_bitmap b;
		if (strcmp(RS(rv, NODE), node) || !phase_is(RS(rv, PHASE), phases_live))
			continue;
		if (gpu_count(RS(rv, GPUS), &b) && idx < IOD_BITMAP_BITS &&
		    iod_bitmap_test(&b, idx))
			return sval(r, "name");
	}
	return NULL;
}

static void build_gpus(struct iod_top_table *t, const struct iod_top_input *in)
{
	static const char *const cols[] = {"NODE", "GPU",     "MODEL",  "REPLICA", "UTIL%",
	                                   "MEM",  "POWER_W", "TEMP_C", "TREND"};
	static const bool num[] = {0, 1, 0, 0, 1, 1, 1, 1, 0};
	size_t i, j;
	const json_t *n, *d;

	table_init(t, IOD_TOP_GPUS, cols, num, G_COLS);
	bool any_tel = false;
	json_array_foreach(items(in->nodes), i, n)
	{
		const char *node = sval(n, "name");
		const json_t *tel = telemetry_of(in, node);
		any_tel |= tel != NULL;
		json_array_foreach(
		    json_object_get(json_object_get(value(n), "topology"), "devices"), j, d)
		{
			if (strcmp(sval(d, "kind"), "gpu"))
				continue;
			double idx = nval(d, "gpu_index");
			if (isnan(idx) || idx < 0)
				continue;
			struct iod_top_row *row = row_add(t);
			if (!row)
				return;
			cell(row, G_NODE, "%s", node);
			cell_num(row, G_GPU, idx, "%.0f");
			const char *model = sval(d, "model");
			if (!strncmp(model, "NVIDIA ", 7))
				model += 7;
			cell(row, G_MODEL, "%s", model[0] ? model : "-");
			const char *owner = gpu_owner(in, node, (unsigned)idx);
			cell(row, G_REPLICA, "%s", owner ? owner : "-");
			const json_t *g = telemetry_item(tel, "gpus", "index", NULL, idx);
			cell_num(row, G_UTIL, g ? nval(g, "util_pct") : NAN, "%.0f");
			cell_size(row, G_MEM, g ? nval(g, "mem_used_bytes") : NAN);
			cell_num(row, G_POWER, g ? nval(g, "power_w") : NAN, "%.0f");
			cell_num(row, G_TEMP, g ? nval(g, "temp_c") : NAN, "%.0f");
			double hist[IOD_TOP_SPARK_MAX];
			uint32_t hn = 0;
			size_t k;
			const json_t *h;
			const json_t *ha = json_object_get(g, "util_hist");
			/* the newest samples that fit in a cell (3 bytes each) */
			size_t from = json_array_size(ha) > (IOD_TOP_CELL_MAX - 1) / 3
			                  ? json_array_size(ha) - (IOD_TOP_CELL_MAX - 1) / 3
			                  : 0;
			json_array_foreach(ha, k, h)
			{
				if (k >= from && hn < IOD_TOP_SPARK_MAX && json_is_number(h))
					hist[hn++] = json_number_value(h);
			}
			if (hn)
				iod_top_sparkline(hist, hn, row->cells[G_TREND], IOD_TOP_CELL_MAX);
			else
				cell(row, G_TREND, "-");
			if (g && json_is_true(json_object_get(g, "stalled"))) {
				row->level = IOD_TOP_BAD;
				cell(row, G_TREND, "stalled");
			} else if (!owner) {
				row->level = IOD_TOP_OK;
			}
		}
	}
	if (!any_tel)
		snprintf(t->note, sizeof(t->note),
		         "no GPU telemetry from the agents yet: utilisation, memory, power and "
		         "temperature show -");
}

enum { R_NAME, R_SERVICE, R_NODE, R_GPUS, R_PHASE, R_HEALTH, R_RESTARTS, R_CPU, R_MEM, R_COLS };

static void build_replicas(struct iod_top_table *t, const struct iod_top_input *in)
{
	static const char *const cols[] = {"NAME",   "SERVICE",  "NODE", "GPUS", "PHASE",
	                                   "HEALTH", "RESTARTS", "CPU%", "MEM"};
	static const bool num[] = {0, 0, 0, 0, 0, 0, 1, 1, 1};
	size_t i;
	const json_t *r;

	table_init(t, IOD_TOP_REPLICAS, cols, num, R_COLS);
	if (!items(in->replicas)) {
		snprintf(t->note, sizeof(t->note), "no replica list from the API");
		return;
	}
	json_array_foreach(items(in->replicas), i, r)
	{
		const json_t *v = value(r);
		const char *name = sval(r, "name"), *phase = RS(v, PHASE);
		const char *node = RS(v, NODE);
		struct iod_top_row *row = row_add(t);
		if (!row)
			break;
		cell(row, R_NAME, "%s", name);
		cell(row, R_SERVICE, "%s", RS(v, SERVICE)[0] ? RS(v, SERVICE) : "-");
		cell(row, R_NODE, "%s", node[0] ? node : "(unplaced)");
		cell(row, R_GPUS, "%s", RS(v, GPUS)[0] ? RS(v, GPUS) : "-");
		cell(row, R_PHASE, "%s", phase[0] ? phase : "-");
		const char *h = endpoint_health(in, name);
		/* a replica without an endpoint is as healthy as its phase says */
		if (!h[0])
			h = phase_is(phase, phases_bad)  ? "unhealthy"
			    : phase_is(phase, phases_ok) ? "ok"
			                                 : "-";
		cell(row, R_HEALTH, "%s", h);
		cell_num(row, R_RESTARTS,
		         iod_obj_peek_num(IOD_OBJ_KIND_REPLICA, v, IOD_OBJ_REPLICA_RESTARTS),
		         "%.0f");
		const json_t *tr =
		    telemetry_item(telemetry_of(in, node), "replicas", "name", name, 0);
		cell_num(row, R_CPU, tr ? nval(tr, "cpu_pct") : NAN, "%.1f");
		cell_size(row, R_MEM, tr ? nval(tr, "mem_bytes") : NAN);
		if (phase_is(phase, phases_bad) || !strcmp(h, "unhealthy"))
			row->level = IOD_TOP_BAD;
		else if (!phase_is(phase, phases_ok))
			row->level = IOD_TOP_WARN;
	}
}

enum { S_NAME, S_TYPE, S_REPL, S_EPS, S_RPS, S_ERRS, S_ERRORS, S_P99, S_TP, S_COLS };

static const struct iod_top_mesh_svc *mesh_of(const struct iod_top_snapshot *s, const char *name)
{
	for (uint32_t i = 0; s && i < s->mesh_n; i++)
		if (!strcmp(s->mesh[i].name, name))
			return &s->mesh[i];
	return NULL;
}

static void build_services(struct iod_top_table *t, const struct iod_top_input *in,
                           const struct iod_top_snapshot *s)
{
	static const char *const cols[] = {"NAME",  "TYPE",   "READY",  "ENDPOINTS", "RPS",
	                                   "ERR/S", "ERRORS", "P99_MS", "TRANSPORT"};
	static const bool num[] = {0, 0, 1, 1, 1, 1, 1, 1, 0};
	size_t i, j;
	const json_t *sv, *x;

	table_init(t, IOD_TOP_SERVICES, cols, num, S_COLS);
	json_array_foreach(items(in->services), i, sv)
	{
		const char *name = sval(sv, "name");
		const json_t *v = value(sv);
		unsigned ready = 0, eps = 0, eps_ok = 0;
		json_array_foreach(items(in->replicas), j, x)
		{
			if (!strcmp(RS(value(x), SERVICE), name) &&
			    !strcmp(RS(value(x), PHASE), "healthy"))
				ready++;
			else if (!strcmp(RS(value(x), SERVICE), name) &&
			         !strcmp(RS(value(x), PHASE), "running") &&
			         json_is_true(iod_obj_peek_json(IOD_OBJ_KIND_REPLICA, value(x),
			                                        IOD_OBJ_REPLICA_READY)))
				ready++;
		}
		json_array_foreach(items(in->endpoints), j, x)
		{
			if (strcmp(iod_obj_peek_text(IOD_OBJ_KIND_ENDPOINT, value(x),
			                             IOD_OBJ_ENDPOINT_SERVICE),
			           name))
				continue;
			eps++;
			eps_ok += json_is_true(iod_obj_peek_json(IOD_OBJ_KIND_ENDPOINT, value(x),
			                                         IOD_OBJ_ENDPOINT_HEALTHY));
		}
		struct iod_top_row *row = row_add(t);
		if (!row)
			break;
		double want = iod_obj_peek_num(IOD_OBJ_KIND_SERVICE, v, IOD_OBJ_SERVICE_REPLICAS);
		cell(row, S_NAME, "%s", name);
		cell(row, S_TYPE, "%s",
		     iod_obj_peek_text(IOD_OBJ_KIND_SERVICE, v, IOD_OBJ_SERVICE_TYPE)[0]
		         ? iod_obj_peek_text(IOD_OBJ_KIND_SERVICE, v, IOD_OBJ_SERVICE_TYPE)
		         : "-");
		row->num[S_REPL] = ready;
		cell(row, S_REPL, "%u/%.0f", ready, isnan(want) ? 0.0 : want);
		row->num[S_EPS] = eps_ok;
		cell(row, S_EPS, "%u/%u", eps_ok, eps);
		const struct iod_top_mesh_svc *m = mesh_of(s, name);
		cell_num(row, S_RPS, m ? m->rps : NAN, "%.1f");
		cell_num(row, S_ERRS, m ? m->eps : NAN, "%.1f");
		cell_num(row, S_ERRORS, m ? m->errors : NAN, "%.0f");
		cell_num(row, S_P99, m && m->p99_s >= 0 ? m->p99_s * 1000 : NAN, "%.2f");
		/* service_mesh.transport, and the proxy's connections (both hops)
		 * by the path they took: "shm shm=12 tcp=2" */
		if (m && m->transport[0])
			cell(row, S_TP, "%s shm=%.0f tcp=%.0f", m->transport, m->conns_shm,
			     m->conns_tcp);
		else
			cell(row, S_TP, "-");
		if (!isnan(want) && want > 0 && eps && !eps_ok)
			row->level = IOD_TOP_BAD;
		else if (!isnan(want) && ready < want)
			row->level = IOD_TOP_WARN;
		if (m && m->eps > 0)
			row->level = IOD_TOP_BAD;
	}
	if (!in->mesh_metrics)
		snprintf(t->note, sizeof(t->note),
		         "no mesh metrics: pass --mesh ADDR (a proxy's admin address) for RPS, "
		         "errors and p99");
}

enum { L_NAME, L_KIND, L_NODE, L_RX, L_TX, L_DROPS, L_COLS };

static void build_links(struct iod_top_table *t, const struct iod_top_input *in)
{
	static const char *const cols[] = {"LINK", "KIND", "NODE", "RX_BPS", "TX_BPS", "DROPS"};
	static const bool num[] = {0, 0, 0, 1, 1, 1};
	size_t i, j;
	const json_t *n, *l;

	table_init(t, IOD_TOP_LINKS, cols, num, L_COLS);
	json_array_foreach(items(in->telemetry), i, n)
	{
		const json_t *v = value(n) ? value(n) : n;
		json_array_foreach(json_object_get(v, "links"), j, l)
		{
			struct iod_top_row *row = row_add(t);
			if (!row)
				return;
			cell(row, L_NAME, "%s", sval(l, "name"));
			cell(row, L_KIND, "%s", sval(l, "kind")[0] ? sval(l, "kind") : "-");
			cell(row, L_NODE, "%s", sval(v, "node"));
			char b[32];
			row->num[L_RX] = nval(l, "rx_bps");
			row->num[L_TX] = nval(l, "tx_bps");
			/* no rate yet (one reading): "-", not 0 */
			for (uint32_t c = L_RX; c <= L_TX; c++) {
				if (!(row->num[c] >= 0 &&
				      row->num[c] < 1e18)) { /* none, or not a rate */
					cell(row, c, "-");
					continue;
				}
				iod_format_bandwidth((uint64_t)row->num[c], b, sizeof(b));
				cell(row, c, "%s", b);
			}
			cell_num(row, L_DROPS, nval(l, "drops"), "%.0f");
			if (nval(l, "drops") > 0)
				row->level = IOD_TOP_WARN;
		}
	}
	if (!t->rows_n)
		snprintf(t->note, sizeof(t->note),
		         "no link counters reported: fabric and NIC links appear here when the "
		         "node network reports them");
}

static void build_cluster(struct iod_top_table *t, const struct iod_top_input *in,
                          const struct iod_top_snapshot *s)
{
	static const char *const cols[] = {"ITEM", "VALUE", "DETAIL"};
	static const bool num[] = {0, 0, 0};
	struct iod_top_row *row;

	table_init(t, IOD_TOP_CLUSTER, cols, num, 3);
	if ((row = row_add(t))) {
		const json_t *st = in->status;
		cell(row, 0, "leader");
		double leader = nval(st, "leader");
		const char *api = sval(st, "leader_api");
		if (!st) {
			cell(row, 1, "-");
			row->level = IOD_TOP_BAD;
		} else if (isnan(leader) || leader == 0) {
			cell(row, 1, "none");
			row->level = IOD_TOP_BAD;
		} else {
			cell(row, 1, "server %.0f", leader);
		}
		cell(row, 2, "%s%sterm %.0f, revision %.0f", api, api[0] ? ", " : "",
		     isnan(nval(st, "term")) ? 0.0 : nval(st, "term"),
		     isnan(nval(st, "revision")) ? 0.0 : nval(st, "revision"));
	}
	const struct iod_top_table *nodes = &s->views[IOD_TOP_NODES];
	unsigned ready = 0, gpus_used = 0, gpus = 0;
	for (uint32_t i = 0; i < nodes->rows_n; i++) {
		ready += !strcmp(nodes->rows[i].cells[N_HEALTH], "ready");
		gpus_used += (unsigned)nodes->rows[i].num[N_GPUS];
		const char *slash = strchr(nodes->rows[i].cells[N_GPUS], '/');
		gpus += slash ? (unsigned)atoi(slash + 1) : 0;
	}
	if ((row = row_add(t))) {
		cell(row, 0, "nodes");
		cell(row, 1, "%u/%u ready", ready, nodes->rows_n);
		cell(row, 2, "%u lost", nodes->rows_n - ready);
		row->level = ready < nodes->rows_n ? IOD_TOP_BAD : IOD_TOP_OK;
	}
	if ((row = row_add(t))) {
		cell(row, 0, "gpus");
		cell(row, 1, "%u/%u used", gpus_used, gpus);
		cell(row, 2, "%u free", gpus > gpus_used ? gpus - gpus_used : 0);
	}
	const struct iod_top_table *reps = &s->views[IOD_TOP_REPLICAS];
	unsigned bad = 0, warn = 0;
	for (uint32_t i = 0; i < reps->rows_n; i++) {
		bad += reps->rows[i].level == IOD_TOP_BAD;
		warn += reps->rows[i].level == IOD_TOP_WARN;
	}
	if ((row = row_add(t))) {
		cell(row, 0, "replicas");
		cell(row, 1, "%u/%u ok", reps->rows_n - bad - warn, reps->rows_n);
		cell(row, 2, "%u unhealthy or failed, %u starting or pending", bad, warn);
		row->level = bad ? IOD_TOP_BAD : warn ? IOD_TOP_WARN : IOD_TOP_OK;
	}
	if ((row = row_add(t))) {
		size_t n = json_array_size(items(in->services));
		cell(row, 0, "services");
		cell(row, 1, "%zu", n);
		unsigned sbad = 0;
		for (uint32_t i = 0; i < s->views[IOD_TOP_SERVICES].rows_n; i++)
			sbad += s->views[IOD_TOP_SERVICES].rows[i].level == IOD_TOP_BAD;
		cell(row, 2, "%u without a healthy endpoint or with errors", sbad);
		row->level = sbad ? IOD_TOP_BAD : IOD_TOP_OK;
	}
}

/* ---- mesh metrics ---------------------------------------------------------- */

/* The value of label key in a "{a=\"x\",b=\"y\"}" set, copied to out. */
static bool label(const char *labels, size_t len, const char *key, char *out, size_t outlen)
{
	size_t kl = strlen(key);
	for (size_t i = 0; i + kl + 2 <= len; i++) {
		if ((i == 0 || labels[i - 1] == '{' || labels[i - 1] == ',') &&
		    !strncmp(labels + i, key, kl) && labels[i + kl] == '=' &&
		    labels[i + kl + 1] == '"') {
			size_t k = 0;
			for (size_t j = i + kl + 2; j < len && labels[j] != '"'; j++) {
				if (labels[j] == '\\' && j + 1 < len)
					j++;
				if (k + 1 < outlen)
					out[k++] = labels[j];
			}
			out[k] = 0;
			return true;
		}
	}
	return false;
}

#define MESH_BUCKETS_MAX 32

struct mesh_hist {
	uint32_t n;                  /* buckets seen */
	double le[MESH_BUCKETS_MAX]; /* upper bounds (+Inf as INFINITY) */
	double c[MESH_BUCKETS_MAX];  /* cumulative counts */
};

static struct iod_top_mesh_svc *mesh_slot(struct iod_top_mesh_svc *out, uint32_t *n, uint32_t max,
                                          const char *name)
{
	for (uint32_t i = 0; i < *n; i++)
		if (!strcmp(out[i].name, name))
			return &out[i];
	if (*n >= max)
		return NULL;
	struct iod_top_mesh_svc *m = &out[(*n)++];
	memset(m, 0, sizeof(*m));
	iod_strlcpy(m->name, name, sizeof(m->name));
	m->p99_s = -1;
	m->rps = -1;
	m->eps = -1;
	return m;
}

uint32_t iod_top_mesh_parse(const char *text, size_t len, struct iod_top_mesh_svc *out,
                            uint32_t max)
{
	uint32_t n = 0;
	size_t at = 0;

	if (max > IOD_TOP_SERVICES_MAX)
		max = IOD_TOP_SERVICES_MAX;
	struct mesh_hist *hist = calloc(max ? max : 1, sizeof(*hist));
	if (!hist)
		return 0;
	while (text && at < len) {
		const char *line = text + at;
		const char *nl = memchr(line, '\n', len - at);
		size_t ll = nl ? (size_t)(nl - line) : len - at;
		at += ll + 1;
		if (!ll || line[0] == '#')
			continue;
		const char *brace = memchr(line, '{', ll);
		const char *close = brace ? memchr(brace, '}', ll - (size_t)(brace - line)) : NULL;
		if (!brace || !close)
			continue;
		size_t name_len = (size_t)(brace - line);
		int kind = 0;
		if (name_len == strlen("iod_mesh_requests_total") &&
		    !strncmp(line, "iod_mesh_requests_total", name_len))
			kind = 1;
		else if (name_len == strlen("iod_mesh_errors_total") &&
		         !strncmp(line, "iod_mesh_errors_total", name_len))
			kind = 2;
		else if (name_len == strlen("iod_mesh_request_duration_seconds_bucket") &&
		         !strncmp(line, "iod_mesh_request_duration_seconds_bucket", name_len))
			kind = 3;
		else if (name_len == strlen("iod_mesh_transport_info") &&
		         !strncmp(line, "iod_mesh_transport_info", name_len))
			kind = 4;
		else if (name_len == strlen("iod_mesh_transport_connections_total") &&
		         !strncmp(line, "iod_mesh_transport_connections_total", name_len))
			kind = 5;
		if (!kind)
			continue;
		char svc[IOD_NAME_MAX], le[32], num[64];
		size_t lablen = (size_t)(close - brace + 1);
		if (!label(brace, lablen, "service", svc, sizeof(svc)) || !svc[0])
			continue;
		size_t vl = ll - (size_t)(close + 1 - line);
		if (vl >= sizeof(num))
			continue;
		memcpy(num, close + 1, vl);
		num[vl] = 0;
		char *end;
		double v = strtod(num, &end);
		if (end == num || isnan(v))
			continue;
		struct iod_top_mesh_svc *m = mesh_slot(out, &n, max, svc);
		if (!m)
			continue;
		char tp[16];
		if (kind == 1)
			m->requests = v;
		else if (kind == 2)
			m->errors = v;
		else if (kind == 4 || kind == 5) {
			if (!label(brace, lablen, "transport", tp, sizeof(tp)))
				continue;
			if (kind == 4 && v > 0)
				iod_strlcpy(m->transport, tp, sizeof(m->transport));
			else if (kind == 5 && !strcmp(tp, "shm"))
				m->conns_shm += v;
			else if (kind == 5 && !strcmp(tp, "tcp"))
				m->conns_tcp += v;
		} else {
			struct mesh_hist *h = &hist[m - out];
			if (!label(brace, lablen, "le", le, sizeof(le)) || h->n >= MESH_BUCKETS_MAX)
				continue;
			double b = !strcmp(le, "+Inf") ? INFINITY : strtod(le, NULL);
			h->le[h->n] = b;
			h->c[h->n++] = v;
		}
	}
	/* p99: the upper bound of the first bucket holding 99% of the requests
	 * (the bucket's bound, as Prometheus' histogram_quantile reads it at the top) */
	for (uint32_t i = 0; i < n; i++) {
		struct mesh_hist *h = &hist[i];
		double total = h->n ? h->c[h->n - 1] : 0;
		if (total <= 0)
			continue;
		for (uint32_t k = 0; k < h->n; k++) {
			if (h->c[k] >= 0.99 * total) {
				double prev_le = k ? h->le[k - 1] : 0;
				out[i].p99_s = isinf(h->le[k]) ? prev_le : h->le[k];
				break;
			}
		}
	}
	free(hist);
	return n;
}

/* ---- snapshot ---------------------------------------------------------------- */

int iod_top_snapshot_build(struct iod_top_snapshot *s, const struct iod_top_input *in,
                           const struct iod_top_snapshot *prev)
{
	IOD_ASSERT(s && in);
	memset(s, 0, sizeof(*s));
	s->at_ms = in->now_ms;
	if (in->mesh_metrics) {
		s->mesh_n = iod_top_mesh_parse(in->mesh_metrics, strlen(in->mesh_metrics), s->mesh,
		                               IOD_TOP_SERVICES_MAX);
		double dt =
		    prev && in->now_ms > prev->at_ms ? (double)(in->now_ms - prev->at_ms) / 1e3 : 0;
		for (uint32_t i = 0; dt > 0 && i < s->mesh_n; i++) {
			const struct iod_top_mesh_svc *p = mesh_of(prev, s->mesh[i].name);
			if (!p)
				continue;
			/* a counter that went down is a restarted proxy: no rate this time */
			if (s->mesh[i].requests >= p->requests)
				s->mesh[i].rps = (s->mesh[i].requests - p->requests) / dt;
			if (s->mesh[i].errors >= p->errors)
				s->mesh[i].eps = (s->mesh[i].errors - p->errors) / dt;
		}
	}
	build_nodes(&s->views[IOD_TOP_NODES], in);
	build_gpus(&s->views[IOD_TOP_GPUS], in);
	build_replicas(&s->views[IOD_TOP_REPLICAS], in);
	build_services(&s->views[IOD_TOP_SERVICES], in, s);
	build_links(&s->views[IOD_TOP_LINKS], in);
	build_cluster(&s->views[IOD_TOP_CLUSTER], in, s);
	for (int v = 0; v < IOD_TOP_VIEW_COUNT; v++)
		if (s->views[v].hidden_n)
			snprintf(s->views[v].note, sizeof(s->views[v].note),
			         "%u rows not shown (more than %u, or out of memory)",
			         s->views[v].hidden_n, (unsigned)IOD_TOP_ROWS_MAX);
	return 0;
}

void iod_top_snapshot_free(struct iod_top_snapshot *s)
{
	for (int v = 0; v < IOD_TOP_VIEW_COUNT; v++)
		iod_top_table_free(&s->views[v]);
}

int iod_top_table_copy(struct iod_top_table *dst, const struct iod_top_table *src)
{
	*dst = *src;
	dst->rows = NULL;
	dst->rows_cap = 0;
	if (!src->rows_n)
		return 0;
	dst->rows = malloc(src->rows_n * sizeof(*dst->rows));
	if (!dst->rows) {
		dst->rows_n = 0;
		return -ENOMEM;
	}
	memcpy(dst->rows, src->rows, src->rows_n * sizeof(*dst->rows));
	dst->rows_cap = src->rows_n;
	return 0;
}

void iod_top_table_free(struct iod_top_table *t)
{
	free(t->rows);
	t->rows = NULL;
	t->rows_n = t->rows_cap = 0;
}

/* ---- filter, sort, layout ----------------------------------------------------- */

int iod_top_table_column(const struct iod_top_table *t, const char *name)
{
	for (uint32_t i = 0; i < t->cols_n; i++)
		if (!strcasecmp(t->cols[i], name))
			return (int)i;
	return -1;
}

static bool contains_nocase(const char *hay, const char *needle)
{
	return !needle[0] || strcasestr(hay, needle) != NULL;
}

int iod_top_table_filter(struct iod_top_table *t, const char *filter, struct iod_err *e)
{
	char col[IOD_TOP_FILTER_MAX];
	const char *text = filter ? filter : "";
	int c = -1;
	const char *eq = strchr(text, '=');

	if (strlen(text) >= IOD_TOP_FILTER_MAX)
		return iod_err_set(e, -EINVAL, "filter is longer than %d characters",
		                   IOD_TOP_FILTER_MAX - 1);
	if (eq) {
		size_t n = (size_t)(eq - text);
		memcpy(col, text, n);
		col[n] = 0;
		c = iod_top_table_column(t, col);
		if (c < 0) {
			char names[IOD_TOP_COLS_MAX * (IOD_TOP_CELL_MAX / 4)] = "";
			for (uint32_t i = 0; i < t->cols_n; i++) {
				size_t l = strlen(names);
				snprintf(names + l, sizeof(names) - l, "%s%s", i ? ", " : "",
				         t->cols[i]);
			}
			return iod_err_set(
			    e, -EINVAL,
			    "unknown column \"%.32s\" in filter \"%.64s\"; the %s view "
			    "has %s (or filter TEXT to match any column)",
			    col, text, iod_top_view_name(t->view), names);
		}
		text = eq + 1;
	}
	uint32_t keep = 0;
	for (uint32_t i = 0; i < t->rows_n; i++) {
		bool hit = false;
		if (c >= 0)
			hit = contains_nocase(t->rows[i].cells[c], text);
		else
			for (uint32_t k = 0; k < t->cols_n && !hit; k++)
				hit = contains_nocase(t->rows[i].cells[k], text);
		if (hit) {
			if (keep != i)
				t->rows[keep] = t->rows[i];
			keep++;
		}
	}
	t->hidden_n += t->rows_n - keep;
	t->rows_n = keep;
	return 0;
}

static int cmp_rows(const struct iod_top_row *a, const struct iod_top_row *b, uint32_t col,
                    bool numeric)
{
	if (numeric) {
		double x = a->num[col], y = b->num[col];
		/* unknown values sort last either way */
		if (isnan(x) || isnan(y))
			return isnan(x) - isnan(y);
		if (x != y)
			return x < y ? -1 : 1;
	}
	return strcmp(a->cells[col], b->cells[col]);
}

void iod_top_table_sort(struct iod_top_table *t, uint32_t col, bool desc)
{
	if (col >= t->cols_n || t->rows_n < 2)
		return;
	/* insertion sort into a scratch order: stable, and tables are small
	 * (a merge sort would matter past ~10,000 rows) */
	struct iod_top_row tmp;
	for (uint32_t i = 1; i < t->rows_n; i++) {
		uint32_t j = i;
		tmp = t->rows[i];
		while (j > 0) {
			int c = cmp_rows(&t->rows[j - 1], &tmp, col, t->numeric[col]);
			if (desc)
				c = -c;
			if (c <= 0)
				break;
			t->rows[j] = t->rows[j - 1];
			j--;
		}
		t->rows[j] = tmp;
	}
}

/* Display width of UTF-8 text: code points (the block characters are one cell). */
static size_t text_width(const char *s)
{
	size_t w = 0;
	for (; *s; s++)
		w += ((unsigned char)*s & 0xc0) != 0x80;
	return w;
}

/* Append s padded to width w, cutting at `room` display cells. */
static int put_cell(struct iod_buf *b, const char *s, size_t w, size_t *room)
{
	size_t n = 0, bytes = 0;
	while (s[bytes] && n < *room && n < w) {
		bytes++;
		while (s[bytes] && ((unsigned char)s[bytes] & 0xc0) == 0x80)
			bytes++;
		n++;
	}
	int rc = iod_buf_append(b, s, bytes);
	for (; !rc && n < w && n < *room; n++)
		rc = iod_buf_append(b, " ", 1);
	*room -= n;
	return rc;
}

int iod_top_table_format(const struct iod_top_table *t, uint32_t width, struct iod_buf *b)
{
	size_t w[IOD_TOP_COLS_MAX];
	int rc = 0;
	if (width < 1)
		width = 1;
	for (uint32_t c = 0; c < t->cols_n; c++) {
		w[c] = strlen(t->cols[c]);
		for (uint32_t i = 0; i < t->rows_n; i++)
			if (text_width(t->rows[i].cells[c]) > w[c])
				w[c] = text_width(t->rows[i].cells[c]);
	}
	for (uint32_t i = 0; i <= t->rows_n && !rc; i++) {
		size_t room = width;
		for (uint32_t c = 0; c < t->cols_n && room && !rc; c++) {
			const char *s = i ? t->rows[i - 1].cells[c] : t->cols[c];
			bool last = c + 1 == t->cols_n;
			rc = put_cell(b, s, last ? text_width(s) : w[c], &room);
			if (!last && room && !rc) {
				rc = iod_buf_append(b, "  ", room >= 2 ? 2 : 1);
				room -= room >= 2 ? 2 : 1;
			}
		}
		if (!rc)
			rc = iod_buf_append(b, "\n", 1);
	}
	return rc;
}

json_t *iod_top_table_json(const struct iod_top_table *t)
{
	json_t *a = json_array();
	for (uint32_t i = 0; a && i < t->rows_n; i++) {
		json_t *o = json_object();
		for (uint32_t c = 0; o && c < t->cols_n; c++) {
			char key[IOD_TOP_CELL_MAX];
			size_t k = 0;
			for (const char *p = t->cols[c]; *p && k + 1 < sizeof(key); p++)
				key[k++] = isalnum((unsigned char)*p)
				               ? (char)tolower((unsigned char)*p)
				               : '_';
			key[k] = 0;
			const struct iod_top_row *r = &t->rows[i];
			if (t->numeric[c] && !strchr(r->cells[c], '/'))
				json_object_set_new(
				    o, key, isnan(r->num[c]) ? json_null() : json_real(r->num[c]));
			else
				json_object_set_new(o, key, json_string(r->cells[c]));
		}
		json_object_set_new(o, "level",
		                    json_string(t->rows[i].level == IOD_TOP_BAD    ? "bad"
		                                : t->rows[i].level == IOD_TOP_WARN ? "warn"
		                                                                   : "ok"));
		json_array_append_new(a, o);
	}
	return a;
}

int iod_top_sparkline(const double *v, uint32_t n, char *buf, size_t len)
{
	/* U+2581..U+2588, lower one eighth block to full block */
	static const char *const bars[] = {"\xe2\x96\x81", "\xe2\x96\x82", "\xe2\x96\x83",
	                                   "\xe2\x96\x84", "\xe2\x96\x85", "\xe2\x96\x86",
	                                   "\xe2\x96\x87", "\xe2\x96\x88"};
	size_t at = 0;
	if (!len)
		return -ENOSPC;
	buf[0] = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (at + 4 > len)
			return -ENOSPC;
		double x = isnan(v[i]) ? 0 : v[i];
		int k = (int)(x / 100.0 * 7.0 + 0.5);
		k = k < 0 ? 0 : k > 7 ? 7 : k;
		memcpy(buf + at, bars[k], 3);
		at += 3;
		buf[at] = 0;
	}
	return 0;
}
