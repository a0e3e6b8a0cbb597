// forkbox dashboard: what changed between two nodes of the lineage graph —
// along an edge (click its label) or between any two nodes (shift-click
// both) — as a list of changed files (GET /sandboxes/{id}/diff?against=),
// and a file's unified diff when its row is clicked (format=patch).
// app.js lends its API helper as window.forkboxDashboard. Every API value
// reaches the DOM as text, never as markup.
"use strict";

(function () {
  const $ = (id) => document.getElementById(id);
  const enc = encodeURIComponent;
  const PAGE = 500;
  const view = { id: "", against: "", marked: [], seq: 0 };

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    if (cls) e.className = cls;
    return e;
  }

  // globEscape makes a path a glob that matches only itself.
  const globEscape = (p) => p.replace(/[*?[\\]/g, "\\$&");

  function query(extra) {
    const q = new URLSearchParams();
    if (view.against) q.set("against", view.against);
    for (const [k, v] of Object.entries(extra || {})) q.set(k, v);
    return q.toString();
  }

  function showError(msg) {
    const e = $("diff-error");
    e.textContent = msg;
    e.hidden = !msg;
  }

  function sizeText(c) {
    const o = c.old && c.old.type === "file" ? c.old.size : null;
    const n = c.new && c.new.type === "file" ? c.new.size : null;
    if (o !== null && n !== null && o !== n) return o + " → " + n + " B";
    const s = n !== null ? n : o;
    return s === null ? "" : s + " B";
  }

  function changeText(c) {
    const e = c.new || c.old || {};
    if (c.kind === "modified") return (c.what || []).join(", ");
    return c.kind + " " + (e.type || "") + (e.type === "symlink" ? " → " + e.link : "");
  }

  async function show(id, against) {
    const seq = ++view.seq;
    view.id = id;
    view.against = against;
    $("diff").hidden = false;
    $("diff-of").textContent = id + " against " + (against || "its parent");
    $("diff-patch").hidden = true;
    $("diff-file").hidden = true;
    $("diff-body").replaceChildren();
    showError("Loading changes…");
    try {
      const r = await window.forkboxDashboard.api("GET", "/sandboxes/" + enc(id) + "/diff?" + query({ limit: PAGE }));
      if (seq !== view.seq) return;
      render(r.data);
    } catch (e) {
      if (seq === view.seq) showError(e.message);
    }
  }

  function render(d) {
    const changes = (d && d.changes) || [];
    view.against = view.against || d.against || "";
    $("diff-of").textContent = view.id + " against " + (d.against || view.against) + " · " + changes.length +
      (d.next ? "+" : "") + " changed";
    showError(changes.length ? "" : "No files changed.");
    $("diff-body").replaceChildren(...changes.map((c) => {
      const tr = el("tr");
      tr.dataset.path = c.path;
      tr.className = "diff-row " + c.kind;
      tr.append(el("td", c.kind[0].toUpperCase(), "kind"), el("td", c.path, "path"), el("td", changeText(c)), el("td", sizeText(c)));
      tr.addEventListener("click", () => showFile(c.path));
      return tr;
    }));
    const more = $("diff-more");
    more.hidden = !d.next;
    more.textContent = d.next ? "showing the first " + changes.length + " changes (use the CLI or API for all)" : "";
  }

  async function showFile(path) {
    const seq = view.seq;
    const pre = $("diff-patch");
    $("diff-file").textContent = path;
    $("diff-file").hidden = false;
    pre.hidden = false;
    pre.textContent = "Loading…";
    for (const tr of document.querySelectorAll("#diff-body tr")) tr.classList.toggle("selected", tr.dataset.path === path);
    try {
      const resp = await fetch((window.forkboxDashboard.base || "") + "/sandboxes/" + enc(view.id) + "/diff?" + query({ format: "patch", path: globEscape(path), limit: 50 }),
        { headers: { "X-API-Key": window.forkboxDashboard.key() }, cache: "no-store" });
      const text = await resp.text();
      if (seq !== view.seq) return;
      pre.textContent = resp.ok ? text || "(no content change)" : "error " + resp.status + ": " + text;
    } catch (e) {
      pre.textContent = e.message;
    }
  }

  // marks shows which nodes shift-clicks picked.
  function paintMarks() {
    for (const g of document.querySelectorAll("#lineage g.node[data-id]")) {
      g.classList.toggle("compare", view.marked.includes(g.dataset.id));
    }
  }

  function onLineageClick(ev) {
    const edge = ev.target.closest && ev.target.closest("#lineage g.edge-label[data-to]");
    if (edge) {
      ev.stopPropagation();
      // A snapshot is compared with its sandbox's state before it (the
      // default); a sandbox with the snapshot it came from.
      const to = edge.dataset.to;
      show(to, edge.dataset.toKind === "snapshot" ? "" : edge.dataset.from);
      return;
    }
    const node = ev.target.closest && ev.target.closest("#lineage g.node[data-id]");
    if (!node || !ev.shiftKey) return;
    ev.stopPropagation();
    ev.preventDefault();
    const id = node.dataset.id;
    view.marked = view.marked.includes(id) ? view.marked.filter((m) => m !== id) : [...view.marked, id].slice(-2);
    paintMarks();
    if (view.marked.length === 2) show(view.marked[1], view.marked[0]);
  }

  function start() {
    const box = $("lineage");
    if (!box || !window.forkboxDashboard) return;
    box.addEventListener("click", onLineageClick, true);
    new MutationObserver(paintMarks).observe(box, { childList: true });
    $("diff-close").addEventListener("click", () => {
      view.seq++;
      view.marked = [];
      paintMarks();
      $("diff").hidden = true;
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
