// forkbox dashboard: the secrets view. Lists every secret's name, version,
// metadata and update time; the API never returns a value, so neither does
// this view. Uses app.js's API helper (window.forkboxDashboard); every API
// value reaches the DOM as text.
"use strict";

(function () {
  const EVERY_MS = 5000;
  const MAX_PAGES = 20;
  const $ = (id) => document.getElementById(id);
  let secrets = [];
  let busy = false;

  function dash() { return window.forkboxDashboard; }

  function when(s) {
    const t = Date.parse(s || "");
    return Number.isNaN(t) || t <= 0 ? "—" : new Date(t).toLocaleString();
  }

  // refresh reads every page of GET /secrets (X-Next-Token).
  async function refresh() {
    const d = dash();
    if (busy || !d || !d.key() || $("app").hidden) return;
    busy = true;
    try {
      const all = [];
      let next = "";
      for (let page = 0; page < MAX_PAGES; page++) {
        const r = await d.api("GET", "/secrets?limit=100" + (next ? "&nextToken=" + encodeURIComponent(next) : ""));
        all.push(...(r.data || []));
        next = r.next;
        if (!next) break;
      }
      secrets = all;
      d.setError("secrets", "");
    } catch (e) {
      d.setError("secrets", e.message);
    } finally {
      busy = false;
    }
    render();
  }

  function render() {
    const d = dash();
    if (!d) return;
    const el = d.el;
    $("sec-count").textContent = secrets.length ? "(" + secrets.length + ")" : "";
    $("sec-empty").hidden = secrets.length > 0;
    $("sec-body").replaceChildren(...secrets.map((s) => el("tr", { "data-id": s.secretID },
      el("td", {}, el("code", { text: s.name })),
      el("td", { class: "muted", text: s.secretID }),
      el("td", { class: "sec-version", text: "v" + s.currentVersion }),
      el("td", { text: Object.entries(s.metadata || {}).map(([k, v]) => k + "=" + v).join(", ") || "—" }),
      el("td", { text: when(s.updatedAt) }))));
  }

  function init() {
    setInterval(() => { if (!document.hidden) refresh(); }, EVERY_MS);
    refresh();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
