/*
 * viz.h: the live web view of `iod viz net-topology --live` (viz_live.c)
 * and the page it serves, embedded in the binary (viz_assets.c).
 */
#ifndef IOD_CLI_VIZ_H
#define IOD_CLI_VIZ_H

#include "ctl.h"

/* One embedded file of the page. */
struct iod_viz_asset {
	const char *path;  /* as requested: "/", "/app.js" */
	const char *ctype; /* Content-Type */
	const char *data;  /* its bytes */
	size_t len;        /* their count */
};

/* The asset served at path (exact match), or NULL. */
const struct iod_viz_asset *iod_viz_asset_find(const char *path);

/*
 * Serve the live view on listen ("IP:PORT") until SIGINT/SIGTERM, reading
 * the cluster every refresh_ms. Returns an exit code.
 */
int iod_viz_live_run(struct iod_api_client *c, const char *mesh, const char *listen,
                     uint64_t refresh_ms, uint32_t group_over);

#endif
