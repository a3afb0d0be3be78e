/*
 * internal.h: private pieces of the spec loader shared by its files.
 *
 * The loader works in two passes. src/base/yaml.c turns the text into a
 * small tree of nodes that remember where they were written (line, col);
 * load.c walks that tree against the schema and fills struct iod_spec,
 * recording every problem as a diagnostic. Nothing here prints, reads the
 * clock or keeps state between loads.
 */
#ifndef IOD_SPEC_INTERNAL_H
#define IOD_SPEC_INTERNAL_H

#include "iod/spec.h"
#include "iod/yaml.h"

/* The state of one load: where diagnostics go and what owns memory. */
struct spec_ld {
	const char *name;             /* file name for messages */
	struct iod_spec_diags *diags; /* caller-owned, filled here */
	struct iod_arena tree;        /* the YAML tree (src/base/yaml.c); freed after the load */
	struct iod_spec *spec;        /* being filled; its arena owns the results */
	char obj[IOD_NAME_MAX + 32];  /* "service \"x\": " prefix for messages */
	bool standalone;              /* one stored service: depends_on is not resolved */
};

/* Record a diagnostic at (line, col); counts past IOD_SPEC_ERRORS_MAX. */
void spec_diag(struct spec_ld *ld, uint32_t line, uint32_t col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Record a diagnostic at a node, prefixed with ld->obj. */
void spec_err(struct spec_ld *ld, const struct iod_yaml_node *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Walk the tree into ld->spec. Returns 0 or -EINVAL with diagnostics. */
int spec_build(struct spec_ld *ld, const struct iod_yaml_node *root);

#endif
