/*
 * telemetry.c: the agent's telemetry model: bounded rings of GPU and
 * replica samples, the busy-but-stalled rule, the simulated-GPU counters
 * protocol, and the three ways out (Prometheus text with iod_ and
 * DCGM-exporter names, the summary for the control plane, the detail
 * document the agent serves).
 *
 * Pure: the shell (src/agent/telemetry.c) reads NVML, /proc and counters
 * files and passes samples and times in. Every array is bounded (limits.h);
 * a ring overwrites its oldest sample, it never grows.
 */
#include "iod/obs.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

const struct iod_tel_gpu_sample *iod_tel_gpu_last(const struct iod_tel_gpu *g)
{
	return g->n ? &g->ring[(g->head + IOD_TEL_RING - 1) % IOD_TEL_RING] : NULL;
}

const struct iod_tel_replica_sample *iod_tel_replica_last(const struct iod_tel_replica *r)
{
	return r->n ? &r->ring[(r->head + IOD_TEL_RING - 1) % IOD_TEL_RING] : NULL;
}

/* The k-th newest sample (0 = newest); k < n. */
static const struct iod_tel_gpu_sample *gpu_back(const struct iod_tel_gpu *g, uint32_t k)
{
	IOD_ASSERT(k < g->n);
	return &g->ring[(g->head + 2 * IOD_TEL_RING - 1 - k) % IOD_TEL_RING];
}

bool iod_tel_gpu_stalled(const struct iod_tel_gpu *g)
{
	if (g->n < IOD_TEL_STALL_SAMPLES)
		return false;
	for (uint32_t k = 0; k < IOD_TEL_STALL_SAMPLES; k++)
		if (!(gpu_back(g, k)->util_pct >= IOD_TEL_STALL_UTIL_PCT))
			return false;
	const struct iod_tel_gpu_sample *a = gpu_back(g, IOD_TEL_STALL_SAMPLES - 1);
	const struct iod_tel_gpu_sample *b = gpu_back(g, 0);
	uint64_t before = a->nvlink_bytes_total + a->pcie_bytes_total;
	uint64_t after = b->nvlink_bytes_total + b->pcie_bytes_total;
	/* a counter that went back (driver reload) is not progress either way */
	return after < before || after - before < IOD_TEL_STALL_BYTES;
}

void iod_tel_gpu_push(struct iod_tel_gpu *g, const struct iod_tel_gpu_sample *s)
{
	g->ring[g->head] = *s;
	g->head = (g->head + 1) % IOD_TEL_RING;
	if (g->n < IOD_TEL_RING)
		g->n++;
	g->stalled = iod_tel_gpu_stalled(g);
}

void iod_tel_replica_push(struct iod_tel_replica *r, const struct iod_tel_replica_sample *s)
{
	r->ring[r->head] = *s;
	r->head = (r->head + 1) % IOD_TEL_RING;
	if (r->n < IOD_TEL_RING)
		r->n++;
}

struct iod_tel_replica *iod_tel_replica_get(struct iod_tel_node *n, const char *name)
{
	for (uint32_t i = 0; i < n->replicas_n; i++)
		if (!strcmp(n->replicas[i].name, name)) {
			n->replicas[i].seen = true;
			return &n->replicas[i];
		}
	if (n->replicas_n >= IOD_TEL_REPLICAS_MAX || !name[0])
		return NULL;
	struct iod_tel_replica *r = &n->replicas[n->replicas_n++];
	memset(r, 0, sizeof(*r));
	iod_strlcpy(r->name, name, sizeof(r->name));
	r->seen = true;
	return r;
}

void iod_tel_replicas_sweep(struct iod_tel_node *n)
{
	uint32_t keep = 0;
	for (uint32_t i = 0; i < n->replicas_n; i++) {
		if (!n->replicas[i].seen)
			continue;
		if (keep != i)
			n->replicas[keep] = n->replicas[i];
		n->replicas[keep++].seen = false;
	}
	n->replicas_n = keep;
}

/* ---- data-plane ports ---------------------------------------------------- */

static void port_rate(const struct iod_tel_port *prev, struct iod_tel_port *p)
{
	p->rated = false;
	p->rx_bps = p->tx_bps = 0;
	if (!prev || p->at_ms <= prev->at_ms || p->rx_bytes < prev->rx_bytes ||
	    p->tx_bytes < prev->tx_bytes)
		return;
	double dt = (double)(p->at_ms - prev->at_ms) / 1e3;
	p->rx_bps = (double)(p->rx_bytes - prev->rx_bytes) * 8.0 / dt;
	p->tx_bps = (double)(p->tx_bytes - prev->tx_bytes) * 8.0 / dt;
	p->rated = true;
}

int iod_tel_ports_set(struct iod_tel_node *n, const struct iod_tel_port *in, uint32_t k)
{
	if (k > IOD_TEL_PORTS_MAX)
		k = IOD_TEL_PORTS_MAX;
	struct iod_tel_port *next = k ? calloc(k, sizeof(*next)) : NULL;
	if (k && !next)
		return -ENOMEM;
	for (uint32_t i = 0; i < k; i++) {
		const struct iod_tel_port *prev = NULL;
		for (uint32_t j = 0; j < n->ports_n && !prev; j++)
			if (!strcmp(n->ports[j].name, in[i].name) &&
			    !strcmp(n->ports[j].iface, in[i].iface))
				prev = &n->ports[j];
		next[i] = in[i];
		port_rate(prev, &next[i]);
	}
	if (k)
		memcpy(n->ports, next, k * sizeof(*next));
	n->ports_n = k;
	free(next);
	return 0;
}

/* ---- the counters protocol ----------------------------------------------- */

int iod_tel_counters_parse(const char *text, size_t len, struct iod_tel_counters *c,
                           struct iod_err *e)
{
	static const struct {
		const char *name;
		size_t off;
	} keys[] = {
	    {"busy_ns_total", offsetof(struct iod_tel_counters, busy_ns_total)},
	    {"comm_bytes_total", offsetof(struct iod_tel_counters, comm_bytes_total)},
	    {"steps_total", offsetof(struct iod_tel_counters, steps_total)},
	    {"gpu_mem_used_bytes", offsetof(struct iod_tel_counters, gpu_mem_used_bytes)},
	};
	size_t at = 0;
	unsigned line = 0;

	memset(c, 0, sizeof(*c));
	if (len > IOD_TEL_COUNTERS_FILE_MAX)
		return iod_err_set(e, -E2BIG, "counters file of %zu bytes is over %u", len,
		                   IOD_TEL_COUNTERS_FILE_MAX);
	while (at < len) {
		const char *l = text + at;
		const char *nl = memchr(l, '\n', len - at);
		size_t ll = nl ? (size_t)(nl - l) : len - at;
		at += ll + 1;
		line++;
		char buf[128], name[64];
		if (ll >= sizeof(buf))
			return iod_err_set(e, -EINVAL, "line %u: longer than %zu bytes", line,
			                   sizeof(buf) - 1);
		memcpy(buf, l, ll);
		buf[ll] = 0;
		char *hash = strchr(buf, '#');
		if (hash)
			*hash = 0;
		char *p = buf;
		while (*p == ' ' || *p == '\t' || *p == '\r')
			p++;
		if (!*p)
			continue;
		size_t k = 0;
		while (*p && *p != ' ' && *p != '\t' && k + 1 < sizeof(name))
			name[k++] = *p++;
		name[k] = 0;
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p < '0' || *p > '9')
			return iod_err_set(e, -EINVAL,
			                   "line %u: \"%s\" wants an unsigned integer value", line,
			                   name);
		char *end;
		errno = 0;
		unsigned long long v = strtoull(p, &end, 10);
		while (*end == ' ' || *end == '\t' || *end == '\r')
			end++;
		if (errno || *end)
			return iod_err_set(e, -EINVAL, "line %u: bad value for \"%s\"", line, name);
		for (size_t i = 0; i < IOD_ARRAY_LEN(keys); i++)
			if (!strcmp(name, keys[i].name)) {
				memcpy((char *)c + keys[i].off, &(uint64_t){v}, sizeof(uint64_t));
				if (i == 0)
					c->has_busy = true;
			}
	}
	return 0;
}

void iod_tel_sim_gpu(const struct iod_tel_counters *prev, const struct iod_tel_counters *cur,
                     uint64_t dt_ms, uint32_t gpus_n, uint64_t mem_total_bytes, uint64_t at_ms,
                     struct iod_tel_gpu_sample *out)
{
	uint32_t g = gpus_n ? gpus_n : 1;
	memset(out, 0, sizeof(*out));
	out->at_ms = at_ms;
	out->mem_total_bytes = mem_total_bytes;
	out->mem_used_bytes = cur ? cur->gpu_mem_used_bytes / g : 0;
	if (out->mem_used_bytes > mem_total_bytes && mem_total_bytes)
		out->mem_used_bytes = mem_total_bytes;
	/* every GPU of the replica works in the same steps: each is as busy */
	if (prev && cur && dt_ms && cur->busy_ns_total >= prev->busy_ns_total) {
		double busy = (double)(cur->busy_ns_total - prev->busy_ns_total);
		out->util_pct = busy / ((double)dt_ms * 1e6) * 100.0;
		if (out->util_pct > 100)
			out->util_pct = 100;
	}
	out->nvlink_bytes_total = cur ? cur->comm_bytes_total / g : 0;
	out->power_w = 60.0 + out->util_pct / 100.0 * 340.0;
	out->temp_c = 30.0 + out->util_pct / 100.0 * 40.0;
}

/* ---- Prometheus ------------------------------------------------------------ */

static int gpu_labels(const struct iod_tel_node *n, const struct iod_tel_gpu *g, char *buf,
                      size_t len, bool dcgm)
{
	char idx[16], dev[24];
	snprintf(idx, sizeof(idx), "%u", g->index);
	snprintf(dev, sizeof(dev), "nvidia%u", g->index);
	if (dcgm)
		return iod_prom_labels(buf, len, "gpu", idx, "UUID", g->uuid, "device", dev,
		                       "pci_bus_id", g->pci, "Hostname", n->hostname, "node",
		                       n->node, "replica", g->replica, "service", g->service,
		                       (const char *)NULL);
	return iod_prom_labels(buf, len, "node", n->node, "gpu", idx, "uuid", g->uuid, "replica",
	                       g->replica, "service", g->service, (const char *)NULL);
}

/* One gauge family over every GPU with a sample; value picks the field. */
static int gpu_family(struct iod_buf *b, const struct iod_tel_node *n, const char *name,
                      const char *type, const char *help, bool dcgm,
                      double (*value)(const struct iod_tel_gpu *,
                                      const struct iod_tel_gpu_sample *))
{
	int rc = iod_prom_header(b, name, type, help);
	for (uint32_t i = 0; !rc && i < n->gpus_n; i++) {
		const struct iod_tel_gpu *g = &n->gpus[i];
		const struct iod_tel_gpu_sample *s = iod_tel_gpu_last(g);
		char labels[768];
		if (!s || gpu_labels(n, g, labels, sizeof(labels), dcgm))
			continue;
		rc = iod_prom_f64(b, name, labels, value(g, s));
	}
	return rc;
}

static double v_util_ratio(const struct iod_tel_gpu *g, const struct iod_tel_gpu_sample *s)
{
	(void)g;
	return s->util_pct / 100.0;
}
static double v_util_pct(const struct iod_tel_gpu *g, const struct iod_tel_gpu_sample *s)
{
	(void)g;
	return round(s->util_pct);
}
static double v_mem_used(const struct iod_tel_gpu *g, const struct iod_tel_gpu_sample *s)
{
	(void)g;
	return (double)s->mem_used_bytes;
}
static double v_mem_free(const struct iod_tel_gpu *g, const struct iod_tel_gpu_sample *s)
{
	(void)g;
	return s->mem_total_bytes > s->mem_used_bytes
	           ? (double)(s->mem_total_bytes - s->mem_used_bytes)
	           : 0;
}
static double v_mem_used_mib(const struct iod_tel_gpu *g, const struct iod_tel_gpu_sample *s)
{
	return floor(v_mem_used(g, s) / (1024.0 * 1024.0));
}
static double v_mem_free_mib(const struct iod_tel_gpu *g, const struct iod_tel_gpu_sample *s)
{
	return floor(v_mem_free(g, s) / (1024.0 * 1024.0));
}
static double v_power(const struct iod_tel_gpu *g, const struct iod_tel_gpu_sample *s)
{
	(void)g;
	return s->power_w;
}
static double v_temp(const struct iod_tel_gpu *g, const struct iod_tel_gpu_sample *s)
{
	(void)g;
	return s->temp_c;
}
static double v_nvlink(const struct iod_tel_gpu *g, const struct iod_tel_gpu_sample *s)
{
	(void)g;
	return (double)s->nvlink_bytes_total;
}
static double v_pcie(const struct iod_tel_gpu *g, const struct iod_tel_gpu_sample *s)
{
	(void)g;
	return (double)s->pcie_bytes_total;
}
static double v_stalled(const struct iod_tel_gpu *g, const struct iod_tel_gpu_sample *s)
{
	(void)s;
	return g->stalled ? 1 : 0;
}
static double v_simulated(const struct iod_tel_gpu *g, const struct iod_tel_gpu_sample *s)
{
	(void)s;
	return g->simulated ? 1 : 0;
}

static int ports_prom(const struct iod_tel_node *n, struct iod_buf *b)
{
	return iod_tel_ports_prom(n->node, n->ports, n->ports_n, b);
}

int iod_tel_ports_prom(const char *node, const struct iod_tel_port *ports, uint32_t ports_n,
                       struct iod_buf *b)
{
	static const struct {
		const char *name, *help;
	} pf[] = {
	    {"iod_dp_port_received_packets_total", "Packets the data-plane port received."},
	    {"iod_dp_port_received_bytes_total", "Bytes the data-plane port received."},
	    {"iod_dp_port_sent_packets_total", "Packets the data-plane port sent."},
	    {"iod_dp_port_sent_bytes_total", "Bytes the data-plane port sent."},
	    {"iod_dp_port_dropped_packets_total",
	     "Packets the data-plane port dropped: rx, received with no buffer free; tx, could "
	     "not be sent."},
	};
	int rc = 0;
	if (!ports_n)
		return 0;
	for (size_t f = 0; !rc && f < IOD_ARRAY_LEN(pf); f++) {
		rc = iod_prom_header(b, pf[f].name, "counter", pf[f].help);
		for (uint32_t i = 0; !rc && i < ports_n; i++) {
			const struct iod_tel_port *p = &ports[i];
			char labels[512];
			if (f < 4) {
				if (iod_prom_labels(labels, sizeof(labels), "node", node, "port",
				                    p->name, "kind", p->kind, "iface", p->iface,
				                    (const char *)NULL))
					continue;
				uint64_t v = f == 0   ? p->rx_packets
				             : f == 1 ? p->rx_bytes
				             : f == 2 ? p->tx_packets
				                      : p->tx_bytes;
				rc = iod_prom_u64(b, pf[f].name, labels, v);
				continue;
			}
			for (int d = 0; !rc && d < 2; d++) {
				if (iod_prom_labels(labels, sizeof(labels), "node", node, "port",
				                    p->name, "kind", p->kind, "iface", p->iface,
				                    "direction", d ? "tx" : "rx",
				                    (const char *)NULL))
					continue;
				rc = iod_prom_u64(b, pf[f].name, labels,
				                  d ? p->tx_dropped : p->rx_dropped);
			}
		}
	}
	return rc;
}

int iod_tel_prom(const struct iod_tel_node *n, struct iod_buf *b)
{
	int rc = 0;
	/* iod's own names: base units, ratios, _total counters */
	rc = rc ? rc
	        : gpu_family(b, n, "iod_gpu_utilization_ratio", "gauge",
	                     "Fraction of the last sample period the GPU was busy.", false,
	                     v_util_ratio);
	rc = rc ? rc
	        : gpu_family(b, n, "iod_gpu_memory_used_bytes", "gauge", "GPU memory in use.",
	                     false, v_mem_used);
	rc = rc ? rc
	        : gpu_family(b, n, "iod_gpu_memory_free_bytes", "gauge", "GPU memory free.", false,
	                     v_mem_free);
	rc = rc ? rc
	        : gpu_family(b, n, "iod_gpu_power_watts", "gauge", "GPU board power draw.", false,
	                     v_power);
	rc = rc ? rc
	        : gpu_family(b, n, "iod_gpu_temperature_celsius", "gauge", "GPU core temperature.",
	                     false, v_temp);
	rc = rc ? rc
	        : gpu_family(b, n, "iod_gpu_nvlink_bytes_total", "counter",
	                     "Bytes moved over the GPU's NVLinks (transmit + receive).", false,
	                     v_nvlink);
	rc = rc ? rc
	        : gpu_family(b, n, "iod_gpu_pcie_bytes_total", "counter",
	                     "Bytes moved over the GPU's PCIe link (transmit + receive).", false,
	                     v_pcie);
	rc = rc ? rc
	        : gpu_family(b, n, "iod_gpu_stalled", "gauge",
	                     "1 when the GPU is busy but stalled: utilisation high while its "
	                     "NVLink and PCIe bytes stay flat.",
	                     false, v_stalled);
	rc = rc ? rc
	        : gpu_family(b, n, "iod_gpu_simulated", "gauge",
	                     "1 when the GPU's values are derived from its replica's counters "
	                     "(a simulated node), 0 when read from NVML.",
	                     false, v_simulated);
	/* DCGM-exporter's names, units and labels, for existing dashboards */
	rc = rc ? rc
	        : gpu_family(b, n, "DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", true,
	                     v_util_pct);
	rc = rc ? rc
	        : gpu_family(b, n, "DCGM_FI_DEV_FB_USED", "gauge",
	                     "Framebuffer memory used (in MiB).", true, v_mem_used_mib);
	rc = rc ? rc
	        : gpu_family(b, n, "DCGM_FI_DEV_FB_FREE", "gauge",
	                     "Framebuffer memory free (in MiB).", true, v_mem_free_mib);
	rc = rc ? rc
	        : gpu_family(b, n, "DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", true,
	                     v_power);
	rc = rc ? rc
	        : gpu_family(b, n, "DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", true,
	                     v_temp);

	/* replicas */
	static const struct {
		const char *name, *type, *help;
	} rf[] = {
	    {"iod_replica_cpu_seconds_total", "counter", "CPU time of the replica's processes."},
	    {"iod_replica_cpu_ratio", "gauge", "CPU use over the last sample, in cores."},
	    {"iod_replica_memory_bytes", "gauge", "Resident memory of the replica's processes."},
	    {"iod_replica_restarts_total", "counter", "Times the agent restarted the replica."},
	};
	for (size_t f = 0; !rc && f < IOD_ARRAY_LEN(rf); f++) {
		rc = iod_prom_header(b, rf[f].name, rf[f].type, rf[f].help);
		for (uint32_t i = 0; !rc && i < n->replicas_n; i++) {
			const struct iod_tel_replica *r = &n->replicas[i];
			const struct iod_tel_replica_sample *s = iod_tel_replica_last(r);
			char labels[512];
			if (iod_prom_labels(labels, sizeof(labels), "node", n->node, "replica",
			                    r->name, "service", r->service, (const char *)NULL))
				continue;
			double v = f == 0   ? r->cpu_seconds_total
			           : f == 1 ? (s ? s->cpu_pct / 100.0 : 0)
			           : f == 2 ? (s ? (double)s->mem_bytes : 0)
			                    : (double)r->restarts;
			rc = iod_prom_f64(b, rf[f].name, labels, v);
		}
	}
	rc = rc ? rc : ports_prom(n, b);
	if (!rc) {
		char labels[128];
		iod_prom_labels(labels, sizeof(labels), "node", n->node, (const char *)NULL);
		rc = iod_prom_header(b, "iod_telemetry_samples_total", "counter",
		                     "Sampling rounds the agent's telemetry made.");
		rc = rc ? rc
		        : iod_prom_u64(b, "iod_telemetry_samples_total", labels, n->samples_total);
		rc = rc ? rc
		        : iod_prom_header(b, "iod_telemetry_sample_seconds_total", "counter",
		                          "Time the agent's telemetry spent sampling.");
		rc = rc ? rc
		        : iod_prom_f64(b, "iod_telemetry_sample_seconds_total", labels,
		                       (double)n->sample_ns_total / 1e9);
		rc = rc ? rc
		        : iod_prom_header(b, "iod_telemetry_cpu_seconds_total", "counter",
		                          "CPU time of the agent's telemetry thread.");
		rc = rc ? rc
		        : iod_prom_f64(b, "iod_telemetry_cpu_seconds_total", labels,
		                       (double)n->cpu_ns_total / 1e9);
	}
	return rc;
}

/* ---- JSON ------------------------------------------------------------------- */

static json_t *gpu_sample_json(const struct iod_tel_gpu_sample *s)
{
	return json_pack("{s:I, s:f, s:I, s:I, s:f, s:f, s:I, s:I}", "at_ms", (json_int_t)s->at_ms,
	                 "util_pct", s->util_pct, "mem_used_bytes", (json_int_t)s->mem_used_bytes,
	                 "mem_total_bytes", (json_int_t)s->mem_total_bytes, "power_w", s->power_w,
	                 "temp_c", s->temp_c, "nvlink_bytes_total",
	                 (json_int_t)s->nvlink_bytes_total, "pcie_bytes_total",
	                 (json_int_t)s->pcie_bytes_total);
}

static json_t *gpu_head_json(const struct iod_tel_gpu *g)
{
	return json_pack("{s:i, s:s, s:s, s:s, s:s, s:s, s:b, s:b}", "index", (int)g->index, "uuid",
	                 g->uuid, "pci", g->pci, "model", g->model, "replica", g->replica,
	                 "service", g->service, "simulated", g->simulated, "stalled", g->stalled);
}

/* A data-plane port as a link of the summary (iod top's links view, the
 * live view's link colouring): counters, drops, and rates when rated. */
static json_t *port_json(const struct iod_tel_port *p)
{
	json_t *o =
	    json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I}", "name", p->name, "kind",
	              p->kind, "iface", p->iface, "rx_packets", (json_int_t)p->rx_packets,
	              "rx_bytes", (json_int_t)p->rx_bytes, "tx_packets", (json_int_t)p->tx_packets,
	              "tx_bytes", (json_int_t)p->tx_bytes, "drops",
	              (json_int_t)(p->rx_dropped + p->tx_dropped), "at_ms", (json_int_t)p->at_ms);
	if (o && p->speed_bps)
		json_object_set_new(o, "speed_bps", json_integer((json_int_t)p->speed_bps));
	if (o && p->rated) {
		json_object_set_new(o, "rx_bps", json_real(p->rx_bps));
		json_object_set_new(o, "tx_bps", json_real(p->tx_bps));
	}
	return o;
}

json_t *iod_tel_summary_json(const struct iod_tel_node *n, uint64_t now_ms)
{
	json_t *o = json_pack("{s:s, s:I, s:I}", "node", n->node, "at_ms", (json_int_t)now_ms,
	                      "samples_total", (json_int_t)n->samples_total);
	json_t *gpus = json_array(), *reps = json_array();
	double cpu = 0;
	for (uint32_t i = 0; i < n->gpus_n; i++) {
		const struct iod_tel_gpu *g = &n->gpus[i];
		const struct iod_tel_gpu_sample *s = iod_tel_gpu_last(g);
		json_t *x = gpu_head_json(g);
		if (s) {
			json_t *sj = gpu_sample_json(s);
			json_object_update(x, sj);
			json_decref(sj);
		}
		json_t *h = json_array();
		uint32_t k = g->n < IOD_TEL_SUMMARY_HIST ? g->n : IOD_TEL_SUMMARY_HIST;
		while (k--)
			json_array_append_new(h, json_real(round(gpu_back(g, k)->util_pct)));
		json_object_set_new(x, "util_hist", h);
		json_array_append_new(gpus, x);
	}
	for (uint32_t i = 0; i < n->replicas_n; i++) {
		const struct iod_tel_replica *r = &n->replicas[i];
		const struct iod_tel_replica_sample *s = iod_tel_replica_last(r);
		cpu += s ? s->cpu_pct : 0;
		json_array_append_new(reps,
		                      json_pack("{s:s, s:s, s:i, s:f, s:I, s:f}", "name", r->name,
		                                "service", r->service, "restarts", (int)r->restarts,
		                                "cpu_pct", s ? s->cpu_pct : 0.0, "mem_bytes",
		                                (json_int_t)(s ? s->mem_bytes : 0),
		                                "cpu_seconds_total", r->cpu_seconds_total));
	}
	json_object_set_new(o, "cpu_pct", json_real(cpu));
	json_object_set_new(o, "gpus", gpus);
	json_object_set_new(o, "replicas", reps);
	if (n->ports_n) {
		json_t *links = json_array();
		for (uint32_t i = 0; i < n->ports_n; i++)
			json_array_append_new(links, port_json(&n->ports[i]));
		json_object_set_new(o, "links", links);
	}
	return o;
}

json_t *iod_tel_detail_json(const struct iod_tel_node *n)
{
	json_t *o = json_pack("{s:s, s:I, s:i}", "node", n->node, "samples_total",
	                      (json_int_t)n->samples_total, "ring", IOD_TEL_RING);
	json_t *gpus = json_array(), *reps = json_array();
	for (uint32_t i = 0; i < n->gpus_n; i++) {
		const struct iod_tel_gpu *g = &n->gpus[i];
		json_t *x = gpu_head_json(g), *ss = json_array();
		for (uint32_t k = g->n; k-- > 0;)
			json_array_append_new(ss, gpu_sample_json(gpu_back(g, k)));
		json_object_set_new(x, "samples", ss);
		json_array_append_new(gpus, x);
	}
	for (uint32_t i = 0; i < n->replicas_n; i++) {
		const struct iod_tel_replica *r = &n->replicas[i];
		json_t *ss = json_array();
		for (uint32_t k = r->n; k-- > 0;) {
			const struct iod_tel_replica_sample *s =
			    &r->ring[(r->head + 2 * IOD_TEL_RING - 1 - k) % IOD_TEL_RING];
			json_array_append_new(ss,
			                      json_pack("{s:I, s:f, s:I}", "at_ms",
			                                (json_int_t)s->at_ms, "cpu_pct", s->cpu_pct,
			                                "mem_bytes", (json_int_t)s->mem_bytes));
		}
		json_array_append_new(reps, json_pack("{s:s, s:s, s:i, s:o}", "name", r->name,
		                                      "service", r->service, "restarts",
		                                      (int)r->restarts, "samples", ss));
	}
	json_object_set_new(o, "gpus", gpus);
	json_object_set_new(o, "replicas", reps);
	json_t *ports = json_array();
	for (uint32_t i = 0; i < n->ports_n; i++)
		json_array_append_new(ports, port_json(&n->ports[i]));
	json_object_set_new(o, "ports", ports);
	return o;
}
