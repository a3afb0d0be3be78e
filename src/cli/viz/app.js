// iod live view: draws the graph document of src/obs/viz.c as SVG. The
// first Server-Sent Event (/events) is the whole graph; every later one is
// a delta (nodes and edges added, changed, removed), applied to the model
// kept here. A delta that only changes statuses and details is patched
// into the drawn elements in place; one that adds or removes something is
// laid out again (once per animation frame, however many arrive).
// Elements carry data-id, data-kind and data-status so tests can read them.
"use strict";
(function () {
  const svg = document.getElementById("graph");
  const counts = document.getElementById("counts");
  const statusEl = document.getElementById("status");
  const detail = document.getElementById("detail");
  const feedEl = document.getElementById("feed");
  const fabricNote = document.getElementById("fabric-note");
  const expanded = new Set(); // racks and services clicked open
  const FOLD_REPLICAS = 32; // a service with more replicas starts folded
  // the model: nodes and edges by id, in the server's order
  let nodes = new Map(), edges = new Map(), graphCounts = {}, version = 0;
  let drawn = new Map(); // id -> element drawn for it
  let used = new Set(); // GPUs some replica is placed on
  let pending = false;
  window.iodView = { renders: 0, patches: 0, graphs: 0, deltas: 0, version: 0,
                     firstPaintMs: null, lastRenderMs: null, lastGraphAt: null };

  function esc(s) {
    return String(s).replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
  }
  function serviceText(s) {
    const d = s.detail || {};
    const rate = d.requests_total != null ? ` ${d.requests_total} req, ${d.errors_total} err${d.p99_ms != null ? ", p99 " + d.p99_ms.toFixed(2) + " ms" : ""}` : "";
    return s.label + rate;
  }
  function rackText(n) {
    const d = n.detail || {};
    return n.label + (expanded.has(n.id) ? " \u25be" : " \u25b8") + (d.down ? ` ${d.down} down` : "");
  }
  function gpuClass(g) { return "gpu " + (g.status === "ok" && !used.has(g.id) ? "free" : g.status); }
  function gpuTitle(g) {
    const util = g.detail && g.detail.util_pct != null ? `${Math.round(g.detail.util_pct)}%` : "";
    return `${g.label} ${util}${g.detail && g.detail.stalled ? " busy but stalled" : ""}`;
  }
  // A node's flows its virtual switch dropped (the records `iod trace
  // --drops` reads): a count on the node, the list with the rule that
  // dropped each in its detail panel.
  function nodeText(n) { return n.drops ? `${n.label} \u2716 ${n.drops} dropped` : n.label; }
  let detailNode = null;
  function showNode(n) {
    detailNode = n.id;
    const d = n.detail || {}, dr = d.drops;
    let html = `<h2>${esc(n.label)}</h2><p>${esc(d.model || "")} ${esc(d.addr || "")} rack ${esc(d.rack || "-")}</p><h2>Dropped flows (<code>iod trace --drops</code>)</h2>`;
    if (!dr) html += `<p id="node-drops" class="hint">none recorded</p>`;
    else {
      const rules = Object.entries(dr.rules || {}).map(([r, c]) => `<li><code>${esc(r)}</code>: ${c} packet${c === 1 ? "" : "s"}</li>`).join("");
      const recs = (dr.records || []).map((r) => `<li data-rule="${esc(r.rule)}">${esc(r.tenant)}/${esc(r.src_name || "?")} ${esc(r.src)} &rarr; ${esc(r.dst_name ? r.dst_name + " " : "")}${esc(r.dst)}:${esc(r.dport)} DROPPED by <code>${esc(r.rule)}</code>: ${esc(r.why)} (${r.count} packet${r.count === 1 ? "" : "s"})</li>`).join("");
      html += `<p>${dr.packets} packet${dr.packets === 1 ? "" : "s"} in ${dr.flows} flow${dr.flows === 1 ? "" : "s"}</p><ul id="node-drop-rules">${rules}</ul><ol id="node-drops">${recs}</ol>`;
    }
    detail.innerHTML = html;
  }
  function replicaTitle(r) { return `${r.label} ${r.detail ? r.detail.phase : ""}`; }

  function render() {
    pending = false;
    if (!nodes.size) return;
    const t0 = performance.now();
    const W = Math.max(svg.clientWidth || 1200, 600);
    const kids = new Map();
    for (const n of nodes.values()) {
      if (!n.parent) continue;
      if (!kids.has(n.parent)) kids.set(n.parent, []);
      kids.get(n.parent).push(n);
    }
    used = new Set();
    for (const e of edges.values()) if (e.kind === "placement") used.add(e.to);
    const pos = new Map();
    const out = '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" orient="auto"><path d="M0,0L10,5L0,10z" fill="#555"/></marker></defs>';
    const shapes = [];
    function box(n, x, y, w, h, text, cls) {
      pos.set(n.id, { x: x + w / 2, y: y + h / 2 });
      shapes.push(`<g data-id="${esc(n.id)}" data-kind="${n.kind}" data-status="${n.status}" class="${cls || n.kind}"><rect class="box ${n.status}" x="${x}" y="${y}" width="${w}" height="${h}" rx="5"/><text x="${x + 6}" y="${y + 15}">${esc(text)}</text></g>`);
    }
    // the fabric: core and spines, then the leaves not inside a rack
    const sw = [...nodes.values()].filter((n) => n.kind === "switch" && !n.parent);
    const top = sw.filter((n) => n.detail && n.detail.role !== "leaf");
    const leaves = sw.filter((n) => !n.detail || n.detail.role === "leaf");
    let y = 8;
    for (const row of [top, leaves]) {
      if (!row.length) continue;
      const w = Math.min(140, (W - 20) / row.length - 10);
      row.forEach((n, i) => box(n, 10 + i * (w + 10) + Math.max(0, (W - 20 - row.length * (w + 10)) / 2), y, w, 24, n.label, "switch"));
      y += 44;
    }
    // racks (collapsed unless expanded) and nodes with their GPUs and NICs
    const tops = [...nodes.values()].filter((n) => n.kind === "rack" || (n.kind === "node" && !n.parent));
    const shown = [];
    for (const t of tops) {
      shown.push(t);
      if (t.kind === "rack" && expanded.has(t.id))
        for (const k of kids.get(t.id) || []) if (k.kind === "node") shown.push(k);
    }
    const cw = 170, cols = Math.max(1, Math.floor((W - 20) / cw));
    let col = 0, rowH = 0;
    y += 6;
    for (const n of shown) {
      const devs = n.kind === "node" ? (kids.get(n.id) || []) : [];
      const gpus = devs.filter((d) => d.kind === "gpu"), nics = devs.filter((d) => d.kind === "nic");
      const h = n.kind === "rack" ? 44 : 34 + Math.ceil(gpus.length / 6) * 22 + (nics.length ? 18 : 0);
      const x = 10 + col * cw;
      pos.set(n.id, { x: x + 75, y: y });
      const text = n.kind === "rack" ? rackText(n) : nodeText(n);
      shapes.push(`<g data-id="${esc(n.id)}" data-kind="${n.kind}" data-status="${n.status}" class="${n.kind}"><rect class="box ${n.status}" x="${x}" y="${y}" width="150" height="${h}" rx="5"/><text x="${x + 6}" y="${y + 15}">${esc(text)}</text>`);
      gpus.forEach((g, i) => {
        const gx = x + 6 + (i % 6) * 23, gy = y + 24 + Math.floor(i / 6) * 22;
        pos.set(g.id, { x: gx + 9, y: gy + 9 });
        shapes.push(`<rect data-id="${esc(g.id)}" data-kind="gpu" data-status="${g.status}" class="${gpuClass(g)}" x="${gx}" y="${gy}" width="18" height="18" rx="2"><title>${esc(gpuTitle(g))}</title></rect>`);
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
    const svcs = [...nodes.values()].filter((n) => n.kind === "service");
    const sWidth = 220, scols = Math.max(1, Math.floor((W - 20) / (sWidth + 20)));
    col = 0; rowH = 0;
    for (const s of svcs) {
      // a large service shows only its replicas that are not ok (and a
      // count of the rest) until it is clicked open
      const all = kids.get(s.id) || [];
      const folded = all.length > FOLD_REPLICAS && !expanded.has(s.id);
      const reps = folded ? all.filter((r) => r.status !== "ok") : all;
      const h = 40 + Math.ceil(Math.max(reps.length, 1) / 8) * 24;
      const x = 10 + col * (sWidth + 20);
      pos.set(s.id, { x: x + sWidth / 2, y: y });
      const fold = all.length > FOLD_REPLICAS ? (folded ? ` \u25b8 ${all.length - reps.length} ok of ${all.length}` : " \u25be") : "";
      shapes.push(`<g data-id="${esc(s.id)}" data-kind="service" data-status="${s.status}" class="service${all.length > FOLD_REPLICAS ? " foldable" : ""}"><rect class="box ${s.status}" x="${x}" y="${y}" width="${sWidth}" height="${h}" rx="10"/><text x="${x + 8}" y="${y + 15}">${esc(serviceText(s) + fold)}</text>`);
      reps.forEach((r, i) => {
        const rx = x + 18 + (i % 8) * 25, ry = y + 30 + Math.floor(i / 8) * 24;
        pos.set(r.id, { x: rx, y: ry });
        shapes.push(`<circle data-id="${esc(r.id)}" data-kind="replica" data-status="${r.status}" class="replica ${r.status}" cx="${rx}" cy="${ry}" r="9"><title>${esc(replicaTitle(r))}</title></circle>`);
      });
      shapes.push("</g>");
      rowH = Math.max(rowH, h);
      if (++col >= scols) { col = 0; y += rowH + 20; rowH = 0; }
    }
    if (col) y += rowH + 20;
    // edges under the shapes; an end not drawn (inside a collapsed rack)
    // is drawn at the nearest ancestor that is, and such edges merge
    function anchor(id) {
      for (let k = 0; id && k < 8; k++) {
        if (pos.has(id)) return id;
        const n = nodes.get(id);
        id = n && n.parent;
      }
      return null;
    }
    const lines = [], merged = new Set();
    for (const e of edges.values()) {
      const af = anchor(e.from), at = anchor(e.to);
      if (!af || !at || af === at) continue;
      const direct = af === e.from && at === e.to;
      // a placement into a collapsed rack is noise at 1,000 nodes, unless broken
      if (!direct && e.kind === "placement" && e.status === "ok") continue;
      const key = e.kind + "|" + af + "|" + at;
      if (!direct) { if (merged.has(key)) continue; merged.add(key); }
      const a = pos.get(af), b = pos.get(at);
      lines.push(`<line${direct ? ` data-id="${esc(e.id)}"` : ""} class="${e.kind} ${e.status}${linkClass(e)}" data-kind="${e.kind}" data-util="${utilAttr(e)}" x1="${a.x}" y1="${a.y}" x2="${b.x}" y2="${b.y}"><title>${esc(e.label || e.kind)}</title></line>`);
    }
    svg.setAttribute("viewBox", `0 0 ${W} ${Math.max(y, 300)}`);
    svg.setAttribute("preserveAspectRatio", "xMinYMin meet");
    svg.innerHTML = out + lines.join("") + shapes.join("");
    drawn = new Map();
    for (const el of svg.querySelectorAll("[data-id]")) drawn.set(el.getAttribute("data-id"), el);
    showCounts();
    const v = window.iodView;
    v.renders++;
    v.lastRenderMs = performance.now() - t0;
    if (v.firstPaintMs == null) v.firstPaintMs = performance.now();
  }

  function showCounts() {
    const c = graphCounts || {};
    counts.textContent = `${c.nodes} nodes, ${c.gpus} GPUs, ${c.services} services, ${c.replicas} replicas, ${c.bad} broken${c.grouped ? " (grouped by rack: click one to expand)" : ""}`;
    fabricNote.textContent = c.fabric === "derived" ? "fabric derived: a leaf per rack, a spine per zone (the cluster describes no switches)" : "";
  }

  // A node's link to the fabric: coloured by utilisation (u0..u4, fifths of
  // capacity) when its data plane reports a rate and a capacity; the rest
  // (no counters, or switch-to-switch links of the derived fabric) "no data"
  // — never guessed. data-util says which, for tests.
  function linkClass(e) {
    if (e.kind !== "net" && e.kind !== "fabric") return "";
    if (typeof e.util !== "number") return " nodata";
    return " u" + Math.min(4, Math.floor(e.util * 5));
  }
  function utilAttr(e) {
    if (e.kind !== "net" && e.kind !== "fabric") return "";
    return typeof e.util === "number" ? e.util.toFixed(3) : "none";
  }

  // One changed node or edge drawn already: its status and text in place.
  function patch(x, isEdge) {
    const el = drawn.get(x.id);
    // not drawn (inside a collapsed rack or a folded service): nothing to
    // do, unless it is a replica a folded service must now show
    if (!el) return !(x.kind === "replica" && x.status !== "ok");
    el.setAttribute("data-status", x.status);
    if (isEdge) {
      el.setAttribute("class", `${x.kind} ${x.status}${linkClass(x)}`);
      el.setAttribute("data-util", utilAttr(x));
      const t = el.querySelector("title");
      if (t) t.textContent = x.label || x.kind;
      return true;
    }
    const title = el.querySelector("title"), rect = el.querySelector("rect"), text = el.querySelector("text");
    switch (x.kind) {
      case "replica": el.setAttribute("class", `replica ${x.status}`); if (title) title.textContent = replicaTitle(x); break;
      case "gpu": el.setAttribute("class", gpuClass(x)); if (title) title.textContent = gpuTitle(x); break;
      case "nic": el.setAttribute("class", `box ${x.status}`); break;
      case "service": if (rect) rect.setAttribute("class", `box ${x.status}`); if (text) text.textContent = serviceText(x); break;
      case "rack": if (rect) rect.setAttribute("class", `box ${x.status}`); if (text) text.textContent = rackText(x); break;
      case "node": if (rect) rect.setAttribute("class", `box ${x.status}`); if (text) text.textContent = nodeText(x); if (detailNode === x.id) showNode(x); break;
      case "switch": if (rect) rect.setAttribute("class", `box ${x.status}`); break;
      default: return false;
    }
    return true;
  }

  function applyDelta(d) {
    const v = window.iodView;
    if (d.base !== version) return false; // out of step: start the stream again
    let relayout = d.nodes.add.length || d.nodes.remove.length || d.edges.add.length || d.edges.remove.length;
    for (const id of d.nodes.remove) nodes.delete(id);
    for (const id of d.edges.remove) edges.delete(id);
    for (const n of d.nodes.add) nodes.set(n.id, n);
    for (const e of d.edges.add) edges.set(e.id, e);
    for (const n of d.nodes.change) {
      const was = nodes.get(n.id);
      if (!was || was.parent !== n.parent || was.kind !== n.kind || was.label !== n.label) relayout = true;
      nodes.set(n.id, n);
    }
    for (const e of d.edges.change) edges.set(e.id, e);
    if (d.counts) graphCounts = d.counts;
    version = d.version;
    v.version = version;
    v.deltas++;
    v.lastGraphAt = performance.now();
    if (relayout) { schedule(); return true; }
    for (const n of d.nodes.change) if (!patch(n, false)) { schedule(); return true; }
    for (const e of d.edges.change) patch(e, true);
    showCounts();
    v.patches++;
    return true;
  }

  function schedule() {
    if (pending) return;
    pending = true;
    requestAnimationFrame(render);
  }

  function setGraph(g) {
    nodes = new Map(g.nodes.map((n) => [n.id, n]));
    edges = new Map(g.edges.map((e) => [e.id, e]));
    graphCounts = g.counts || {};
    version = g.version || 0;
    const v = window.iodView;
    v.graphs++;
    v.version = version;
    v.lastGraphAt = performance.now();
    if (detailNode && nodes.get(detailNode)) showNode(nodes.get(detailNode));
    render();
  }

  svg.addEventListener("click", (ev) => {
    const el = ev.target.closest("[data-id]");
    if (!el) return;
    const id = el.getAttribute("data-id"), kind = el.getAttribute("data-kind");
    if (kind === "rack" || (kind === "service" && el.classList.contains("foldable"))) {
      if (expanded.has(id)) expanded.delete(id); else expanded.add(id);
      render();
    } else if (kind === "node" && nodes.get(id)) {
      showNode(nodes.get(id));
    } else if (kind === "replica") {
      detailNode = null;
      const name = id.slice("replica:".length);
      detail.innerHTML = `<h2>${esc(name)}</h2><p class="hint">loading&hellip;</p>`;
      fetch("/explain?replica=" + encodeURIComponent(name)).then((r) => r.json()).then((x) => {
        const evs = (x.events || []).slice(-20).reverse().map((e) => `<li>${eventText(e)}</li>`).join("");
        detail.innerHTML = `<h2>${esc(name)}</h2><p>service ${esc(x.service)}, node ${esc(x.node || "-")}, GPUs ${esc(x.gpus || "none")}, ${esc(x.phase || "")}, restarts ${esc(x.restarts)}</p>` +
          `<h2>Why here (iod explain)</h2><pre id="explain">${esc((x.reasons || []).join("\n"))}\n${esc(x.explain || "")}</pre><h2>Recent events</h2><ol id="replica-events">${evs || "<li>none in the view's recent history</li>"}</ol>`;
      }).catch(() => { detail.innerHTML = `<h2>${esc(name)}</h2><p>cannot read it now</p>`; });
    }
  });

  // the feed reads like `iod events -f`: revision, kind, name, what happened
  function eventText(e) {
    const what = e.type === "delete" ? "deleted" : (e.phase || "changed");
    return `<span class="rev">${esc(e.rev)}</span> ${esc(e.kind || "")} <b>${esc(e.name || "")}</b> ${esc(what)}${e.reason ? " (" + esc(e.reason) + ")" : ""}`;
  }
  function feed(events) {
    for (const e of events) {
      const li = document.createElement("li");
      li.setAttribute("data-event-kind", e.kind || "");
      li.innerHTML = eventText(e);
      feedEl.insertBefore(li, feedEl.firstChild);
    }
    while (feedEl.childNodes.length > 200) feedEl.removeChild(feedEl.lastChild);
  }

  // EventSource retries a dropped stream itself but gives up on an HTTP
  // error (503 when the view has too many streams open): then start over.
  let es = null;
  function connect() {
    if (es) es.close();
    es = new EventSource("/events");
    es.addEventListener("graph", (e) => { statusEl.textContent = ""; statusEl.className = ""; setGraph(JSON.parse(e.data)); });
    es.addEventListener("delta", (e) => {
      statusEl.textContent = ""; statusEl.className = "";
      if (!applyDelta(JSON.parse(e.data))) connect(); // a fresh stream starts with the graph
    });
    es.addEventListener("events", (e) => feed(JSON.parse(e.data)));
    es.addEventListener("status", () => { statusEl.textContent = "cluster unreachable: showing the last data"; statusEl.className = "down"; });
    es.onerror = () => {
      statusEl.textContent = "view server unreachable: retrying"; statusEl.className = "down";
      // EventSource's own reconnect opens a new stream, which begins with
      // the whole graph; a refused one is closed: open it again
      if (es.readyState === EventSource.CLOSED) setTimeout(connect, 1000);
    };
  }
  connect();
  window.addEventListener("resize", schedule);
})();
