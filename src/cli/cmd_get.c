/*
 * cmd_get.c: `iod get KIND [NAME]`: list or show cluster objects.
 *
 * A thin client of GET /v1/<kind>[/<name>]: prints a table per kind, or the
 * API's JSON with -o json. Lists are fetched a page at a time
 * (IOD_API_LIST_PAGE_DEFAULT objects, ?limit=&continue=), so a big list is
 * never one huge answer; -o json joins the pages into one document. --watch
 * follows changes (long-poll watch) from the first page's revision.
 */
#include "ctl.h"
#include "iod/objects.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
	fprintf(f, "usage: iod get nodes|services|replicas|endpoints|policies|configs [NAME]\n"
	           "       iod get checkpoints [SERVICE]\n"
	           "               [-o text|json] [--watch] [--server ADDR]\n\n"
	           "List cluster objects (or show one by NAME). Checkpoints are listed per\n"
	           "SERVICE: step, size, tier, copies holding it, replica health (Ceph's words:\n"
	           "clean, degraded, undersized) and the last scrub (docs/storage.md).\n"
	           "  -o json      the API's JSON (objects with kind, name, rev, value)\n"
	           "  --watch      after listing, print every change as it happens (Ctrl-C "
	           "ends)\n" IOD_CTL_SERVER_HELP);
}

static const char *str(const json_t *v, const char *key)
{
	const char *s = NULL;
	json_t *x = json_object_get(v, key);
	if (json_is_string(x))
		return json_string_value(x)[0] ? json_string_value(x) : "-";
	if (json_is_integer(x)) {
		static char buf[4][32];
		static int at;
		at = (at + 1) % 4;
		snprintf(buf[at], sizeof(buf[at]), "%lld", (long long)json_integer_value(x));
		return buf[at];
	}
	if (json_is_array(x)) {
		static char buf[32];
		snprintf(buf, sizeof(buf), "%zu", json_array_size(x));
		return buf;
	}
	(void)s;
	return "-";
}

/* Exclusive CPUs, else the shared NUMA-local set marked "(shared)". */
static const char *replica_cpus(const struct iod_obj_replica *v, char *buf, size_t len)
{
	if (v->cpus[0])
		return v->cpus;
	if (v->cpu_affinity[0]) {
		snprintf(buf, len, "%s(shared)", v->cpu_affinity);
		return buf;
	}
	return "-";
}

/* The accelerators given to a replica ("mlx5_8,FPGA0"), "-" when none. */
static const char *replica_accs(const struct iod_obj_replica *v, char *buf, size_t len)
{
	size_t i, off = 0;
	const json_t *d;
	buf[0] = 0;
	json_array_foreach(v->accelerator_devices, i, d)
	{
		const char *n = str(d, "os_name");
		if (!strcmp(n, "-"))
			n = str(d, "name");
		int w = snprintf(buf + off, len - off, "%s%s", off ? "," : "", n);
		if (w < 0 || (size_t)w >= len - off)
			break;
		off += (size_t)w;
	}
	return buf[0] ? buf : "-";
}

static const char *dash(const char *s)
{
	return s[0] ? s : "-";
}

/* One Replica row from its typed value. */
static void replica_row(const char *name, const json_t *v)
{
	struct iod_obj_replica *r = malloc(sizeof(*r));
	char cpus[128], accs[128], restarts[16] = "-";
	if (!r)
		return;
	iod_obj_replica_from_json(v, r, NULL);
	if (iod_obj_has(r, IOD_OBJ_REPLICA_RESTARTS))
		snprintf(restarts, sizeof(restarts), "%u", r->restarts);
	printf("%-24s %-16s %-16s %-8s %-20s %-9s %-8s %s\n", name, dash(r->service), dash(r->node),
	       dash(r->gpus), replica_cpus(r, cpus, sizeof(cpus)), dash(r->phase), restarts,
	       replica_accs(r, accs, sizeof(accs)));
	iod_obj_replica_free(r);
	free(r);
}

/* One Endpoint row: ADDRESS and HEALTH from its typed value. */
static void endpoint_row(const char *name, const json_t *v, long long rev)
{
	struct iod_obj_endpoint ep;
	char address[IOD_ADDR_MAX + 8];
	iod_obj_endpoint_from_json(v, &ep, NULL);
	iod_obj_endpoint_address(&ep, address, sizeof(address));
	printf("%-24s %-16s %-22s %-8s %lld\n", name, ep.service[0] ? ep.service : "-",
	       address[0] ? address : "-",
	       iod_obj_has(&ep, IOD_OBJ_ENDPOINT_HEALTHY) ? (ep.healthy ? "healthy" : "unhealthy")
	                                                  : "-",
	       rev);
	iod_obj_endpoint_free(&ep);
}

/* One Checkpoint row from its typed value: copies as held/wanted. */
static void checkpoint_row(const char *name, const json_t *v)
{
	struct iod_obj_checkpoint *c = malloc(sizeof(*c));
	char copies[16];
	uint32_t ok = 0;
	size_t i;
	const json_t *x;
	if (!c)
		return;
	iod_obj_checkpoint_from_json(v, c, NULL);
	json_array_foreach(c->copies, i, x) ok += json_is_true(json_object_get(x, "ok"));
	snprintf(copies, sizeof(copies), "%u/%u", ok, c->replicas);
	printf("%-32s %-16s %-10llu %-12llu %-6s %-7s %-22s %s\n", name, dash(c->service),
	       (unsigned long long)c->step, (unsigned long long)c->bytes, dash(c->tier), copies,
	       dash(c->health), c->scrub[0] ? c->scrub : "never");
	iod_obj_checkpoint_free(c);
	free(c);
}

/* One XferPeer row: whose blob, and how big (not the blob). */
static void xferpeer_row(const char *name, const json_t *v, long long rev)
{
	struct iod_obj_xferpeer *p = malloc(sizeof(*p));
	if (!p)
		return;
	iod_obj_xferpeer_from_json(v, p, NULL);
	const char *md = json_string_value(p->md);
	printf("%-24s %-16s %-8u %-16s %-9s %-24s %-8zu %lld\n", name, dash(p->service), p->ordinal,
	       dash(p->node), dash(p->transport), dash(p->peer), md ? strlen(md) / 2 : 0, rev);
	iod_obj_xferpeer_free(p);
	free(p);
}

/* A Node or Service field as text ("-" when absent or empty). */
#define NODE_STR(F) str(v, iod_obj_key(IOD_OBJ_KIND_NODE, IOD_OBJ_NODE_##F))
#define SERVICE_STR(F) str(v, iod_obj_key(IOD_OBJ_KIND_SERVICE, IOD_OBJ_SERVICE_##F))

static void print_row(enum iod_state_kind k, const json_t *o)
{
	const json_t *v = json_object_get(o, "value");
	const char *name = str(o, "name");
	long long rev = (long long)json_integer_value(json_object_get(o, "rev"));

	switch (k) {
	case IOD_STATE_NODE:
		printf("%-24s %-12s %-6s %-6s %-16s %-8s %lld\n", name, NODE_STR(MODEL),
		       NODE_STR(GPUS), NODE_STR(CPUS), NODE_STR(ADDR),
		       json_integer_value(json_object_get(o, "lease")) ? "yes" : "-", rev);
		break;
	case IOD_STATE_SERVICE:
		printf("%-24s %-9s %-6s %-11s %lld\n", name, SERVICE_STR(REPLICAS),
		       SERVICE_STR(GPU), SERVICE_STR(GENERATION), rev);
		break;
	case IOD_STATE_REPLICA: replica_row(name, v); break;
	case IOD_STATE_ENDPOINT: endpoint_row(name, v, rev); break;
	case IOD_STATE_CHECKPOINT: checkpoint_row(name, v); break;
	case IOD_STATE_XFERPEER: xferpeer_row(name, v, rev); break;
	default: {
		char *t = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER);
		printf("%-24s %-8lld %.80s%s\n", name, rev, t ? t : "",
		       t && strlen(t) > 80 ? "..." : "");
		free(t);
	}
	}
}

static void print_header(enum iod_state_kind k)
{
	switch (k) {
	case IOD_STATE_NODE:
		printf("%-24s %-12s %-6s %-6s %-16s %-8s %s\n", "NAME", "MODEL", "GPUS", "CPUS",
		       "ADDR", "LEASE", "REV");
		break;
	case IOD_STATE_SERVICE:
		printf("%-24s %-9s %-6s %-11s %s\n", "NAME", "REPLICAS", "GPU", "GENERATION",
		       "REV");
		break;
	case IOD_STATE_REPLICA:
		printf("%-24s %-16s %-16s %-8s %-20s %-9s %-8s %s\n", "NAME", "SERVICE", "NODE",
		       "GPUS", "CPUS", "PHASE", "RESTARTS", "ACCEL");
		break;
	case IOD_STATE_ENDPOINT:
		printf("%-24s %-16s %-22s %-8s %s\n", "NAME", "SERVICE", "ADDRESS", "HEALTH",
		       "REV");
		break;
	case IOD_STATE_CHECKPOINT:
		printf("%-32s %-16s %-10s %-12s %-6s %-7s %-22s %s\n", "NAME", "SERVICE", "STEP",
		       "BYTES", "TIER", "COPIES", "HEALTH", "SCRUB");
		break;
	case IOD_STATE_XFERPEER:
		printf("%-24s %-16s %-8s %-16s %-9s %-24s %-8s %s\n", "NAME", "SERVICE", "ORDINAL",
		       "NODE", "TRANSPORT", "PEER", "MD_BYTES", "REV");
		break;
	default: printf("%-24s %-8s %s\n", "NAME", "REV", "VALUE"); break;
	}
}

static int watch_loop(struct iod_api_client *c, enum iod_state_kind k, uint64_t rev, bool json)
{
	char path[128];
	for (;;) {
		struct iod_api_response r;
		snprintf(path, sizeof(path), "/v1/%s?watch=1&rev=%llu&timeout_ms=30000",
		         iod_state_kind_plural(k), (unsigned long long)rev);
		c->timeout_ms = 40000;
		int rc = iod_ctl_call("get", c, "GET", path, NULL, NULL, 0, &r);
		if (rc)
			return rc;
		json_t *ev = json_object_get(r.json, "events"), *x;
		size_t i;
		json_array_foreach(ev, i, x)
		{
			if (json) {
				iod_json_print(stdout, x, true);
			} else if (!strcmp(str(x, "type"), "delete")) {
				printf("DELETED %s (rev %s)\n", str(x, "name"), str(x, "rev"));
			} else {
				json_t *o = json_pack("{s:s, s:O, s:O}", "name", str(x, "name"),
				                      "rev", json_object_get(x, "rev"), "value",
				                      json_object_get(x, "value"));
				print_row(k, o);
				json_decref(o);
			}
		}
		fflush(stdout);
		rev = (uint64_t)json_integer_value(json_object_get(r.json, "rev"));
		iod_api_response_free(&r);
	}
}

int cmd_get(int argc, char **argv)
{
	static const struct option opts[] = {{"output", required_argument, NULL, 'o'},
	                                     {"server", required_argument, NULL, 's'},
	                                     {"watch", no_argument, NULL, 'w'},
	                                     {"help", no_argument, NULL, 'h'},
	                                     {NULL, 0, NULL, 0}};
	static const char *const outs[] = {"text", "json", "wide", NULL};
	enum iod_output out = IOD_OUT_TEXT;
	const char *server = NULL;
	bool watch = false;
	struct iod_api_client c;
	struct iod_api_response r;
	enum iod_state_kind k;
	char path[160];
	int o, rc;

	while ((o = getopt_long(argc, argv, "o:s:wh", opts, NULL)) != -1) {
		switch (o) {
		case 'o':
			if (iod_cli_output("get", optarg, outs, &out))
				return IOD_EXIT_INVALID;
			break;
		case 's': server = optarg; break;
		case 'w': watch = true; break;
		case 'h': usage(stdout); return IOD_EXIT_OK;
		default: usage(stderr); return IOD_EXIT_INVALID;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return IOD_EXIT_INVALID;
	}
	if (iod_state_kind_parse(argv[optind], &k)) {
		const char *names[] = {"nodes",     "services", "replicas",
		                       "endpoints", "policies", "configs"};
		const char *s = iod_suggest(argv[optind], names, IOD_ARRAY_LEN(names));
		return iod_cli_fail("get", IOD_EXIT_INVALID,
		                    "unknown kind \"%s\"%s%s%s; kinds: nodes, "
		                    "services, replicas, endpoints, policies, configs",
		                    argv[optind], s ? " (did you mean " : "", s ? s : "",
		                    s ? "?)" : "");
	}
	const char *name = optind + 1 < argc ? argv[optind + 1] : NULL, *service = NULL;
	if (name && !iod_state_name_valid(name))
		return iod_cli_fail("get", IOD_EXIT_INVALID, "invalid name \"%s\"", name);
	if (k == IOD_STATE_CHECKPOINT) /* the argument is a service: its checkpoints */
		service = name, name = NULL;
	if ((rc = iod_ctl_client("get", server, &c)))
		return rc;
	if (name) {
		snprintf(path, sizeof(path), "/v1/%s/%s", iod_state_kind_name(k), name);
		rc = iod_ctl_call("get", &c, "GET", path, NULL, NULL, 0, &r);
		if (rc) {
			iod_api_client_close(&c);
			return rc;
		}
		if (out == IOD_OUT_JSON) {
			iod_json_print(stdout, r.json, false);
		} else {
			print_header(k);
			print_row(k, r.json);
		}
		iod_api_response_free(&r);
		iod_api_client_close(&c);
		return IOD_EXIT_OK;
	}
	/* a list, page by page (IOD_API_LIST_PAGE_DEFAULT objects each) until
	 * the server gives no "continue"; the revision is the first page's, so
	 * a --watch from it sees every change made while paging */
	char after[IOD_NAME_MAX] = "";
	uint64_t rev = 0;
	size_t shown = 0;
	json_t *all = out == IOD_OUT_JSON ? json_array() : NULL;
	if (out != IOD_OUT_JSON)
		print_header(k);
	for (int page = 0;; page++) {
		snprintf(path, sizeof(path), "/v1/%s?limit=%d%s%s", iod_state_kind_plural(k),
		         IOD_API_LIST_PAGE_DEFAULT, after[0] ? "&continue=" : "", after);
		rc = iod_ctl_call("get", &c, "GET", path, NULL, NULL, 0, &r);
		if (rc) {
			json_decref(all);
			iod_api_client_close(&c);
			return rc;
		}
		if (page == 0)
			rev = (uint64_t)json_integer_value(json_object_get(r.json, "rev"));
		json_t *x, *items = json_object_get(r.json, "items");
		size_t i;
		json_array_foreach(items, i, x)
		{
			if (service && strcmp(str(json_object_get(x, "value"), "service"), service))
				continue;
			shown++;
			if (all)
				json_array_append(all, x);
			else
				print_row(k, x);
		}
		const char *cont = json_string_value(json_object_get(r.json, "continue"));
		bool more = cont && iod_state_name_valid(cont) && strcmp(cont, after) > 0;
		if (more)
			iod_strlcpy(after, cont, sizeof(after));
		iod_api_response_free(&r);
		if (!more)
			break;
		fflush(stdout);
	}
	if (all) {
		json_t *doc = json_pack("{s:I, s:o}", "rev", (json_int_t)rev, "items", all);
		iod_json_print(stdout, doc, false);
		json_decref(doc);
	} else if (!shown) {
		fprintf(stderr, "(no %s%s%s)\n", iod_state_kind_plural(k), service ? " of " : "",
		        service ? service : "");
	}
	if (watch)
		rc = watch_loop(&c, k, rev, out == IOD_OUT_JSON);
	iod_api_client_close(&c);
	return rc;
}
