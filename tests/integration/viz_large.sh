#!/bin/sh
# viz_large.sh BUILD: the live view stays usable at 1,000 nodes.
# A synthetic control plane (python, on loopback: 1,000 nodes of 8 GPUs in
# 40 racks over 2 zones, 20 services, 2,000 replicas, and a long-poll
# watch over the changes it makes) feeds `iod viz net-topology --live`;
# headless Chromium (Debian's chromium + chromedriver, python3-selenium)
# checks:
#   - the page draws the 40 racks collapsed (no node drawn), the derived
#     spines and core, and not thousands of elements;
#   - a click on a rack expands it (its 25 nodes with 8 GPUs each), a
#     second click collapses it;
#   - a replica failing in the API is red within 1 s, as a delta (one
#     whole graph received), shown in its folded service (100 replicas:
#     only those not ok are drawn, and a count), which a click unfolds;
#   - a node lost (deleted by the watch) leaves its rack's count;
#   - a screenshot goes to the artifacts ($IOD_ARTIFACTS, default
#     BUILD/artifacts/viz_large.png).
# Prints one RESULT line per check; skips without Chromium.
# iod-test: parallel
set -u
. "$(dirname "$0")/lib.sh"
BUILD=${1:-build}
need_iod "$BUILD"
PY3=/usr/bin/python3
if ! [ -x /usr/bin/chromium ] || ! [ -x /usr/bin/chromedriver ] || ! $PY3 -c 'import selenium' 2>/dev/null; then
	skip_check viz_large "needs Debian's chromium, chromium-driver and python3-selenium"
	exit 0
fi
ART=${IOD_ARTIFACTS:-$BUILD/artifacts}
mkdir -p "$ART"
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
$PY3 - "$IOD" "$ART/viz_large.png" <<'PY' >"$T/out" 2>&1
import json, signal, socket, subprocess, sys, threading, time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

IOD, SHOT = sys.argv[1:3]
N, GPUS, RACK = 1000, 8, 25
lock = threading.Lock()
changed = threading.Condition(lock)
st = {"rev": 10, "history": [], "failed": set(), "gone": set()}


def node(i):
    devs = [{"kind": "gpu", "name": f"GPU{g}", "gpu_index": g, "model": "NVIDIA H100",
             "links": {f"GPU{g ^ 1}": {"class": "NV18", "nvlinks": 18}}} for g in range(GPUS)]
    devs.append({"kind": "nic", "name": "NIC0"})
    r = i // RACK
    return {"kind": "node", "name": f"node-{i:04d}", "rev": 1, "lease": 1,
            "value": {"gpus": GPUS, "model": "synthetic-8", "rack": f"r{r:02d}",
                      "zone": f"z{r % 2}", "topology": {"devices": devs}}}


def replica(r):
    name = f"svc-{r % 20}-{r // 20}"
    return {"kind": "replica", "name": name, "rev": 1,
            "value": {"service": f"svc-{r % 20}", "node": f"node-{(r // 2) % N:04d}",
                      "gpus": str(r % 2), "restarts": 0,
                      "phase": "failed" if name in st["failed"] else "healthy"}}


def event(kind, name, typ, value=None):
    with lock:
        st["rev"] += 1
        e = {"rev": st["rev"], "type": typ, "kind": kind, "name": name}
        if value is not None:
            e["value"] = value
        st["history"].append(e)
        changed.notify_all()


class API(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def send(self, obj):
        b = json.dumps(obj).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)

    def do_GET(self):
        p, _, q = self.path.partition("?")
        args = dict(kv.split("=", 1) for kv in q.split("&") if "=" in kv)
        if p == "/v1/watch":
            after, end = int(args.get("rev", "0")), time.time() + int(args.get("timeout_ms", "0")) / 1000
            with lock:
                while st["rev"] <= after and time.time() < end:
                    changed.wait(end - time.time())
                ev = [e for e in st["history"] if e["rev"] > after]
                self.send({"rev": st["rev"], "events": ev})
            return
        with lock:
            if p == "/v1/nodes":
                self.send({"rev": st["rev"], "items": [node(i) for i in range(N)
                                                        if f"node-{i:04d}" not in st["gone"]]})
            elif p == "/v1/services":
                self.send({"rev": st["rev"], "items": [
                    {"kind": "service", "name": f"svc-{s}", "rev": 1,
                     "value": {"replicas": 100, "depends_on": [f"svc-{s - 1}"] if s else []}}
                    for s in range(20)]})
            elif p == "/v1/replicas":
                self.send({"rev": st["rev"], "items": [replica(r) for r in range(2 * N)]})
            elif p in ("/v1/endpoints",):
                self.send({"rev": st["rev"], "items": []})
            elif p == "/v1/status":
                self.send({"leader": 1, "term": 1, "revision": st["rev"]})
            else:
                self.send_response(404)
                self.end_headers()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


api, vp = free_port(), free_port()
srv = ThreadingHTTPServer(("127.0.0.1", api), API)
srv.daemon_threads = True
threading.Thread(target=srv.serve_forever, daemon=True).start()
view = subprocess.Popen([IOD, "viz", "net-topology", "--live", "--server", f"127.0.0.1:{api}",
                         "--listen", f"127.0.0.1:{vp}"], stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL)
try:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By

    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", vp), timeout=1).close()
            break
        except OSError:
            time.sleep(0.1)
    o = Options()
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1600,1000",
              "--disable-dev-shm-usage"]:
        o.add_argument(a)
    d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=o)
    js = d.execute_script

    def until(f, secs):
        end = time.time() + secs
        while time.time() < end:
            v = f()
            if v:
                return v
            time.sleep(0.02)
        return None

    def count(sel):
        return js(f"return document.querySelectorAll(\"{sel}\").length")
    try:
        d.get(f"http://127.0.0.1:{vp}/")
        until(lambda: js("return window.iodView && window.iodView.renders > 0"), 30)
        print("RACKS", count("g[data-kind=rack]"))
        print("NODES_COLLAPSED", count("g[data-kind=node]"))
        print("SWITCHES", count("g[data-kind=switch]"))
        print("ELEMENTS", count("svg *"))
        print("COUNTS", js("return document.getElementById('counts').textContent"))
        d.find_element(By.CSS_SELECTOR, "g[data-id='rack:r03']").click()
        until(lambda: count("g[data-kind=node]") > 0, 5)
        print("NODES_EXPANDED", count("g[data-kind=node]"))
        print("GPUS_EXPANDED", count("rect[data-kind=gpu]"))
        print("EXPANDED_ONE_RACK", count("g[data-id='node:node-0075']") == 1 and
              count("g[data-id='node:node-0100']") == 0)
        d.find_element(By.CSS_SELECTOR, "g[data-id='rack:r03']").click()
        until(lambda: count("g[data-kind=node]") == 0, 5)
        print("NODES_COLLAPSED_AGAIN", count("g[data-kind=node]"))
        # a replica fails in the API
        name = "svc-3-7"
        with lock:
            st["failed"].add(name)
        t = time.time()
        event("replica", name, "put", replica(next(r for r in range(2 * N)
                                                    if f"svc-{r % 20}-{r // 20}" == name))["value"])
        red = until(lambda: count(f"[data-id='replica:{name}'][data-status=bad]") == 1, 5)
        print("RED_MS", round((time.time() - t) * 1000) if red else -1)
        # its service is folded (100 replicas): the broken one shows, the rest
        # is a count; a click unfolds all 100
        print("FOLDED_SHOWN", count("g[data-id='svc:svc-3'] circle"))
        d.find_element(By.CSS_SELECTOR, "g[data-id='svc:svc-3'] rect").click()
        print("UNFOLDED_SHOWN", until(lambda: count("g[data-id='svc:svc-3'] circle") > 1 and
                                     count("g[data-id='svc:svc-3'] circle"), 5))
        print("GRAPHS", js("return window.iodView.graphs"))
        # a node is lost: the watch deletes it; its rack counts one fewer
        with lock:
            st["gone"].add("node-0130")
        event("node", "node-0130", "delete")
        txt = until(lambda: "24 nodes" in (js("var e = document.querySelector(\"g[data-id='rack:r05'] text\"); return e && e.textContent") or ""), 5)
        print("RACK_SHRANK", bool(txt))
        d.save_screenshot(SHOT)
        print("SHOT", SHOT)
    finally:
        d.quit()
finally:
    view.send_signal(signal.SIGTERM)
    view.wait(timeout=10)
    srv.shutdown()
PY
sed 's/^/  /' "$T/out"
v() { sed -n "s/^$1 //p" "$T/out"; }
els=$(v ELEMENTS)
if [ "$(v RACKS)" = 40 ] && [ "$(v NODES_COLLAPSED)" = 0 ] && [ "$(v SWITCHES)" = 3 ] &&
	[ -n "$els" ] && [ "$els" -lt 2000 ]; then
	ok "viz_large_collapsed_racks (40 racks, 2 spines + core, $els SVG elements for 8,000 GPUs)"
else
	bad "viz_large_collapsed_racks (racks $(v RACKS), nodes $(v NODES_COLLAPSED), switches $(v SWITCHES), elements $els)"
fi
if [ "$(v NODES_EXPANDED)" = 25 ] && [ "$(v GPUS_EXPANDED)" = 200 ] && [ "$(v EXPANDED_ONE_RACK)" = True ] &&
	[ "$(v NODES_COLLAPSED_AGAIN)" = 0 ]; then
	ok "viz_large_rack_expands_on_click (25 nodes, 200 GPUs; collapses again)"
else
	bad "viz_large_rack_expands_on_click (nodes $(v NODES_EXPANDED), GPUs $(v GPUS_EXPANDED), one rack $(v EXPANDED_ONE_RACK), again $(v NODES_COLLAPSED_AGAIN))"
fi
ms=$(v RED_MS)
if [ -n "$ms" ] && [ "$ms" -ge 0 ] && [ "$ms" -le 1000 ] && [ "$(v GRAPHS)" = 1 ]; then
	ok "viz_large_update_as_delta (${ms} ms, one whole graph)"
else
	bad "viz_large_update_as_delta (${ms:-?} ms, graphs $(v GRAPHS))"
fi
if [ "$(v FOLDED_SHOWN)" = 1 ] && [ "$(v UNFOLDED_SHOWN)" = 100 ]; then
	ok "viz_large_service_folds (the broken replica of 100 shown; a click shows all)"
else
	bad "viz_large_service_folds (folded $(v FOLDED_SHOWN), unfolded $(v UNFOLDED_SHOWN))"
fi
if [ "$(v RACK_SHRANK)" = True ]; then ok "viz_large_node_lost"; else bad "viz_large_node_lost"; fi
if [ -s "$(v SHOT)" ]; then ok "viz_large_screenshot ($(v SHOT))"; else bad "viz_large_screenshot"; fi
