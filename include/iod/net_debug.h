/*
 * net_debug.h: test-only introspection of the packet layer: verification
 * the data plane itself never needs (tests and fuzz targets check every
 * frame it builds with it).
 */
#ifndef IOD_NET_DEBUG_H
#define IOD_NET_DEBUG_H

#include "iod/net.h"

/* True when every IPv4 header and TCP/UDP checksum present in the frame
 * (outer and inner) verifies; a zero UDP checksum over IPv4 counts as valid. */
bool iod_net_csums_ok(const uint8_t *frame, uint32_t len);

#endif
