// forkbox dashboard: the nodes view. Lists the cluster's nodes (GET
// /nodes) with their state, load and last heartbeat, marks the node that
// serves this page, drains or undrains a node, and removes a dead one. A
// daemon without a node registry answers 501: the view says so rather than
// raising an error.
// Uses app.js's API helper (window.forkboxDashboard); every API value
// reaches the DOM as text.
"use strict";

(function () {
  const EVERY_MS = 3000;
  const $ = (id) => document.getElementById(id);
  const enc = encodeURIComponent;
  let nodes = [];
  let busy = false;

  function dash() { return window.forkboxDashboard; }

  // The sandbox states' colours: alive as running, draining as paused (it
  // keeps its sandboxes but takes no new ones), dead as an error.
  const BADGE = { alive: "running", draining: "paused", dead: "dead" };

  async function refresh() {
    const d = dash();
    if (busy || !d || !d.key() || $("app").hidden) return;
    busy = true;
    try {
      nodes = (await d.api("GET", "/nodes")).data || [];
      $("node-none").hidden = true;
      $("node-table").hidden = false;
      d.setError("nodes", "");
    } catch (e) {
      nodes = [];
      // 501: this daemon runs without a node registry; nothing is wrong.
      $("node-none").hidden = e.status !== 501;
      $("node-table").hidden = e.status === 501;
      d.setError("nodes", e.status === 501 ? "" : e.message);
    } finally {
      busy = false;
    }
    render();
  }

  // act sends one request about a node from its row's button (disabled
  // meanwhile), shows a refusal (a 409 says why), then refreshes the view.
  async function act(button, method, path) {
    const d = dash();
    button.disabled = true;
    try {
      await d.api(method, path);
      d.setError("nodes", "");
    } catch (e) {
      d.setError("nodes", e.message);
    } finally {
      button.disabled = false;
      refresh();
    }
  }

  // setDraining asks for a drain or undrain.
  function setDraining(n, drain, button) {
    return act(button, "POST", "/nodes/" + enc(n.nodeID) + (drain ? "/drain" : "/undrain"));
  }

  // remove asks, once confirmed, to remove a dead node from the records;
  // the daemon refuses while its sandboxes are recorded running.
  function remove(n, button) {
    if (!confirm("Remove dead node " + n.nodeID + " from the cluster's records?")) return;
    return act(button, "DELETE", "/nodes/" + enc(n.nodeID));
  }

  function row(n) {
    const d = dash();
    const el = d.el;
    const drain = !n.draining;
    const cap = n.capacity > 0 ? String(n.capacity) : "∞";
    return el("tr", { "data-node": n.nodeID, class: n.self ? "self" : "" },
      el("td", {}, el("code", { text: n.nodeID }),
        n.self ? el("span", { class: "chip self-mark", title: "this dashboard is served by this node", text: "this node" }) : null),
      el("td", {}, el("span", { class: "badge " + (BADGE[n.state] || "busy"), text: n.state || "—" })),
      el("td", { class: "mono", text: n.url || "—" }),
      el("td", { class: "node-load", text: n.running + " / " + cap }),
      el("td", { text: d.bytes(n.freeMemoryMiB * 1024 * 1024) }),
      el("td", { text: String(n.cpus || "?") }),
      el("td", { text: (n.load1 || 0).toFixed(2) }),
      el("td", { title: d.localTime(n.heartbeatAt), text: d.ago(n.heartbeatAt) }),
      el("td", { class: "muted", text: n.version || "—" }),
      el("td", { class: "actions" }, el("button", {
        type: "button", class: "act" + (drain ? " danger" : ""), text: drain ? "Drain" : "Undrain",
        title: drain ? "Take no new sandboxes on this node; those it runs keep running" : "Take new sandboxes again",
        onclick: (ev) => setDraining(n, drain, ev.currentTarget),
      }), n.state === "dead" ? el("button", {
        type: "button", class: "act danger node-remove", text: "Remove",
        title: "Remove this dead node from the records (a node retired for good)",
        onclick: (ev) => remove(n, ev.currentTarget),
      }) : null));
  }

  function render() {
    if (!dash()) return;
    $("node-count").textContent = nodes.length ? "(" + nodes.length + ")" : "";
    $("node-empty").hidden = nodes.length > 0 || !$("node-none").hidden;
    $("node-body").replaceChildren(...nodes.map(row));
  }

  function init() {
    setInterval(() => { if (!document.hidden) refresh(); }, EVERY_MS);
    refresh();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
