// forkbox dashboard: the templates view. Lists every template (built in
// and user-built) with its latest build's status; a click shows the
// template's builds, and a build's progress and log (the E2B status route,
// paged by logsOffset). Uses app.js's API helper (window.forkboxDashboard);
// every API value reaches the DOM as text.
"use strict";

(function () {
  const EVERY_MS = 3000;
  const LOG_PAGE = 100;
  const MAX_LOG_PAGES = 50;
  const $ = (id) => document.getElementById(id);
  const enc = encodeURIComponent;

  const view = {
    templates: [],
    selected: "",   // template id whose builds are shown
    builds: [],
    build: "",      // build id whose log is shown
    logs: [],
    status: null,   // the shown build's status answer
    busy: false,
  };

  function dash() { return window.forkboxDashboard; }

  function badge(status) {
    // The sandbox states' colours: ready as running, error as killed,
    // waiting and building as busy.
    const cls = { ready: "running", error: "killed" }[status] || "busy";
    return dash().el("span", { class: "badge " + cls, text: status || "—" });
  }

  function when(s) {
    const t = Date.parse(s || "");
    return Number.isNaN(t) || t <= 0 ? "—" : new Date(t).toLocaleString();
  }

  // refresh reloads the list, the selected template's builds and the shown
  // build's log (new entries only: the status route is paged by offset).
  async function refresh() {
    const d = dash();
    if (view.busy || !d || !d.key() || $("app").hidden) return;
    view.busy = true;
    try {
      view.templates = (await d.api("GET", "/templates")).data || [];
      if (view.selected) {
        const tpl = (await d.api("GET", "/templates/" + enc(view.selected))).data;
        view.builds = (tpl && tpl.builds) || [];
        if (!view.build && view.builds.length) view.build = view.builds[view.builds.length - 1].buildID;
      }
      if (view.selected && view.build) await refreshLog(d);
      d.setError("templates", "");
    } catch (e) {
      d.setError("templates", e.message);
    } finally {
      view.busy = false;
    }
    render();
  }

  async function refreshLog(d) {
    const path = "/templates/" + enc(view.selected) + "/builds/" + enc(view.build) + "/status";
    for (let page = 0; page < MAX_LOG_PAGES; page++) {
      const r = (await d.api("GET", path + "?limit=" + LOG_PAGE + "&logsOffset=" + view.logs.length)).data || {};
      view.status = r;
      const got = r.logEntries || [];
      view.logs.push(...got);
      if (got.length < LOG_PAGE) break;
    }
  }

  function select(id) {
    if (view.selected === id) return;
    view.selected = id;
    view.builds = [];
    showBuild("");
  }

  function showBuild(id) {
    view.build = id;
    view.logs = [];
    view.status = null;
    render();
    refresh();
  }

  function render() {
    const d = dash();
    if (!d) return;
    const el = d.el;
    $("tpl-count").textContent = view.templates.length ? "(" + view.templates.length + ")" : "";
    $("tpl-empty").hidden = view.templates.length > 0;
    $("tpl-body").replaceChildren(...view.templates.map((t) => el("tr", {
      class: t.templateID === view.selected ? "selected" : "", tabindex: 0, "data-id": t.templateID,
      onclick: () => select(t.templateID),
      onkeydown: (ev) => { if (ev.key === "Enter") select(t.templateID); },
    },
    el("td", {}, el("code", { text: t.templateID })),
    el("td", { text: (t.names || t.aliases || []).join(", ") }),
    el("td", {}, badge(t.buildStatus)),
    el("td", { text: String(t.buildCount || 0) }),
    el("td", { text: (t.cpuCount || "?") + " CPU · " + (t.memoryMB || "?") + " MiB" }),
    el("td", { text: when(t.updatedAt) }))));
    renderBuilds(el);
  }

  function renderBuilds(el) {
    $("tpl-detail").hidden = !view.selected;
    $("tpl-of").textContent = view.selected;
    $("tpl-builds").replaceChildren(...view.builds.map((b) => el("li", {
      class: b.buildID === view.build ? "selected" : "",
    }, el("button", { type: "button", class: "ghost small", text: b.buildID, onclick: () => showBuild(b.buildID) }),
    " ", badge(b.status), el("span", { class: "muted", text: " " + when(b.createdAt) }))));
    const st = view.status;
    let progress = "";
    if (st) {
      progress = "status " + st.status;
      if (st.reason && st.reason.message) progress += " · failed at step " + (st.reason.step || "?") + ": " + st.reason.message;
    }
    $("tpl-progress").textContent = progress;
    $("tpl-log").textContent = view.logs.map((e) => {
      const step = e.step ? "[" + e.step + "] " : "";
      return new Date(Date.parse(e.timestamp)).toLocaleTimeString() + " " + (e.level || "info").padEnd(5) + " " + step + e.message;
    }).join("\n");
  }

  function init() {
    setInterval(() => { if (!document.hidden) refresh(); }, EVERY_MS);
    refresh();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
