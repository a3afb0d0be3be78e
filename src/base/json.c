/*
 * json.c: small helpers over jansson so every command prints JSON the same
 * way (key order kept, two-space indent or compact) and reads typed fields
 * with one call.
 */
#include "iod/base.h"

#include <stdlib.h>

static size_t flags(bool compact)
{
	return JSON_PRESERVE_ORDER | (compact ? JSON_COMPACT : JSON_INDENT(2));
}

int iod_json_print(FILE *f, const json_t *v, bool compact)
{
	if (json_dumpf(v, f, flags(compact)) != 0)
		return -EIO;
	fputc('\n', f);
	return 0;
}

char *iod_json_string(const json_t *v, bool compact)
{
	return json_dumps(v, flags(compact));
}

int iod_json_get_str(const json_t *obj, const char *key, const char **out)
{
	json_t *v = json_object_get(obj, key);
	if (!v)
		return -ENOENT;
	if (!json_is_string(v))
		return -EINVAL;
	*out = json_string_value(v);
	return 0;
}

int iod_json_get_u64(const json_t *obj, const char *key, uint64_t *out)
{
	json_t *v = json_object_get(obj, key);
	if (!v)
		return -ENOENT;
	if (!json_is_integer(v) || json_integer_value(v) < 0)
		return -EINVAL;
	*out = (uint64_t)json_integer_value(v);
	return 0;
}

int iod_json_get_bool(const json_t *obj, const char *key, bool *out)
{
	json_t *v = json_object_get(obj, key);
	if (!v)
		return -ENOENT;
	if (!json_is_boolean(v))
		return -EINVAL;
	*out = json_is_true(v);
	return 0;
}

int iod_json_parse(const char *text, size_t len, json_t **out, struct iod_err *e)
{
	json_error_t je;

	*out = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!*out)
		return iod_err_set(e, -EINVAL, "invalid JSON at line %d column %d: %s", je.line,
		                   je.column, je.text);
	return 0;
}
