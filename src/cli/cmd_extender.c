/*
 * cmd_extender.c: `iod extender`: the kube-scheduler extender (HTTP JSON
 * filter/prioritize) answered by iod's scheduler (src/k8s/extender.c). It
 * serves POST <prefix>/filter and <prefix>/prioritize on a loopback address
 * only (no TLS or authentication yet: run it beside kube-scheduler), or with
 * --answer VERB answers one ExtenderArgs from stdin. docs/kubernetes.md.
 */
#include "cli.h"
#include "iod/k8s.h"

#include <arpa/inet.h>
#include <getopt.h>
#include <microhttpd.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define EXT_BODY_MAX (64u << 20) /* 5,000 full Node objects at ~10 KiB */

static void usage(FILE *f)
{
	fprintf(f, "usage: iod extender [--listen 127.0.0.1:PORT] [--nodes N --model NAME[,...]\n"
	           "                    [--racks R] [--zones Z]] [--answer filter|prioritize]\n\n"
	           "The kube-scheduler extender: POST .../filter and .../prioritize with\n"
	           "ExtenderArgs JSON, answered by iod's scheduler node by node (filter:\n"
	           "ExtenderFilterResult with iod's reason per failed node; prioritize:\n"
	           "HostPriorityList, iod's score scaled to 0..10). A node's model is its label\n"
	           "iod.dev/model (any built-in model), else the modelled node of that name\n"
	           "(--nodes/--model/--racks/--zones as `iod schedule`: n0..nN-1).\n\n"
	           "  --listen ADDR   loopback IPv4:PORT (default 127.0.0.1:7480); no TLS or\n"
	           "                  authentication yet, so nothing else is accepted\n"
	           "  --answer VERB   answer one ExtenderArgs from stdin and exit\n\n"
	           "Exit codes: 0 ok, 1 cannot serve, 2 invalid input. See docs/kubernetes.md.\n");
}

struct ext_srv {
	struct iod_k8s_ext x;
	struct iod_k8s_ext_shape *shapes;
	struct iod_k8s_ext_node *nodes;
};

static int load_shapes(struct ext_srv *s, struct iod_err *e)
{
	const char *const *names = iod_topo_model_names();
	uint32_t n = 0;
	while (names[n])
		n++;
	struct iod_topo_node *t = malloc(sizeof(*t));
	s->shapes = calloc(n ? n : 1, sizeof(*s->shapes));
	if (!t || !s->shapes) {
		free(t);
		return iod_err_set(e, -ENOMEM, "out of memory");
	}
	for (uint32_t i = 0; i < n; i++) {
		int rc = iod_topo_model_load(names[i], t, e);
		rc = rc ? rc : iod_sched_shape_from_topo(t, &s->shapes[s->x.shapes_n].shape, e);
		if (rc)
			continue; /* a model the scheduler cannot take is left out */
		iod_strlcpy(s->shapes[s->x.shapes_n++].model, names[i], IOD_NAME_MAX);
	}
	free(t);
	s->x.shapes = s->shapes;
	return 0;
}

static int model_nodes(struct ext_srv *s, uint32_t nodes, const char *models, uint32_t racks,
                       uint32_t zones, struct iod_err *e)
{
	char buf[512];
	uint32_t ids[8], nm = 0;
	if (!nodes)
		return 0;
	if (!models || iod_strlcpy(buf, models, sizeof(buf)))
		return iod_err_set(e, -EINVAL, "--nodes needs --model NAME[,NAME...]");
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok && nm < 8;
	     tok = strtok_r(NULL, ",", &save)) {
		uint32_t k = 0;
		while (k < s->x.shapes_n && strcmp(s->shapes[k].model, tok))
			k++;
		if (k == s->x.shapes_n)
			return iod_err_set(e, -EINVAL, "--model %s: not a built-in model", tok);
		ids[nm++] = k;
	}
	if (!nm)
		return iod_err_set(e, -EINVAL, "--model: no model named");
	s->nodes = calloc(nodes, sizeof(*s->nodes));
	if (!s->nodes)
		return iod_err_set(e, -ENOMEM, "out of memory");
	racks = racks ? IOD_MIN(racks, nodes) : nodes;
	zones = zones ? IOD_MIN(zones, racks) : 1;
	for (uint32_t i = 0; i < nodes; i++) { /* the layout of `iod schedule` */
		uint32_t r = (uint32_t)((uint64_t)i * racks / nodes);
		snprintf(s->nodes[i].name, IOD_NAME_MAX, "n%u", i);
		snprintf(s->nodes[i].rack, IOD_NAME_MAX, "rack%u", r);
		snprintf(s->nodes[i].zone, IOD_NAME_MAX, "zone%u",
		         (uint32_t)((uint64_t)r * zones / racks));
		s->nodes[i].shape = ids[i % nm];
	}
	s->x.nodes = s->nodes;
	s->x.nodes_n = nodes;
	return 0;
}

/* The answer's body and HTTP status. */
static char *answer(struct ext_srv *s, const char *verb, const char *body, size_t len,
                    unsigned *status, int *rcp)
{
	struct iod_err e = {0};
	json_t *out = NULL;
	int rc = iod_k8s_ext_answer(&s->x, verb, body, len, &out, &e);
	*rcp = rc;
	*status = MHD_HTTP_OK;
	if (rc) { /* filter: the spec's Error field; prioritize has none: 400 */
		out = json_pack("{s:s}", "Error", e.msg);
		*status = rc == -ENOENT            ? MHD_HTTP_NOT_FOUND
		          : strcmp(verb, "filter") ? MHD_HTTP_BAD_REQUEST
		                                   : MHD_HTTP_OK;
	}
	char *text = iod_json_string(out, true);
	json_decref(out);
	return text;
}

struct conn {
	struct iod_buf body;
	bool too_big;
};

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, char *text)
{
	struct MHD_Response *r =
	    MHD_create_response_from_buffer(text ? strlen(text) : 0, text, MHD_RESPMEM_MUST_FREE);
	MHD_add_response_header(r, "Content-Type", "application/json");
	enum MHD_Result ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *data,
                               size_t *size, void **state)
{
	(void)version;
	struct ext_srv *s = cls;
	struct conn *k = *state;
	if (!k) {
		if (!(k = calloc(1, sizeof(*k))))
			return MHD_NO;
		iod_buf_init(&k->body);
		*state = k;
		return MHD_YES;
	}
	if (*size) {
		if (k->body.len + *size > EXT_BODY_MAX || iod_buf_append(&k->body, data, *size))
			k->too_big = true;
		*size = 0;
		return MHD_YES;
	}
	const char *slash = strrchr(url, '/');
	const char *verb = slash ? slash + 1 : url;
	if (strcmp(method, "POST"))
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, strdup("{\"Error\":\"POST only\"}"));
	if (k->too_big)
		return reply(c, MHD_HTTP_CONTENT_TOO_LARGE,
		             strdup("{\"Error\":\"body too large\"}"));
	unsigned status;
	int rc;
	char *text = answer(s, verb, k->body.data ? k->body.data : "", k->body.len, &status, &rc);
	return reply(c, status, text);
}

static void done(void *cls, struct MHD_Connection *c, void **state,
                 enum MHD_RequestTerminationCode why)
{
	(void)cls, (void)c, (void)why;
	struct conn *k = *state;
	if (k) {
		iod_buf_free(&k->body);
		free(k);
	}
	*state = NULL;
}

static volatile sig_atomic_t stop;
static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

static int serve(struct ext_srv *s, const char *listen)
{
	char host[64];
	struct sockaddr_in sa = {.sin_family = AF_INET};
	iod_strlcpy(host, listen, sizeof(host));
	char *colon = strrchr(host, ':');
	if (!colon)
		return iod_cli_fail("extender", IOD_EXIT_INVALID, "--listen %s: want IPv4:PORT",
		                    listen);
	*colon = 0;
	sa.sin_port = htons((uint16_t)atoi(colon + 1));
	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1 || (ntohl(sa.sin_addr.s_addr) >> 24) != 127)
		return iod_cli_fail(
		    "extender", IOD_EXIT_INVALID,
		    "--listen %s: loopback only (127.x.y.z): the extender has no TLS "
		    "or authentication yet",
		    listen);
	struct MHD_Daemon *d = MHD_start_daemon(
	    MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0, NULL, NULL, handler, s,
	    MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa, MHD_OPTION_NOTIFY_COMPLETED, done, NULL,
	    MHD_OPTION_CONNECTION_LIMIT, (unsigned)64, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)10,
	    MHD_OPTION_END);
	if (!d)
		return iod_cli_fail("extender", IOD_EXIT_ERROR,
		                    "cannot listen on %s (port in use?)", listen);
	signal(SIGINT, on_signal);
	signal(SIGTERM, on_signal);
	fprintf(stderr, "iod extender: serving on http://%s (%u known nodes, %u models)\n", listen,
	        s->x.nodes_n, s->x.shapes_n);
	while (!stop)
		pause();
	MHD_stop_daemon(d);
	return IOD_EXIT_OK;
}

static int answer_stdin(struct ext_srv *s, const char *verb)
{
	struct iod_buf b;
	struct iod_err e = {0};
	unsigned status;
	int rc;
	iod_buf_init(&b);
	if (iod_buf_read_file(&b, "/dev/stdin", EXT_BODY_MAX, &e))
		return iod_cli_fail("extender", IOD_EXIT_INVALID, "stdin: %s", e.msg);
	char *text = answer(s, verb, b.data ? b.data : "", b.len, &status, &rc);
	iod_buf_free(&b);
	printf("%s\n", text ? text : "");
	free(text);
	return rc ? IOD_EXIT_INVALID : IOD_EXIT_OK;
}

int cmd_extender(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"listen", required_argument, NULL, 'l'}, {"nodes", required_argument, NULL, 'n'},
	    {"model", required_argument, NULL, 'm'},  {"racks", required_argument, NULL, 'r'},
	    {"zones", required_argument, NULL, 'z'},  {"answer", required_argument, NULL, 'a'},
	    {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
	};
	const char *listen = "127.0.0.1:7480", *models = NULL, *verb = NULL;
	uint32_t nodes = 0, racks = 0, zones = 0;
	struct ext_srv s = {0};
	struct iod_err e = {0};
	int c, rc;
	while ((c = getopt_long(argc, argv, "n:m:", opts, NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			return IOD_EXIT_OK;
		} else if (c == 'l')
			listen = optarg;
		else if (c == 'm')
			models = optarg;
		else if (c == 'a')
			verb = optarg;
		else if (c == 'n' || c == 'r' || c == 'z') {
			unsigned long v = strtoul(optarg, NULL, 10);
			if (v == 0 || v > IOD_SCHED_NODES_MAX)
				return iod_cli_fail("extender", IOD_EXIT_INVALID,
				                    "--nodes/--racks/--zones %s: 1 to %u", optarg,
				                    IOD_SCHED_NODES_MAX);
			*(c == 'n' ? &nodes : c == 'r' ? &racks : &zones) = (uint32_t)v;
		} else
			return IOD_EXIT_INVALID;
	}
	if ((rc = load_shapes(&s, &e)) || (rc = model_nodes(&s, nodes, models, racks, zones, &e)))
		rc = iod_cli_fail("extender", IOD_EXIT_INVALID, "%s", e.msg);
	else
		rc = verb ? answer_stdin(&s, verb) : serve(&s, listen);
	free(s.shapes);
	free(s.nodes);
	return rc;
}
