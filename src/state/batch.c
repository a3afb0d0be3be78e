/*
 * batch.c: group commit framing: several commands in one Raft entry.
 *
 * Under concurrent writes the leader packs every command proposed while the
 * loop was busy into one log entry (member_propose.c), so one disk append and one
 * AppendEntries message per follower carry many writes. The entry is
 * "\x01BT1", a little-endian u32 count, then count x (u32 length, bytes):
 * the marker byte 0x01 cannot start a JSON command, so old single-command
 * entries and batches share the log. Applying a batch applies its commands
 * one after another exactly as separate entries would (one revision each,
 * its own result each). The decoder validates the whole frame before
 * anything is applied and must never read past len; it is fuzzed
 * (tests/fuzz/fuzz_state.c).
 */
#include "internal.h"

#include <string.h>

static const char batch_magic[4] = {0x01, 'B', 'T', '1'};

static uint32_t get_u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_u32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

bool iod_state_batch_is(const void *buf, size_t len)
{
	return len >= sizeof(batch_magic) && !memcmp(buf, batch_magic, sizeof(batch_magic));
}

size_t iod_state_batch_size(uint32_t n, size_t cmd_bytes)
{
	return sizeof(batch_magic) + 4 + 4 * (size_t)n + cmd_bytes;
}

int iod_state_batch_encode(void *out, size_t cap, const char *const cmds[], const size_t lens[],
                           uint32_t n, size_t *len)
{
	uint8_t *p = out;
	size_t at = 0, total = 0;

	if (n == 0 || n > IOD_STATE_BATCH_MAX)
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++) {
		if (lens[i] == 0 || lens[i] > IOD_STATE_CMD_MAX)
			return -EINVAL;
		total += lens[i];
	}
	if (iod_state_batch_size(n, total) > cap)
		return -E2BIG;
	memcpy(p, batch_magic, sizeof(batch_magic));
	at = sizeof(batch_magic);
	put_u32(p + at, n);
	at += 4;
	for (uint32_t i = 0; i < n; i++) {
		put_u32(p + at, (uint32_t)lens[i]);
		at += 4;
		memcpy(p + at, cmds[i], lens[i]);
		at += lens[i];
	}
	*len = at;
	return 0;
}

/* Check the frame; the count of commands in *n. Trailing bytes (the 8-byte
 * padding raft's log needs) must be NULs. */
static int batch_check(const uint8_t *p, size_t len, uint32_t *n)
{
	size_t at = sizeof(batch_magic) + 4;
	if (!iod_state_batch_is(p, len) || len < at)
		return -EINVAL;
	*n = get_u32(p + sizeof(batch_magic));
	if (*n == 0 || *n > IOD_STATE_BATCH_MAX)
		return -EINVAL;
	for (uint32_t i = 0; i < *n; i++) {
		if (len - at < 4)
			return -EINVAL;
		uint32_t l = get_u32(p + at);
		at += 4;
		if (l == 0 || l > len - at)
			return -EINVAL;
		at += l;
	}
	for (; at < len; at++)
		if (p[at])
			return -EINVAL;
	return 0;
}

int iod_state_apply_batch(struct iod_state *s, const void *buf, size_t len,
                          struct iod_state_result *res, uint32_t res_max, uint32_t *n)
{
	const uint8_t *p = buf;
	uint32_t count = 0;
	size_t at = sizeof(batch_magic) + 4;

	*n = 0;
	if (batch_check(p, len, &count) || count > res_max) {
		if (res_max) {
			memset(&res[0], 0, sizeof(res[0]));
			res[0].code = -EINVAL;
			res[0].rev = iod_state_rev(s);
			snprintf(res[0].msg, sizeof(res[0].msg),
			         "malformed command batch (%zu bytes)", len);
			*n = 1;
		}
		return -EINVAL;
	}
	for (uint32_t i = 0; i < count; i++) {
		uint32_t l = get_u32(p + at);
		at += 4;
		iod_state_apply(s, p + at, l, &res[i]);
		at += l;
	}
	*n = count;
	return 0;
}
