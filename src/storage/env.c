/*
 * env.c: the checkpoint store as the agent provisions it, in the replica's
 * environment (pure). The agent formats, the workload parses:
 *
 *   IOD_CKPT_TIERS=PMem:2000:/data/ckpt/PMem,NVMe:8000:/data/ckpt/NVMe
 *   IOD_CKPT_CAPACITY=1073741824     the node's checkpoint capacity, bytes
 *   IOD_CKPT_REPLICAS=3              storage.replicas (absent: 1)
 *
 * One tier is MEDIUM:QUOTA_BP:DIR (the directory is the rest of the entry,
 * so it may hold ':' but never ','); tiers are listed fastest first.
 */
#include "iod/ckpt.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

int iod_ckpt_env_format(const struct iod_stor_tier_cfg *t, const char *const *dirs, uint32_t n,
                        char *out, size_t cap, struct iod_err *e)
{
	size_t len = 0;

	if (!cap)
		return iod_err_set(e, -E2BIG, "no room for IOD_CKPT_TIERS");
	out[0] = 0;
	if (n == 0 || n > IOD_STOR_TIERS_MAX)
		return iod_err_set(e, -EINVAL, "%u checkpoint tiers; 1 to %u can be given",
		                   (unsigned)n, (unsigned)IOD_STOR_TIERS_MAX);
	for (uint32_t i = 0; i < n; i++) {
		if (!dirs[i][0] || strchr(dirs[i], ',') || strlen(dirs[i]) >= IOD_PATH_MAX)
			return iod_err_set(
			    e, -EINVAL,
			    "checkpoint directory \"%.200s\" is empty, holds a ',' or "
			    "is %u bytes or longer",
			    dirs[i], (unsigned)IOD_PATH_MAX);
		int w =
		    snprintf(out + len, cap - len, "%s%s:%u:%s", i ? "," : "",
		             iod_stor_medium_name(t[i].medium), (unsigned)t[i].quota_bp, dirs[i]);
		if (w < 0 || (size_t)w >= cap - len) {
			out[0] = 0;
			return iod_err_set(e, -E2BIG, "IOD_CKPT_TIERS is over %zu bytes", cap);
		}
		len += (size_t)w;
	}
	return 0;
}

/* A decimal u64 in [lo, hi] spanning s[0..n). */
static int parse_u64(const char *s, size_t n, uint64_t lo, uint64_t hi, uint64_t *v)
{
	uint64_t x = 0;
	if (n == 0 || n > 20)
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		uint64_t d = (uint64_t)(s[i] - '0');
		if (x > (UINT64_MAX - d) / 10)
			return -EINVAL;
		x = x * 10 + d;
	}
	if (x < lo || x > hi)
		return -EINVAL;
	*v = x;
	return 0;
}

int iod_ckpt_env_parse(const char *tiers, const char *capacity, const char *replicas,
                       struct iod_ckpt_env *out, struct iod_err *e)
{
	uint64_t v;

	memset(out, 0, sizeof(*out));
	out->cfg.fast_keep = 1;
	out->cfg.keep_max = 8;
	out->replicas = 1;
	if (!tiers || !tiers[0])
		return iod_err_set(e, -ENOENT, "IOD_CKPT_TIERS is not set");
	if (!capacity || parse_u64(capacity, strlen(capacity), 1, UINT64_MAX, &v))
		return iod_err_set(e, -EINVAL,
		                   "IOD_CKPT_CAPACITY must be a number of bytes above 0, not "
		                   "\"%.40s\"",
		                   capacity ? capacity : "");
	out->cfg.capacity_bytes = v;
	if (replicas && replicas[0]) {
		if (parse_u64(replicas, strlen(replicas), 1, IOD_STOR_REPLICAS_MAX, &v))
			return iod_err_set(e, -EINVAL,
			                   "IOD_CKPT_REPLICAS must be 1 to %u, not \"%.40s\"",
			                   (unsigned)IOD_STOR_REPLICAS_MAX, replicas);
		out->replicas = (uint32_t)v;
	}
	for (const char *p = tiers;;) {
		const char *end = strchr(p, ','), *c1, *c2;
		size_t len = end ? (size_t)(end - p) : strlen(p);
		char medium[16];
		enum iod_stor_medium m;
		uint32_t i = out->cfg.tiers_n;
		if (i == IOD_STOR_TIERS_MAX)
			return iod_err_set(e, -E2BIG, "IOD_CKPT_TIERS lists more than %u tiers",
			                   (unsigned)IOD_STOR_TIERS_MAX);
		c1 = memchr(p, ':', len);
		c2 = c1 ? memchr(c1 + 1, ':', len - (size_t)(c1 + 1 - p)) : NULL;
		if (!c2)
			return iod_err_set(e, -EINVAL,
			                   "IOD_CKPT_TIERS entry %u is not MEDIUM:QUOTA_BP:DIR",
			                   (unsigned)i + 1);
		size_t ml = (size_t)(c1 - p), dl = len - (size_t)(c2 + 1 - p);
		if (ml == 0 || ml >= sizeof(medium))
			return iod_err_set(e, -EINVAL, "IOD_CKPT_TIERS entry %u: no medium",
			                   (unsigned)i + 1);
		memcpy(medium, p, ml);
		medium[ml] = 0;
		int rc = iod_stor_medium_parse(medium, &m, e);
		if (rc) {
			iod_err_wrap(e, "IOD_CKPT_TIERS entry %u", (unsigned)i + 1);
			return rc;
		}
		if (parse_u64(c1 + 1, (size_t)(c2 - c1 - 1), 1, 10000, &v))
			return iod_err_set(e, -EINVAL,
			                   "IOD_CKPT_TIERS entry %u: the quota is 1 to 10000 basis "
			                   "points",
			                   (unsigned)i + 1);
		if (dl == 0 || dl >= sizeof(out->dirs[0]))
			return iod_err_set(
			    e, -EINVAL,
			    "IOD_CKPT_TIERS entry %u: the directory is empty or %u bytes "
			    "or longer",
			    (unsigned)i + 1, (unsigned)sizeof(out->dirs[0]));
		out->cfg.tiers[i] = (struct iod_stor_tier_cfg){m, (uint32_t)v};
		memcpy(out->dirs[i], c2 + 1, dl);
		out->dirs[i][dl] = 0;
		out->cfg.tiers_n = i + 1;
		if (!end)
			break;
		p = end + 1;
	}
	return 0;
}

void iod_ckpt_env_opts(const struct iod_ckpt_env *env, struct iod_ckpt_opts *out)
{
	memset(out, 0, sizeof(*out));
	out->tiers = env->cfg;
	for (uint32_t i = 0; i < env->cfg.tiers_n; i++)
		out->dirs[i] = env->dirs[i];
}

/* A node name: [A-Za-z0-9._-]; an address: printable, no ',', '=' or space. */
static bool peer_node_ok(const char *s, size_t n)
{
	if (n == 0 || n >= IOD_NAME_MAX)
		return false;
	return iod_str_name_chars(s, n);
}

static bool peer_addr_ok(const char *s, size_t n)
{
	if (n == 0 || n >= IOD_CKPT_PEER_ADDR_MAX || !memchr(s, ':', n))
		return false;
	for (size_t i = 0; i < n; i++)
		if (s[i] <= ' ' || s[i] > '~' || s[i] == ',' || s[i] == '=')
			return false;
	return true;
}

int iod_ckpt_env_peers_format(const struct iod_ckpt_env_peer *p, uint32_t n, char *out, size_t cap,
                              struct iod_err *e)
{
	size_t len = 0;
	if (!cap)
		return iod_err_set(e, -E2BIG, "no room for a checkpoint peer list");
	out[0] = 0;
	for (uint32_t i = 0; i < n; i++) {
		if (!peer_node_ok(p[i].node, strlen(p[i].node)) ||
		    !peer_addr_ok(p[i].addr, strlen(p[i].addr)))
			return iod_err_set(e, -EINVAL,
			                   "checkpoint peer %u (\"%.64s\" at \"%.100s\") is not "
			                   "NODE=HOST:PORT/NS",
			                   (unsigned)i + 1, p[i].node, p[i].addr);
		int w =
		    snprintf(out + len, cap - len, "%s%s=%s", i ? "," : "", p[i].node, p[i].addr);
		if (w < 0 || (size_t)w >= cap - len) {
			out[0] = 0;
			return iod_err_set(e, -E2BIG, "the checkpoint peer list is over %zu bytes",
			                   cap);
		}
		len += (size_t)w;
	}
	return 0;
}

int iod_ckpt_env_peers_parse(const char *list, struct iod_ckpt_env_peer *out, uint32_t max,
                             uint32_t *n, struct iod_err *e)
{
	*n = 0;
	if (!list || !list[0])
		return 0;
	for (const char *p = list;;) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		const char *eq = memchr(p, '=', len);
		if (*n == max)
			return iod_err_set(e, -E2BIG, "more than %u checkpoint peers",
			                   (unsigned)max);
		size_t nl = eq ? (size_t)(eq - p) : 0, al = eq ? len - nl - 1 : 0;
		if (!eq || !peer_node_ok(p, nl) || !peer_addr_ok(eq + 1, al))
			return iod_err_set(e, -EINVAL,
			                   "checkpoint peer %u is not NODE=HOST:PORT/NS (a node of "
			                   "[A-Za-z0-9._-], an address without ',' or '=')",
			                   (unsigned)*n + 1);
		memcpy(out[*n].node, p, nl);
		out[*n].node[nl] = 0;
		memcpy(out[*n].addr, eq + 1, al);
		out[*n].addr[al] = 0;
		(*n)++;
		if (!end)
			return 0;
		p = end + 1;
	}
}
