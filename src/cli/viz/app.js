// iod live view: draws the graph document of src/obs/viz.c as SVG and
// redraws it from Server-Sent Events (/events), never reloading the page.
// Elements carry data-id, data-kind and data-status so tests can read them.
"use strict";
(function () {
  const svg = document.getElementById("graph");
  const counts = document.getElementById("counts");
  const statusEl = document.getElementById("status");
  const detail = document.getElementById("detail");
  const feedEl = document.getElementById("feed");
  const expanded = new Set();
  let graph = null;
  window.iodView = { renders: 0, firstPaintMs: null, lastRenderMs: null, lastGraphAt: null };

  function esc(s) {
    return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
  }

  function render() {
    if (!graph) return;
    const t0 = performance.now();
    const W = Math.max(svg.clientWidth || 1200, 600);
    const byId = new Map(graph.nodes.map((n) => [n.id, n]));
    const kids = new Map();
    for (const n of graph.nodes) {
      if (!n.parent) continue;
      if (!kids.has(n.parent)) kids.set(n.parent, []);
      kids.get(n.parent).push(n);
    }
    const pos = new Map();
    const used = new Set(graph.edges.filter((e) => e.kind === "placement").map((e) => e.to));
    let out = '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" orient="auto"><path d="M0,0L10,5L0,10z" fill="#555"/></marker></defs>';
    const shapes = [];
    // the fabric
    pos.set("fabric", { x: W / 2, y: 24 });
    shapes.push(`<g data-id="fabric" data-kind="fabric" data-status="ok"><rect class="box ok" x="${W / 2 - 50}" y="8" width="100" height="32" rx="6"/><text x="${W / 2}" y="28" text-anchor="middle">fabric</text></g>`);
    // racks (collapsed unless expanded) and nodes with their GPUs and NICs
    const tops = graph.nodes.filter((n) => n.kind === "rack" || (n.kind === "node" && !n.parent));
    const shown = [];
    for (const t of tops) {
      if (t.kind === "rack" && expanded.has(t.id)) {
        shown.push(t);
        for (const k of kids.get(t.id) || []) shown.push(k);
      } else shown.push(t);
    }
    const cw = 170, cols = Math.max(1, Math.floor((W - 20) / cw));
    let x0 = 10, y = 70, col = 0, rowH = 0;
    for (const n of shown) {
      const devs = n.kind === "node" ? (kids.get(n.id) || []) : [];
      const gpus = devs.filter((d) => d.kind === "gpu"), nics = devs.filter((d) => d.kind === "nic");
      const h = n.kind === "rack" ? 44 : 34 + Math.ceil(gpus.length / 6) * 22 + (nics.length ? 18 : 0);
      const x = x0 + col * cw;
      pos.set(n.id, { x: x + 75, y: y });
      let bad = 0;
      if (n.kind === "rack") for (const k of kids.get(n.id) || []) if (k.status !== "ok") bad++;
      const st = n.kind === "rack" && bad ? "bad" : n.status;
      shapes.push(`<g data-id="${esc(n.id)}" data-kind="${n.kind}" data-status="${st}" class="${n.kind}"><rect class="box ${st}" x="${x}" y="${y}" width="150" height="${h}" rx="5"/><text x="${x + 6}" y="${y + 15}">${esc(n.label)}${n.kind === "rack" ? (expanded.has(n.id) ? " \u25be" : " \u25b8") + (bad ? ` ${bad} down` : "") : ""}</text>`);
      gpus.forEach((g, i) => {
        const gx = x + 6 + (i % 6) * 23, gy = y + 24 + Math.floor(i / 6) * 22;
        pos.set(g.id, { x: gx + 9, y: gy + 9 });
        const util = g.detail && g.detail.util_pct != null ? `${Math.round(g.detail.util_pct)}%` : "";
        shapes.push(`<rect data-id="${esc(g.id)}" data-kind="gpu" data-status="${g.status}" class="gpu ${g.status === "ok" && !used.has(g.id) ? "free" : g.status}" x="${gx}" y="${gy}" width="18" height="18" rx="2"><title>${esc(g.label)} ${esc(util)}${g.detail && g.detail.stalled ? " busy but stalled" : ""}</title></rect>`);
      });
      nics.forEach((d, i) => {
        const nx = x + 6 + i * 36, ny = y + h - 16;
        pos.set(d.id, { x: nx + 15, y: ny + 6 });
        shapes.push(`<rect data-id="${esc(d.id)}" data-kind="nic" data-status="${d.status}" class="box ${d.status}" x="${nx}" y="${ny}" width="30" height="12"/><text x="${nx + 2}" y="${ny + 10}" style="font-size:8px">${esc(d.label)}</text>`);
      });
      shapes.push("</g>");
      rowH = Math.max(rowH, h);
      if (++col >= cols) { col = 0; y += rowH + 16; rowH = 0; }
    }
    if (col) y += rowH + 16;
    // services with their replicas
    y += 30;
    const svcs = graph.nodes.filter((n) => n.kind === "service");
    const sw = 220, scols = Math.max(1, Math.floor((W - 20) / (sw + 20)));
    col = 0; rowH = 0;
    for (const s of svcs) {
      const reps = kids.get(s.id) || [];
      const h = 40 + Math.ceil(reps.length / 8) * 24;
      const x = 10 + col * (sw + 20);
      pos.set(s.id, { x: x + sw / 2, y: y });
      const d = s.detail || {};
      const rate = d.requests_total != null ? ` ${d.requests_total} req, ${d.errors_total} err${d.p99_ms != null ? ", p99 " + d.p99_ms.toFixed(2) + " ms" : ""}` : "";
      shapes.push(`<g data-id="${esc(s.id)}" data-kind="service" data-status="${s.status}"><rect class="box ${s.status}" x="${x}" y="${y}" width="${sw}" height="${h}" rx="10"/><text x="${x + 8}" y="${y + 15}">${esc(s.label)}${esc(rate)}</text>`);
      reps.forEach((r, i) => {
        const rx = x + 18 + (i % 8) * 25, ry = y + 30 + Math.floor(i / 8) * 24;
        pos.set(r.id, { x: rx, y: ry });
        shapes.push(`<circle data-id="${esc(r.id)}" data-kind="replica" data-status="${r.status}" class="replica ${r.status}" cx="${rx}" cy="${ry}" r="9"><title>${esc(r.label)} ${esc(r.detail ? r.detail.phase : "")}</title></circle>`);
      });
      shapes.push("</g>");
      rowH = Math.max(rowH, h);
      if (++col >= scols) { col = 0; y += rowH + 20; rowH = 0; }
    }
    if (col) y += rowH + 20;
    // edges under the shapes
    const lines = [];
    for (const e of graph.edges) {
      const a = pos.get(e.from), b = pos.get(e.to);
      if (!a || !b) continue;
      lines.push(`<line class="${e.kind} ${e.status}" data-kind="${e.kind}" x1="${a.x}" y1="${a.y}" x2="${b.x}" y2="${b.y}"><title>${esc(e.label || e.kind)}</title></line>`);
    }
    svg.setAttribute("viewBox", `0 0 ${W} ${Math.max(y, 300)}`);
    svg.setAttribute("preserveAspectRatio", "xMinYMin meet");
    svg.innerHTML = out + lines.join("") + shapes.join("");
    const c = graph.counts || {};
    counts.textContent = `${c.nodes} nodes, ${c.gpus} GPUs, ${c.services} services, ${c.replicas} replicas, ${c.bad} broken${c.grouped ? " (grouped by rack)" : ""}`;
    const v = window.iodView;
    v.renders++;
    v.lastRenderMs = performance.now() - t0;
    if (v.firstPaintMs == null) v.firstPaintMs = performance.now();
  }

  svg.addEventListener("click", (ev) => {
    const el = ev.target.closest("[data-id]");
    if (!el) return;
    const id = el.getAttribute("data-id"), kind = el.getAttribute("data-kind");
    if (kind === "rack") {
      if (expanded.has(id)) expanded.delete(id); else expanded.add(id);
      render();
    } else if (kind === "replica") {
      const name = id.slice("replica:".length);
      detail.innerHTML = `<h2>${esc(name)}</h2><p class="hint">loading&hellip;</p>`;
      fetch("/explain?replica=" + encodeURIComponent(name)).then((r) => r.json()).then((x) => {
        const evs = (x.events || []).map((e) => `<li>rev ${esc(e.rev)}: ${esc(e.type)} ${esc(e.phase || "")} ${esc(e.reason || "")}</li>`).join("");
        detail.innerHTML = `<h2>${esc(name)}</h2><p>service ${esc(x.service)}, node ${esc(x.node || "-")}, GPUs ${esc(x.gpus || "none")}, ${esc(x.phase || "")}, restarts ${esc(x.restarts)}</p>` +
          `<h2>Why here (iod explain)</h2><pre id="explain">${esc((x.reasons || []).join("\n"))}\n${esc(x.explain || "")}</pre><h2>Recent events</h2><ol>${evs || "<li>none seen since the view started</li>"}</ol>`;
      }).catch(() => { detail.innerHTML = `<h2>${esc(name)}</h2><p>cannot read it now</p>`; });
    }
  });

  function feed(events) {
    feedEl.innerHTML = events.slice(-40).reverse().map((e) => `<li>${esc(e.kind || "")} ${esc(e.name || "")} ${esc(e.type || "")} ${esc(e.phase || "")}</li>`).join("");
  }

  function setGraph(g) { graph = g; window.iodView.lastGraphAt = performance.now(); render(); }

  fetch("/graph.json").then((r) => (r.ok ? r.json() : null)).then((g) => { if (g) setGraph(g); }).catch(() => {});
  // EventSource retries a dropped stream itself but gives up on an HTTP
  // error (503 when the view has too many streams open): then start over.
  function connect() {
    const es = new EventSource("/events");
    es.addEventListener("graph", (e) => { statusEl.textContent = ""; statusEl.className = ""; setGraph(JSON.parse(e.data)); });
    es.addEventListener("events", (e) => feed(JSON.parse(e.data)));
    es.addEventListener("status", () => { statusEl.textContent = "cluster unreachable: showing the last data"; statusEl.className = "down"; });
    es.onerror = () => {
      statusEl.textContent = "view server unreachable: retrying"; statusEl.className = "down";
      if (es.readyState === EventSource.CLOSED) setTimeout(connect, 1000);
    };
  }
  connect();
  window.addEventListener("resize", render);
})();
