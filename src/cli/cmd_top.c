/*
 * cmd_top.c: `iod top`: the cluster's live resource state in a terminal.
 *
 * A thin ncurses shell over the pure model in src/obs/top.c: every refresh
 * it reads the API (status, nodes, services, replicas, endpoints, and a
 * mesh proxy's /metrics when --mesh names one), builds a snapshot, and
 * paints the chosen view filtered and sorted. Keys follow k9s and htop:
 * `:` switches view, `/` filters, `s` sorts, `q` quits. When the cluster
 * goes away the last data stays on screen under a red status line that
 * says so, and the next refresh tries again. `--once` prints one snapshot
 * (text or JSON) for scripts and never touches the terminal's modes.
 */
#include "ctl.h"
#include "iod/obs.h"

#include <curses.h>
#include <getopt.h>
#include <locale.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void usage(FILE *f)
{
	fprintf(f, "usage: iod top [--view V] [--refresh DUR] [--filter F] [--sort [-]COLUMN]\n"
	           "               [--mesh ADDR] [--server ADDR] [--once [-o text|json]]\n\n"
	           "Live resource state of the cluster. Views: cluster, nodes, gpus, replicas,\n"
	           "services, links.\n"
	           "  --view V         the view to start in (default replicas)\n"
	           "  --refresh DUR    time between refreshes (default 2s, at least 100ms)\n"
	           "  --filter F       keep rows where any column contains F, or COLUMN=TEXT\n"
	           "  --sort [-]COL    sort by a column (a leading - sorts descending)\n"
	           "  --mesh ADDR      a mesh proxy's admin address for requests/s, errors and\n"
	           "                   p99 (default $IOD_MESH; `iod up` prints it)\n"
	           "  --once           print one snapshot and exit (every view, or --view's)\n"
	           "  -o text|json     the --once format (default text)\n" IOD_CTL_SERVER_HELP
	           "\nKeys: `:` view (Tab or 1-6 too), `/` filter (Esc clears), `s` next sort\n"
	           "column, `r` reverse it, arrows/PgUp/PgDn scroll, `q` quits.\n");
}

/* ---- fetching ---------------------------------------------------------------- */

static uint64_t wall_ms(void)
{
	return iod_time_unix_ns() / IOD_NS_PER_MS;
}

static int build(struct iod_top_snapshot *s, const struct iod_ctl_cluster *f,
                 const struct iod_top_snapshot *prev)
{
	struct iod_top_input in = {.status = f->status,
	                           .nodes = f->nodes,
	                           .services = f->services,
	                           .replicas = f->replicas,
	                           .endpoints = f->endpoints,
	                           .telemetry = f->telemetry,
	                           .mesh_metrics = f->mesh,
	                           .now_ms = wall_ms()};
	return iod_top_snapshot_build(s, &in, prev);
}

/* The view's table filtered and sorted (col < 0: as built). */
static int shape(const struct iod_top_table *src, const char *filter, int col, bool desc,
                 struct iod_top_table *out, struct iod_err *e)
{
	if (iod_top_table_copy(out, src))
		return iod_err_set(e, -ENOMEM, "out of memory");
	if (filter && filter[0] && iod_top_table_filter(out, filter, e)) {
		iod_top_table_free(out);
		return -EINVAL;
	}
	if (col >= 0)
		iod_top_table_sort(out, (uint32_t)col, desc);
	return 0;
}

/* --sort [-]COLUMN for view v: column index, or -1 with e set. */
static int sort_column(const struct iod_top_table *t, const char *spec, bool *desc,
                       struct iod_err *e)
{
	*desc = spec[0] == '-';
	int c = iod_top_table_column(t, spec + (*desc ? 1 : 0));
	if (c < 0) {
		iod_err_set(e, -EINVAL, "unknown sort column \"%.32s\" in the %s view", spec,
		            iod_top_view_name(t->view));
		return -1;
	}
	return c;
}

/* ---- --once ------------------------------------------------------------------- */

static int once(struct iod_api_client *c, const char *mesh, int view, const char *filter,
                const char *sort, bool json)
{
	struct iod_ctl_cluster f;
	struct iod_err e = {0};
	static struct iod_top_snapshot s;

	if (iod_ctl_cluster_read(c, mesh, &f, &e))
		return iod_cli_fail(
		    "top", IOD_EXIT_UNAVAILABLE,
		    "%s\n  (is the cluster up? pick it with --server or IOD_SERVER)", e.msg);
	build(&s, &f, NULL);
	iod_ctl_cluster_free(&f);
	json_t *out = json_object();
	json_t *views = json_object();
	int rc = IOD_EXIT_OK;
	for (int v = 0; v < IOD_TOP_VIEW_COUNT; v++) {
		if (view >= 0 && v != view)
			continue;
		struct iod_top_table t;
		bool desc = false;
		int col = sort ? sort_column(&s.views[v], sort, &desc, &e) : -1;
		if ((sort && col < 0) || shape(&s.views[v], filter, col, desc, &t, &e)) {
			rc = iod_cli_fail("top", IOD_EXIT_INVALID, "%s", e.msg);
			break;
		}
		if (json) {
			json_object_set_new(views, iod_top_view_name((enum iod_top_view)v),
			                    iod_top_table_json(&t));
		} else {
			struct iod_buf b;
			iod_buf_init(&b);
			iod_top_table_format(&t, 200, &b);
			if (view < 0)
				printf("== %s\n", iod_top_view_name((enum iod_top_view)v));
			fputs(b.data ? b.data : "", stdout);
			if (t.note[0])
				printf("(%s)\n", t.note);
			if (view < 0)
				printf("\n");
			iod_buf_free(&b);
		}
		iod_top_table_free(&t);
	}
	if (json && rc == IOD_EXIT_OK) {
		json_object_set_new(out, "at_ms", json_integer((json_int_t)s.at_ms));
		json_object_set_new(out, "views", views);
		iod_json_print(stdout, out, false);
	} else {
		json_decref(views);
	}
	json_decref(out);
	iod_top_snapshot_free(&s);
	return rc;
}

/* ---- the terminal -------------------------------------------------------------- */

static volatile sig_atomic_t stop;
static void on_signal(int sig)
{
	(void)sig;
	stop = 1;
}

enum mode { MODE_NORMAL, MODE_VIEW, MODE_FILTER };

struct ui {
	struct iod_api_client *c;           /* the cluster */
	const char *mesh;                   /* mesh proxy admin address, or NULL */
	uint64_t refresh_ms;                /* between fetches */
	struct iod_top_snapshot snap[2];    /* the latest and the one before */
	int cur;                            /* index of the latest in snap */
	bool have;                          /* snap[cur] holds data */
	enum iod_top_view view;             /* shown */
	char filter[IOD_TOP_FILTER_MAX];    /* applied filter */
	int sort_col[IOD_TOP_VIEW_COUNT];   /* per view, -1 = as built */
	bool sort_desc[IOD_TOP_VIEW_COUNT]; /* per view */
	uint32_t scroll;                    /* first row shown */
	enum mode mode;                     /* what keys do */
	char input[IOD_TOP_FILTER_MAX];     /* text typed after : or / */
	char message[IOD_ERR_MSG_MAX];      /* a one-shot message (error of a key) */
	char fetch_err[IOD_ERR_MSG_MAX];    /* why the last refresh failed, "" if it did not */
	uint64_t fetched_ms;                /* wall time of the data shown */
	uint32_t refreshes;                 /* successful refreshes so far */
};

static void refresh_data(struct ui *u)
{
	struct iod_ctl_cluster f;
	struct iod_err e = {0};
	if (iod_ctl_cluster_read(u->c, u->mesh, &f, &e)) {
		snprintf(u->fetch_err, sizeof(u->fetch_err), "%s", e.msg);
		return;
	}
	int next = u->have ? 1 - u->cur : u->cur;
	iod_top_snapshot_free(&u->snap[next]);
	build(&u->snap[next], &f, u->have ? &u->snap[u->cur] : NULL);
	iod_ctl_cluster_free(&f);
	u->cur = next;
	u->have = true;
	u->fetch_err[0] = 0;
	u->fetched_ms = u->snap[next].at_ms;
	u->refreshes++;
}

static void clock_text(uint64_t ms, char *buf, size_t len)
{
	time_t t = (time_t)(ms / 1000);
	struct tm tm;
	localtime_r(&t, &tm);
	strftime(buf, len, "%H:%M:%S", &tm);
}

/* A line at row y, cut to the window, the rest of the row cleared. */
static void line_at(int y, const char *s, int attr)
{
	if (y < 0 || y >= LINES)
		return;
	move(y, 0);
	clrtoeol();
	attron(attr);
	/* cut by display cells, not bytes: the sparkline's blocks are 3 bytes */
	int cells = 0;
	const char *p = s;
	while (*p && *p != '\n' && cells < COLS) {
		const char *q = p + 1;
		while (*q && ((unsigned char)*q & 0xc0) == 0x80)
			q++;
		/* the bottom-right cell would scroll a non-scrolling window: skip it */
		if (y == LINES - 1 && cells == COLS - 1)
			break;
		addnstr(p, (int)(q - p));
		p = q;
		cells++;
	}
	attroff(attr);
}

static void draw(struct ui *u)
{
	char buf[512], when[16];
	erase();
	if (LINES < 4 || COLS < 24) {
		line_at(0, "window too small", A_BOLD);
		refresh();
		return;
	}
	clock_text(u->have ? u->fetched_ms : wall_ms(), when, sizeof(when));
	snprintf(buf, sizeof(buf), " iod top  %s  refresh %llums  %s", u->c->servers[u->c->cur],
	         (unsigned long long)u->refresh_ms, u->have ? when : "(no data yet)");
	line_at(0, buf, A_REVERSE);
	/* view tabs */
	move(1, 0);
	clrtoeol();
	for (int v = 0; v < IOD_TOP_VIEW_COUNT; v++) {
		snprintf(buf, sizeof(buf), " %d:%s ", v + 1,
		         iod_top_view_name((enum iod_top_view)v));
		int attr = v == (int)u->view ? A_REVERSE | A_BOLD : A_NORMAL;
		attron(attr);
		addnstr(buf, COLS - getcurx(stdscr) > 0 ? COLS - getcurx(stdscr) : 0);
		attroff(attr);
	}

	struct iod_top_table t = {0};
	struct iod_err e = {0};
	uint32_t shown = 0;
	if (u->have) {
		if (shape(&u->snap[u->cur].views[u->view], u->filter, u->sort_col[u->view],
		          u->sort_desc[u->view], &t, &e)) {
			/* a filter valid in one view may name a column another lacks */
			snprintf(u->message, sizeof(u->message), "%s", e.msg);
			u->filter[0] = 0;
			shape(&u->snap[u->cur].views[u->view], "", u->sort_col[u->view],
			      u->sort_desc[u->view], &t, &e);
		}
		struct iod_buf b;
		iod_buf_init(&b);
		iod_top_table_format(&t, (uint32_t)COLS, &b);
		int body = LINES - 4; /* title, tabs, note, status */
		if (u->scroll + 1 > t.rows_n)
			u->scroll = t.rows_n ? t.rows_n - 1 : 0;
		const char *p = b.data ? b.data : "";
		uint32_t row = 0;
		int y = 2;
		while (*p && y < 2 + body) {
			const char *nl = strchr(p, '\n');
			size_t n = nl ? (size_t)(nl - p) : strlen(p);
			char lineb[1024];
			snprintf(lineb, sizeof(lineb), "%.*s", (int)(n < 1023 ? n : 1023), p);
			if (row == 0) {
				line_at(y++, lineb, A_BOLD | A_UNDERLINE);
			} else if (row - 1 >= u->scroll) {
				const struct iod_top_row *r = &t.rows[row - 1];
				int attr = r->level == IOD_TOP_BAD    ? COLOR_PAIR(1) | A_BOLD
				           : r->level == IOD_TOP_WARN ? COLOR_PAIR(2)
				                                      : A_NORMAL;
				line_at(y++, lineb, attr);
				shown++;
			}
			row++;
			p = nl ? nl + 1 : p + n;
		}
		iod_buf_free(&b);
		if (t.note[0])
			line_at(LINES - 2, t.note, A_DIM);
		else if (!t.rows_n)
			line_at(LINES - 2, "(no rows)", A_DIM);
	}

	/* the status line */
	if (u->mode != MODE_NORMAL) {
		snprintf(buf, sizeof(buf), "%s%s", u->mode == MODE_VIEW ? ":" : "/", u->input);
		line_at(LINES - 1, buf, A_BOLD);
		curs_set(1);
		move(LINES - 1, (int)strlen(buf) < COLS ? (int)strlen(buf) : COLS - 1);
	} else {
		curs_set(0);
		if (u->fetch_err[0]) {
			char age[64] = "no data yet";
			if (u->have)
				snprintf(age, sizeof(age), "showing data from %s", when);
			snprintf(buf, sizeof(buf),
			         "cluster unreachable (%s); %s; retrying every %llums",
			         u->fetch_err, age, (unsigned long long)u->refresh_ms);
			line_at(LINES - 1, buf, COLOR_PAIR(1) | A_BOLD | A_REVERSE);
		} else if (u->message[0]) {
			line_at(LINES - 1, u->message, COLOR_PAIR(1) | A_BOLD);
		} else {
			char so[64] = "";
			int sc = u->sort_col[u->view];
			if (sc >= 0 && u->have)
				snprintf(so, sizeof(so), "  sort %s%s",
				         u->snap[u->cur].views[u->view].cols[sc],
				         u->sort_desc[u->view] ? " (desc)" : "");
			snprintf(buf, sizeof(buf),
			         "%u of %u rows%s%s%s%s   : view  / filter  s sort  q quit", shown,
			         t.rows_n, u->filter[0] ? "  filter " : "", u->filter, so,
			         u->have ? "" : "  (connecting)");
			line_at(LINES - 1, buf, A_REVERSE);
		}
	}
	iod_top_table_free(&t);
	refresh();
}

/* A key in normal mode; false to quit. */
static bool key_normal(struct ui *u, int ch)
{
	u->message[0] = 0;
	switch (ch) {
	case 'q':
	case 'Q': return false;
	case ':':
		u->mode = MODE_VIEW;
		u->input[0] = 0;
		break;
	case '/':
		u->mode = MODE_FILTER;
		snprintf(u->input, sizeof(u->input), "%s", u->filter);
		break;
	case 27: u->filter[0] = 0; break;
	case '\t':
		u->view = (enum iod_top_view)((u->view + 1) % IOD_TOP_VIEW_COUNT);
		u->scroll = 0;
		break;
	case KEY_BTAB:
		u->view =
		    (enum iod_top_view)((u->view + IOD_TOP_VIEW_COUNT - 1) % IOD_TOP_VIEW_COUNT);
		u->scroll = 0;
		break;
	case 's': {
		uint32_t n = u->snap[u->cur].views[u->view].cols_n;
		if (n)
			u->sort_col[u->view] = (u->sort_col[u->view] + 1) % (int)n;
		break;
	}
	case 'r': u->sort_desc[u->view] = !u->sort_desc[u->view]; break;
	case KEY_DOWN:
	case 'j': u->scroll++; break;
	case KEY_UP:
	case 'k':
		if (u->scroll)
			u->scroll--;
		break;
	case KEY_NPAGE: u->scroll += (uint32_t)(LINES > 8 ? LINES - 5 : 1); break;
	case KEY_PPAGE:
		u->scroll =
		    u->scroll > (uint32_t)(LINES - 5) ? u->scroll - (uint32_t)(LINES - 5) : 0;
		break;
	case KEY_HOME: u->scroll = 0; break;
	default:
		if (ch >= '1' && ch < '1' + IOD_TOP_VIEW_COUNT) {
			u->view = (enum iod_top_view)(ch - '1');
			u->scroll = 0;
		}
	}
	return true;
}

static void key_input(struct ui *u, int ch)
{
	size_t n = strlen(u->input);
	if (ch == 27) { /* Esc: cancel; in the filter prompt it also clears the filter */
		if (u->mode == MODE_FILTER)
			u->filter[0] = 0;
		u->mode = MODE_NORMAL;
	} else if (ch == '\n' || ch == '\r' || ch == KEY_ENTER) {
		struct iod_err e = {0};
		if (u->mode == MODE_VIEW) {
			enum iod_top_view v;
			if (iod_top_view_parse(u->input, &v, &e))
				snprintf(u->message, sizeof(u->message), "%s", e.msg);
			else {
				u->view = v;
				u->scroll = 0;
			}
		} else {
			struct iod_top_table t;
			if (u->have &&
			    shape(&u->snap[u->cur].views[u->view], u->input, -1, false, &t, &e)) {
				snprintf(u->message, sizeof(u->message), "%s", e.msg);
			} else {
				if (u->have)
					iod_top_table_free(&t);
				snprintf(u->filter, sizeof(u->filter), "%s", u->input);
				u->scroll = 0;
			}
		}
		u->mode = MODE_NORMAL;
	} else if (ch == KEY_BACKSPACE || ch == 127 || ch == 8) {
		if (n)
			u->input[n - 1] = 0;
	} else if (ch >= 0x20 && ch < 0x7f && n + 1 < sizeof(u->input)) {
		u->input[n] = (char)ch;
		u->input[n + 1] = 0;
	}
}

static int interactive(struct ui *u)
{
	struct sigaction sa = {0};
	sa.sa_handler = on_signal;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	setlocale(LC_ALL, "");
	if (!initscr())
		return iod_cli_fail("top", IOD_EXIT_ERROR, "cannot initialise the terminal");
	cbreak();
	noecho();
	nonl();
	keypad(stdscr, TRUE);
	set_escdelay(25);
	if (has_colors()) {
		start_color();
		use_default_colors();
		init_pair(1, COLOR_RED, -1);
		init_pair(2, COLOR_YELLOW, -1);
	}
	timeout(100);
	uint64_t next = 0;
	while (!stop) {
		uint64_t now = iod_clock_now_ns() / IOD_NS_PER_MS;
		if (now >= next) {
			refresh_data(u);
			next = iod_clock_now_ns() / IOD_NS_PER_MS + u->refresh_ms;
		}
		draw(u);
		int ch = getch();
		if (ch == ERR || ch == KEY_RESIZE)
			continue;
		if (u->mode == MODE_NORMAL) {
			if (!key_normal(u, ch))
				break;
		} else {
			key_input(u, ch);
		}
	}
	endwin();
	iod_top_snapshot_free(&u->snap[0]);
	iod_top_snapshot_free(&u->snap[1]);
	return IOD_EXIT_OK;
}

int cmd_top(int argc, char **argv)
{
	static const struct option opts[] = {
	    {"output", required_argument, NULL, 'o'},  {"server", required_argument, NULL, 'S'},
	    {"refresh", required_argument, NULL, 'r'}, {"view", required_argument, NULL, 'v'},
	    {"filter", required_argument, NULL, 'f'},  {"sort", required_argument, NULL, 's'},
	    {"mesh", required_argument, NULL, 'm'},    {"once", no_argument, NULL, '1'},
	    {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
	static const char *const outs[] = {"text", "json", NULL};
	enum iod_output out = IOD_OUT_TEXT;
	const char *server = NULL, *filter = NULL, *sort = NULL, *mesh = getenv("IOD_MESH");
	bool one = false, out_set = false;
	uint64_t refresh_ns = 2 * IOD_NS_PER_S;
	int view = -1, o, rc;
	struct iod_err e = {0};

	while ((o = getopt_long(argc, argv, "o:h", opts, NULL)) != -1) {
		switch (o) {
		case 'o':
			if (iod_cli_output("top", optarg, outs, &out))
				return IOD_EXIT_INVALID;
			out_set = true;
			break;
		case 'S': server = optarg; break;
		case 'r':
			if (iod_parse_duration(optarg, &refresh_ns, &e))
				return iod_cli_fail("top", IOD_EXIT_INVALID, "--refresh: %s",
				                    e.msg);
			if (refresh_ns < 100 * IOD_NS_PER_MS)
				return iod_cli_fail("top", IOD_EXIT_INVALID,
				                    "--refresh %s is below 100ms", optarg);
			break;
		case 'v': {
			enum iod_top_view v;
			if (iod_top_view_parse(optarg, &v, &e))
				return iod_cli_fail("top", IOD_EXIT_INVALID, "%s", e.msg);
			view = (int)v;
			break;
		}
		case 'f': filter = optarg; break;
		case 's': sort = optarg; break;
		case 'm': mesh = optarg; break;
		case '1': one = true; break;
		case 'h': usage(stdout); return IOD_EXIT_OK;
		default: usage(stderr); return IOD_EXIT_INVALID;
		}
	}
	if (optind < argc)
		return iod_cli_fail("top", IOD_EXIT_INVALID,
		                    "unexpected argument \"%s\" (views are chosen with --view)",
		                    argv[optind]);
	if (out_set && !one)
		return iod_cli_fail("top", IOD_EXIT_INVALID, "-o needs --once");
	if (filter && strlen(filter) >= IOD_TOP_FILTER_MAX)
		return iod_cli_fail("top", IOD_EXIT_INVALID,
		                    "--filter is longer than %d characters",
		                    IOD_TOP_FILTER_MAX - 1);

	struct iod_api_client c;
	if ((rc = iod_ctl_client("top", server, &c)))
		return rc;
	if (one) {
		rc = once(&c, mesh, view, filter, sort, out == IOD_OUT_JSON);
		iod_api_client_close(&c);
		return rc;
	}
	/* a refresh must not freeze the keys for long when the cluster is gone */
	c.timeout_ms = 1000;
	c.retry_ms = 500;
	c.retry_sleep_ms = 50;
	static struct ui u;
	memset(&u, 0, sizeof(u));
	u.c = &c;
	u.mesh = mesh;
	u.refresh_ms = refresh_ns / IOD_NS_PER_MS;
	u.view = view >= 0 ? (enum iod_top_view)view : IOD_TOP_REPLICAS;
	for (int v = 0; v < IOD_TOP_VIEW_COUNT; v++)
		u.sort_col[v] = -1;
	if (filter)
		snprintf(u.filter, sizeof(u.filter), "%s", filter);
	if (sort) {
		/* checked against the starting view once the first snapshot is in */
		u.sort_desc[u.view] = sort[0] == '-';
		struct iod_top_snapshot probe;
		struct iod_top_input none = {0};
		iod_top_snapshot_build(&probe, &none, NULL);
		bool desc;
		int col = sort_column(&probe.views[u.view], sort, &desc, &e);
		iod_top_snapshot_free(&probe);
		if (col < 0) {
			iod_api_client_close(&c);
			return iod_cli_fail("top", IOD_EXIT_INVALID, "%s", e.msg);
		}
		u.sort_col[u.view] = col;
	}
	rc = interactive(&u);
	iod_api_client_close(&c);
	return rc;
}
