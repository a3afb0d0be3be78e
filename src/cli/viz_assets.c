/*
 * viz_assets.c: the live view's page (src/cli/viz/index.html, app.js,
 * style.css), embedded in the binary with the assembler's .incbin so
 * `iod` needs no files installed beside it. The table is the only way in:
 * a request names one of these paths exactly or gets a 404, so nothing
 * outside the page can be served (no path is ever opened on disk).
 */
#include "viz.h"

#include <string.h>

/* Each file: a NUL-terminated blob and its length (computed by the
 * assembler, so C never subtracts pointers to different objects), in .rodata. */
#define VIZ_INCBIN(sym, file)                                                            \
	__asm__(".section .rodata\n.balign 16\n.global " #sym "\n" #sym ":\n"            \
	        ".incbin \"" file "\"\n" #sym "_end:\n.byte 0\n.balign 8\n.global " #sym \
	        "_len\n" #sym "_len:\n.quad " #sym "_end - " #sym "\n.previous\n");      \
	extern const char sym[];                                                         \
	extern const uint64_t sym##_len
VIZ_INCBIN(iod_viz_index_html, "src/cli/viz/index.html");
VIZ_INCBIN(iod_viz_app_js, "src/cli/viz/app.js");
VIZ_INCBIN(iod_viz_style_css, "src/cli/viz/style.css");

const struct iod_viz_asset *iod_viz_asset_find(const char *path)
{
	static struct iod_viz_asset assets[4];
	static bool init;
	if (!init) {
		assets[0] =
		    (struct iod_viz_asset){"/", "text/html; charset=utf-8", iod_viz_index_html, 0};
		assets[1] = (struct iod_viz_asset){"/index.html", "text/html; charset=utf-8",
		                                   iod_viz_index_html, 0};
		assets[2] = (struct iod_viz_asset){"/app.js", "text/javascript; charset=utf-8",
		                                   iod_viz_app_js, 0};
		assets[3] = (struct iod_viz_asset){"/style.css", "text/css; charset=utf-8",
		                                   iod_viz_style_css, 0};
		assets[0].len = assets[1].len = (size_t)iod_viz_index_html_len;
		assets[2].len = (size_t)iod_viz_app_js_len;
		assets[3].len = (size_t)iod_viz_style_css_len;
		init = true;
	}
	for (size_t i = 0; path && i < IOD_ARRAY_LEN(assets); i++)
		if (!strcmp(assets[i].path, path))
			return &assets[i];
	return NULL;
}
