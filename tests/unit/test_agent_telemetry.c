/*
 * test_agent_telemetry.c: the agent's telemetry listener (src/agent/
 * telemetry.c) beyond loopback is mutual TLS (docs/security.md, "no
 * listener beyond loopback without authentication and TLS"): on 0.0.0.0 it
 * refuses plain HTTP, TLS without a client certificate, a certificate of
 * another CA and a service identity; a user, another node and a server
 * read /metrics; the one HTTP client refuses an agent that is not the node
 * it dialled; a revoked identity is refused (401); a rotated node
 * certificate is what new connections see. On
 * loopback it stays plain HTTP, and without node credentials it serves
 * nothing beyond loopback.
 */
#include "harness.h"
#include "agent/internal.h"
#include "iod/agent_run.h"
#include "iod/http.h"
#include "iod/sec.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static struct iod_err err;

/* A free TCP port on this machine (bound, read, closed). */
static unsigned free_port(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};
	socklen_t l = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) ||
	    getsockname(fd, (struct sockaddr *)&sa, &l)) {
		if (fd >= 0)
			close(fd);
		return 0;
	}
	close(fd);
	return ntohs(sa.sin_port);
}

/* A certificate of kind/name from ca, as PEM. */
static int issue(const struct iod_sec_ca *ca, enum iod_sec_kind kind, const char *name,
                 struct iod_sec_pem *pem)
{
	struct iod_sec_cert_req rq;
	memset(&rq, 0, sizeof(rq));
	rq.id.kind = kind;
	rq.id.role = kind == IOD_SEC_KIND_USER     ? IOD_SEC_ROLE_VIEWER
	             : kind == IOD_SEC_KIND_NODE   ? IOD_SEC_ROLE_NODE
	             : kind == IOD_SEC_KIND_SERVER ? IOD_SEC_ROLE_SERVER
	                                           : IOD_SEC_ROLE_NONE;
	snprintf(rq.id.name, sizeof(rq.id.name), "%s", name);
	snprintf(rq.id.tenant, sizeof(rq.id.tenant), "default");
	rq.server = iod_sec_kind_serves(kind); /* the node's endpoint serves */
	rq.not_before_s = (uint64_t)time(NULL);
	rq.ttl_s = 3600;
	return iod_sec_ca_issue(ca, &rq, pem, &err);
}

/* Client credentials: trust `trust`, present a certificate of kind/name
 * from ca (kind ANONYMOUS: none). */
static struct iod_sec_tls_creds *client(const struct iod_sec_ca *ca, const struct iod_sec_ca *trust,
                                        enum iod_sec_kind kind, const char *name)
{
	struct iod_sec_pem pem = {0};
	struct iod_sec_tls_creds *c = NULL;
	if (kind != IOD_SEC_KIND_ANONYMOUS && issue(ca, kind, name, &pem))
		return NULL;
	iod_sec_tls_creds_new(iod_sec_ca_cert_pem(trust), pem.cert, pem.key, &c, &err);
	iod_sec_pem_free(&pem);
	return c;
}

/* GET path on 127.0.0.1:port with creds (NULL: plain) wanting the server
 * to be node peer: the status, or a negative errno; body kept in *body. */
static int get(unsigned port, struct iod_sec_tls_creds *creds, const char *peer, const char *path,
               char **body)
{
	struct iod_http_conn c;
	struct iod_http_response r = {0};
	char addr[32];
	iod_http_conn_init(&c);
	c.creds = creds;
	c.tls_peer_kind = IOD_SEC_KIND_NODE;
	c.tls_peer_name = peer;
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", port);
	memset(&err, 0, sizeof(err));
	int rc = iod_http_request(&c, addr, "GET", path, NULL, NULL, NULL, 0, 3000, &r, &err);
	iod_http_conn_close(&c);
	int status = r.status;
	if (body)
		*body = r.body, r.body = NULL;
	iod_http_response_free(&r);
	return rc ? rc : status;
}

/* The serial of the certificate the listener on port presents now. */
static int served_serial(unsigned port, struct iod_sec_tls_creds *creds, char *serial, size_t len)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	struct iod_sec_tls *t = NULL;
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		if (fd >= 0)
			close(fd);
		return -1;
	}
	int rc = iod_sec_tls_connect(creds, fd, IOD_SEC_KIND_NODE,
	                             iod_clock_now_ns() / IOD_NS_PER_MS + 3000, &t, &err);
	if (!rc)
		snprintf(serial, len, "%s", iod_sec_tls_peer(t)->serial);
	iod_sec_tls_close(t);
	close(fd);
	return rc;
}

TEST(telemetry_beyond_loopback_is_mutual_tls)
{
	static struct iod_agent_config c; /* large: not on the stack */
	struct iod_sec_ca *ca = NULL, *other = NULL;
	struct iod_sec_pem node = {0};
	struct iod_agent_telemetry *t = NULL;
	char ca_path[600], *body = NULL;
	unsigned port = free_port();
	CHECK(port != 0);
	CHECK_EQ(iod_sec_ca_create("local", (uint64_t)time(NULL), 86400, &ca, &err), 0);
	CHECK_EQ(iod_sec_ca_create("local", (uint64_t)time(NULL), 86400, &other, &err), 0);
	iod_agent_config_default(&c);
	snprintf(c.name, sizeof(c.name), "node-1");
	snprintf(c.data_dir, sizeof(c.data_dir), "%s", iod_test_tmpdir());
	snprintf(c.cert_path, sizeof(c.cert_path), "%s/node.crt", iod_test_tmpdir());
	snprintf(c.key_path, sizeof(c.key_path), "%s/node.key", iod_test_tmpdir());
	snprintf(ca_path, sizeof(ca_path), "%s/ca.crt", iod_test_tmpdir());
	c.telemetry_interval_ns = 100 * IOD_NS_PER_MS;
	c.servers[0] = 0;
	CHECK_EQ(issue(ca, IOD_SEC_KIND_NODE, "node-1", &node), 0);
	CHECK_EQ(iod_sec_write_file(c.cert_path, node.cert, strlen(node.cert), 0600, &err), 0);
	CHECK_EQ(iod_sec_write_file(c.key_path, node.key, strlen(node.key), 0600, &err), 0);
	CHECK_EQ(iod_sec_write_file(ca_path, iod_sec_ca_cert_pem(ca),
	                            strlen(iod_sec_ca_cert_pem(ca)), 0644, &err),
	         0);
	CHECK_MSG(iod_sec_tls_creds_load(ca_path, c.cert_path, c.key_path, &c.creds, &err) == 0,
	          "%s", err.msg);
	snprintf(c.telemetry_addr, sizeof(c.telemetry_addr), "0.0.0.0:%u", port);
	CHECK(iod_agent_telemetry_tls(c.telemetry_addr));
	CHECK(!iod_agent_telemetry_tls("127.0.0.1:9"));
	char url[IOD_ADDR_MAX];
	CHECK_EQ(iod_agent_telemetry_url("10.254.1.1:7600", url, sizeof(url)), 0);
	CHECK_STR(url, "https://10.254.1.1:7600");
	CHECK_EQ(iod_agent_telemetry_url("127.0.0.1:7600", url, sizeof(url)), 0);
	CHECK_STR(url, "http://127.0.0.1:7600");
	CHECK_MSG(iod_agent_telemetry_start(&t, &c, &err) == 0, "%s", err.msg);

	struct iod_sec_tls_creds *nocert = client(ca, ca, IOD_SEC_KIND_ANONYMOUS, "");
	struct iod_sec_tls_creds *foreign = client(other, ca, IOD_SEC_KIND_USER, "mallory");
	struct iod_sec_tls_creds *svc = client(ca, ca, IOD_SEC_KIND_SERVICE, "web");
	struct iod_sec_tls_creds *viewer = client(ca, ca, IOD_SEC_KIND_USER, "alice");
	struct iod_sec_tls_creds *node2 = client(ca, ca, IOD_SEC_KIND_NODE, "node-2");
	struct iod_sec_tls_creds *server = client(ca, ca, IOD_SEC_KIND_SERVER, "1");
	CHECK(nocert && foreign && svc && viewer && node2 && server);

	/* plain HTTP gets no answer at all (a TLS listener) */
	int st = get(port, NULL, NULL, "/metrics", &body);
	CHECK_MSG(st < 0, "plain HTTP got HTTP %d: %.80s", st, body ? body : "");
	free(body), body = NULL;
	/* TLS without a certificate, with another CA's, as a service: refused,
	 * and no telemetry in the answer */
	CHECK_EQ(get(port, nocert, "node-1", "/metrics", &body), 401);
	CHECK_CONTAINS(body, "needs a client certificate of the cluster CA");
	free(body), body = NULL;
	CHECK_EQ(get(port, nocert, "node-1", "/v1/telemetry", &body), 401);
	free(body), body = NULL;
	CHECK_EQ(get(port, foreign, "node-1", "/metrics", &body), 401);
	CHECK_CONTAINS(body, "not signed by");
	free(body), body = NULL;
	CHECK_EQ(get(port, svc, "node-1", "/metrics", &body), 403);
	CHECK(!strstr(body, "iod_telemetry"));
	free(body), body = NULL;
	/* a viewer, another node, a server: the metrics */
	struct iod_sec_tls_creds *ok[] = {viewer, node2, server};
	for (size_t i = 0; i < IOD_ARRAY_LEN(ok); i++) {
		CHECK_EQ(get(port, ok[i], "node-1", "/metrics", &body), 200);
		CHECK_CONTAINS(body, "iod_telemetry_samples_total");
		free(body), body = NULL;
	}
	/* the client dialled node-2: node-1's certificate is refused before
	 * anything is sent */
	CHECK_EQ(get(port, viewer, "node-2", "/metrics", NULL), -EACCES);
	CHECK_CONTAINS(err.msg, "node \"node-1\", not of node-2");

	/* a revoked identity (`iod revoke user alice`, `iod revoke node node-2`)
	 * is refused on its next request, on the connection it already has too;
	 * the others still read; lifting it lets it back in */
	const char *revoked[] = {"user.alice", "node.node-2"};
	iod_agent_telemetry_set_revoked(t, revoked, 2);
	CHECK_EQ(get(port, viewer, "node-1", "/metrics", &body), 401);
	CHECK_CONTAINS(body, "user.alice: its credential is revoked");
	CHECK(!strstr(body, "iod_telemetry"));
	free(body), body = NULL;
	CHECK_EQ(get(port, node2, "node-1", "/v1/telemetry", NULL), 401);
	CHECK_EQ(get(port, server, "node-1", "/metrics", NULL), 200);
	iod_agent_telemetry_set_revoked(t, NULL, 0);
	CHECK_EQ(get(port, viewer, "node-1", "/metrics", NULL), 200);

	/* rotation: the listener presents the new certificate within a few
	 * samples, and still serves */
	char before[64] = "", after[64] = "";
	CHECK_MSG(served_serial(port, viewer, before, sizeof(before)) == 0, "%s", err.msg);
	struct iod_sec_pem next = {0};
	CHECK_EQ(issue(ca, IOD_SEC_KIND_NODE, "node-1", &next), 0);
	CHECK_EQ(iod_sec_write_file(c.cert_path, next.cert, strlen(next.cert), 0600, &err), 0);
	CHECK_EQ(iod_sec_write_file(c.key_path, next.key, strlen(next.key), 0600, &err), 0);
	CHECK_EQ(iod_sec_tls_creds_rotate(c.creds, next.cert, next.key, &err), 0);
	for (int i = 0; i < 50; i++) {
		usleep(100000);
		if (!served_serial(port, viewer, after, sizeof(after)) && strcmp(after, before))
			break;
	}
	CHECK_MSG(after[0] && strcmp(after, before), "still serving %s", before);
	CHECK_EQ(get(port, viewer, "node-1", "/metrics", NULL), 200);
	iod_agent_telemetry_stop(t);

	/* loopback: plain HTTP, as the checkpoint chunk server there */
	snprintf(c.telemetry_addr, sizeof(c.telemetry_addr), "127.0.0.1:%u", port);
	CHECK_EQ(iod_agent_telemetry_start(&t, &c, &err), 0);
	CHECK_EQ(get(port, NULL, NULL, "/metrics", &body), 200);
	CHECK_CONTAINS(body, "iod_telemetry_samples_total");
	free(body), body = NULL;
	iod_agent_telemetry_stop(t);

	/* beyond loopback without node credentials: no listener */
	struct iod_sec_tls_creds *mine = c.creds;
	c.creds = NULL;
	snprintf(c.telemetry_addr, sizeof(c.telemetry_addr), "0.0.0.0:%u", port);
	CHECK_EQ(iod_agent_telemetry_start(&t, &c, &err), 0);
	CHECK_EQ(get(port, NULL, NULL, "/metrics", NULL), -ECONNREFUSED);
	iod_agent_telemetry_stop(t);

	iod_sec_pem_free(&next);
	iod_sec_pem_free(&node);
	struct iod_sec_tls_creds *all[] = {nocert, foreign, svc, viewer, node2, server, mine};
	for (size_t i = 0; i < IOD_ARRAY_LEN(all); i++)
		iod_sec_tls_creds_free(all[i]);
	iod_sec_ca_free(other);
	iod_sec_ca_free(ca);
}
