/*
 * validate.h: the checks an object written through PUT /v1/<kind>/<name>
 * must pass (validate.c). Only src/api includes this.
 */
#ifndef IOD_API_VALIDATE_H
#define IOD_API_VALIDATE_H

#include "iod/state.h"

/* 0, or -EINVAL with why in e (and, for a Service, the spec's errors as
 * {"errors": [...]} in *answer, owned by the caller). */
int iod_api_validate_put(const struct iod_state *st, enum iod_state_kind k, const char *name,
                         const json_t *v, json_t **answer, struct iod_err *e);

#endif
