// forkbox dashboard: the network view of the selected sandbox — its
// egress rules in force (addresses, header rules by domain and header name,
// the egress proxy), its data-plane settings, and what the rules refused
// (GET /sandboxes/{id}/network).
// app.js announces the selection with a "forkbox:select" event and lends
// its API helper as window.forkboxDashboard.api. Every API value reaches the DOM as
// text, never as markup.
"use strict";

(function () {
  const EVERY_MS = 3000;
  const $ = (id) => document.getElementById(id);
  const enc = encodeURIComponent;
  const view = { id: "", timer: 0, busy: false };

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined) e.textContent = text;
    if (cls) e.className = cls;
    return e;
  }

  function list(items) {
    return items && items.length ? items.join(", ") : "—";
  }

  // headerRules lists each rules domain with its header names; the values
  // never reach the dashboard (the API redacts them here).
  function headerRules(rules) {
    return Object.keys(rules || {}).sort().map((domain) => {
      const names = [];
      for (const r of rules[domain] || []) {
        if (r && r.transform && r.transform.headers) names.push(...Object.keys(r.transform.headers).sort());
      }
      return domain + ": " + (names.length ? names.join(", ") : "—");
    });
  }

  function proxyText(p) {
    if (!p || !p.address) return "—";
    return (p.username ? p.username + "@" : "") + p.address + " (SOCKS5)";
  }

  function rulesRows(st) {
    const n = st.network || {};
    const rows = [
      ["Internet", st.allowInternetAccess ? "yes" : "no (0.0.0.0/0 denied)"],
      ["Allow out", list(n.allowOut)],
      ["Deny out", list(n.denyOut)],
      ["Header rules", list(headerRules(n.rules))],
      ["Egress proxy", proxyText(n.egressProxy)],
    ];
    if (n.allowPublicTraffic === false) rows.push(["Public traffic", "no (traffic access token required)"]);
    if (n.maskRequestHost) rows.push(["Request host", n.maskRequestHost]);
    if (n.httpsPorts && n.httpsPorts.length) rows.push(["HTTPS ports", n.httpsPorts.join(", ")]);
    const by = (st.denials && st.denials.byReason) || {};
    const parts = Object.keys(by).sort().map((r) => r + " " + by[r]);
    rows.push(["Denied", String((st.denials && st.denials.total) || 0) + (parts.length ? " (" + parts.join(", ") + ")" : "")]);
    return rows;
  }

  function render(st) {
    $("net-of").textContent = st.sandboxID;
    const rules = $("net-rules");
    rules.replaceChildren();
    for (const [k, v] of rulesRows(st)) {
      const dt = el("dt", k);
      const dd = el("dd", v, "mono");
      rules.append(dt, dd);
    }
    const recent = ((st.denials && st.denials.recent) || []).slice().reverse();
    const body = $("net-body");
    body.replaceChildren();
    for (const d of recent) {
      const tr = el("tr");
      const t = new Date(d.time);
      tr.append(
        el("td", isNaN(t) ? d.time : t.toLocaleTimeString()),
        el("td", d.layer),
        el("td", d.destination, "mono"),
        el("td", d.name || "—", "mono"),
        el("td", d.reason),
        el("td", d.rule),
      );
      body.append(tr);
    }
    $("net-empty").hidden = recent.length > 0;
    $("net-table").hidden = recent.length === 0;
  }

  async function refresh() {
    const id = view.id;
    if (!id || view.busy || document.hidden || $("app").hidden || !window.forkboxDashboard) return;
    view.busy = true;
    try {
      const r = await window.forkboxDashboard.api("GET", "/sandboxes/" + enc(id) + "/network");
      if (view.id === id) {
        $("net-error").hidden = true;
        render(r.data);
      }
    } catch (e) {
      // A snapshot or a sandbox that is gone has no network view.
      if (view.id === id) {
        $("net-error").textContent = e.status === 404 ? "No running or paused sandbox " + id + "." : e.message;
        $("net-error").hidden = false;
        $("net-table").hidden = true;
      }
    } finally {
      view.busy = false;
    }
  }

  function show(id) {
    view.id = id || "";
    clearInterval(view.timer);
    $("network").hidden = !view.id;
    if (!view.id) return;
    $("net-of").textContent = view.id;
    $("net-rules").replaceChildren();
    $("net-body").replaceChildren();
    $("net-empty").hidden = true;
    view.timer = setInterval(refresh, EVERY_MS);
    refresh();
  }

  function init() {
    document.addEventListener("forkbox:select", (ev) => show(ev.detail && ev.detail.id));
    const m = /(?:^#|&)lineage=([^&]*)/.exec(location.hash);
    if (m) show(decodeURIComponent(m[1]));
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
