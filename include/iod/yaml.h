/*
 * yaml.h: iod's one YAML loader: a bounded tree of positioned nodes.
 *
 * Every file iod reads as YAML (service specs, the simulator's topology
 * files, the data plane's config) goes through here, so they share one set
 * of guarantees: every node keeps its line and column, aliases and
 * non-standard tags are refused where they are written, the tree is bounded
 * in depth (IOD_YAML_DEPTH_MAX) and size (IOD_YAML_NODES_MAX), and every
 * problem is reported through the caller's callback, not only the first.
 * The loader never interprets what the nodes mean; that is each format's
 * job. Pure: text in, tree out; no I/O, no clock.
 */
#ifndef IOD_YAML_H
#define IOD_YAML_H

#include "iod/base.h"

enum iod_yaml_kind { IOD_YAML_SCALAR, IOD_YAML_MAP, IOD_YAML_SEQ };

/* One YAML node, with the position it started at. */
struct iod_yaml_node {
	enum iod_yaml_kind kind;     /* scalar, mapping or sequence */
	uint32_t line, col;          /* 1-based start position */
	const char *str;             /* scalar: NUL-terminated text */
	size_t len;                  /* scalar: bytes in str */
	bool plain;                  /* scalar: written unquoted (may be a number/bool/null) */
	struct iod_yaml_node *first; /* map: key, value, key, value...; seq: items */
	struct iod_yaml_node *last;  /* last child, for appending */
	struct iod_yaml_node *next;  /* next sibling */
	uint32_t n;                  /* map: pairs; seq: items */
};

/* Where a problem goes: its position (0, 0 when it has none) and text. */
typedef void iod_yaml_diag_fn(void *ctx, uint32_t line, uint32_t col, const char *msg);

/* How one document is read. */
struct iod_yaml_opts {
	const char *what;           /* the format in messages: "spec", "topology" */
	uint32_t nodes_max;         /* 0: IOD_YAML_NODES_MAX; never more than it */
	const char *nodes_max_name; /* that bound's name in messages; NULL: IOD_YAML_NODES_MAX */
	iod_yaml_diag_fn *diag;     /* called once per problem; required */
	void *ctx;                  /* passed to diag */
};

/*
 * Parse text into a tree allocated from arena, rooted at *root (NULL for
 * an empty document). Returns 0, or -EINVAL with every problem reported
 * (syntax errors, aliases, tags, NUL characters, a second document, the
 * depth or node bound), or -ENOMEM. On error *root is NULL.
 */
int iod_yaml_parse(struct iod_arena *arena, const char *text, size_t len,
                   const struct iod_yaml_opts *o, struct iod_yaml_node **root);

/* The value of key in mapping m (NULL when absent or m is not a mapping). */
const struct iod_yaml_node *iod_yaml_map_get(const struct iod_yaml_node *m, const char *key);

#endif
