/*
 * yaml.c: libyaml's event stream turned into a tree of positioned nodes.
 *
 * We use the event API rather than libyaml's document API because the
 * document API resolves aliases into shared nodes silently, which would let
 * a small file expand exponentially when walked ("billion laughs"), and it
 * hides where an alias was written. Here every node keeps its line and
 * column, aliases are rejected at the place they are used, and the tree is
 * bounded in depth (IOD_SPEC_DEPTH_MAX) and size (IOD_SPEC_NODES_MAX), so
 * no input can make the loader recurse without bound or exhaust memory.
 * This file never interprets what the nodes mean: that is load.c's job.
 */
#include "internal.h"

#include <string.h>
#include <yaml.h>

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

static void syntax_error(struct spec_ld *ld, const yaml_parser_t *p, const char *text, size_t len)
{
	uint32_t line, col;
	const char *problem = p->problem ? p->problem : "unknown error";

	if (p->error == YAML_MEMORY_ERROR) {
		spec_diag(ld, 0, 0, "out of memory while parsing YAML");
		return;
	}
	if (p->error == YAML_READER_ERROR) {
		offset_position(text, len, p->problem_offset, &line, &col);
		spec_diag(ld, line, col, "invalid text: %s (a spec must be UTF-8 text)", problem);
		return;
	}
	line = (uint32_t)p->problem_mark.line + 1;
	col = (uint32_t)p->problem_mark.column + 1;
	if (p->context)
		spec_diag(ld, line, col,
		          "YAML syntax error: %s (%s that started at line %u, column %u)", problem,
		          p->context, (unsigned)p->context_mark.line + 1,
		          (unsigned)p->context_mark.column + 1);
	else
		spec_diag(ld, line, col, "YAML syntax error: %s", problem);
}

static struct snode *node_new(struct spec_ld *ld, enum snode_kind kind, const yaml_mark_t *m)
{
	struct snode *n;

	if (ld->nodes >= IOD_SPEC_NODES_MAX)
		return NULL;
	n = iod_arena_alloc(&ld->tree, sizeof(*n));
	if (!n)
		return NULL;
	ld->nodes++;
	n->kind = kind;
	n->line = (uint32_t)m->line + 1;
	n->col = (uint32_t)m->column + 1;
	return n;
}

static void attach(struct snode *parent, struct snode *child)
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

/* Only the standard string/map/seq tags are meaningful to a spec. */
static bool tag_ok(struct spec_ld *ld, const yaml_char_t *tag, const yaml_mark_t *m,
                   const char *allowed)
{
	if (!tag || tag_is(tag, allowed))
		return true;
	spec_diag(ld, (uint32_t)m->line + 1, (uint32_t)m->column + 1,
	          "YAML tag \"%s\" is not supported in iod specs; remove it", (const char *)tag);
	return false;
}

int spec_yaml_parse(struct spec_ld *ld, const char *text, size_t len, struct snode **root)
{
	yaml_parser_t p;
	yaml_event_t ev;
	struct snode *stack[IOD_SPEC_DEPTH_MAX];
	unsigned depth = 0, docs = 0;
	bool done = false, bad = false;
	int rc = 0;

	*root = NULL;
	if (!yaml_parser_initialize(&p)) {
		spec_diag(ld, 0, 0, "out of memory while parsing YAML");
		return -ENOMEM;
	}
	yaml_parser_set_input_string(&p, (const unsigned char *)text, len);
	while (!done) {
		struct snode *n = NULL;
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
				spec_diag(ld, (uint32_t)m->line + 1, (uint32_t)m->column + 1,
				          "a spec file holds one YAML document, but a second one "
				          "starts here; split it into two files");
				rc = -EINVAL;
				done = true;
			}
			break;
		case YAML_ALIAS_EVENT:
			spec_diag(ld, (uint32_t)m->line + 1, (uint32_t)m->column + 1,
			          "alias \"*%s\": anchors and aliases are not supported in iod "
			          "specs; write the value out in full",
			          (const char *)ev.data.alias.anchor);
			bad = true;
			n = node_new(ld, SNODE_SCALAR, m); /* a placeholder keeps the shape */
			if (n) {
				n->str = "";
				n->plain = false;
			}
			break;
		case YAML_SCALAR_EVENT:
			if (!tag_ok(ld, ev.data.scalar.tag, m, YAML_STR_TAG))
				bad = true;
			n = node_new(ld, SNODE_SCALAR, m);
			if (!n)
				break;
			n->len = ev.data.scalar.length;
			n->str = iod_arena_strndup(&ld->tree, (const char *)ev.data.scalar.value,
			                           n->len);
			n->plain =
			    ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE && !ev.data.scalar.tag;
			if (n->str && strlen(n->str) != n->len) {
				spec_diag(ld, n->line, n->col,
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
			if (depth >= IOD_SPEC_DEPTH_MAX) {
				spec_diag(ld, (uint32_t)m->line + 1, (uint32_t)m->column + 1,
				          "nesting is deeper than %d levels (IOD_SPEC_DEPTH_MAX); "
				          "a spec is only a few levels deep",
				          IOD_SPEC_DEPTH_MAX);
				rc = -EINVAL;
				done = true;
				break;
			}
			n = node_new(ld, seq ? SNODE_SEQ : SNODE_MAP, m);
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
			if (ld->nodes >= IOD_SPEC_NODES_MAX)
				spec_diag(
				    ld, (uint32_t)m->line + 1, (uint32_t)m->column + 1,
				    "the spec has more than %d YAML nodes (IOD_SPEC_NODES_MAX); "
				    "split it into several files",
				    IOD_SPEC_NODES_MAX);
			else
				spec_diag(ld, 0, 0, "out of memory while parsing YAML");
			rc = ld->nodes >= IOD_SPEC_NODES_MAX ? -EINVAL : -ENOMEM;
			done = true;
		}
		if (n) {
			if (depth == 0)
				*root = n;
			else
				attach(stack[depth - 1], n);
			if (n->kind != SNODE_SCALAR)
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
