/*
 * flow_debug.h: test-only introspection of the data plane: reaching inside
 * a built data plane to drive or check one of its cores directly.
 */
#ifndef IOD_FLOW_DEBUG_H
#define IOD_FLOW_DEBUG_H

#include "iod/flow.h"

/* The AR core of network n (NULL when it has none). */
struct iod_ar *iod_flow_dp_ar_core(struct iod_flow_dp_ar *a, uint32_t n);

#endif
