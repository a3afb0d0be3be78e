/*
 * cmd_agent.c: `iod agent`: run a node agent in the foreground.
 *
 * Today its desired state comes from a manifest file (--manifest), re-read
 * when it changes or on SIGHUP: a standalone node, like kubelet's static
 * pods. The control plane's watch feeds the same reconciler when it lands.
 * Thin shell: parses options, runs iod_agent_run().
 */
#include "cli.h"
#include "iod/agent_run.h"
#include "iod/mesh.h"
#include "iod/net.h"
#include "iod/sec.h"
#include "iod/topo.h"

#include <getopt.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
	fprintf(
	    f,
	    "usage: iod agent [--name NODE] [--data-dir DIR] [--manifest FILE]\n"
	    "                 [--no-sandbox] [--backoff DUR] [--backoff-max DUR]\n"
	    "                 [--stop-grace DUR] [--log-max SIZE] [--log-files N]\n"
	    "                 [--run-for DUR] [--netns-subnet CIDR] [--ckpt-capacity SIZE]\n"
	    "       iod agent --server HOST:PORT[,...] [--name NODE] [--gpus N] [--cpus N]\n"
	    "                 [--model NAME] [--addr IP] [--lease-ttl DUR]\n"
	    "                 [--stateful-grace DUR] [--no-mesh] [--mesh-admin ADDR|off]\n"
	    "                 [--mesh-workers N] [--telemetry-addr ADDR]\n"
	    "                 [--telemetry-interval DUR] [--telemetry-push DUR]\n"
	    "                 [--ca FILE (--cert FILE --key FILE | --join-token T)\n"
	    "                 [--cert-ttl DUR] [--mesh-mtls IP:PORT [--svid-dir DIR]\n"
	    "                 [--svid-ttl DUR] [--mesh-no-vips]]] [...]\n\n"
	    "Run this node's replicas, each in its own sandbox (PID, mount, UTS and IPC\n"
	    "namespaces, cgroup cpu/memory limits, CPU affinity, NUMA policy, GPUs),\n"
	    "restart them with exponential backoff, run their health checks, and\n"
	    "publish every phase change as an event.\n\n"
	    "  --name NODE        node name (default: the host name)\n"
	    "  --data-dir DIR     replicas' logs and data, events.jsonl, status.json\n"
	    "                     (default ~/.local/share/iod)\n"
	    "  --manifest FILE    desired replicas as JSON {\"replicas\": [...]}\n"
	    "                     (docs/runtime.md); re-read when it changes\n"
	    "  --no-sandbox       plain child processes (no namespaces)\n"
	    "  --backoff DUR      first restart delay (default 100ms), doubling up to\n"
	    "  --backoff-max DUR  (default 10s)\n"
	    "  --stop-grace DUR   SIGTERM to SIGKILL (default 5s)\n"
	    "  --log-max SIZE     rotate a replica's log past SIZE (default 10MiB)\n"
	    "  --log-files N      rotated logs kept per replica (default 3)\n"
	    "  --run-for DUR      stop after DUR (tests, demos)\n"
	    "  --ckpt-capacity SIZE  checkpoint capacity of each stateful replica of a spec\n"
	    "                     with storage:, split by its tiers' quotas (default 1GiB;\n"
	    "                     docs/storage.md)\n"
	    "  --netns-subnet CIDR  give each replica its own network namespace with a\n"
	    "                     veth pair and an address from CIDR (e.g. 10.213.0.0/24;\n"
	    "                     the first host address is the node's bridge, the\n"
	    "                     gateway); root only, else replicas share the node's\n"
	    "                     network (the default) with a warning\n"
	    "  --overlay DEV      with --netns-subnet and --server: no bridge; the agent's\n"
	    "                     data plane switches the replicas' veths (AF_PACKET) and\n"
	    "                     carries other nodes' over VXLAN on underlay device DEV\n"
	    "                     (its address is the VTEP; docs/network.md)\n"
	    "  --overlay-gw-mac MAC  the underlay next hop's MAC (VXLAN's outer destination)\n"
	    "  --server ADDRS     follow the control plane (instead of --manifest):\n"
	    "                     register this node under a lease, run the replicas\n"
	    "                     placed on it, report phases and endpoints\n"
	    "  --gpus N           simulate a generic node with N GPUs (generic-N model)\n"
	    "  --cpus N           CPUs it offers (default: this machine's)\n"
	    "  --model NAME       simulate a built-in hardware model (`iod topo --list-models`)\n"
	    "  --xml FILE         simulate the machine of an hwloc XML file\n"
	    "                     (default: discover this machine with hwloc)\n"
	    "  --addr IP          address replicas are reached at (default 127.0.0.1)\n"
	    "  --lease-ttl DUR    node lease (default 2s): lost when not renewed in time\n"
	    "  --stateful-grace DUR  after a node is lost, wait this long before moving\n"
	    "                     its stateful replicas (default 30s)\n"
	    "  --mesh, --no-mesh  host this node's service-mesh proxy (default on with\n"
	    "                     --server): every service on its loopback VIP, which\n"
	    "                     replicas find in IOD_SVC_<NAME>_ADDR (docs/mesh.md)\n"
	    "  --mesh-admin ADDR  the proxy's /metrics /spans /registry endpoint\n"
	    "                     (default 127.0.0.1:15000, loopback only; off = none)\n"
	    "  --mesh-workers N   the proxy's threads (default 1)\n"
	    "  --telemetry-addr ADDR  serve GPU and replica telemetry on IP:PORT: /metrics\n"
	    "                     (iod_ and DCGM names) and /v1/telemetry (the rings);\n"
	    "                     beyond 127.x over HTTPS with the node's certificate,\n"
	    "                     to clients with a certificate of the cluster CA\n"
	    "  --telemetry-interval DUR  sampling period (default 1s, at least 100ms;\n"
	    "                     0 = no telemetry)\n"
	    "  --telemetry-push DUR  send the node's summary to the control plane this\n"
	    "                     often (default 5s; docs/observability.md)\n"
	    "  --ca FILE          the cluster CA certificate: talk HTTPS to servers that run\n"
	    "                     with --pki (docs/security.md)\n"
	    "  --cert FILE, --key FILE  this node's certificate (spiffe://CLUSTER/node/NAME)\n"
	    "                     and key (0600); --name defaults to the certificate's\n"
	    "  --join-token T     join with a token (`iod token create --role node --ttl 1h`):\n"
	    "                     exchanged over HTTPS for a node certificate, kept in\n"
	    "                     DATA_DIR/node.crt and node.key (a restart needs no token)\n"
	    "  --cert-ttl DUR     life to ask for the node certificate (default 24h, at least\n"
	    "                     10s); it is renewed at two thirds of it, with no restart\n"
	    "  --mesh-mtls IP:PORT  the proxy accepts other nodes' proxies here over mutual\n"
	    "                     TLS (with --ca/--cert or --join-token); the Node object\n"
	    "                     names it, so other proxies reach this node's replicas\n"
	    "                     through it. The agent issues and rotates an SVID\n"
	    "                     (spiffe://CLUSTER/ns/TENANT/svc/SERVICE) for each service\n"
	    "                     with a replica here (docs/security.md)\n"
	    "  --svid-dir DIR     where those SVIDs go (default DATA_DIR/svid; 0700, keys 0600)\n"
	    "  --svid-ttl DUR     their life (default 1h, at least 10s); renewed at 2/3\n"
	    "  --mesh-no-vips     the proxy serves no VIPs, only --mesh-mtls (nodes sharing a\n"
	    "                     host's loopback with the one that serves them: iod up)\n"
	    "  --mesh-unix DIR    AF_UNIX sockets of service_mesh.transport shm (default\n"
	    "                     DATA_DIR/mesh; replicas get IOD_MESH_UNIX_DIR; docs/mesh.md)\n\n"
	    "Stops every replica on SIGTERM/SIGINT. See `iod logs`, `iod events`.\n");
}

static int dur(const char *opt, const char *v, uint64_t *ns)
{
	struct iod_err e = {0};
	if (iod_parse_duration(v, ns, &e))
		return iod_cli_fail("agent", IOD_EXIT_INVALID, "%s %s: %s", opt, v, e.msg);
	return 0;
}

/* The hardware this node registers: a model, an XML file, generic-N, or this machine. */
static int topology(struct iod_agent_config *c, const char *xml, bool gpus_set)
{
	struct iod_topo_node *n = calloc(1, sizeof(*n));
	struct iod_err e = {0};
	int rc;
	if (!n)
		return iod_cli_fail("agent", IOD_EXIT_ERROR, "out of memory");
	if (c->model[0])
		rc = iod_topo_model_load(c->model, n, &e);
	else if (xml)
		rc = iod_topo_load_xml_file(xml, n, &e);
	else if (gpus_set)
		rc = iod_topo_model_generic(c->gpus, n, &e);
	else
		rc = iod_topo_discover(n, &e);
	if (rc && (c->model[0] || xml || gpus_set)) {
		free(n);
		return iod_cli_fail("agent", IOD_EXIT_INVALID, "%s", e.msg);
	}
	if (rc) {
		IOD_WARN("agent", "topology discovery failed (%s): registering %u CPUs, no GPUs",
		         e.msg, c->cpus);
	} else {
		c->gpus = iod_topo_gpu_count(n);
		c->cpus = n->pus ? n->pus : c->cpus;
		if (!c->model[0])
			snprintf(c->model, sizeof(c->model), "%s",
			         n->model[0] ? n->model : (xml ? "xml" : "host"));
		c->topology = iod_topo_to_json(n);
	}
	free(n);
	return 0;
}

/*
 * The node's credentials for HTTPS to the servers: the CA and a node
 * certificate naming this node (--name defaults to the certificate's).
 */
static int credentials(struct iod_agent_config *c, const char *ca, bool name_set)
{
	struct iod_sec_cert_info info;
	struct iod_err e = {0};
	char *pem = NULL;

	if (!ca && !c->cert_path[0] && !c->key_path[0])
		return 0;
	if (!ca || !c->cert_path[0] || !c->key_path[0])
		return iod_cli_fail("agent", IOD_EXIT_INVALID,
		                    "--ca, --cert and --key go together (the CA to trust, this "
		                    "node's certificate and its key)");
	if (!c->servers[0])
		return iod_cli_fail("agent", IOD_EXIT_INVALID,
		                    "--ca/--cert/--key are for --server (a manifest agent talks "
		                    "to no server)");
	if (iod_sec_read_file(c->cert_path, false, &pem, &e) ||
	    iod_sec_cert_inspect(pem, strlen(pem), &info, &e)) {
		free(pem);
		return iod_cli_fail("agent", IOD_EXIT_INVALID, "--cert: %s", e.msg);
	}
	free(pem);
	if (info.id.kind != IOD_SEC_KIND_NODE)
		return iod_cli_fail("agent", IOD_EXIT_INVALID,
		                    "--cert %s is a %s certificate, not a node's", c->cert_path,
		                    iod_sec_kind_name(info.id.kind));
	if (!name_set)
		snprintf(c->name, sizeof(c->name), "%s", info.id.name);
	else if (strcmp(c->name, info.id.name))
		return iod_cli_fail("agent", IOD_EXIT_INVALID,
		                    "--cert %s is node %s's; this agent is --name %s", c->cert_path,
		                    info.id.name, c->name);
	if (iod_sec_tls_creds_load(ca, c->cert_path, c->key_path, &c->creds, &e))
		return iod_cli_fail("agent", IOD_EXIT_INVALID, "%s", e.msg);
	return 0;
}

int cmd_agent(int argc, char **argv)
{
	struct iod_agent_config c;
	struct iod_err e = {0};
	static const struct option opts[] = {{"name", required_argument, 0, 'n'},
	                                     {"data-dir", required_argument, 0, 'd'},
	                                     {"manifest", required_argument, 0, 'm'},
	                                     {"no-sandbox", no_argument, 0, 'S'},
	                                     {"backoff", required_argument, 0, 'b'},
	                                     {"backoff-max", required_argument, 0, 'B'},
	                                     {"stop-grace", required_argument, 0, 'g'},
	                                     {"log-max", required_argument, 0, 'l'},
	                                     {"log-files", required_argument, 0, 'L'},
	                                     {"run-for", required_argument, 0, 'r'},
	                                     {"server", required_argument, 0, 's'},
	                                     {"gpus", required_argument, 0, 'G'},
	                                     {"cpus", required_argument, 0, 'C'},
	                                     {"model", required_argument, 0, 'M'},
	                                     {"addr", required_argument, 0, 'A'},
	                                     {"lease-ttl", required_argument, 0, 'T'},
	                                     {"stateful-grace", required_argument, 0, 'R'},
	                                     {"xml", required_argument, 0, 'X'},
	                                     {"mesh", no_argument, 0, 'Y'},
	                                     {"no-mesh", no_argument, 0, 'N'},
	                                     {"mesh-admin", required_argument, 0, 'P'},
	                                     {"mesh-workers", required_argument, 0, 'W'},
	                                     {"netns-subnet", required_argument, 0, 'U'},
	                                     {"overlay", required_argument, 0, 1201},
	                                     {"overlay-gw-mac", required_argument, 0, 1202},
	                                     {"telemetry-addr", required_argument, 0, 1001},
	                                     {"telemetry-interval", required_argument, 0, 1002},
	                                     {"telemetry-push", required_argument, 0, 1003},
	                                     {"ca", required_argument, 0, 1101},
	                                     {"cert", required_argument, 0, 1102},
	                                     {"key", required_argument, 0, 1103},
	                                     {"join-token", required_argument, 0, 1104},
	                                     {"cert-ttl", required_argument, 0, 1105},
	                                     {"mesh-mtls", required_argument, 0, 1106},
	                                     {"svid-dir", required_argument, 0, 1107},
	                                     {"svid-ttl", required_argument, 0, 1108},
	                                     {"mesh-no-vips", no_argument, 0, 1109},
	                                     {"ckpt-capacity", required_argument, 0, 1110},
	                                     {"mesh-unix", required_argument, 0, 1111},
	                                     {"help", no_argument, 0, 'h'},
	                                     {0, 0, 0, 0}};
	uint64_t ns;
	char *end;
	const char *xml = NULL, *ca = NULL, *join = NULL;
	bool gpus_set = false, name_set = false;
	int o, rc;

	if (iod_cli_wants_help(argc, argv)) {
		usage(stdout);
		return 0;
	}
	iod_agent_config_default(&c);
	while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (o) {
		case 'n':
			name_set = true;
			if (iod_strlcpy(c.name, optarg, sizeof(c.name)) || !optarg[0])
				return iod_cli_fail("agent", IOD_EXIT_INVALID,
				                    "--name must be 1..%d characters",
				                    IOD_NAME_MAX - 1);
			break;
		case 'd':
			if (iod_strlcpy(c.data_dir, optarg, sizeof(c.data_dir)))
				return iod_cli_fail("agent", IOD_EXIT_INVALID,
				                    "--data-dir too long");
			break;
		case 'm':
			if (iod_strlcpy(c.manifest, optarg, sizeof(c.manifest)))
				return iod_cli_fail("agent", IOD_EXIT_INVALID,
				                    "--manifest too long");
			break;
		case 'S': c.use_namespaces = false; break;
		case 'b':
			if ((rc = dur("--backoff", optarg, &c.rec.backoff_base_ns)))
				return rc;
			break;
		case 'B':
			if ((rc = dur("--backoff-max", optarg, &c.rec.backoff_max_ns)))
				return rc;
			break;
		case 'g':
			if ((rc = dur("--stop-grace", optarg, &c.rec.stop_grace_ns)))
				return rc;
			break;
		case 'r':
			if ((rc = dur("--run-for", optarg, &c.run_for_ns)))
				return rc;
			break;
		case 'l':
			if (iod_parse_size(optarg, &c.log_max_bytes, &e) || !c.log_max_bytes)
				return iod_cli_fail("agent", IOD_EXIT_INVALID, "--log-max %s: %s",
				                    optarg, e.msg[0] ? e.msg : "must be > 0");
			break;
		case 1110:
			if (iod_parse_size(optarg, &c.ckpt_capacity_bytes, &e) ||
			    !c.ckpt_capacity_bytes)
				return iod_cli_fail("agent", IOD_EXIT_INVALID,
				                    "--ckpt-capacity %s: %s", optarg,
				                    e.msg[0] ? e.msg : "must be > 0");
			break;
		case 'L': {
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || v > 99)
				return iod_cli_fail("agent", IOD_EXIT_INVALID,
				                    "--log-files must be 0..99, not %s", optarg);
			c.log_files = (uint32_t)v;
			break;
		}
		case 's':
			if (iod_strlcpy(c.servers, optarg, sizeof(c.servers)))
				return iod_cli_fail("agent", IOD_EXIT_INVALID, "--server too long");
			break;
		case 'G':
		case 'C': {
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || !optarg[0] || v > IOD_BITMAP_BITS)
				return iod_cli_fail(
				    "agent", IOD_EXIT_INVALID, "--%s must be 0..%d, not %s",
				    o == 'G' ? "gpus" : "cpus", IOD_BITMAP_BITS, optarg);
			*(o == 'G' ? &c.gpus : &c.cpus) = (uint32_t)v;
			gpus_set |= o == 'G';
			break;
		}
		case 'M': snprintf(c.model, sizeof(c.model), "%s", optarg); break;
		case 'X': xml = optarg; break;
		case 'A': snprintf(c.addr, sizeof(c.addr), "%s", optarg); break;
		case 1201: snprintf(c.overlay_dev, sizeof(c.overlay_dev), "%s", optarg); break;
		case 1202: {
			uint8_t mac[6];
			if (iod_net_mac_parse(optarg, mac))
				return iod_cli_fail("agent", IOD_EXIT_INVALID,
				                    "--overlay-gw-mac %s: not a MAC address",
				                    optarg);
			memcpy(c.overlay_gw_mac, mac, 6);
			c.overlay_gw_mac_set = true;
			break;
		}
		case 'U': {
			struct iod_agent_ipam *m = calloc(1, sizeof(*m));
			int bad = !m || iod_agent_ipam_init(m, optarg, &e);
			free(m);
			if (bad)
				return iod_cli_fail("agent", IOD_EXIT_INVALID, "--netns-subnet: %s",
				                    e.msg[0] ? e.msg : "out of memory");
			snprintf(c.netns_subnet, sizeof(c.netns_subnet), "%s", optarg);
			break;
		}
		case 'T':
			if ((rc = dur("--lease-ttl", optarg, &ns)))
				return rc;
			c.lease_ttl_ms = ns / IOD_NS_PER_MS;
			if (c.lease_ttl_ms < 10)
				return iod_cli_fail("agent", IOD_EXIT_INVALID,
				                    "--lease-ttl must be >= 10ms");
			break;
		case 'R':
			if ((rc = dur("--stateful-grace", optarg, &ns)))
				return rc;
			c.stateful_grace_ms = ns / IOD_NS_PER_MS;
			break;
		case 'Y': c.mesh = true; break;
		case 'N': c.mesh = false; break;
		case 'P': {
			uint32_t ip;
			uint16_t port;
			if (!strcmp(optarg, "off")) {
				c.mesh_admin[0] = 0;
				break;
			}
			if (iod_mesh_addr_parse(optarg, &ip, &port, true) ||
			    iod_strlcpy(c.mesh_admin, optarg, sizeof(c.mesh_admin)))
				return iod_cli_fail("agent", IOD_EXIT_INVALID,
				                    "--mesh-admin %s: want IP:PORT or off", optarg);
			break;
		}
		case 'W': {
			unsigned long v = strtoul(optarg, &end, 10);
			if (*end || !optarg[0] || !v || v > IOD_MESH_WORKERS_MAX)
				return iod_cli_fail("agent", IOD_EXIT_INVALID,
				                    "--mesh-workers must be 1..%d, not %s",
				                    IOD_MESH_WORKERS_MAX, optarg);
			c.mesh_workers = (uint32_t)v;
			break;
		}
		case 1101: ca = optarg; break;
		case 1104: join = optarg; break;
		case 1105:
			if ((rc = dur("--cert-ttl", optarg, &ns)))
				return rc;
			c.cert_ttl_s = ns / IOD_NS_PER_S;
			if (c.cert_ttl_s < IOD_SEC_CERT_TTL_MIN_S)
				return iod_cli_fail("agent", IOD_EXIT_INVALID,
				                    "--cert-ttl must be at least %ds",
				                    IOD_SEC_CERT_TTL_MIN_S);
			break;
		case 1106: {
			uint32_t ip;
			uint16_t port;
			if (iod_mesh_addr_parse(optarg, &ip, &port, true) ||
			    iod_strlcpy(c.mesh_mtls, optarg, sizeof(c.mesh_mtls)))
				return iod_cli_fail("agent", IOD_EXIT_INVALID,
				                    "--mesh-mtls %s: want IP:PORT", optarg);
			break;
		}
		case 1107:
			if (iod_strlcpy(c.svid_dir, optarg, sizeof(c.svid_dir)))
				return iod_cli_fail("agent", IOD_EXIT_INVALID,
				                    "--svid-dir too long");
			break;
		case 1108:
			if ((rc = dur("--svid-ttl", optarg, &ns)))
				return rc;
			c.svid_ttl_s = ns / IOD_NS_PER_S;
			if (c.svid_ttl_s < IOD_SEC_CERT_TTL_MIN_S)
				return iod_cli_fail("agent", IOD_EXIT_INVALID,
				                    "--svid-ttl must be at least %ds",
				                    IOD_SEC_CERT_TTL_MIN_S);
			break;
		case 1109: c.mesh_no_vips = true; break;
		case 1111:
			if (iod_strlcpy(c.mesh_unix_dir, optarg, sizeof(c.mesh_unix_dir)))
				return iod_cli_fail("agent", IOD_EXIT_INVALID,
				                    "--mesh-unix too long");
			break;
		case 1102:
		case 1103:
			if (iod_strlcpy(o == 1102 ? c.cert_path : c.key_path, optarg,
			                sizeof(c.cert_path)))
				return iod_cli_fail("agent", IOD_EXIT_INVALID, "--%s too long",
				                    o == 1102 ? "cert" : "key");
			break;
		case 1001: {
			uint32_t ip;
			uint16_t port;
			if (iod_mesh_addr_parse(optarg, &ip, &port, true) ||
			    iod_strlcpy(c.telemetry_addr, optarg, sizeof(c.telemetry_addr)))
				return iod_cli_fail("agent", IOD_EXIT_INVALID,
				                    "--telemetry-addr %s: want IP:PORT", optarg);
			break;
		}
		case 1002:
			if (dur("--telemetry-interval", optarg, &c.telemetry_interval_ns))
				return IOD_EXIT_INVALID;
			if (c.telemetry_interval_ns &&
			    c.telemetry_interval_ns < IOD_TEL_INTERVAL_MIN_MS * IOD_NS_PER_MS)
				return iod_cli_fail("agent", IOD_EXIT_INVALID,
				                    "--telemetry-interval %s is below %dms", optarg,
				                    IOD_TEL_INTERVAL_MIN_MS);
			break;
		case 1003:
			if (dur("--telemetry-push", optarg, &c.telemetry_push_ns))
				return IOD_EXIT_INVALID;
			break;
		default: usage(stderr); return IOD_EXIT_INVALID;
		}
	}
	if (optind < argc)
		return iod_cli_fail("agent", IOD_EXIT_INVALID, "unexpected argument %s",
		                    argv[optind]);
	if (join) {
		if (!ca || !c.servers[0] || c.cert_path[0] || c.key_path[0])
			return iod_cli_fail("agent", IOD_EXIT_INVALID,
			                    "--join-token needs --server and --ca (the cluster CA "
			                    "to trust), and no --cert/--key (it makes them)");
		if (iod_agent_bootstrap(&c, ca, join, &e))
			return iod_cli_fail(
			    "agent", e.code == -EACCES ? IOD_EXIT_INVALID : IOD_EXIT_UNAVAILABLE,
			    "%s", e.msg);
	} else if ((rc = credentials(&c, ca, name_set))) {
		return rc;
	}
	if (c.rec.backoff_max_ns < c.rec.backoff_base_ns || !c.rec.backoff_base_ns)
		return iod_cli_fail("agent", IOD_EXIT_INVALID,
		                    "--backoff must be > 0 and not above --backoff-max");
	if (c.servers[0] && c.manifest[0])
		return iod_cli_fail(
		    "agent", IOD_EXIT_INVALID,
		    "--server and --manifest are exclusive: the desired state comes "
		    "from one of them");
	if ((c.model[0] != 0) + (xml != NULL) + gpus_set > 1)
		return iod_cli_fail(
		    "agent", IOD_EXIT_INVALID,
		    "--model, --xml and --gpus are exclusive: each names the hardware");
	if (c.servers[0] && (rc = topology(&c, xml, gpus_set)))
		return rc;
	if (c.mesh_mtls[0] && (!c.creds || !c.servers[0] || !c.mesh))
		return iod_cli_fail("agent", IOD_EXIT_INVALID,
		                    "--mesh-mtls needs --server, the node's credentials (--ca with "
		                    "--cert/--key or --join-token) and the mesh");
	if (c.telemetry_addr[0] && c.telemetry_interval_ns &&
	    iod_agent_telemetry_tls(c.telemetry_addr) && !c.creds)
		return iod_cli_fail("agent", IOD_EXIT_INVALID,
		                    "--telemetry-addr %s is not a loopback address: serving "
		                    "telemetry there without TLS and authentication would let "
		                    "anyone on that network read it; give the node's credentials "
		                    "(--ca with --cert/--key, or --join-token), or a 127.x address",
		                    c.telemetry_addr);
	if (!c.svid_dir[0] && snprintf(c.svid_dir, sizeof(c.svid_dir), "%s/svid", c.data_dir) >=
	                          (int)sizeof(c.svid_dir))
		return iod_cli_fail("agent", IOD_EXIT_INVALID, "--data-dir too long");
	if (!c.mesh_unix_dir[0] && snprintf(c.mesh_unix_dir, sizeof(c.mesh_unix_dir), "%s/mesh",
	                                    c.data_dir) >= (int)sizeof(c.mesh_unix_dir))
		return iod_cli_fail("agent", IOD_EXIT_INVALID, "--data-dir too long");
	iod_fd_limit_raise(NULL); /* a daemon: the hard limit of descriptors, not 1024 */
	rc = iod_agent_run(&c, &e) ? iod_cli_fail("agent", IOD_EXIT_ERROR, "%s", e.msg) : 0;
	json_decref(c.topology);
	iod_sec_tls_creds_free(c.creds);
	return rc;
}
