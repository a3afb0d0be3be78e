#!/bin/sh
# viz_browser.sh BUILD: `iod viz` on a real local cluster.
#   1. net-topology as DOT and SVG (Graphviz) names every node, GPU, service
#      and replica; gpu-topology --node draws one node; bad views fail (2);
#   2. the live view in headless Chromium (Debian's chromium + chromedriver,
#      driven by python3-selenium): one graph node per cluster node, one
#      edge per service dependency, the derived fabric (a leaf, a spine)
#      with the legend saying so, a replica's click shows its `iod
#      explain` reasons and its recent events; killing a replica
#      (restart: never) turns it red within 2 s of the kill without a
#      reload, arriving as a delta (the page got one whole graph, the view
#      listed the cluster once and followed the watch), and appears in the
#      events feed; every link says "no data" (no data plane: no counters);
#      a screenshot goes to the artifacts directory
#      ($IOD_ARTIFACTS, default BUILD/artifacts);
#   docs/observability.md names every metric family the servers and the
#   agents serve;
#   3. the view's server refuses path traversal and unknown paths, and
#      bounds its SSE streams (503 past IOD_VIZ_SSE_CLIENTS_MAX).
# Prints one RESULT line per check; the browser part skips without Chromium.
set -u
. "$(dirname "$0")/lib.sh"
BUILD=${1:-build}
need_iod "$BUILD"
need python3 curl
ART=${IOD_ARTIFACTS:-$BUILD/artifacts}
mkdir -p "$ART"

T=$(mktemp -d)
T0=$(date +%s)
export IOD_STATE_DIR="$T/cluster"
BASE=$(free_port_block $$) || { echo "skip: no free block of ports"; exit 77; }
API="127.0.0.1:$((BASE + 10))"
VIEW="127.0.0.1:$((BASE + 19))"
export IOD_SERVER="$API,127.0.0.1:$((BASE + 11)),127.0.0.1:$((BASE + 12))"
VPID=""
cleanup() {
	[ -n "$VPID" ] && kill "$VPID" 2>/dev/null && wait "$VPID" 2>/dev/null
	stop_cluster
	rm -rf "$T"
}
trap cleanup EXIT
trap "exit 1" INT TERM


start_cluster "$T/up.log" --nodes 3 --gpus-per-node 2 --api-port $((BASE + 10)) --raft-port $((BASE + 0)) \
	--no-mesh --telemetry-port $((BASE + 60)) --election-timeout 1s --heartbeat 100ms || exit 1
cat >"$T/spec.yaml" <<'EOF'
services:
  - name: ps
    type: stateful
    replicas: 1
    command: iod demo-worker --role parameter-server --params 4096
  - name: trainer
    type: stateless
    replicas: 2
    resources: {gpu: 1}
    command: iod demo-worker --role worker --ps-service ps --compute-ms 2
    depends_on: [ps]
  - name: batch
    type: stateless
    replicas: 1
    restart: never
    command: iod demo-worker --role parameter-server --params 64
EOF
"$IOD" deploy -f "$T/spec.yaml" >"$T/deploy.log" 2>&1 || { cat "$T/deploy.log"; bad "deploy"; exit 1; }
running() {
	"$IOD" get replicas -o json 2>/dev/null | python3 -c '
import json, sys
items = json.load(sys.stdin)["items"]
sys.exit(0 if len(items) == 4 and all(i["value"].get("phase") in ("running", "healthy") for i in items) else 1)'
}
wait_for 30 running || { "$IOD" get replicas; bad "replicas running"; exit 1; }

# 1. DOT and SVG
"$IOD" viz net-topology >"$T/net.dot" 2>"$T/err"
miss=""
for want in '"node:node-1"' '"node:node-3/GPU1"' '"svc:trainer" -- "svc:ps"' '"replica:batch-0"' '"switch:leaf-0"' '"switch:spine"'; do
	grep -qF "$want" "$T/net.dot" || miss="$miss $want"
done
if [ -z "$miss" ] && command -v dot >/dev/null && "$IOD" viz net-topology -o svg >"$T/net.svg" &&
	grep -q '<svg' "$T/net.svg" && grep -Eq 'trainer(-|&#45;)1' "$T/net.svg"; then
	cp "$T/net.svg" "$ART/net-topology.svg"
	ok "viz_net_topology_dot_svg"
else
	bad "viz_net_topology_dot_svg:$miss"; head -20 "$T/net.dot"; cat "$T/err"
fi
# no data plane, no counters: every link to the fabric grey and dashed, as on the page
nd=$(grep -c -- '-- "switch:leaf-0" .*color="#c4c4c4", style=dashed' "$T/net.dot")
if [ "$nd" -ge 3 ] && ! grep -E -- '-- "switch:leaf-0" ' "$T/net.dot" | grep -qv '#c4c4c4'; then
	ok "viz_dot_links_no_data ($nd links to the leaf grey and dashed)"
else
	bad "viz_dot_links_no_data: $(grep -m2 -- '"switch:leaf-0" \[' "$T/net.dot")"
fi
if "$IOD" viz gpu-topology --node node-2 | grep -q '^graph' &&
	"$IOD" viz gpu-topology --node node-2 -o svg | grep -q '<svg'; then ok "viz_gpu_topology"; else
	bad "viz_gpu_topology"; fi
o1=$("$IOD" viz nett-topology 2>&1); r1=$?
o2=$("$IOD" viz gpu-topology 2>&1); r2=$?
o3=$("$IOD" viz gpu-topology --node nosuch 2>&1); r3=$?
if [ $r1 = 2 ] && echo "$o1" | grep -q 'did you mean net-topology' && [ $r2 = 2 ] &&
	echo "$o2" | grep -q 'needs --node' && [ $r3 = 2 ] && echo "$o3" | grep -q 'not found'; then
	ok "viz_bad_input"
else
	bad "viz_bad_input ($r1 $o1 / $r2 $o2 / $r3 $o3)"
fi

# docs/observability.md names every metric family the servers and agents serve
fams=$(for a in "$API" "127.0.0.1:$((BASE + 60))" "127.0.0.1:$((BASE + 61))"; do
	curl -sf "http://$a/metrics"; done | sed -n 's/^# TYPE \([A-Za-z_:][A-Za-z0-9_:]*\) .*/\1/p' | sort -u)
DOC="$(dirname "$0")/../../docs/observability.md"
undoc=""
for f in $fams; do grep -q "\b$f\b" "$DOC" || undoc="$undoc $f"; done
if [ -n "$fams" ] && [ -z "$undoc" ]; then
	ok "viz_metrics_documented ($(echo "$fams" | wc -l) families, each named in docs/observability.md)"
else
	bad "viz_metrics_documented (not in docs/observability.md:${undoc:- no families scraped})"
fi

# a flow node-2's virtual switch dropped, as its agent records it in its
# directory (this cluster runs no data plane, so none writes one): the view
# reads it as `iod trace --drops` does
if [ -d "$IOD_STATE_DIR/node-2" ]; then
	cat >"$IOD_STATE_DIR/node-2/drops.json" <<'EOF'
{"node": "node-2", "dropped": 2, "recorded": 1, "rules": [{"rule": "tenant-x/deny-other-tenants", "forwarded": 0, "dropped": 2}],
 "records": [{"seq": 1, "first_ms": 1000, "last_ms": 1500, "count": 2, "src": "10.0.9.2", "sport": 40000, "dst": "10.0.1.5", "dport": 7777, "proto": 6, "tcp_flags": 2, "from_fabric": false, "src_name": "intruder-0", "dst_name": "ps-0", "tenant": "x", "rule": "tenant-x/deny-other-tenants", "why": "10.0.1.5 is tenant default's (ps-0), not x's"}]}
EOF
fi
"$IOD" trace --drops --node 2 | grep -q 'rule tenant-x/deny-other-tenants' || bad "viz_drops_fixture: iod trace --drops does not read it"

# 3 first (no browser needed): the server's bounds
"$IOD" viz net-topology --live --listen "$VIEW" --refresh 200ms >"$T/view.log" 2>&1 &
VPID=$!
wait_for 10 sh -c "curl -sf http://$VIEW/graph.json >/dev/null" || { cat "$T/view.log"; bad "live view up"; exit 1; }
c1=$(curl -s -o /dev/null -w '%{http_code}' --path-as-is "http://$VIEW/../../../etc/passwd")
c2=$(curl -s -o /dev/null -w '%{http_code}' "http://$VIEW/%2e%2e/%2e%2e/etc/passwd")
c3=$(curl -s -o /dev/null -w '%{http_code}' "http://$VIEW/etc/passwd")
c4=$(curl -s -o /dev/null -w '%{http_code}' -X POST "http://$VIEW/")
if [ "$c1" = 400 ] && [ "$c2" = 400 ] && [ "$c3" = 404 ] && [ "$c4" = 405 ]; then
	ok "viz_path_traversal_refused"
else
	bad "viz_path_traversal_refused ($c1 $c2 $c3 $c4)"
fi
python3 - "$VIEW" <<'PY' >"$T/sse.out" 2>&1
import socket, sys, time
host, port = sys.argv[1].rsplit(":", 1)
socks, codes = [], []
for i in range(34):
    s = socket.create_connection((host, int(port)), timeout=5)
    s.sendall(b"GET /events HTTP/1.1\r\nHost: x\r\n\r\n")
    socks.append(s)
    codes.append(s.recv(64).split(b" ")[1].decode())
print(" ".join(codes))
for s in socks:
    s.close()
PY
codes=$(cat "$T/sse.out")
n200=$(echo "$codes" | tr ' ' '\n' | grep -c '^200$')
n503=$(echo "$codes" | tr ' ' '\n' | grep -c '^503$')
if [ "$n200" = 32 ] && [ "$n503" = 2 ]; then ok "viz_sse_clients_bounded (32 served, 2 refused)"; else
	bad "viz_sse_clients_bounded: $codes"; fi
# the closed streams give their slots back (a keep-alive write notices each)
sse_open() { curl -s "http://$VIEW/stats" | python3 -c 'import json,sys; sys.exit(0 if json.load(sys.stdin)["sse_open"] == 0 else 1)'; }
if wait_for 10 sse_open; then ok "viz_sse_slots_freed"; else bad "viz_sse_slots_freed: $(curl -s "http://$VIEW/stats")"; fi

# 2. the browser
PY3=/usr/bin/python3
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ] && $PY3 -c 'import selenium' 2>/dev/null; then
	batch_pid() {
		python3 -c "
import json, glob
for f in glob.glob('$IOD_STATE_DIR/node-*/status.json'):
    for r in json.load(open(f))['replicas']:
        if r['name'] == 'batch-0' and r['pid']:
            print(r['pid'])"
	}
	$PY3 - "http://$VIEW/" "$ART/viz_live.png" "$T/killed" <<'PY' >"$T/browser.out" 2>&1 &
import os, sys, time
from selenium import webdriver
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.common.exceptions import StaleElementReferenceException
url, shot, killed = sys.argv[1:4]
o = Options()
for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1400,900",
          "--disable-dev-shm-usage"]:
    o.add_argument(a)
d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=o)
def js(s):
    return d.execute_script(s)
def until(cond, secs):
    # the live page re-renders its elements: one found a moment ago may be
    # gone (stale) when it is used; look again
    end = time.time() + secs
    while time.time() < end:
        try:
            v = cond()
        except StaleElementReferenceException:
            v = None
        if v:
            return v
        time.sleep(0.05)
    return None
def click(sel):
    return until(lambda: d.find_element(By.CSS_SELECTOR, sel).click() or True, 5)
try:
    d.get(url)
    until(lambda: js("return window.iodView && window.iodView.renders > 0"), 10)
    nodes = js("return document.querySelectorAll('[data-kind=node]').length")
    deps = js("return document.querySelectorAll('line[data-kind=depends]').length")
    print("NODES", nodes)
    print("DEPENDS", deps)
    print("FIRST_PAINT_MS", round(js("return window.iodView.firstPaintMs")))
    # a click shows the placement explanation
    click("[data-id='replica:trainer-0']")
    txt = until(lambda: (d.find_elements(By.ID, "explain") or [None])[0] and
                d.find_element(By.ID, "explain").text, 5)
    print("EXPLAIN", "highest score" in (txt or ""))
    evs = until(lambda: (d.find_elements(By.ID, "replica-events") or [None])[0] and
                d.find_element(By.ID, "replica-events").text, 5)
    print("REPLICA_EVENTS", "trainer-0" in (evs or ""))
    print("SWITCHES", js("return document.querySelectorAll('[data-kind=switch]').length"))
    print("FABRIC_NOTE", "derived" in js("return document.getElementById('fabric-note').textContent"))
    # links: this cluster runs no data plane, so every link says "no data"
    print("LINKS", js("return document.querySelectorAll('line[data-kind=net], line[data-kind=fabric]').length"))
    print("LINKS_NODATA", js("return document.querySelectorAll('line.nodata[data-util=none]').length"))
    print("LINKS_LEGEND", "no data" in js("return document.querySelector('.legend.links').textContent"))
    js("window.__noReload = 42")
    status = js("return document.querySelector(\"[data-id='replica:batch-0']\").getAttribute('data-status')")
    print("BEFORE", status)
    open(killed + ".ready", "w").close()
    t = float(until(lambda: os.path.exists(killed) and open(killed).read().strip(), 20) or 0)
    red = until(lambda: js("var e = document.querySelector(\"[data-id='replica:batch-0']\");"
                           "return e && e.getAttribute('data-status') == 'bad'"), 5)
    print("RED_MS", round((time.time() - t) * 1000) if red else -1)
    print("NO_RELOAD", js("return window.__noReload") == 42)
    print("GRAPHS", js("return window.iodView.graphs"))
    print("DELTAS", js("return window.iodView.deltas"))
    fed = until(lambda: "batch-0" in js("return document.getElementById('feed').textContent"), 5)
    print("FEED", bool(fed))
    # drops: a count on the node, and a click lists them with their rule
    print("DROPS_COUNT", "2 dropped" in (js("var t = document.querySelector(\"[data-id='node:node-2'] > text\"); return t ? t.textContent : ''") or ""))
    js("var t = document.querySelector(\"[data-id='node:node-2'] > text\");"
       "if (t) t.dispatchEvent(new MouseEvent('click', {bubbles: true}))")
    dl = until(lambda: (d.find_elements(By.ID, "node-drops") or [None])[0] and
               d.find_element(By.ID, "node-drops").text, 5)
    print("DROPS_LIST", "tenant-x/deny-other-tenants" in (dl or "") and "intruder-0" in (dl or ""))
    d.save_screenshot(shot)
    print("SHOT", os.path.getsize(shot))
finally:
    d.quit()
PY
	BPID=$!
	wait_for 30 test -f "$T/killed.ready"
	# kill the replica: its sandbox's init (the agent's child; the workload
	# in its PID namespace dies with it), the time written before the signal
	bp=$(batch_pid)
	python3 -c 'import time; print(time.time())' >"$T/killed.tmp"
	if [ -n "$bp" ] && kill -9 "$bp"; then
		mv "$T/killed.tmp" "$T/killed"
	else
		echo "  no pid for batch-0 to kill (status.json: '$bp')"
	fi
	wait "$BPID"
	cat "$T/browser.out" | sed 's/^/  /'
	echo "  batch-0 after the kill: phase $("$IOD" get replicas -o json 2>/dev/null | python3 -c '
import json, sys
print(next((i["value"].get("phase") for i in json.load(sys.stdin)["items"] if i["name"] == "batch-0"), "?"))')"
	v() { sed -n "s/^$1 //p" "$T/browser.out"; }
	if [ "$(v NODES)" = 3 ] && [ "$(v DEPENDS)" = 1 ]; then ok "viz_browser_one_node_per_node"; else
		bad "viz_browser_one_node_per_node (nodes $(v NODES), dependency edges $(v DEPENDS))"; fi
	if [ "$(v EXPLAIN)" = True ]; then ok "viz_browser_click_explains"; else bad "viz_browser_click_explains"; fi
	ms=$(v RED_MS)
	if [ "$(v BEFORE)" = ok ] && [ -n "$ms" ] && [ "$ms" -ge 0 ] && [ "$ms" -le 2000 ] &&
		[ "$(v NO_RELOAD)" = True ]; then
		ok "viz_browser_killed_replica_red (${ms} ms after the kill, no reload)"
	else
		bad "viz_browser_killed_replica_red (before $(v BEFORE), ${ms:-?} ms, no reload $(v NO_RELOAD))"
	fi
	if [ "$(v SWITCHES)" = 2 ] && [ "$(v FABRIC_NOTE)" = True ]; then
		ok "viz_browser_derived_fabric (a leaf and a spine, the legend says derived)"
	else
		bad "viz_browser_derived_fabric (switches $(v SWITCHES), note $(v FABRIC_NOTE))"
	fi
	if [ -n "$(v LINKS)" ] && [ "$(v LINKS)" -ge 4 ] && [ "$(v LINKS)" = "$(v LINKS_NODATA)" ] &&
		[ "$(v LINKS_LEGEND)" = True ]; then
		ok "viz_browser_links_no_data ($(v LINKS) links, none with counters: grey, nothing made up)"
	else
		bad "viz_browser_links_no_data (links $(v LINKS), no data $(v LINKS_NODATA), legend $(v LINKS_LEGEND))"
	fi
	lists=$(curl -s "http://$VIEW/stats" | python3 -c 'import json,sys; print(json.load(sys.stdin).get("lists"))')
	if [ "$(v GRAPHS)" = 1 ] && [ -n "$(v DELTAS)" ] && [ "$(v DELTAS)" -ge 1 ] && [ "$lists" = 1 ]; then
		ok "viz_browser_deltas_from_the_watch (1 graph, $(v DELTAS) deltas, the cluster listed once)"
	else
		bad "viz_browser_deltas_from_the_watch (graphs $(v GRAPHS), deltas $(v DELTAS), lists $lists)"
	fi
	if [ "$(v FEED)" = True ] && [ "$(v REPLICA_EVENTS)" = True ]; then
		ok "viz_browser_events_feed (the kill in the feed; a click lists the replica's events)"
	else
		bad "viz_browser_events_feed (feed $(v FEED), replica events $(v REPLICA_EVENTS))"
	fi
	if [ "$(v DROPS_COUNT)" = True ] && [ "$(v DROPS_LIST)" = True ]; then
		ok "viz_browser_drops (node-2 counts its dropped flow; a click lists it with its rule)"
	else
		bad "viz_browser_drops (count $(v DROPS_COUNT), list $(v DROPS_LIST))"
	fi
	if [ -s "$ART/viz_live.png" ]; then ok "viz_browser_screenshot ($ART/viz_live.png)"; else
		bad "viz_browser_screenshot"; fi
else
	skip_check viz_browser "needs Debian's chromium, chromium-driver and python3-selenium"
fi
