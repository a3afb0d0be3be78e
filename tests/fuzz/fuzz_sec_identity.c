/*
 * fuzz_sec_identity.c: libFuzzer target for the certificate-to-identity
 * mapping: the bytes are read as a certificate (PEM or DER, what a TLS
 * peer presents) and, separately, as "URI\0ORG" for the URI mapping. An
 * identity that maps must produce a URI that maps back to the same
 * identity.
 */
#include "iod/sec.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void round_trip(const struct iod_sec_identity *id, const char *org)
{
	struct iod_sec_identity back;
	struct iod_err e = {0};
	char uri[512];
	if (iod_sec_identity_uri(id, uri, sizeof(uri)))
		abort();
	if (iod_sec_identity_from_uri(uri, org, id->cluster, &back, &e))
		abort();
	if (back.kind != id->kind || back.role != id->role || strcmp(back.name, id->name) ||
	    strcmp(back.tenant, id->tenant) || strcmp(back.cluster, id->cluster))
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct iod_sec_cert_info info;
	struct iod_sec_identity id;
	struct iod_err e = {0};
	char buf[1024];

	if (iod_sec_cert_inspect(data, size, &info, &e) == 0)
		round_trip(&info.id, info.id.kind == IOD_SEC_KIND_USER
		                         ? iod_sec_role_name(info.id.role)
		                         : NULL);
	else if (!e.msg[0])
		abort();

	if (size >= sizeof(buf))
		return 0;
	memcpy(buf, data, size);
	buf[size] = 0;
	const char *org = NULL;
	size_t n = strlen(buf);
	if (n + 1 < size)
		org = buf + n + 1;
	if (iod_sec_identity_from_uri(buf, org, NULL, &id, &e) == 0)
		round_trip(&id, id.kind == IOD_SEC_KIND_USER ? iod_sec_role_name(id.role) : NULL);
	else if (!e.msg[0])
		abort();
	return 0;
}
