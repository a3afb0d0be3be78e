/*
 * internal.h: private pieces of the spec loader shared by its files.
 *
 * The loader works in two passes. yaml.c turns libyaml's event stream into
 * a small tree of nodes that remember where they were written (line, col);
 * load.c walks that tree against the schema and fills struct iod_spec,
 * recording every problem as a diagnostic. Nothing here prints, reads the
 * clock or keeps state between loads.
 */
#ifndef IOD_SPEC_INTERNAL_H
#define IOD_SPEC_INTERNAL_H

#include "iod/spec.h"

enum snode_kind { SNODE_SCALAR, SNODE_MAP, SNODE_SEQ };

/* One YAML node, with the position it started at. */
struct snode {
	enum snode_kind kind; /* scalar, mapping or sequence */
	uint32_t line, col;   /* 1-based start position */
	const char *str;      /* scalar: NUL-terminated text */
	size_t len;           /* scalar: bytes in str */
	bool plain;           /* scalar: written unquoted (may be a number/bool/null) */
	struct snode *first;  /* map: key, value, key, value...; seq: items */
	struct snode *last;   /* last child, for appending */
	struct snode *next;   /* next sibling */
	uint32_t n;           /* map: pairs; seq: items */
};

/* The state of one load: where diagnostics go and what owns memory. */
struct spec_ld {
	const char *name;             /* file name for messages */
	struct iod_spec_diags *diags; /* caller-owned, filled here */
	struct iod_arena tree;        /* the snode tree; freed after the load */
	uint32_t nodes;               /* nodes built, bounded by IOD_SPEC_NODES_MAX */
	struct iod_spec *spec;        /* being filled; its arena owns the results */
	char obj[IOD_NAME_MAX + 32];  /* "service \"x\": " prefix for messages */
	bool standalone;              /* one stored service: depends_on is not resolved */
};

/* Record a diagnostic at (line, col); counts past IOD_SPEC_ERRORS_MAX. */
void spec_diag(struct spec_ld *ld, uint32_t line, uint32_t col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Record a diagnostic at a node, prefixed with ld->obj. */
void spec_err(struct spec_ld *ld, const struct snode *n, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/*
 * Parse text into a tree rooted at *root (NULL for an empty document).
 * Returns 0, or -EINVAL with diagnostics (YAML syntax errors, aliases,
 * depth or size limits), or -ENOMEM.
 */
int spec_yaml_parse(struct spec_ld *ld, const char *text, size_t len, struct snode **root);

/* Walk the tree into ld->spec. Returns 0 or -EINVAL with diagnostics. */
int spec_build(struct spec_ld *ld, const struct snode *root);

#endif
