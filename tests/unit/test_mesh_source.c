/*
 * test_mesh_source.c: the registry sources: the config file source reloads
 * on change, and the control-plane source turns the API's Service, Endpoint
 * and Node objects into a mesh view (served here by a fake API on loopback).
 */
#include "harness.h"
#include "iod/mesh_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

struct fake_api {
	int fd;                  /* listening socket */
	uint16_t port;           /* its port */
	int answers;             /* requests to serve before exiting */
	const char *endpoints;   /* body of /v1/endpoints */
	const char *nodes;       /* body of /v1/nodes (NULL: nodes_body) */
	const char *faults;      /* body of /v1/faults (NULL: a 404, as a server before them) */
	const char *revocations; /* body of /v1/revocations (NULL: none) */
	int rev;                 /* cluster revision in list answers */
	const char *watch[4];    /* bodies of successive /v1/watch answers */
	int watch_status[4];     /* their status codes (0 = 200) */
	int watch_n;             /* watch answers given */
	char watch_req[4][96];   /* the request line of each watch */
};

static const char *services_body =
    "{\"rev\":%d,\"items\":["
    "{\"kind\":\"service\",\"name\":\"param-server\",\"value\":"
    "{\"name\":\"param-server\",\"ports\":[{\"name\":\"http\",\"port\":9000}]}},"
    "{\"kind\":\"service\",\"name\":\"store\",\"value\":{\"name\":\"store\"}}]}";
static const char *nodes_body =
    "{\"rev\":%d,\"items\":[{\"kind\":\"node\",\"name\":\"n1\",\"value\":"
    "{\"rack\":\"r7\"}},{\"kind\":\"node\",\"name\":\"n2\",\"value\":"
    "{\"labels\":{\"rack\":\"r8\"}}}]}";

static void *fake_main(void *arg)
{
	struct fake_api *f = arg;
	for (int i = 0; i < f->answers; i++) {
		char req[2048], body[4096], resp[5000];
		int c = accept(f->fd, NULL, NULL);
		if (c < 0)
			break;
		ssize_t n = recv(c, req, sizeof(req) - 1, 0);
		req[n > 0 ? n : 0] = 0;
		int status = 200;
		if (strstr(req, "GET /v1/watch?") && f->watch_n < 4) {
			int k = f->watch_n++;
			snprintf(f->watch_req[k], sizeof(f->watch_req[k]), "%.*s",
			         (int)strcspn(req, "\r"), req);
			snprintf(body, sizeof(body), "%s", f->watch[k] ? f->watch[k] : "{}");
			if (f->watch_status[k])
				status = f->watch_status[k];
		} else if (strstr(req, "GET /v1/services "))
			snprintf(body, sizeof(body), services_body, f->rev);
		else if (strstr(req, "GET /v1/endpoints "))
			snprintf(body, sizeof(body), f->endpoints, f->rev);
		else if (strstr(req, "GET /v1/nodes "))
			snprintf(body, sizeof(body), f->nodes ? f->nodes : nodes_body, f->rev);
		else if (strstr(req, "GET /v1/revocations ") && f->revocations)
			snprintf(body, sizeof(body), f->revocations, f->rev);
		else if (strstr(req, "GET /v1/faults ") && f->faults)
			snprintf(body, sizeof(body), f->faults, f->rev);
		else if (strstr(req, "GET /v1/faults ")) {
			snprintf(body, sizeof(body), "{\"error\":\"unknown kind\"}");
			status = 404;
		} else
			snprintf(body, sizeof(body), "{}");
		int m =
		    snprintf(resp, sizeof(resp),
		             "HTTP/1.1 %d X\r\ncontent-length: %zu\r\nconnection: close\r\n\r\n%s",
		             status, strlen(body), body);
		if (send(c, resp, (size_t)m, MSG_NOSIGNAL) < 0)
			i = f->answers;
		close(c);
	}
	return NULL;
}

static int fake_start(struct fake_api *f, pthread_t *t)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
	socklen_t l = sizeof(sa);
	f->fd = socket(AF_INET, SOCK_STREAM, 0);
	if (f->fd < 0 || bind(f->fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(f->fd, 8) ||
	    getsockname(f->fd, (struct sockaddr *)&sa, &l))
		return -1;
	f->port = ntohs(sa.sin_port);
	/* accept() gives up after 5 s so a broken test cannot hang the run */
	struct timeval tv = {.tv_sec = 5};
	setsockopt(f->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return pthread_create(t, NULL, fake_main, f);
}

TEST(api_source_builds_view_from_control_plane)
{
	struct fake_api f = {.answers = 13, .rev = 5}; /* 6 + 1 + 6 requests below */
	struct iod_mesh_api_source as;
	struct iod_mesh_registry r;
	struct iod_err e = {0};
	pthread_t t;
	char addr[32];

	f.endpoints =
	    "{\"rev\":%d,\"items\":["
	    "{\"kind\":\"endpoint\",\"name\":\"param-server-0\",\"value\":{\"service\":"
	    "\"param-server\",\"node\":\"n1\",\"address\":\"127.0.0.1:31001\",\"healthy\":true}},"
	    "{\"kind\":\"endpoint\",\"name\":\"param-server-1\",\"value\":{\"service\":"
	    "\"param-server\",\"node\":\"n2\",\"address\":\"127.0.0.1:31002\",\"healthy\":false}},"
	    "{\"kind\":\"endpoint\",\"name\":\"store-0\",\"value\":{\"service\":\"store\","
	    "\"node\":\"n2\",\"address\":\"127.0.0.1:31003\",\"healthy\":true}}]}";
	/* two delays for param-server (the one that ends last wins), an abort,
	 * and one that does not check (skipped) */
	f.faults = "{\"rev\":%d,\"items\":["
	           "{\"name\":\"c1\",\"value\":{\"service\":\"param-server\",\"action\":"
	           "\"delay\",\"delay_ms\":50,\"percent\":20,\"until_ms\":9000}},"
	           "{\"name\":\"c2\",\"value\":{\"service\":\"param-server\",\"action\":"
	           "\"delay\",\"delay_ms\":70,\"until_ms\":8000}},"
	           "{\"name\":\"c3\",\"value\":{\"service\":\"param-server\",\"action\":"
	           "\"abort\",\"status\":503,\"percent\":5,\"until_ms\":7000}},"
	           "{\"name\":\"c4\",\"value\":{\"service\":\"store\",\"action\":"
	           "\"abort\",\"status\":7,\"until_ms\":7000}}]}";
	/* what `iod revoke` wrote: refused as mTLS peers (issue 16) */
	f.revocations = "{\"rev\":%d,\"items\":[{\"name\":\"service.blue.web\",\"value\":{}},"
	                "{\"name\":\"node.n9\",\"value\":{}}]}";
	if (fake_start(&f, &t))
		SKIP("cannot listen on loopback");
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", f.port);
	iod_mesh_api_source_init(&as, addr, "n1");
	CHECK_EQ(iod_mesh_registry_init(&r, 0), 0);
	int rc = as.src.poll(as.src.ctx, 0, &r, &e);
	CHECK_MSG(rc == 0, "poll: %d %s", rc, e.msg);
	CHECK_EQ(r.revoked_n, 2);
	CHECK_STR(r.revoked[0], "node.n9"); /* sorted */
	CHECK_STR(r.revoked[1], "service.blue.web");
	CHECK_EQ(r.svcs_n, 2);
	CHECK_STR(r.node, "n1");
	CHECK_STR(r.rack, "r7");
	const struct iod_mesh_service *ps = iod_mesh_registry_find(&r, "param-server");
	CHECK(ps && ps->mode == IOD_MESH_MODE_HTTP && ps->port == 9000 && ps->eps_n == 2);
	CHECK_STR(ps->eps[0].id, "param-server-0");
	CHECK_STR(ps->eps[1].rack, "r8");
	CHECK(ps->eps[0].healthy && !ps->eps[1].healthy);
	CHECK_EQ(ps->eps[1].port, 31002);
	CHECK_U64(ps->vip4, iod_mesh_vip_for("param-server"));
	CHECK_EQ(ps->fault.delay_pct, 20);
	CHECK_U64(ps->fault.delay_ns, 50 * IOD_NS_PER_MS);
	CHECK_U64(ps->fault.delay_until_ns, 9000 * IOD_NS_PER_MS);
	CHECK_EQ(ps->fault.abort_pct, 5);
	CHECK_EQ(ps->fault.abort_status, 503);
	const struct iod_mesh_service *st = iod_mesh_registry_find(&r, "store");
	CHECK(st && st->mode == IOD_MESH_MODE_TCP && st->port == IOD_MESH_API_DEFAULT_PORT);
	CHECK_EQ(st->fault.abort_pct, 0); /* its fault does not check: skipped */
	/* What agents put in IOD_SVC_<NAME>_ADDR is what this view serves. */
	json_t *sj = NULL;
	char sb[1024];
	struct iod_mesh_svc_addr sa[4];
	uint32_t sn = 0;
	snprintf(sb, sizeof(sb), services_body, 5);
	CHECK_EQ(iod_json_parse(sb, strlen(sb), &sj, &e), 0);
	CHECK_EQ(iod_mesh_api_addrs(sj, sa, 4, &sn), 0);
	CHECK_EQ(sn, 2);
	for (uint32_t i = 0; i < sn && i < r.svcs_n; i++) {
		CHECK_STR(sa[i].name, r.svcs[i].name);
		CHECK_U64(sa[i].vip4, r.svcs[i].vip4);
		CHECK_EQ(sa[i].port, r.svcs[i].port);
	}
	CHECK_EQ(iod_mesh_api_addrs(sj, sa, 1, &sn), -E2BIG);
	json_decref(sj);
	/* Same revision: nothing new (one request). */
	CHECK_EQ(as.src.poll(as.src.ctx, r.version, &r, &e), -EAGAIN);
	/* The revision moves but the view is the same: still nothing new. */
	f.rev = 6;
	CHECK_EQ(as.src.poll(as.src.ctx, r.version, &r, &e), -EAGAIN);
	pthread_join(t, NULL);
	close(f.fd);
	/* No server: an error that names the address. */
	rc = as.src.poll(as.src.ctx, r.version, &r, &e);
	CHECK(rc < 0 && rc != -EAGAIN);
	CHECK_CONTAINS(e.msg, addr);
	iod_mesh_registry_free(&r);
}

/* Issue 16: a proxy learns other nodes' mTLS listeners from their Node
 * objects ("mesh_mtls"), not from flags: an endpoint on another node that
 * has one is reached through it; one on this node, or on a node without
 * one, directly; and none at all when this proxy has no mTLS. */
TEST(api_source_routes_other_nodes_through_their_mtls_listener)
{
	struct fake_api f = {.answers = 12, .rev = 5}; /* 2 x 6; no /v1/faults: 404, none */
	struct iod_mesh_api_source as;
	struct iod_mesh_registry r;
	struct iod_err e = {0};
	pthread_t t;
	char addr[32];

	f.nodes = "{\"rev\":%d,\"items\":[{\"kind\":\"node\",\"name\":\"n1\",\"value\":"
	          "{\"mesh_mtls\":\"127.0.0.1:15040\"}},{\"kind\":\"node\",\"name\":\"n2\","
	          "\"value\":{\"mesh_mtls\":\"127.0.0.1:15041\"}},{\"kind\":\"node\",\"name\":"
	          "\"n3\",\"value\":{}}]}";
	f.endpoints =
	    "{\"rev\":%d,\"items\":["
	    "{\"kind\":\"endpoint\",\"name\":\"store-0\",\"value\":{\"service\":\"store\","
	    "\"node\":\"n1\",\"addr\":\"127.0.0.1\",\"port\":31001,\"healthy\":true}},"
	    "{\"kind\":\"endpoint\",\"name\":\"store-1\",\"value\":{\"service\":\"store\","
	    "\"node\":\"n2\",\"addr\":\"127.0.0.1\",\"port\":31002,\"healthy\":true}},"
	    "{\"kind\":\"endpoint\",\"name\":\"store-2\",\"value\":{\"service\":\"store\","
	    "\"node\":\"n3\",\"addr\":\"127.0.0.1\",\"port\":31003,\"healthy\":true}}]}";
	if (fake_start(&f, &t))
		SKIP("cannot listen on loopback");
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", f.port);
	for (int mtls = 1; mtls >= 0; mtls--) {
		iod_mesh_api_source_init(&as, addr, "n1");
		as.mtls = mtls;
		CHECK_EQ(iod_mesh_registry_init(&r, 0), 0);
		int rc = as.src.poll(as.src.ctx, 0, &r, &e);
		CHECK_MSG(rc == 0, "poll: %d %s", rc, e.msg);
		const struct iod_mesh_service *st = iod_mesh_registry_find(&r, "store");
		CHECK(st && st->eps_n == 3);
		CHECK_STR(st->eps[1].node, "n2");
		CHECK_U64(st->eps[0].mtls_ip4, 0); /* this node's: direct */
		CHECK_U64(st->eps[1].mtls_ip4, mtls ? 0x7f000001 : 0);
		CHECK_EQ(st->eps[1].mtls_port, mtls ? 15041 : 0);
		CHECK_U64(st->eps[2].mtls_ip4, 0); /* a node without a listener */
		iod_mesh_registry_free(&r);
	}
	pthread_join(t, NULL);
	close(f.fd);
}

TEST(file_source_reloads_on_change)
{
	char path[512];
	struct iod_mesh_file_source fs;
	struct iod_mesh_registry r;
	struct iod_err e = {0};
	snprintf(path, sizeof(path), "%s/mesh.json", iod_test_tmpdir());
	FILE *f = fopen(path, "w");
	CHECK(f != NULL);
	fputs("{\"services\":[{\"name\":\"a\",\"port\":1}]}", f);
	fclose(f);
	iod_mesh_file_source_init(&fs, path);
	CHECK_EQ(iod_mesh_registry_init(&r, 0), 0);
	CHECK_EQ(fs.src.poll(fs.src.ctx, 0, &r, &e), 0);
	CHECK_EQ(r.svcs_n, 1);
	uint64_t v = r.version;
	CHECK_EQ(fs.src.poll(fs.src.ctx, v, &r, &e), -EAGAIN);
	/* A new mtime with different content is picked up. */
	CHECK_EQ(iod_test_sh("sleep 0.02; printf '%s' '{\"services\":[{\"name\":\"a\",\"port\":1},"
	                     "{\"name\":\"b\",\"port\":2}]}' > %s && touch -d '+1 second' %s",
	                     "%s", path, path),
	         0);
	CHECK_EQ(fs.src.poll(fs.src.ctx, v, &r, &e), 0);
	CHECK_EQ(r.svcs_n, 2);
	/* A broken file is an error naming the file; the caller keeps its view. */
	CHECK_EQ(iod_test_sh("printf '{' > %s && touch -d '+2 seconds' %s", path, path), 0);
	CHECK(fs.src.poll(fs.src.ctx, r.version, &r, &e) < 0);
	CHECK_CONTAINS(e.msg, "mesh.json");
	iod_mesh_registry_free(&r);
}

/* Names whose preferred VIPs collide get the same distinct VIPs from
 * iod_mesh_vips_assign (what agents compute) as from the registry (what the
 * proxy binds). */
TEST(vips_assign_matches_registry_on_collisions)
{
	static char names[4096][16];
	const char *pair[2] = {NULL, NULL};
	for (uint32_t i = 0; i < 4096 && !pair[1]; i++) {
		snprintf(names[i], sizeof(names[i]), "svc-%u", i);
		for (uint32_t j = 0; j < i && !pair[1]; j++)
			if (iod_mesh_vip_for(names[j]) == iod_mesh_vip_for(names[i])) {
				pair[0] = names[j];
				pair[1] = names[i];
			}
	}
	if (!pair[1])
		SKIP("no colliding pair among 4096 names");
	if (strcmp(pair[0], pair[1]) > 0) {
		const char *t = pair[0];
		pair[0] = pair[1];
		pair[1] = t;
	}
	const char *names3[3] = {pair[0], pair[1], "zz-other"};
	uint16_t ports[3] = {7000, 7000, 7000};
	uint32_t vips[3];
	iod_mesh_vips_assign(names3, ports, 3, vips);
	CHECK(vips[0] != vips[1]);
	CHECK_U64(vips[0], iod_mesh_vip_for(pair[0]));
	struct iod_mesh_registry r;
	struct iod_mesh_service s;
	struct iod_err e = {0};
	CHECK_EQ(iod_mesh_registry_init(&r, 0), 0);
	for (int i = 0; i < 3; i++) {
		iod_mesh_service_defaults(&s);
		snprintf(s.name, sizeof(s.name), "%s", names3[i]);
		s.port = 7000;
		s.vip4 = 0;
		s.eps_n = 0;
		CHECK_EQ(iod_mesh_registry_add(&r, &s, &e), 0);
	}
	iod_mesh_registry_assign_vips(&r);
	for (int i = 0; i < 3; i++)
		CHECK_U64(iod_mesh_registry_find(&r, names3[i])->vip4, vips[i]);
	/* different ports: the same VIP is fine */
	ports[1] = 7001;
	iod_mesh_vips_assign(names3, ports, 3, vips);
	CHECK_U64(vips[0], vips[1]);
	iod_mesh_registry_free(&r);
}

TEST(api_source_watch_pushes_relevant_changes)
{
	struct fake_api f = {.answers = 3, .rev = 5};
	struct iod_mesh_api_source as;
	struct iod_err e = {0};
	pthread_t t;
	char addr[32];
	int stop = 0;

	/* a replica change moves the revision on; an endpoint change is news */
	f.watch[0] = "{\"rev\":7,\"events\":[{\"rev\":7,\"type\":\"put\",\"kind\":\"replica\","
	             "\"name\":\"x-0\",\"value\":{}}]}";
	f.watch[1] = "{\"rev\":8,\"events\":[{\"rev\":8,\"type\":\"put\",\"kind\":\"endpoint\","
	             "\"name\":\"x-0\",\"value\":{\"healthy\":false}}]}";
	f.watch[2] = "{\"error\":\"revision 8 compacted\",\"rev\":900,\"compacted_rev\":100}";
	f.watch_status[2] = 410;
	if (fake_start(&f, &t))
		SKIP("cannot listen on loopback");
	snprintf(addr, sizeof(addr), "127.0.0.1:%u", f.port);
	iod_mesh_api_source_init(&as, addr, "n1");
	CHECK(as.src.wait != NULL);
	/* no view yet: list first, without asking the server */
	CHECK_EQ(as.src.wait(as.src.ctx, 1000, &stop, &e), 0);
	CHECK_EQ(f.watch_n, 0);
	as.watch_rev = 5; /* as a poll at revision 5 leaves it */
	CHECK_EQ(as.src.wait(as.src.ctx, 5000, &stop, &e), 0);
	CHECK_EQ(f.watch_n, 2);
	CHECK_CONTAINS(f.watch_req[0], "GET /v1/watch?rev=5&");
	CHECK_CONTAINS(f.watch_req[1], "GET /v1/watch?rev=7&");
	CHECK_U64(as.watch_rev, 8);
	/* history compacted past our revision: poll (list) again */
	CHECK_EQ(as.src.wait(as.src.ctx, 5000, &stop, &e), 0);
	CHECK_CONTAINS(f.watch_req[2], "GET /v1/watch?rev=8&");
	CHECK_U64(as.watch_rev, 0);
	pthread_join(t, NULL);
	close(f.fd);
	/* the server gone: an error naming it, so the caller falls back to polling */
	as.watch_rev = 8;
	int rc = as.src.wait(as.src.ctx, 200, &stop, &e);
	CHECK(rc < 0 && rc != -ETIMEDOUT);
	CHECK_CONTAINS(e.msg, addr);
	/* a server that never answers: a stop request ends the wait (-EINTR),
	 * not the 60 s watch timeout */
	struct fake_api mute = {0};
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(0x7f000001)};
	socklen_t l = sizeof(sa);
	mute.fd = socket(AF_INET, SOCK_STREAM, 0);
	CHECK(mute.fd >= 0 && !bind(mute.fd, (struct sockaddr *)&sa, sizeof(sa)) &&
	      !listen(mute.fd, 8) && !getsockname(mute.fd, (struct sockaddr *)&sa, &l));
	snprintf(as.server, sizeof(as.server), "127.0.0.1:%u", ntohs(sa.sin_port));
	stop = 1;
	CHECK_EQ(as.src.wait(as.src.ctx, 60000, &stop, &e), -EINTR);
	close(mute.fd);
}
