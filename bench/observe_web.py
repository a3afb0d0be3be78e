#!/usr/bin/python3
"""observe_web.py IOD N [BASELINE_IOD]: the live view at N nodes
(bench_observe.c's obs.web).

A synthetic control plane (this script, on loopback) answers the API reads
`iod viz net-topology --live` makes with N nodes of 8 GPUs each (NVLink
pairs, one NIC), 20 services and 2N replicas, and serves the watch (a long
poll over the changes it makes, as the real server's /v1/watch); the view
runs with --refresh 100ms. Headless Chromium (chromedriver,
python3-selenium) opens the page: first_paint_ms is from navigation start
to the first drawn graph. Then one replica fails in the synthetic API;
update_ms is from that change to the replica drawn red on the page (the
view's read, SSE and the redraw included), median of several rounds.
Prints one BENCH line; with BASELINE_IOD (an older build, e.g. main's), one
for it first (binary=baseline) and then for IOD (binary=new), in one run.
"""
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

IOD, N = sys.argv[1], int(sys.argv[2])
BASELINE = sys.argv[3] if len(sys.argv) > 3 else None
GPUS = 8
state = {"failed": set(), "rev": 1, "history": []}
lock = threading.Lock()
changed = threading.Condition(lock)


def topology(i):
    devs = []
    for g in range(GPUS):
        peer = g ^ 1
        devs.append({"kind": "gpu", "name": f"GPU{g}", "gpu_index": g, "model": "NVIDIA H100",
                     "links": {f"GPU{peer}": {"class": "NV18", "nvlinks": 18}}})
    devs.append({"kind": "nic", "name": "NIC0"})
    return {"devices": devs}


NODES = {"rev": 1, "items": [{"kind": "node", "name": f"node-{i:04d}", "rev": 1, "lease": 1,
                              "value": {"gpus": GPUS, "model": "synthetic-8",
                                        "addr": f"10.0.{i // 250}.{i % 250}",
                                        "topology": topology(i)}} for i in range(N)]}
NODES_BYTES = json.dumps(NODES).encode()  # a real server answers from memory too
SERVICES = {"rev": 1, "items": [{"kind": "service", "name": f"svc-{s}", "rev": 1,
                                 "value": {"type": "stateless", "replicas": N // 10,
                                           "depends_on": [f"svc-{s - 1}"] if s else []}}
                                for s in range(20)]}


def replica(r):
    name = f"svc-{r % 20}-{r // 20}"
    phase = "failed" if name in state["failed"] else "healthy"
    return {"kind": "replica", "name": name, "rev": 1,
            "value": {"service": f"svc-{r % 20}", "node": f"node-{(r // 2) % N:04d}",
                      "gpus": str((r % 2) * 4 + (r // (2 * N // 4 or 1)) % 4),
                      "phase": phase, "restarts": 0}}


def replicas():
    return {"rev": state["rev"], "items": [replica(r) for r in range(2 * N)]}


def fail(name):
    """Replica name fails: a new revision and its watch event."""
    with lock:
        state["failed"].add(name)
        state["rev"] += 1
        r = next(i for i in range(2 * N) if f"svc-{i % 20}-{i // 20}" == name)
        o = replica(r)
        state["history"].append({"rev": state["rev"], "type": "put", "kind": "replica",
                                 "name": name, "value": o["value"]})
        changed.notify_all()


def watch(query):
    q = dict(kv.split("=", 1) for kv in query.split("&") if "=" in kv)
    after, wait_s = int(q.get("rev", "0")), int(q.get("timeout_ms", "0")) / 1000
    end = time.time() + wait_s
    with lock:
        while state["rev"] <= after and time.time() < end:
            changed.wait(end - time.time())
        ev = [e for e in state["history"] if e["rev"] > after]
        return {"rev": state["rev"], "events": ev}


class API(BaseHTTPRequestHandler):
    def log_message(self, *a):
        pass

    def send(self, code, obj):
        b = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)

    def do_GET(self):
        p, _, query = self.path.partition("?")
        if p == "/v1/watch":
            self.send(200, watch(query))
            return
        with lock:
            if p == "/v1/status":
                self.send(200, {"leader": 1, "leader_api": "synthetic", "term": 1,
                                "revision": state["rev"]})
            elif p == "/v1/nodes":
                self.send(200, NODES_BYTES)
            elif p == "/v1/services":
                self.send(200, SERVICES)
            elif p == "/v1/replicas":
                self.send(200, replicas())
            elif p == "/v1/endpoints":
                self.send(200, {"rev": 1, "items": []})
            else:
                self.send(404, {"error": "synthetic API: not here"})


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


api_port = free_port()
srv = ThreadingHTTPServer(("127.0.0.1", api_port), API)
srv.daemon_threads = True
threading.Thread(target=srv.serve_forever, daemon=True).start()
rounds_done = [0]


def measure(iod, tag):
    view_port = free_port()
    view = subprocess.Popen([iod, "viz", "net-topology", "--live", "--server",
                             f"127.0.0.1:{api_port}", "--listen", f"127.0.0.1:{view_port}",
                             "--refresh", "100ms"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    try:
        from selenium import webdriver
        from selenium.webdriver.chrome.options import Options
        from selenium.webdriver.chrome.service import Service

        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", view_port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        time.sleep(0.5)  # the first graph is built
        o = Options()
        for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--window-size=1600,1000",
                  "--disable-dev-shm-usage"]:
            o.add_argument(a)
        d = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=o)
        try:
            d.get(f"http://127.0.0.1:{view_port}/")
            end = time.time() + 20
            while time.time() < end and not d.execute_script(
                    "return window.iodView && window.iodView.firstPaintMs"):
                time.sleep(0.02)
            fp = d.execute_script("return window.iodView.firstPaintMs")
            nodes = d.execute_script("return document.querySelectorAll('[data-kind=rack]').length")
            time.sleep(0.5)
            ups, renders = [], []
            for k in range(5):
                name = f"svc-{k}-{rounds_done[0]}"
                fail(name)
                t = time.time()
                sel = f"[data-id='replica:{name}'][data-status='bad']"
                while time.time() < t + 10 and not d.execute_script(
                        f"return document.querySelector(\"{sel}\") != null"):
                    time.sleep(0.005)
                ups.append((time.time() - t) * 1000)
                renders.append(d.execute_script("return window.iodView.lastRenderMs"))
                time.sleep(0.3)
            rounds_done[0] += 1
            try:
                st = json.loads(urllib.request.urlopen(
                    f"http://127.0.0.1:{view_port}/stats", timeout=5).read())
            except OSError:
                st = {}
            full = d.execute_script("return window.iodView.graphs")
            deltas = d.execute_script("return window.iodView.deltas")
            ups.sort()
            print(f"BENCH obs.web nodes={N} gpus={N * GPUS} replicas={2 * N} racks={nodes} "
                  f"first_paint_ms={fp:.0f} update_ms={ups[len(ups) // 2]:.0f} "
                  f"update_max_ms={ups[-1]:.0f} render_ms={max(renders):.0f} refresh_ms=100 "
                  f"target_first_paint_ms=1000 target_update_ms=200 "
                  f"met={'yes' if fp <= 1000 and ups[len(ups) // 2] <= 200 else 'no'} "
                  f"binary={tag} graphs={full if full is not None else 'na'} "
                  f"deltas={deltas if deltas is not None else 'na'} "
                  f"lists={st.get('lists', 'na')} rebuild_ms={st.get('rebuild_ms', 'na')}",
                  flush=True)
        finally:
            d.quit()
    finally:
        view.send_signal(signal.SIGTERM)
        view.wait(timeout=10)


try:
    if BASELINE:
        measure(BASELINE, "baseline")
    measure(IOD, "new")
finally:
    srv.shutdown()
