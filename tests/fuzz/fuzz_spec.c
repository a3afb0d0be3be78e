/*
 * fuzz_spec.c: libFuzzer target for the spec loader (YAML via libyaml, then
 * the schema walk). Any input must either load, or be rejected with at
 * least one diagnostic and no spec handed out; never a crash, a leak, a
 * hang or a diagnostic without text. A loaded spec must satisfy the
 * invariants the loader promises (bounds, unique names, tier sum), and its
 * JSON rendering must load again to the very same JSON.
 */
#include "iod/spec.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_spec(const struct iod_spec *s)
{
	uint32_t sum = 0;

	if (s->services_n > IOD_SPEC_SERVICES_MAX || s->tiers_n > IOD_SPEC_TIERS_MAX)
		abort();
	for (uint32_t i = 0; i < s->services_n; i++) {
		const struct iod_spec_service *v = &s->services[i];
		if (!v->name || v->replicas > IOD_SPEC_REPLICAS_MAX ||
		    v->args_n > IOD_SPEC_LIST_MAX)
			abort();
		if (iod_spec_find_service(s, v->name) != v) /* names are unique */
			abort();
		for (uint32_t d = 0; d < v->depends_n; d++)
			if (!iod_spec_find_service(s, v->depends_on[d]))
				abort();
		if (v->health.timeout_ns > v->health.interval_ns)
			abort();
	}
	for (uint32_t i = 0; i < s->tiers_n; i++)
		sum += s->tiers[i].quota_bp;
	if (s->tiers_n && sum != 10000)
		abort();
	/* the JSON is itself a spec that loads to the same JSON */
	json_t *j = iod_spec_to_json(s);
	char *text = iod_json_string(j, false);
	if (!text)
		abort();
	static struct iod_spec_diags d2;
	struct iod_spec *again = NULL;
	if (iod_spec_load_buffer("json", text, strlen(text), &again, &d2) != 0) {
		fprintf(stderr, "JSON did not reload: %u:%u %s\n%s\n", d2.d[0].line, d2.d[0].col,
		        d2.d[0].msg, text);
		abort();
	}
	json_t *j2 = iod_spec_to_json(again);
	char *text2 = iod_json_string(j2, false);
	if (!text2 || strcmp(text, text2)) {
		fprintf(stderr, "JSON round trip differs:\n%s\n%s\n", text,
		        text2 ? text2 : "(null)");
		abort();
	}
	free(text2);
	json_decref(j2);
	iod_spec_free(again);
	free(text);
	json_decref(j);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct iod_spec_diags diags;
	struct iod_spec *s = NULL;

	int rc = iod_spec_load_buffer("fuzz.yaml", (const char *)data, size, &s, &diags);
	if (rc == 0) {
		if (!s || diags.total)
			abort();
		check_spec(s);
		iod_spec_free(s);
		return 0;
	}
	if (s || diags.n == 0 || diags.total < diags.n || diags.n > IOD_SPEC_ERRORS_MAX)
		abort();
	for (uint32_t i = 0; i < diags.n; i++) {
		/* every message has text and is valid UTF-8 (the API sends it as JSON) */
		json_t *m = json_string(diags.d[i].msg);
		if (!diags.d[i].msg[0] || !m)
			abort();
		json_decref(m);
	}
	return 0;
}
