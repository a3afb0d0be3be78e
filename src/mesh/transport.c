/*
 * transport.c: which path a mesh hop takes under service_mesh.transport
 * (pure: no socket, file or clock; the proxy shell asks, then dials or
 * listens).
 *
 * The value comes from a service's spec when it names one, else from the
 * cluster configuration the node applied (`iod config`), else tcp. Under
 * anything but tcp a hop that stays on this node and whose far end takes
 * AF_UNIX (the proxy's per-service socket, a replica listening on its
 * conventional path) runs over an AF_UNIX stream socket: no TCP/IP stack,
 * no loopback device. Every other hop runs TCP, rdma included: the proxy
 * has no RDMA path (libiod-xfer does; docs/transfer.md).
 */
#include "iod/mesh.h"

#include <errno.h>
#include <string.h>

static const char *const want_names[] = {"", "tcp", "shm", "rdma", "auto"};

int iod_mesh_tp_want_parse(const char *s, enum iod_mesh_tp_want *out)
{
	if (!s || !*s) {
		*out = IOD_MESH_TP_UNSET;
		return 0;
	}
	for (int i = IOD_MESH_TP_TCP; i <= IOD_MESH_TP_AUTO; i++)
		if (!strcmp(s, want_names[i])) {
			*out = (enum iod_mesh_tp_want)i;
			return 0;
		}
	return -EINVAL;
}

const char *iod_mesh_tp_want_name(enum iod_mesh_tp_want w)
{
	return (unsigned)w <= IOD_MESH_TP_AUTO ? want_names[w] : "?";
}

const char *iod_mesh_tp_path_name(enum iod_mesh_tp_path p)
{
	return p == IOD_MESH_PATH_SHM ? "shm" : "tcp";
}

enum iod_mesh_tp_want iod_mesh_tp_effective(enum iod_mesh_tp_want service,
                                            enum iod_mesh_tp_want cluster)
{
	if (service != IOD_MESH_TP_UNSET)
		return service;
	return cluster != IOD_MESH_TP_UNSET ? cluster : IOD_MESH_TP_TCP;
}

enum iod_mesh_tp_path iod_mesh_tp_pick(enum iod_mesh_tp_want want, const struct iod_mesh_hop *hop,
                                       const char **why)
{
	const char *dummy;
	if (!why)
		why = &dummy;
	if (want == IOD_MESH_TP_UNSET || want == IOD_MESH_TP_TCP) {
		*why = "transport tcp";
		return IOD_MESH_PATH_TCP;
	}
	if (!hop->same_node) {
		*why = want == IOD_MESH_TP_RDMA && hop->rdma_device
		           ? "across nodes: the proxy has no RDMA path (tcp)"
		           : "across nodes: tcp";
		return IOD_MESH_PATH_TCP;
	}
	if (!hop->unix_ok) {
		*why = "same node, but the far end takes no AF_UNIX connection";
		return IOD_MESH_PATH_TCP;
	}
	*why = "same node: AF_UNIX";
	return IOD_MESH_PATH_SHM;
}
