// forkbox dashboard: the volumes view. Lists every volume with the
// running and paused sandboxes that mount it, and where (from the
// sandbox listing's volumeMounts, which name volumes). Uses app.js's API
// helper (window.forkboxDashboard); every API value reaches the DOM as
// text.
"use strict";

(function () {
  const EVERY_MS = 3000;
  const $ = (id) => document.getElementById(id);
  let busy = false;

  function dash() { return window.forkboxDashboard; }

  // refresh reloads the volumes and the sandboxes' mounts.
  async function refresh() {
    const d = dash();
    if (busy || !d || !d.key() || $("app").hidden) return;
    busy = true;
    try {
      const vols = (await d.api("GET", "/volumes")).data || [];
      const sbs = (await d.api("GET", "/v2/sandboxes?state=running,paused&limit=100")).data || [];
      render(vols, sbs);
      d.setError("volumes", "");
    } catch (e) {
      d.setError("volumes", e.message);
    } finally {
      busy = false;
    }
  }

  // mountsOf lists "sandbox at path" for each sandbox mounting volume name.
  function mountsOf(name, sbs) {
    const out = [];
    for (const sb of sbs) {
      for (const m of sb.volumeMounts || []) {
        if (m.name === name) out.push({ id: sb.sandboxID, path: m.path, state: sb.state });
      }
    }
    return out;
  }

  function render(vols, sbs) {
    const el = dash().el;
    $("vol-count").textContent = vols.length ? "(" + vols.length + ")" : "";
    $("vol-empty").hidden = vols.length > 0;
    $("vol-body").replaceChildren(...vols.map((v) => {
      const mounts = mountsOf(v.name, sbs);
      return el("tr", { "data-id": v.volumeID },
        el("td", {}, el("code", { text: v.volumeID })),
        el("td", { text: v.name }),
        el("td", { class: "vol-mounts" }, ...(mounts.length ? mounts.map((m) => el("div", {},
          el("code", { text: m.id }), " at ", el("code", { text: m.path }),
          el("span", { class: "muted", text: " (" + m.state + ")" }))) : [el("span", { class: "muted", text: "not mounted" })])));
    }));
  }

  function init() {
    setInterval(() => { if (!document.hidden) refresh(); }, EVERY_MS);
    refresh();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
