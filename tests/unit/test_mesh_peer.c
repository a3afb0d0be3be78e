/*
 * test_mesh_peer.c: the owner of a local connection's peer socket, as the
 * proxy learns which replica (uid) is calling: our own uid, and as root a
 * child that switched to another uid.
 */
#include "harness.h"
#include "iod/mesh_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int listen_lo(struct sockaddr_in *a)
{
	socklen_t al = sizeof(*a);
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	memset(a, 0, sizeof(*a));
	a->sin_family = AF_INET;
	a->sin_addr.s_addr = htonl(0x7f4d0101); /* 127.77.1.1, like a VIP */
	if (l < 0 || bind(l, (struct sockaddr *)a, sizeof(*a)) || listen(l, 4) ||
	    getsockname(l, (struct sockaddr *)a, &al))
		return -1;
	return l;
}

TEST(peer_owner_is_the_connecting_uid)
{
	struct sockaddr_in a;
	struct iod_mesh_peer p;
	struct iod_err e = {0};
	int l = listen_lo(&a);
	CHECK(l >= 0);
	int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	CHECK_EQ(connect(c, (struct sockaddr *)&a, sizeof(a)), 0);
	int f = accept(l, NULL, NULL);
	CHECK(f >= 0);
	CHECK_MSG(iod_mesh_peer_owner(f, &p, &e) == 0, "%s", e.msg);
	CHECK_EQ(p.uid, getuid());
	CHECK(p.inode != 0);
	close(f);
	close(c);
	if (getuid() != 0) {
		close(l);
		SKIP("another uid needs root");
	}
	pid_t pid = fork();
	if (pid == 0) {
		if (setuid(65534))
			_exit(1);
		int k = socket(AF_INET, SOCK_STREAM, 0);
		if (connect(k, (struct sockaddr *)&a, sizeof(a)))
			_exit(2);
		char b;
		(void)!read(k, &b, 1); /* until the parent is done */
		_exit(0);
	}
	f = accept(l, NULL, NULL);
	CHECK(f >= 0);
	int rc = iod_mesh_peer_owner(f, &p, &e);
	close(f);
	int st = 0;
	waitpid(pid, &st, 0);
	close(l);
	CHECK_MSG(rc == 0, "%s", e.msg);
	CHECK_EQ(p.uid, 65534);
}
