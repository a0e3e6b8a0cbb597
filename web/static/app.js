// forkbox dashboard: a single page over the daemon's control API.
// No dependencies and no build step; every API value reaches the DOM as
// text (textContent / attributes), never as markup.
"use strict";

(function () {
  const KEY_STORAGE = "forkbox.apiKey";
  const LIST_EVERY_MS = 3000;
  const METRICS_EVERY_MS = 2000;
  const METRICS_POINTS = 60; // two minutes of 2 s readings
  const RESUME_TIMEOUT_S = 300;
  const MAX_PAGES = 50;

  // The API lives at the root of the origin the dashboard is served from:
  // the page's path minus its last directory ("/dashboard/" → "").
  const API_BASE = location.pathname.replace(/[^/]*\/[^/]*$/, "").replace(/\/$/, "");

  const SVG_NS = "http://www.w3.org/2000/svg";
  const $ = (id) => document.getElementById(id);

  const state = {
    key: "",
    sandboxes: [],
    snapshots: [],
    selected: "",      // id whose lineage is shown (sandbox or snapshot)
    lineage: null,     // last lineage tree
    lineageKey: "",    // what the drawn SVG was made from, to redraw only on change
    lineageError: "",
    metrics: new Map(), // sandbox id → [{t, cpu, memUsed, memTotal}]
    listTimer: 0,
    metricsTimer: 0,
    listBusy: false,
    metricsBusy: false,
    errors: new Map(),  // source → message, shown in the banner
    deaths: [],         // sandboxes that died on their own: {id, reason, at}
  };

  // ---------- small DOM helpers ----------

  function el(tag, attrs, ...children) {
    const e = document.createElement(tag);
    setAttrs(e, attrs);
    append(e, children);
    return e;
  }

  function svg(tag, attrs, ...children) {
    const e = document.createElementNS(SVG_NS, tag);
    setAttrs(e, attrs);
    append(e, children);
    return e;
  }

  function setAttrs(e, attrs) {
    if (!attrs) return;
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === null || v === false) continue;
      if (k === "text") e.textContent = String(v);
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? "" : String(v));
    }
  }

  function append(e, children) {
    for (const c of children.flat()) {
      if (c === undefined || c === null || c === false) continue;
      e.appendChild(typeof c === "string" || typeof c === "number" ? document.createTextNode(String(c)) : c);
    }
  }

  // ---------- formatting ----------

  function parseTime(s) {
    if (!s) return NaN;
    const t = Date.parse(s);
    return Number.isNaN(t) || t <= 0 ? NaN : t;
  }

  function duration(ms) {
    const s = Math.max(0, Math.round(ms / 1000));
    if (s < 60) return s + "s";
    const m = Math.floor(s / 60);
    if (m < 60) return m + "m " + String(s % 60).padStart(2, "0") + "s";
    const h = Math.floor(m / 60);
    if (h < 48) return h + "h " + String(m % 60).padStart(2, "0") + "m";
    return Math.floor(h / 24) + "d " + (h % 24) + "h";
  }

  function ago(s) {
    const t = parseTime(s);
    if (Number.isNaN(t)) return "—";
    const sec = Math.round((Date.now() - t) / 1000);
    if (sec < 5) return "just now";
    if (sec < 60) return sec + "s ago";
    const m = Math.floor(sec / 60);
    if (m < 60) return m + "m ago";
    const h = Math.floor(m / 60);
    if (h < 48) return h + "h " + (m % 60) + "m ago";
    return Math.floor(h / 24) + "d ago";
  }

  function localTime(s) {
    const t = parseTime(s);
    return Number.isNaN(t) ? "" : new Date(t).toLocaleString();
  }

  function bytes(n) {
    if (!n && n !== 0) return "—";
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (n >= 100 || i === 0 ? n.toFixed(0) : n.toFixed(1)) + " " + units[i];
  }

  function stateClass(s) {
    return s === "running" || s === "paused" || s === "killed" ? s : "other";
  }

  // ---------- banner and status ----------

  function setError(source, msg) {
    if (msg) state.errors.set(source, msg);
    else state.errors.delete(source);
    renderBanner();
  }

  function renderBanner() {
    const b = $("banner");
    const msgs = [...state.errors.values()];
    if (msgs.length === 0) { b.hidden = true; return; }
    $("banner-text").textContent = msgs.join(" · ");
    b.hidden = false;
  }

  function setStatus(ok, text) {
    const s = $("status");
    s.textContent = text;
    s.className = "status " + (ok ? "ok" : "err");
  }

  // ---------- API ----------

  class APIError extends Error {
    constructor(status, message) {
      super(message);
      this.status = status;
    }
  }

  async function api(method, path, body) {
    const headers = { "X-API-Key": state.key, "Accept": "application/json" };
    const init = { method, headers, cache: "no-store" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    let resp;
    try {
      resp = await fetch(API_BASE + path, init);
    } catch (e) {
      throw new APIError(0, "cannot reach the forkbox daemon (" + e.message + ")");
    }
    const text = await resp.text();
    let data = null;
    if (text) {
      try { data = JSON.parse(text); } catch (e) { data = null; }
    }
    if (!resp.ok) {
      let msg = data && typeof data.message === "string" && data.message ? data.message : resp.statusText || "request failed";
      if (resp.status === 401) msg += " — use “Forget key” to enter another";
      throw new APIError(resp.status, method + " " + path.split("?")[0] + ": " + msg + " (" + resp.status + ")");
    }
    return { data, next: resp.headers.get("X-Next-Token") || "" };
  }

  // getAll follows X-Next-Token through a paginated listing.
  async function getAll(path) {
    const out = [];
    let token = "";
    for (let page = 0; page < MAX_PAGES; page++) {
      const sep = path.includes("?") ? "&" : "?";
      const r = await api("GET", token ? path + sep + "nextToken=" + encodeURIComponent(token) : path);
      if (Array.isArray(r.data)) out.push(...r.data);
      if (!r.next || r.next === token) break;
      token = r.next;
    }
    return out;
  }

  const enc = encodeURIComponent;

  // ---------- deaths ----------

  // noteDeaths asks the API about sandboxes gone from the list since the
  // last refresh: one that died on its own answers state "killed" with a
  // killReason (out of memory, process limit, crashed, killed).
  async function noteDeaths(before) {
    const now = new Set(state.sandboxes.map((x) => x.sandboxID));
    for (const id of before.filter((x) => !now.has(x))) {
      try {
        const r = await api("GET", "/sandboxes/" + enc(id));
        if (r.data && r.data.killReason) {
          state.deaths.unshift({ id, reason: r.data.killReason, at: r.data.killedAt, node: r.data.clientID });
          state.deaths.length = Math.min(state.deaths.length, 20);
        }
      } catch (e) { /* killed on request: 404, nothing to show */ }
    }
    renderDeaths();
  }

  function renderDeaths() {
    const box = $("deaths");
    box.hidden = state.deaths.length === 0;
    $("deaths-list").replaceChildren(...state.deaths.map((d) => el("li", {},
      el("code", { text: d.id }), " killed: ",
      el("strong", { class: "warn", text: d.reason }),
      d.node ? el("span", { class: "muted", text: " on " + d.node }) : null,
      el("span", { class: "muted", text: " · " + localTime(d.at) }))));
  }

  // ---------- refresh loops ----------

  async function refreshLists() {
    if (state.listBusy || !state.key) return;
    state.listBusy = true;
    try {
      const [sbs, snaps] = await Promise.all([
        getAll("/v2/sandboxes?state=running,paused&limit=100"),
        getAll("/snapshots?limit=100"),
      ]);
      const before = state.sandboxes.map((x) => x.sandboxID);
      state.sandboxes = sbs.sort((a, b) => (parseTime(b.startedAt) || 0) - (parseTime(a.startedAt) || 0));
      noteDeaths(before);
      state.snapshots = snaps;
      setError("list", "");
      setStatus(true, "connected · " + new Date().toLocaleTimeString());
      if (!state.selected && state.sandboxes.length > 0) select(state.sandboxes[0].sandboxID, false);
      renderSandboxes();
      renderSnapshots();
    } catch (e) {
      setError("list", e.message);
      setStatus(false, e.status === 401 ? "API key refused" : "disconnected");
    } finally {
      state.listBusy = false;
    }
    await refreshLineage();
  }

  async function refreshLineage() {
    const id = state.selected;
    if (!id || !state.key) return;
    try {
      const r = await api("GET", "/sandboxes/" + enc(id) + "/lineage");
      if (id !== state.selected) return;
      state.lineage = r.data;
      state.lineageError = "";
      setError("lineage", "");
    } catch (e) {
      if (id !== state.selected) return;
      state.lineage = null;
      state.lineageError = e.message;
      if (e.status !== 404) setError("lineage", e.message);
    }
    renderLineage();
  }

  async function refreshMetrics() {
    if (state.metricsBusy || !state.key) return;
    state.metricsBusy = true;
    try {
      const running = state.sandboxes.filter((s) => s.state === "running").slice(0, 100);
      const live = new Set(running.map((s) => s.sandboxID));
      for (const id of [...state.metrics.keys()]) if (!live.has(id)) state.metrics.delete(id);
      const failures = [];
      await Promise.all(running.map(async (s) => {
        try {
          const r = await api("GET", "/sandboxes/" + enc(s.sandboxID) + "/metrics");
          const ms = Array.isArray(r.data) ? r.data : [];
          if (ms.length === 0) return;
          const hist = state.metrics.get(s.sandboxID) || [];
          for (const m of ms) {
            const t = m.timestampUnix || Math.floor(Date.now() / 1000);
            if (hist.length && hist[hist.length - 1].t >= t) continue;
            hist.push({ t, cpu: m.cpuUsedPct || 0, cpuCount: m.cpuCount || 0, memUsed: m.memUsed || 0, memTotal: m.memTotal || 0 });
          }
          while (hist.length > METRICS_POINTS) hist.shift();
          state.metrics.set(s.sandboxID, hist);
        } catch (e) {
          // A sandbox paused or killed since the last listing is not an error.
          if (e.status !== 404 && e.status !== 409) failures.push(e.message);
        }
      }));
      setError("metrics", failures.length ? failures[0] : "");
      for (const s of state.sandboxes) updateSpark(s.sandboxID);
    } finally {
      state.metricsBusy = false;
    }
  }

  function startLoops() {
    stopLoops();
    const tickList = () => { if (!document.hidden) refreshLists(); };
    const tickMetrics = () => { if (!document.hidden) refreshMetrics(); };
    state.listTimer = setInterval(tickList, LIST_EVERY_MS);
    state.metricsTimer = setInterval(tickMetrics, METRICS_EVERY_MS);
    refreshLists().then(refreshMetrics);
  }

  function stopLoops() {
    clearInterval(state.listTimer);
    clearInterval(state.metricsTimer);
  }

  document.addEventListener("visibilitychange", () => {
    if (!document.hidden && state.key) refreshLists().then(refreshMetrics);
  });

  // ---------- selection (kept in the URL fragment: #lineage=ID) ----------

  function select(id, fetchNow = true) {
    if (state.selected === id) return;
    state.selected = id;
    state.lineage = null;
    state.lineageKey = "";
    state.lineageError = "";
    history.replaceState(null, "", location.pathname + location.search + (id ? "#lineage=" + enc(id) : ""));
    markSelectedRows();
    renderLineage();
    if (fetchNow) refreshLineage();
    document.dispatchEvent(new CustomEvent("forkbox:select", { detail: { id } })); // network.js
  }

  function markSelectedRows() {
    for (const tr of document.querySelectorAll("tr[data-id]")) {
      tr.classList.toggle("selected", tr.dataset.id === state.selected);
    }
  }

  // ---------- actions ----------

  async function act(button, fn, okMsg) {
    button.disabled = true;
    try {
      const msg = await fn();
      setError("action", "");
      if (okMsg || msg) flash(msg || okMsg);
    } catch (e) {
      setError("action", e.message);
    } finally {
      button.disabled = false;
      refreshLists();
    }
  }

  let flashTimer = 0;
  function flash(msg) {
    const s = $("status");
    s.textContent = msg;
    s.className = "status ok";
    clearTimeout(flashTimer);
    flashTimer = setTimeout(() => setStatus(true, "connected · " + new Date().toLocaleTimeString()), 4000);
  }

  function pauseSandbox(s, b) {
    act(b, () => api("POST", "/sandboxes/" + enc(s.sandboxID) + "/pause"), "paused " + s.sandboxID);
  }

  function resumeSandbox(s, b) {
    act(b, () => api("POST", "/sandboxes/" + enc(s.sandboxID) + "/connect", { timeout: RESUME_TIMEOUT_S }),
      "resumed " + s.sandboxID);
  }

  function snapshotSandbox(s, b) {
    const name = prompt("Snapshot of " + s.sandboxID + "\nName (optional, no spaces):", "");
    if (name === null) return;
    const body = name.trim() ? { name: name.trim() } : {};
    act(b, async () => {
      const r = await api("POST", "/sandboxes/" + enc(s.sandboxID) + "/snapshots", body);
      return "snapshot " + ((r.data && r.data.snapshotID) || "") + " taken";
    });
  }

  function killSandbox(s, b) {
    if (!confirm("Kill sandbox " + s.sandboxID + "? Its snapshots are kept.")) return;
    act(b, () => api("DELETE", "/sandboxes/" + enc(s.sandboxID)), "killed " + s.sandboxID);
  }

  // ---------- sandboxes table ----------

  function renderSandboxes() {
    const body = $("sb-body");
    const rows = state.sandboxes.map(sandboxRow);
    body.replaceChildren(...rows);
    $("sb-empty").hidden = rows.length > 0;
    $("sb-count").textContent = rows.length ? "(" + rows.length + ")" : "";
    markSelectedRows();
  }

  function sandboxRow(s) {
    const id = s.sandboxID;
    const running = s.state === "running";
    const paused = s.state === "paused";
    const stop = (fn) => (ev) => { ev.stopPropagation(); fn(s, ev.currentTarget); };

    const end = parseTime(s.endAt);
    let expires;
    if (!running) expires = el("span", { class: "muted", title: paused ? "paused sandboxes are kept until killed" : "", text: "—" });
    else if (Number.isNaN(end)) expires = el("span", { class: "muted", text: "—" });
    else {
      const left = end - Date.now();
      expires = el("span", { class: left < 60000 ? "warn" : "", title: localTime(s.endAt),
        text: left <= 0 ? "expiring" : duration(left) });
    }

    const md = Object.entries(s.metadata || {});
    const mdCell = el("td", { class: "md", title: md.map(([k, v]) => k + "=" + v).join("\n") },
      md.length === 0 ? el("span", { class: "muted", text: "—" }) : null,
      md.slice(0, 2).map(([k, v]) => el("span", { class: "chip", text: clip(k + "=" + v, 24) })),
      md.length > 2 ? el("span", { class: "muted", text: "+" + (md.length - 2) }) : null);

    const tr = el("tr", { "data-id": id, onclick: () => select(id) },
      el("td", { class: "mono", text: id }),
      el("td", { class: "mono", title: s.templateID, text: clip(s.alias || s.templateID || "—", 22) }),
      el("td", null, el("span", { class: "badge " + stateClass(s.state), text: s.state })),
      el("td", { class: "mono sb-node", title: "the node that runs it", text: s.clientID || "—" }),
      el("td", { title: localTime(s.startedAt), text: ago(s.startedAt) }),
      el("td", null, expires),
      el("td", { text: (s.cpuCount || "?") + " vCPU · " + (s.memoryMB ? bytes(s.memoryMB * 1024 * 1024).replace(".0 ", " ") : "?") }),
      el("td", { class: "spark-td", "data-spark": id }),
      mdCell,
      el("td", { class: "actions" },
        paused
          ? el("button", { type: "button", class: "act", title: "Resume (connect, timeout " + RESUME_TIMEOUT_S + " s)", onclick: stop(resumeSandbox), text: "Resume" })
          : el("button", { type: "button", class: "act", disabled: !running, title: "Pause (persist memory and disk)", onclick: stop(pauseSandbox), text: "Pause" }),
        el("button", { type: "button", class: "act", title: "Take a named snapshot", onclick: stop(snapshotSandbox), text: "Snapshot" }),
        el("button", { type: "button", class: "act danger", title: "Kill the sandbox", onclick: stop(killSandbox), text: "Kill" })));
    fillSpark(tr.querySelector("[data-spark]"), s);
    return tr;
  }

  function updateSpark(id) {
    const td = document.querySelector('td[data-spark="' + CSS.escape(id) + '"]');
    const s = state.sandboxes.find((x) => x.sandboxID === id);
    if (td && s) fillSpark(td, s);
  }

  // fillSpark draws CPU % (blue line) and memory use (orange area) of the
  // readings gathered since the page opened.
  function fillSpark(td, s) {
    const hist = state.metrics.get(s.sandboxID) || [];
    if (s.state !== "running" || hist.length === 0) {
      td.replaceChildren(el("span", { class: "muted", text: s.state === "running" ? "…" : "—" }));
      return;
    }
    const W = 84, H = 26, n = Math.max(hist.length, 10); // fills up, then scrolls
    const x = (i) => (W * (n - hist.length + i)) / (n - 1);
    const y = (f) => H - 1 - Math.max(0, Math.min(1, f)) * (H - 2);
    const cpuPts = hist.map((h, i) => x(i).toFixed(1) + "," + y(h.cpu / 100).toFixed(1));
    const memPts = hist.map((h, i) => x(i).toFixed(1) + "," + y(h.memTotal ? h.memUsed / h.memTotal : 0).toFixed(1));
    if (hist.length === 1) { // a single reading: draw a short flat segment
      cpuPts.unshift((x(0) - 3).toFixed(1) + "," + cpuPts[0].split(",")[1]);
      memPts.unshift((x(0) - 3).toFixed(1) + "," + memPts[0].split(",")[1]);
    }
    const firstX = memPts[0].split(",")[0];
    const area = "M" + firstX + "," + H + " L" + memPts.join(" L") + " L" + x(hist.length - 1).toFixed(1) + "," + H + " Z";
    const last = hist[hist.length - 1];
    td.replaceChildren(el("div", { class: "spark-cell", title: "CPU % (blue) and memory (orange), last " + hist.length + " readings" },
      svg("svg", { class: "spark", width: W, height: H, viewBox: "0 0 " + W + " " + H },
        svg("line", { x1: 0, y1: H - 0.5, x2: W, y2: H - 0.5, stroke: "#e2e6ee" }),
        svg("path", { class: "mem-area", d: area }),
        svg("polyline", { class: "mem", points: memPts.join(" ") }),
        svg("polyline", { class: "cpu", points: cpuPts.join(" ") })),
      el("div", { class: "spark-vals" },
        el("div", { class: "c", text: last.cpu.toFixed(0) + "% cpu" }),
        el("div", { class: "m", text: bytes(last.memUsed) }))));
  }

  // ---------- snapshots table ----------

  function renderSnapshots() {
    const rows = state.snapshots.map((s) => el("tr", { "data-id": s.snapshotID, onclick: () => select(s.snapshotID) },
      el("td", { class: "mono", text: s.snapshotID }),
      el("td", null, (s.names || []).length ? s.names.map((n) => el("span", { class: "chip", text: n })) : el("span", { class: "muted", text: "—" })),
      el("td", { class: "mono", text: s.sandboxID || "—" }),
      el("td", { title: localTime(s.createdAt), text: ago(s.createdAt) }),
      el("td", { title: localTime(s.expiresAt), text: s.expiresAt ? "in " + duration(parseTime(s.expiresAt) - Date.now()) : "never" })));
    $("snap-body").replaceChildren(...rows);
    $("snap-empty").hidden = rows.length > 0;
    $("snap-count").textContent = rows.length ? "(" + rows.length + ")" : "";
    markSelectedRows();
  }

  // ---------- lineage graph ----------

  const NODE_W = 204;
  const SB_H = 46;
  const SNAP_H = 40;
  const COL_GAP = 118;  // room between columns for the edge labels
  const ROW_H = 66;
  const PAD_X = 24;
  const PAD_Y = 22;
  const TITLE_CHARS = 24;

  // layout is a tidy tree: x by depth, y by leaf order, each parent centred
  // on its first and last child. It returns the nodes in drawing order.
  function layout(root) {
    const nodes = [];
    let leaf = 0;
    let maxDepth = 0;
    const walk = (n, depth, parent) => {
      const kids = Array.isArray(n.children) ? n.children : [];
      const v = { n, depth, parent, kids: [], slot: 0 };
      nodes.push(v);
      maxDepth = Math.max(maxDepth, depth);
      for (const c of kids) v.kids.push(walk(c, depth + 1, v));
      if (v.kids.length === 0) v.slot = leaf++;
      else v.slot = (v.kids[0].slot + v.kids[v.kids.length - 1].slot) / 2;
      return v;
    };
    walk(root, 0, null);
    for (const v of nodes) {
      v.h = v.n.kind === "snapshot" ? SNAP_H : SB_H;
      v.x = PAD_X + v.depth * (NODE_W + COL_GAP);
      v.cy = PAD_Y + v.slot * ROW_H + SB_H / 2;
      v.y = v.cy - v.h / 2;
    }
    return {
      nodes,
      width: PAD_X * 2 + (maxDepth + 1) * NODE_W + maxDepth * COL_GAP,
      height: PAD_Y * 2 + Math.max(0, leaf - 1) * ROW_H + SB_H,
    };
  }

  function clip(s, n) {
    s = String(s || "");
    return s.length > n ? s.slice(0, n - 1) + "…" : s;
  }

  const EDGE_KINDS = ["clone", "restore", "snapshot", "fork"];
  const edgeKind = (origin) => (EDGE_KINDS.includes(origin) ? origin : "other");

  function arrowDefs() {
    const colours = { clone: "#2f6fed", fork: "#2f6fed", restore: "#1f9d55", snapshot: "#8e67e0", other: "#9aa5bb", rollback: "#e0702a" };
    return svg("defs", null, Object.entries(colours).map(([k, c]) =>
      svg("marker", { id: "arrow-" + k, viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto-start-reverse" },
        svg("path", { d: "M0,0 L10,5 L0,10 z", fill: c }))));
  }

  function label(x, y, text, kind) {
    const w = text.length * 6.4 + 12;
    return svg("g", { class: "edge-label " + kind, transform: "translate(" + x.toFixed(1) + "," + y.toFixed(1) + ")" },
      svg("rect", { x: -w / 2, y: -8.5, width: w, height: 17, rx: 8.5 }),
      svg("text", { x: 0, y: 3.8, "text-anchor": "middle", text }));
  }

  // snapshotShape is a tag: a rectangle with a notched left end.
  function snapshotShape(v) {
    const x = v.x, y = v.y, w = NODE_W, h = v.h, k = 12;
    const d = "M" + (x + k) + "," + y + " L" + (x + w - 4) + "," + y + " Q" + (x + w) + "," + y + " " + (x + w) + "," + (y + 4) +
      " L" + (x + w) + "," + (y + h - 4) + " Q" + (x + w) + "," + (y + h) + " " + (x + w - 4) + "," + (y + h) +
      " L" + (x + k) + "," + (y + h) + " L" + x + "," + (y + h / 2) + " Z";
    return svg("path", { class: "shape", d });
  }

  function renderLineage() {
    const box = $("lineage");
    const root = state.lineage;
    const head = $("lineage-of");
    if (!state.selected) {
      head.textContent = "";
      box.replaceChildren(el("p", { class: "empty", text: "Select a sandbox or a snapshot to draw its lineage." }));
      state.lineageKey = "";
      return;
    }
    if (!root) {
      head.textContent = "of " + state.selected;
      state.lineageKey = "";
      box.replaceChildren(el("p", { class: "empty", text: state.lineageError || "Loading lineage…" }));
      return;
    }
    const key = state.selected + "\n" + JSON.stringify(root);
    if (key === state.lineageKey) { refreshNodeSubtitles(); return; }
    state.lineageKey = key;

    const L = layout(root);
    const byId = new Map(L.nodes.map((v) => [v.n.id, v]));
    const nSb = L.nodes.filter((v) => v.n.kind !== "snapshot").length;
    head.textContent = "of " + state.selected + " · " + nSb + " sandbox" + (nSb === 1 ? "" : "es") + ", " +
      (L.nodes.length - nSb) + " snapshot" + (L.nodes.length - nSb === 1 ? "" : "s");

    const edges = svg("g", { class: "edges" });
    const labels = svg("g", { class: "labels" });
    const back = svg("g", { class: "rollbacks" });
    const nodesG = svg("g", { class: "nodes" });

    for (const v of L.nodes) {
      if (!v.parent) continue;
      const p = v.parent;
      const kind = edgeKind(v.n.origin);
      const x1 = p.x + NODE_W, y1 = p.cy, x2 = v.x - 2, y2 = v.cy;
      const mx = (x1 + x2) / 2;
      edges.appendChild(svg("path", {
        class: "edge " + kind, d: "M" + x1 + "," + y1 + " C" + mx + "," + y1 + " " + mx + "," + y2 + " " + x2 + "," + y2,
        "marker-end": "url(#arrow-" + kind + ")",
      }));
      const text = v.n.origin || "derived";
      // diff.js shows what changed along an edge when its label is clicked.
      const lab = label(v.x - 10 - (text.length * 6.4 + 12) / 2, v.cy, text, kind);
      lab.setAttribute("data-from", p.n.id);
      lab.setAttribute("data-to", v.n.id);
      lab.setAttribute("data-to-kind", v.n.kind || "");
      labels.appendChild(lab);
    }

    // Rollbacks: a dashed back-edge from the snapshot to the sandbox it
    // restored in place, under the nodes; plus a ↺N marker on the sandbox.
    // The arc leaves and enters on the side facing away from the tree's
    // middle: over the top when the snapshot sits above (or level with) the
    // sandbox, under the bottom otherwise.
    let minY = 0, maxY = L.height;
    for (const v of L.nodes) {
      const rbs = Array.isArray(v.n.rollbacks) ? v.n.rollbacks : [];
      const seen = new Set();
      for (const rb of rbs) {
        const s = byId.get(rb.snapshotID);
        if (!s || seen.has(rb.snapshotID)) continue;
        seen.add(rb.snapshotID);
        const count = rbs.filter((r) => r.snapshotID === rb.snapshotID).length;
        const up = s.cy <= v.cy;
        const sx = s.x + NODE_W * 0.5, sy = up ? s.y : s.y + s.h;
        const tx = v.x + NODE_W * 0.5, ty = up ? v.y - 2 : v.y + v.h + 2;
        const bend = 38 + Math.abs(s.depth - v.depth) * 4;
        const dip = up ? Math.min(sy, ty) - bend : Math.max(sy, ty) + bend;
        minY = Math.min(minY, dip - 14);
        maxY = Math.max(maxY, dip + 14);
        back.appendChild(svg("path", {
          class: "rollback-edge", d: "M" + sx + "," + sy + " C" + sx + "," + dip + " " + tx + "," + dip + " " + tx + "," + ty,
          "marker-end": "url(#arrow-rollback)",
        }));
        // The midpoint of the cubic: 1/8 P0 + 3/8 C1 + 3/8 C2 + 1/8 P3.
        const lx = (sx + 3 * sx + 3 * tx + tx) / 8, ly = (sy + 6 * dip + ty) / 8;
        const when = parseTime(rb.at);
        labels.appendChild(label(lx, ly, "rollback" + (count > 1 ? " ×" + count : "") +
          (Number.isNaN(when) ? "" : " · " + ago(rb.at)), "rollback"));
      }
    }

    for (const v of L.nodes) nodesG.appendChild(drawNode(v));

    const W = L.width, H = maxY - minY;
    box.replaceChildren(svg("svg", { width: W, height: H, viewBox: "0 " + minY + " " + W + " " + H, role: "img",
      "aria-label": "lineage of " + state.selected },
      arrowDefs(), back, edges, nodesG, labels));
  }

  function subtitleOf(n) {
    if (n.kind === "snapshot") {
      const what = n.origin === "clone" ? "clone snapshot" : "snapshot";
      return (n.name ? what + " · " + clip(n.id, 8) : what) + " · " + ago(n.createdAt);
    }
    return (n.state || "?") + " · " + ago(n.createdAt);
  }

  // refreshNodeSubtitles updates the relative times without a redraw.
  function refreshNodeSubtitles() {
    const byId = new Map();
    const collect = (n) => { byId.set(n.id, n); (n.children || []).forEach(collect); };
    if (state.lineage) collect(state.lineage);
    for (const t of document.querySelectorAll("#lineage text.subtitle[data-id]")) {
      const n = byId.get(t.dataset.id);
      if (n) t.textContent = subtitleOf(n);
    }
  }

  function drawNode(v) {
    const n = v.n;
    const isSnap = n.kind === "snapshot";
    const sc = stateClass(n.state);
    const selected = n.id === state.selected;
    const g = svg("g", {
      class: "node " + (isSnap ? "snapshot" : "sandbox " + sc) + (selected ? " selected" : ""),
      "data-id": n.id, tabindex: 0,
    });
    if (selected) {
      g.appendChild(svg("rect", { class: "halo", x: v.x - 4, y: v.y - 4, width: NODE_W + 8, height: v.h + 8, rx: isSnap ? 6 : 14 }));
    }
    g.appendChild(isSnap ? snapshotShape(v)
      : svg("rect", { class: "shape", x: v.x, y: v.y, width: NODE_W, height: v.h, rx: 10 }));
    const tx = v.x + (isSnap ? 20 : 24);
    if (!isSnap) g.appendChild(svg("circle", { class: "state-dot " + sc, cx: v.x + 13, cy: v.y + 16, r: 4.5 }));
    const title = isSnap ? (n.name || n.id) : n.id;
    g.appendChild(svg("text", { class: "title", x: tx, y: v.y + (isSnap ? 17 : 20), text: clip(title, TITLE_CHARS) }));
    g.appendChild(svg("text", { class: "subtitle", x: tx, y: v.y + (isSnap ? 31 : 36), "data-id": n.id, text: subtitleOf(n) }));

    const rbs = Array.isArray(n.rollbacks) ? n.rollbacks : [];
    if (rbs.length) {
      const cx = v.x + NODE_W - 4, cy = v.y + 4;
      g.appendChild(svg("g", { class: "rb-marker" },
        svg("circle", { cx, cy, r: 10 }),
        svg("text", { x: cx, y: cy + 3.5, "text-anchor": "middle", text: "↺" + rbs.length })));
    }

    g.addEventListener("mouseenter", (ev) => showTip(ev, n));
    g.addEventListener("mousemove", moveTip);
    g.addEventListener("mouseleave", hideTip);
    g.addEventListener("focus", (ev) => showTip(ev, n));
    g.addEventListener("blur", hideTip);
    g.addEventListener("click", () => { hideTip(); select(n.id); });
    g.addEventListener("keydown", (ev) => { if (ev.key === "Enter") select(n.id); });
    return g;
  }

  // ---------- tooltip ----------

  function showTip(ev, n) {
    const t = $("tooltip");
    const row = (k, v) => v ? el("div", null, el("span", { class: "k", text: k }), el("span", { class: "v", text: v })) : null;
    const rbs = Array.isArray(n.rollbacks) ? n.rollbacks : [];
    t.replaceChildren(...[
      row("id", n.id),
      row("kind", n.kind),
      row("name", n.name),
      row("state", n.state),
      row("origin", n.origin),
      row("parent", n.parentId),
      row("created", n.createdAt ? n.createdAt + " (" + ago(n.createdAt) + ")" : ""),
      ...rbs.map((r) => row("rollback", "to " + r.snapshotID + " · " + ago(r.at))),
    ].filter(Boolean));
    t.hidden = false;
    if (ev.clientX !== undefined && ev.type !== "focus") moveTip(ev);
    else {
      const r = ev.currentTarget.getBoundingClientRect();
      place(t, r.right + 8, r.top);
    }
  }

  function moveTip(ev) { place($("tooltip"), ev.clientX + 14, ev.clientY + 14); }

  function place(t, x, y) {
    const w = t.offsetWidth, h = t.offsetHeight;
    if (x + w > innerWidth - 8) x = Math.max(8, x - w - 28);
    if (y + h > innerHeight - 8) y = Math.max(8, y - h - 28);
    t.style.left = x + "px";
    t.style.top = y + "px";
  }

  function hideTip() { $("tooltip").hidden = true; }

  // ---------- legend ----------

  function renderLegend() {
    const item = (shape, text) => el("span", null, svg("svg", { width: 26, height: 16, viewBox: "0 0 26 16" }, shape), text);
    const sb = (cls) => svg("g", { class: "node sandbox " + cls }, svg("rect", { class: "shape", x: 2, y: 2, width: 22, height: 12, rx: 4 }));
    $("legend").replaceChildren(
      item(sb("running"), "running"),
      item(sb("paused"), "paused"),
      item(sb("killed"), "killed"),
      item(svg("g", { class: "node snapshot" }, svg("path", { class: "shape", d: "M7,2 L24,2 L24,14 L7,14 L2,8 Z" })), "snapshot"),
      item(svg("path", { class: "rollback-edge", d: "M2,8 L24,8" }), "rollback"),
      item(svg("g", { class: "node" }, svg("g", { class: "rb-marker" }, svg("circle", { cx: 13, cy: 8, r: 7 }))), "rolled back"));
  }

  // ---------- key handling ----------

  function keyFromFragment() {
    const h = location.hash.replace(/^#/, "");
    if (!h) return { key: "", lineage: "" };
    const p = new URLSearchParams(h);
    return { key: p.get("key") || "", lineage: p.get("lineage") || "" };
  }

  function showLogin() {
    stopLoops();
    $("app").hidden = true;
    $("forget").hidden = true;
    $("login").hidden = false;
    setStatus(false, "not connected");
    $("key-input").focus();
  }

  function showApp() {
    $("login").hidden = true;
    $("app").hidden = false;
    $("forget").hidden = false;
    setStatus(true, "connecting…");
    startLoops();
  }

  function init() {
    renderLegend();
    const frag = keyFromFragment();
    if (frag.key) {
      try { localStorage.setItem(KEY_STORAGE, frag.key); } catch (e) { /* private mode: keep it in memory */ }
    }
    let stored = "";
    try { stored = localStorage.getItem(KEY_STORAGE) || ""; } catch (e) { stored = ""; }
    state.key = frag.key || stored;
    // Never leave the key in the address bar or the history.
    history.replaceState(null, "", location.pathname + location.search + (frag.lineage ? "#lineage=" + enc(frag.lineage) : ""));
    if (frag.lineage) state.selected = frag.lineage;

    $("login-form").addEventListener("submit", (ev) => {
      ev.preventDefault();
      const k = $("key-input").value.trim();
      if (!k) return;
      state.key = k;
      try { localStorage.setItem(KEY_STORAGE, k); } catch (e) { /* ignore */ }
      $("key-input").value = "";
      showApp();
    });
    $("forget").addEventListener("click", () => {
      try { localStorage.removeItem(KEY_STORAGE); } catch (e) { /* ignore */ }
      state.key = "";
      state.sandboxes = [];
      state.snapshots = [];
      state.metrics.clear();
      state.errors.clear();
      renderBanner();
      showLogin();
    });
    $("banner-close").addEventListener("click", () => { state.errors.clear(); renderBanner(); });

    if (state.key) showApp();
    else showLogin();
  }

  // The other views (templates.js, nodes.js, ...) share the API helper,
  // the banner and the formatting.
  window.forkboxDashboard = { api, el, setError, key: () => state.key, base: API_BASE, ago, bytes, localTime };

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
