/*
 * obs.h: telemetry helpers shared by every module that exports metrics.
 *
 * For now: writing the Prometheus text exposition format (version 0.0.4):
 * `# HELP`, `# TYPE`, samples with escaped label values, histograms with
 * cumulative `_bucket{le=...}` lines ending in `le="+Inf"`, `_sum` and
 * `_count`. The mesh uses it; obs/ (metrics registry, `iod top`) builds on
 * it. Pure: appends text to a caller's iod_buf, never does I/O.
 */
#ifndef IOD_OBS_H
#define IOD_OBS_H

#include "iod/base.h"

/* The Content-Type to serve the text with. */
#define IOD_PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Metric names: [a-zA-Z_:][a-zA-Z0-9_:]*; label names: [a-zA-Z_][a-zA-Z0-9_]*. */
bool iod_prom_name_valid(const char *name);
bool iod_prom_label_name_valid(const char *name);

/* "# HELP name help" (help escaped: \\ and \n) and "# TYPE name type". */
int iod_prom_header(struct iod_buf *b, const char *name, const char *type, const char *help);

/*
 * Build a label set "k1=\"v1\",k2=\"v2\"" from NULL-terminated key, value
 * pairs, escaping \\, \" and \n in values. -ENOSPC when it does not fit,
 * -EINVAL for an invalid label name.
 */
int iod_prom_labels(char *buf, size_t len, ...);

/* One sample "name{labels} value" (labels may be NULL or ""). */
int iod_prom_u64(struct iod_buf *b, const char *name, const char *labels, uint64_t v);
int iod_prom_f64(struct iod_buf *b, const char *name, const char *labels, double v);

/*
 * A histogram: n finite upper bounds le[] (ascending) and n+1 per-bucket
 * counts (not cumulative; the last is the overflow bucket). Writes
 * name_bucket lines (cumulative, plus le="+Inf"), name_sum and name_count.
 */
int iod_prom_histogram(struct iod_buf *b, const char *name, const char *labels, const double *le,
                       const uint64_t *counts, uint32_t n, double sum);

#endif
