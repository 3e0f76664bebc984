// kemem-es dashboard: the proxy's token usage per agent and user (docs/proxy.md), on the
// Overview tab. Reads GET /v1/usage with the page's key, so a key sees its own agents only.
// Uses the helpers dashboard.js exposes (window.kememDashboard); data become text nodes.
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  const COLS = ["requests", "prompt_tokens", "completion_tokens", "memory_tokens"];

  function start() {
    const d = window.kememDashboard;
    if (!d) return;
    const { api, h, clear } = d;

    async function load() {
      const box = $("ov-usage");
      if (!box || box.closest(".panel").hidden) return;
      const body = clear(box.tBodies[0]);
      let data;
      try {
        data = await api("GET", "/v1/usage");
      } catch (e) {  // 401 before a key is entered: the page's own error box says so
        body.append(h("tr", null, h("td", { colspan: 6, class: "muted" }, e.message || String(e))));
        return;
      }
      for (const r of data.results) {
        body.append(h("tr", { data: { agent: r.agent_id, user: r.user_id } },
          h("td", null, r.agent_id), h("td", null, r.user_id || "(no user)"),
          COLS.map((c) => h("td", { class: "num", data: { col: c } }, r[c]))));
      }
      if (!data.results.length) body.append(h("tr", null, h("td", { colspan: 6, class: "muted" }, "no proxied requests yet")));
      $("ov-usage-note").textContent = data.degraded ? "(" + data.degraded + ")" : "";
    }

    for (const id of ["tab-overview", "key-save", "ov-usage-refresh"]) {
      const el = $(id);
      if (el) el.addEventListener("click", () => setTimeout(load, 0));
    }
    load();
    setInterval(load, 10000);
  }
  document.addEventListener("DOMContentLoaded", start);
})();
