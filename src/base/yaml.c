/*
 * yaml.c: libyaml's event stream turned into a tree of positioned nodes,
 * the one YAML loader of iod (specs, topology files, the dp config).
 *
 * We use the event API rather than libyaml's document API because the
 * document API resolves aliases into shared nodes silently, which would let
 * a small file expand exponentially when walked ("billion laughs"), and it
 * hides where an alias was written. Here every node keeps its line and
 * column, aliases are rejected at the place they are used, and the tree is
 * bounded in depth (IOD_YAML_DEPTH_MAX) and size (IOD_YAML_NODES_MAX), so
 * no input can make the loader recurse without bound or exhaust memory.
 * This file never interprets what the nodes mean: that is each format's
 * job (src/spec/load.c, src/sim/topo.c, src/flow/dpconfig.c).
 */
#include "iod/yaml.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <yaml.h>

/* The state of one parse. */
struct yld {
	struct iod_arena *a;           /* owns the tree */
	const struct iod_yaml_opts *o; /* the caller's options */
	uint32_t nodes;                /* nodes built */
	uint32_t max;                  /* the bound on nodes */
};

static void ydiag(struct yld *ld, uint32_t line, uint32_t col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void ydiag(struct yld *ld, uint32_t line, uint32_t col, const char *fmt, ...)
{
	char msg[IOD_ERR_MSG_MAX];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	ld->o->diag(ld->o->ctx, line, col, msg);
}

/* The line and column (1-based) of a byte offset, for reader errors. */
static void offset_position(const char *text, size_t len, size_t off, uint32_t *line, uint32_t *col)
{
	*line = 1;
	*col = 1;
	for (size_t i = 0; i < off && i < len; i++) {
		if (text[i] == '\n') {
			(*line)++;
			*col = 1;
		} else if (((unsigned char)text[i] & 0xc0) != 0x80) {
			(*col)++; /* count characters, not UTF-8 continuation bytes */
		}
	}
}

static void syntax_error(struct yld *ld, const yaml_parser_t *p, const char *text, size_t len)
{
	uint32_t line, col;
	const char *problem = p->problem ? p->problem : "unknown error";

	if (p->error == YAML_MEMORY_ERROR) {
		ydiag(ld, 0, 0, "out of memory while parsing YAML");
		return;
	}
	if (p->error == YAML_READER_ERROR) {
		offset_position(text, len, p->problem_offset, &line, &col);
		ydiag(ld, line, col, "invalid text: %s (a %s must be UTF-8 text)", problem,
		      ld->o->what);
		return;
	}
	line = (uint32_t)p->problem_mark.line + 1;
	col = (uint32_t)p->problem_mark.column + 1;
	if (p->context)
		ydiag(ld, line, col,
		      "YAML syntax error: %s (%s that started at line %u, column %u)", problem,
		      p->context, (unsigned)p->context_mark.line + 1,
		      (unsigned)p->context_mark.column + 1);
	else
		ydiag(ld, line, col, "YAML syntax error: %s", problem);
}

static struct iod_yaml_node *node_new(struct yld *ld, enum iod_yaml_kind kind, const yaml_mark_t *m)
{
	struct iod_yaml_node *n;

	if (ld->nodes >= ld->max)
		return NULL;
	n = iod_arena_alloc(ld->a, sizeof(*n));
	if (!n)
		return NULL;
	ld->nodes++;
	n->kind = kind;
	n->line = (uint32_t)m->line + 1;
	n->col = (uint32_t)m->column + 1;
	return n;
}

static void attach(struct iod_yaml_node *parent, struct iod_yaml_node *child)
{
	if (parent->last)
		parent->last->next = child;
	else
		parent->first = child;
	parent->last = child;
	parent->n++;
}

static bool tag_is(const yaml_char_t *tag, const char *want)
{
	return tag && !strcmp((const char *)tag, want);
}

/* Only the standard string/map/seq tags are meaningful to iod's formats. */
static bool tag_ok(struct yld *ld, const yaml_char_t *tag, const yaml_mark_t *m,
                   const char *allowed)
{
	if (!tag || tag_is(tag, allowed))
		return true;
	ydiag(ld, (uint32_t)m->line + 1, (uint32_t)m->column + 1,
	      "YAML tag \"%s\" is not supported in iod %s files; remove it", (const char *)tag,
	      ld->o->what);
	return false;
}

int iod_yaml_parse(struct iod_arena *arena, const char *text, size_t len,
                   const struct iod_yaml_opts *o, struct iod_yaml_node **root)
{
	struct yld ld_, *ld = &ld_;
	yaml_parser_t p;
	yaml_event_t ev;
	struct iod_yaml_node *stack[IOD_YAML_DEPTH_MAX];
	unsigned depth = 0, docs = 0;
	bool done = false, bad = false;
	int rc = 0;

	IOD_ASSERT(arena && o && o->diag && o->what && root);
	IOD_ASSERT(o->nodes_max <= IOD_YAML_NODES_MAX);
	ld->a = arena;
	ld->o = o;
	ld->nodes = 0;
	ld->max = o->nodes_max ? o->nodes_max : IOD_YAML_NODES_MAX;
	const char *max_name = o->nodes_max_name ? o->nodes_max_name : "IOD_YAML_NODES_MAX";
	*root = NULL;
	if (!yaml_parser_initialize(&p)) {
		ydiag(ld, 0, 0, "out of memory while parsing YAML");
		return -ENOMEM;
	}
	yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
	while (!done) {
		struct iod_yaml_node *n = NULL;
		const yaml_mark_t *m = &ev.start_mark;

		if (!yaml_parser_parse(&p, &ev)) {
			syntax_error(ld, &p, text, len);
			rc = -EINVAL;
			break;
		}
		switch (ev.type) {
		case YAML_STREAM_END_EVENT: done = true; break;
		case YAML_DOCUMENT_START_EVENT:
			if (++docs > 1) {
				ydiag(ld, (uint32_t)m->line + 1, (uint32_t)m->column + 1,
				      "a %s file holds one YAML document, but a second one "
				      "starts here; split it into two files",
				      o->what);
				rc = -EINVAL;
				done = true;
			}
			break;
		case YAML_ALIAS_EVENT:
			ydiag(ld, (uint32_t)m->line + 1, (uint32_t)m->column + 1,
			      "alias \"*%s\": anchors and aliases are not supported in iod "
			      "%s files; write the value out in full",
			      (const char *)ev.data.alias.anchor, o->what);
			bad = true;
			n = node_new(ld, IOD_YAML_SCALAR, m); /* a placeholder keeps the shape */
			if (n) {
				n->str = "";
				n->plain = false;
			}
			break;
		case YAML_SCALAR_EVENT:
			if (!tag_ok(ld, ev.data.scalar.tag, m, YAML_STR_TAG))
				bad = true;
			n = node_new(ld, IOD_YAML_SCALAR, m);
			if (!n)
				break;
			n->len = ev.data.scalar.length;
			n->str =
			    iod_arena_strndup(ld->a, (const char *)ev.data.scalar.value, n->len);
			n->plain =
			    ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !ev.data.scalar.tag;
			if (n->str && strlen(n->str) != n->len) {
				ydiag(ld, n->line, n->col,
				      "text contains a NUL character; remove it");
				bad = true;
			}
			if (!n->str)
				n = NULL;
			break;
		case YAML_SEQUENCE_START_EVENT:
		case YAML_MAPPING_START_EVENT: {
			bool seq = ev.type == YAML_SEQUENCE_START_EVENT;
			if (!tag_ok(ld,
			            seq ? ev.data.sequence_start.tag : ev.data.mapping_start.tag, m,
			            seq ? YAML_SEQ_TAG : YAML_MAP_TAG))
				bad = true;
			if (depth >= IOD_YAML_DEPTH_MAX) {
				ydiag(ld, (uint32_t)m->line + 1, (uint32_t)m->column + 1,
				      "nesting is deeper than %d levels (IOD_YAML_DEPTH_MAX); "
				      "a %s is only a few levels deep",
				      IOD_YAML_DEPTH_MAX, o->what);
				rc = -EINVAL;
				done = true;
				break;
			}
			n = node_new(ld, seq ? IOD_YAML_SEQ : IOD_YAML_MAP, m);
			break;
		}
		case YAML_SEQUENCE_END_EVENT:
		case YAML_MAPPING_END_EVENT:
			IOD_ASSERT(depth > 0);
			depth--;
			break;
		default: break;
		}
		if (!done && !n &&
		    (ev.type == YAML_SCALAR_EVENT || ev.type == YAML_ALIAS_EVENT ||
		     ev.type == YAML_SEQUENCE_START_EVENT || ev.type == YAML_MAPPING_START_EVENT)) {
			if (ld->nodes >= ld->max)
				ydiag(ld, (uint32_t)m->line + 1, (uint32_t)m->column + 1,
				      "the %s has more than %u YAML nodes (%s); split it into "
				      "several files",
				      o->what, (unsigned)ld->max, max_name);
			else
				ydiag(ld, 0, 0, "out of memory while parsing YAML");
			rc = ld->nodes >= ld->max ? -EINVAL : -ENOMEM;
			done = true;
		}
		if (n) {
			if (depth == 0)
				*root = n;
			else
				attach(stack[depth - 1], n);
			if (n->kind != IOD_YAML_SCALAR)
				stack[depth++] = n;
		}
		yaml_event_delete(&ev);
	}
	yaml_parser_delete(&p);
	if (rc == 0 && bad)
		rc = -EINVAL;
	if (rc)
		*root = NULL;
	return rc;
}

const struct iod_yaml_node *iod_yaml_map_get(const struct iod_yaml_node *m, const char *key)
{
	if (!m || m->kind != IOD_YAML_MAP)
		return NULL;
	for (const struct iod_yaml_node *k = m->first; k && k->next; k = k->next->next)
		if (k->kind == IOD_YAML_SCALAR && !strcmp(k->str, key))
			return k->next;
	return NULL;
}
