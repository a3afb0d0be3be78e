/*
 * peer.c: who is on the other end of a local TCP connection: the uid (and
 * cgroup) that owns the peer socket, from the kernel's socket table
 * (NETLINK_SOCK_DIAG, the interface `ss -e` uses).
 *
 * The node's proxy serves every replica of the node on shared loopback
 * VIPs, so the address a connection comes from says nothing about which
 * replica opened it. The owner of the peer socket does: replicas run
 * under uids of their own (the sandbox's per-replica uids), and the kernel
 * records the uid and cgroup of every socket; a replica cannot forge
 * either. The proxy maps them to the replica's service identity (the
 * spiffe:// id it then presents upstream) once per connection.
 *
 * Shell code: one netlink round trip per lookup, on the accepting worker.
 */
#include "internal.h"

#include <arpa/inet.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

int iod_mesh_peer_owner(int fd, struct iod_mesh_peer *out, struct iod_err *e)
{
	struct sockaddr_in local, peer;
	socklen_t ll = sizeof(local), pl = sizeof(peer);
	struct {
		struct nlmsghdr nh;
		struct inet_diag_req_v2 r;
	} req;
	char buf[8192];
	int s, rc = -ENOENT;

	memset(out, 0, sizeof(*out));
	if (getsockname(fd, (struct sockaddr *)&local, &ll) ||
	    getpeername(fd, (struct sockaddr *)&peer, &pl))
		return iod_err_set(e, -errno, "peer of fd %d: %s", fd, strerror(errno));
	if (local.sin_family != AF_INET || peer.sin_family != AF_INET)
		return iod_err_set(e, -EAFNOSUPPORT, "peer lookup: IPv4 connections only");
	s = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
	if (s < 0)
		return iod_err_set(e, -errno, "sock_diag socket: %s", strerror(errno));
	struct timeval tv = {.tv_sec = 0, .tv_usec = 200000};
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	memset(&req, 0, sizeof(req));
	req.nh.nlmsg_len = sizeof(req);
	req.nh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
	req.nh.nlmsg_flags = NLM_F_REQUEST;
	req.r.sdiag_family = AF_INET;
	req.r.sdiag_protocol = IPPROTO_TCP;
	req.r.idiag_states = ~0u;
	/* the peer's socket: its source is our peer, its destination us */
	req.r.id.idiag_sport = peer.sin_port;
	req.r.id.idiag_dport = local.sin_port;
	req.r.id.idiag_src[0] = peer.sin_addr.s_addr;
	req.r.id.idiag_dst[0] = local.sin_addr.s_addr;
	req.r.id.idiag_cookie[0] = INET_DIAG_NOCOOKIE;
	req.r.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
	if (send(s, &req, sizeof(req), 0) != (ssize_t)sizeof(req)) {
		rc = iod_err_set(e, -errno, "sock_diag send: %s", strerror(errno));
		goto out;
	}
	ssize_t n = recv(s, buf, sizeof(buf), 0);
	if (n < 0) {
		rc = iod_err_set(e, -errno, "sock_diag recv: %s", strerror(errno));
		goto out;
	}
	for (struct nlmsghdr *h = (struct nlmsghdr *)buf; NLMSG_OK(h, (size_t)n);
	     h = NLMSG_NEXT(h, n)) {
		if (h->nlmsg_type == NLMSG_ERROR) {
			const struct nlmsgerr *er = NLMSG_DATA(h);
			rc = iod_err_set(e, er->error ? er->error : -ENOENT,
			                 "sock_diag: %s (is the peer on this host?)",
			                 strerror(er->error ? -er->error : ENOENT));
			goto out;
		}
		if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY)
			continue;
		const struct inet_diag_msg *m = NLMSG_DATA(h);
		out->uid = m->idiag_uid;
		out->inode = m->idiag_inode;
		int alen = (int)(h->nlmsg_len - NLMSG_LENGTH(sizeof(*m)));
		for (struct rtattr *a = (struct rtattr *)(m + 1); RTA_OK(a, alen);
		     a = RTA_NEXT(a, alen))
			if (a->rta_type == INET_DIAG_CGROUP_ID &&
			    RTA_PAYLOAD(a) >= sizeof(uint64_t))
				memcpy(&out->cgroup_id, RTA_DATA(a), sizeof(uint64_t));
		rc = 0;
		break;
	}
	if (rc)
		iod_err_set(e, rc, "sock_diag: no socket for the peer %s:%u",
		            inet_ntoa(peer.sin_addr), ntohs(peer.sin_port));
out:
	close(s);
	return rc;
}
