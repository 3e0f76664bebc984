// kemem-es dashboard: the Sessions tab (conversation memory, docs/sessions.md). Uses the
// helpers dashboard.js exposes (window.kememDashboard); every piece of data is a text node.
"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  const scopeOf = () => ({ agent_id: $("ses-agent").value.trim(), user_id: $("ses-user").value.trim() });
  const query = (o) => new URLSearchParams(Object.entries(o).filter(([, v]) => v !== "" && v !== null && v !== undefined)).toString();

  function start() {
    const d = window.kememDashboard;
    if (!d) return;
    const { api, h, clear, guarded, showError } = d;

    const listSessions = guarded(async (ev) => {
      if (ev) ev.preventDefault();
      const scope = scopeOf();
      const data = await api("GET", "/v1/sessions?" + query({ ...scope, limit: 100 }));
      showError("");
      const body = clear($("ses-table").tBodies[0]);
      for (const s of data.results) {
        body.append(h("tr", { data: { session: s.session_id } },
          h("td", null, s.session_id), h("td", { class: "num" }, s.messages), h("td", { class: "num" }, s.window_from),
          h("td", { class: "num" }, s.open_batches), h("td", null, s.has_summary ? "yes" : ""), h("td", null, s.last_at || ""),
          h("td", null, h("button", { type: "button", class: "open", onclick: () => openSession(scope, s.session_id) }, "open"))));
      }
      if (!body.rows.length) body.append(h("tr", null, h("td", { colspan: 7, class: "muted" }, "no sessions for this user")));
    });

    const openSession = guarded(async (scope, sid) => {
      $("ses-session").value = sid;
      for (const tr of $("ses-table").tBodies[0].rows) tr.classList.toggle("open", tr.dataset.session === sid);
      const data = await api("GET", `/v1/sessions/${encodeURIComponent(sid)}/messages?` + query({ ...scope, limit: 1000 }));
      const box = clear($("ses-messages"));
      box.append(h("h2", null, `messages (${data.results.length})`), h("table", null,
        h("thead", null, h("tr", null, ["seq", "speaker", "text", "at"].map((c) => h("th", null, c)))),
        h("tbody", null, data.results.map((m) => h("tr", null, h("td", { class: "num" }, m.seq),
          h("td", null, m.name || m.role), h("td", { class: "text" }, m.content), h("td", null, m.at || ""))))));
    });

    const buildContext = guarded(async (ev) => {
      if (ev) ev.preventDefault();
      const body = { ...scopeOf(), message: $("ses-message").value };
      const sid = $("ses-session").value.trim();
      if (sid) body.session_id = sid;
      const max = $("ses-max").value;
      if (max) body.max_tokens = Number(max);
      const ctx = await api("POST", "/v1/context", body);
      showError("");
      const box = clear($("ses-context"));
      const t = ctx.tokens;
      box.append(...[h("h2", null, "context"),
        h("table", { id: "ses-tokens" }, h("thead", null, h("tr", null, ["part", "tokens"].map((c) => h("th", null, c)))),
          h("tbody", null, [["dialogue", t.dialogue], ["summary", t.summary], ["overview", t.overview], ["details", t.details],
            ["total", `${t.total} / ${ctx.budget}`]].map(([k, v]) => h("tr", null, h("td", null, k), h("td", { class: "num" }, v))))),
        h("p", { class: "muted" }, `tokenizer: ${ctx.tokenizer}; pending batches: ${ctx.pending_batches}; ` +
          `${ctx.dialogue.length} turns, ${ctx.overview.length} overview events, ${ctx.entities.length} entities, ${ctx.events.length} events`),
        ctx.degraded ? h("p", { class: "error" }, "degraded: " + ctx.degraded) : null,
        ctx.notes.length ? h("ul", null, ctx.notes.map((n) => h("li", null, n))) : null,
        h("pre", { id: "ses-text", class: "prompt" }, ctx.text)].filter(Boolean));
    });

    $("ses-form").addEventListener("submit", listSessions);
    $("ses-context-run").addEventListener("click", buildContext);
  }
  document.addEventListener("DOMContentLoaded", start);
})();
