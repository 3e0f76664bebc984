// kemem-es dashboard. Plain script, no build step, no libraries.
// Safety rule: every piece of data becomes a text node (h() below); no innerHTML anywhere.
// The API key lives in sessionStorage (this tab only) and travels in the Authorization header,
// never in a URL.
"use strict";
(() => {
  const KEY = "kemem.dashboard.key";
  const MODES = ["fusion", "bm25", "vector", "rrf", "two_stage"];
  const SIGNALS = ["kw", "vec", "time", "strength"];
  const TIERS = { 1: "与主体和客体的关系", 2: "用户属性 / 用户关系", 3: "特殊实体属性 / 与其它实体的关系", 4: "记忆画面" };
  const SVG = "http://www.w3.org/2000/svg";
  const $ = (id) => document.getElementById(id);

  // -- DOM helpers: text only -------------------------------------------------------------
  function h(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "class") e.className = v;
      else if (k === "data") Object.assign(e.dataset, v);
      else if (k === "onclick") e.addEventListener("click", v);
      else e.setAttribute(k, String(v));
    }
    for (const kid of kids.flat()) {
      if (kid === null || kid === undefined || kid === false) continue;
      e.append(kid instanceof Node ? kid : String(kid));
    }
    return e;
  }
  function s(tag, attrs, ...kids) {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, String(v));
    for (const kid of kids) e.append(kid instanceof Node ? kid : String(kid));
    return e;
  }
  const fmt = (v, d = 3) => (v === null || v === undefined ? "–" : Number(v).toFixed(d));
  const clear = (e) => { e.replaceChildren(); return e; };

  function showError(msg) {
    const box = $("error");
    box.textContent = msg;
    box.hidden = !msg;
  }

  // -- the API ----------------------------------------------------------------------------
  async function api(method, path, body) {
    const headers = { Accept: "application/json" };
    const key = sessionStorage.getItem(KEY);
    if (key) headers.Authorization = "Bearer " + key;
    const init = { method, headers, cache: "no-store", credentials: "omit" };
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const r = await fetch(path, init);
    let data = null;
    try { data = await r.json(); } catch (_) { data = null; }
    if (!r.ok) {
      const err = data && data.error ? data.error : { code: "http", message: r.statusText };
      const hint = r.status === 401 ? " — enter an API key above" : "";
      const e = new Error(`${r.status} ${err.code}: ${err.message}${hint}`);
      e.status = r.status;
      throw e;
    }
    return data;
  }
  const guarded = (fn) => async (...args) => {
    try { await fn(...args); } catch (e) { showError(e.message || String(e)); }
  };
  // for the other tabs' scripts (sessions.js)
  window.kememDashboard = { api, h, clear, guarded, showError };

  // -- key --------------------------------------------------------------------------------
  function keyState() {
    const has = !!sessionStorage.getItem(KEY);
    const needed = document.body.dataset.keys === "on";
    $("key-state").textContent = has ? "key set (this tab only)" : needed ? "this server needs a key" : "no key needed";
  }

  // -- tabs -------------------------------------------------------------------------------
  function show(tab) {
    for (const b of document.querySelectorAll(".tab")) b.classList.toggle("active", b.dataset.tab === tab);
    for (const p of document.querySelectorAll(".panel")) p.hidden = p.id !== tab;
    if (tab === "overview") loadOverview();
  }

  // -- overview ---------------------------------------------------------------------------
  function card(k, v, cls) {
    return h("div", { class: "card" + (cls ? " " + cls : "") }, h("div", { class: "v" }, v), h("div", { class: "k" }, k));
  }

  const loadOverview = guarded(async () => {
    const data = await api("GET", "/dashboard/api/overview");
    showError("");
    const cards = clear($("ov-cards"));
    const eng = data.engine;
    if (eng.ok) cards.append(card("engine", `${eng.dialect} ${eng.version} · ${eng.status}`, eng.status === "red" ? "bad" : ""));
    else cards.append(card("engine", "unreachable", "bad"), card("reason", eng.reason, "bad"));
    cards.append(card("server", "v" + data.server.version));
    cards.append(card("agents visible", data.server.agents === null ? "all" : data.server.agents.join(", ") || "none"));
    const st = data.stats;
    if (!st) return;
    const users = st.scopes.filter((r) => r.db === "user").length;
    cards.append(
      h("div", { class: "card", id: "ov-total" }, h("div", { class: "v" }, st.total), h("div", { class: "k" }, "memories")),
      card("user db", st.by_db.user || 0), card("official db", st.by_db.official || 0),
      card("events", st.by_kind.events || 0), card("entities", st.by_kind.entities || 0),
      card("agents", Object.keys(st.by_agent).length), card("users", users),
      card("strength avg / max", `${fmt(st.strength_avg, 1)} / ${fmt(st.strength_max, 1)}`),
    );
    if (st.missing.length) cards.append(card("missing indices", st.missing.join(", "), "bad"));
    if (st.truncated) cards.append(card("note", "more scopes than listed", "bad"));

    const body = clear($("ov-scopes").tBodies[0]);
    for (const r of st.scopes) {
      body.append(h("tr", { data: { agent: r.agent_id, user: r.user_id || "", db: r.db } },
        h("td", null, r.agent_id), h("td", null, r.db), h("td", null, r.user_id || "(shared)"),
        h("td", { class: "num" }, r.events), h("td", { class: "num" }, r.entities),
        h("td", null, h("button", { type: "button", class: "browse", onclick: () => browse(r) }, "browse"))));
    }
    strengthChart(st.strength);
    const cl = clear($("ov-cleanups").tBodies[0]);
    if (!st.cleanups.length) cl.append(h("tr", null, h("td", { colspan: 4, class: "muted" }, "none")));
    for (const c of st.cleanups) {
      const reasons = Object.entries(c.reasons).map(([k, v]) => `${k} ${v}`).join(", ");
      cl.append(h("tr", null, h("td", null, c.day), h("td", { class: "num" }, c.deleted), h("td", { class: "num" }, c.users), h("td", null, reasons)));
    }
  });

  function strengthChart(buckets) {
    const W = 420, H = 150, pad = 22;
    const max = Math.max(1, ...buckets.map((b) => b.count));
    const bw = (W - pad) / buckets.length;
    const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, role: "img", "aria-label": "strength distribution" });
    buckets.forEach((b, i) => {
      const bh = ((H - 2 * pad) * b.count) / max;
      const x = pad + i * bw;
      svg.append(s("rect", { x: x + 3, y: H - pad - bh, width: bw - 6, height: bh, fill: "#a855f7" }));
      svg.append(s("text", { x: x + bw / 2, y: H - pad - bh - 4, "text-anchor": "middle", "font-size": 10 }, String(b.count)));
      const label = b.hi === null ? `${b.lo}+` : `${b.lo}–${b.hi}`;
      svg.append(s("text", { x: x + bw / 2, y: H - 6, "text-anchor": "middle", "font-size": 10, fill: "#6b7280" }, label));
    });
    clear($("ov-strength")).append(svg);
  }

  // -- live metrics -----------------------------------------------------------------------
  const samples = [];
  const SAMPLES = 60;

  function spark(el, values, unit) {
    const W = 300, H = 60;
    const svg = s("svg", { viewBox: `0 0 ${W} ${H}`, preserveAspectRatio: "none" });
    const max = Math.max(1e-9, ...values);
    if (values.length > 1) {
      const pts = values.map((v, i) => `${(i * W) / (SAMPLES - 1)},${H - 4 - ((H - 12) * v) / max}`).join(" ");
      svg.append(s("polyline", { points: pts, fill: "none", stroke: "#2563eb", "stroke-width": 2 }));
    }
    const last = values.length ? values[values.length - 1] : 0;
    svg.append(s("text", { x: W - 4, y: 12, "text-anchor": "end", "font-size": 11 }, `${last.toFixed(2)}${unit} (max ${max < 1e-6 ? 0 : max.toFixed(2)})`));
    clear(el).append(svg);
  }

  const pollMetrics = guarded(async () => {
    if ($("overview").hidden) return;
    const m = await api("GET", "/dashboard/api/metrics");
    const live = clear($("ov-live"));
    if (!m.enabled) { live.append(card("metrics", m.hidden ? "operator keys only" : "prometheus_client not installed", m.hidden ? "" : "bad")); return; }
    live.append(card("queries", m.queries), card("errors (5xx)", m.query_errors, m.query_errors ? "bad" : ""),
      card("rejected (4xx)", m.query_rejected), card("degraded", m.degraded, m.degraded ? "bad" : ""),
      card("requests (all)", m.requests), card("uptime", `${Math.round(m.uptime_s)} s`));
    samples.push(m);
    if (samples.length > SAMPLES + 1) samples.shift();
    const qps = [], err = [], deg = [];
    for (let i = 1; i < samples.length; i++) {
      const a = samples[i - 1], b = samples[i];
      const dt = Math.max(b.at - a.at, 1e-3), dq = Math.max(b.queries - a.queries, 0);
      qps.push(dq / dt);
      err.push(dq ? (100 * Math.max(b.query_errors - a.query_errors, 0)) / dq : 0);
      deg.push(dq ? (100 * Math.max(b.degraded - a.degraded, 0)) / dq : 0);
    }
    spark($("ch-qps"), qps, "/s");
    spark($("ch-err"), err, "%");
    spark($("ch-deg"), deg, "%");
    const body = clear($("ov-stages").tBodies[0]);
    const top = Math.max(1e-9, ...m.stages.map((r) => r.p99_ms || 0));
    for (const r of m.stages) {
      const bar = h("div", { class: "sigbar" });
      [["p99_ms", "#cbd5e1"], ["p95_ms", "#94a3b8"], ["p50_ms", "#1d2330"]].forEach(([k, c]) => {
        const seg = h("div", { class: "seg" });
        seg.style.left = "0";
        seg.style.width = `${(100 * (r[k] || 0)) / top}%`;
        seg.style.background = c;
        bar.append(seg);
      });
      body.append(h("tr", { data: { stage: r.stage } }, h("td", null, r.stage), h("td", { class: "num" }, r.count),
        h("td", { class: "num" }, fmt(r.p50_ms, 2)), h("td", { class: "num" }, fmt(r.p95_ms, 2)),
        h("td", { class: "num" }, fmt(r.p99_ms, 2)), h("td", { class: "num" }, fmt(r.mean_ms, 2)), h("td", null, bar)));
    }
    if (!m.stages.length) body.append(h("tr", null, h("td", { colspan: 7, class: "muted" }, "no /query served yet")));
  });

  // -- explorer ---------------------------------------------------------------------------
  function num(id) { return Number($(id).value); }

  const runExplorer = guarded(async (ev) => {
    ev.preventDefault();
    const modes = [$("ex-mode").value];
    if ($("ex-mode-b").value) modes.push($("ex-mode-b").value);
    const body = {
      query: $("ex-query").value, context: $("ex-context").value,
      agent_id: $("ex-agent").value.trim(), user_id: $("ex-user").value.trim(),
      modes, limit: num("ex-limit"), score_threshold: num("ex-threshold"),
    };
    // Weights go only when changed from the defaults: left alone, an English query runs with
    // the latin profile's weights, as the chat's queries do.
    const wIds = ["ex-w-kw", "ex-w-vec", "ex-w-time", "ex-w-strength"];
    if (wIds.some((id) => $(id).value !== $(id).defaultValue)) {
      body.weights = { kw: num("ex-w-kw"), vec: num("ex-w-vec"), time: num("ex-w-time"), strength: num("ex-w-strength") };
    }
    if ($("ex-now").value) body.now = $("ex-now").value;
    if ($("ex-user-name").value.trim()) body.user_name = $("ex-user-name").value.trim();
    if ($("ex-agent-name").value.trim()) body.agent_name = $("ex-agent-name").value.trim();
    const out = clear($("ex-runs"));
    out.append(h("p", { class: "muted" }, "running…"));
    const data = await api("POST", "/dashboard/api/explore", body);
    showError("");
    clear(out).append(...data.runs.map(renderRun));
  });

  function chips(words, cls) {
    return h("div", { class: "chips" + (cls ? " " + cls : "") }, words.length ? words.map((w) => h("span", { class: "chip" }, w)) : h("span", { class: "muted" }, "–"));
  }

  function sigBar(hit, weights, threshold) {
    const bar = h("div", { class: "sigbar" });
    let left = 0;
    // The signals are what the score holds (vec above 1 for a close paraphrase); only the
    // total is clamped to [0, 1], so a segment is cut where the bar ends.
    for (const k of SIGNALS) {
      const w = weights[k] || 0;
      const part = w * (hit.signals[k] || 0);
      if (part <= 0 || left >= 1) continue;
      const seg = h("div", { class: `seg ${k}`, title: `${k}: ${fmt(hit.signals[k])} × ${w}` });
      seg.style.left = `${100 * left}%`;
      seg.style.width = `${100 * Math.min(part, 1 - left)}%`;
      bar.append(seg);
      left += part;
    }
    // What the memory's best sentence added (search.best_sentence) and anchor feedback (what
    // closeness in meaning or time to a confident best hit added): weight 1, after the sum.
    const extras = [
      ["sentence", "its best sentence is closer to the query than the whole memory"],
      ["anchor", "close to the best hit in meaning or time"],
    ];
    for (const [k, why] of extras) {
      const gain = hit.signals[k] || 0;
      if (gain <= 0) continue;
      const seg = h("div", { class: `seg ${k}`, title: `${k}: +${fmt(gain)} (${why})` });
      seg.style.left = `${100 * Math.min(left, 1)}%`;
      seg.style.width = `${100 * Math.max(0, Math.min(gain, 1 - left))}%`;
      bar.append(seg);
      left += gain;
    }
    const thr = h("div", { class: "thr", title: `threshold ${threshold}` });
    thr.style.left = `${100 * threshold}%`;
    const sc = h("div", { class: "score", title: `score ${hit.score}` });
    sc.style.left = `${100 * Math.min(hit.score, 1)}%`;
    bar.append(thr, sc);
    return bar;
  }

  function renderRun(run) {
    const r = run.response, info = r.additional_info;
    const w = run.weights;
    const box = h("div", { class: "run", data: { mode: run.mode } });
    box.append(h("h2", null, `${run.mode} `, h("span", { class: "muted" }, `· ${r.memory_events.length} events · ${r.memory_entities.length} entities · threshold ${run.score_threshold}`)));
    if (run.profile === "latin") box.append(h("div", { class: "muted profile" }, "latin profile: the query is mostly latin script (QueryParams.latin_weights)"));
    box.append(h("div", { class: "muted" }, w ? "score = " + SIGNALS.filter((k) => w[k]).map((k) => `${w[k]}·${k}`).join(" + ") : "rrf: the score sums 1/(k + rank) over the keyword and vector lists; no weighted signals"));
    if (info.degraded) box.append(h("div", { class: "error" }, `degraded: ${info.degraded_reason || ""}`));
    if (info.skipped) box.append(h("div", { class: "error" }, `no search ran: ${info.skipped}`));
    box.append(h("h3", null, "tokens"), chips(info["分词"], "tokens"));
    box.append(h("h3", null, "base words"), chips(info["给联想的基词"], "base"));
    if (info.context_words && info.context_words.length) box.append(h("h3", null, "context words"), chips(info.context_words));
    if (info.entity_words && info.entity_words.length) box.append(h("h3", null, "entity words"), chips(info.entity_words));
    const exp = info["扩展后联想词"].map((o) => Object.entries(o)[0]);
    box.append(h("h3", null, `expansions (${exp.length})`),
      h("div", { class: "chips expansions" }, exp.length ? exp.map(([word, lv]) => h("span", { class: `chip l${lv}` }, word, h("span", { class: "lv" }, lv))) : h("span", { class: "muted" }, "–")));

    box.append(h("h3", null, "events"), h("div", { class: "legend" },
      [...SIGNALS, "sentence", "anchor"].map((k) => h("span", null, h("span", { class: `key ${k}` }), `${k}`)),
      h("span", null, "red line: threshold · black line: score")));
    if (!r.memory_events.length) box.append(h("p", { class: "muted" }, "no event reached the threshold"));
    r.memory_events.forEach((e, i) => {
      const hit = h("div", { class: "hit", data: { id: e.index } });
      hit.append(h("div", { class: "meta" }, `#${i + 1} · score ${fmt(e.score, 4)} · ${e.db} · ${e.created_at || e.updatetime} · ${e.place || ""} · id ${e.index}`));
      hit.append(h("div", { class: "text" }, e.description));
      if (e.deepinsight) hit.append(h("div", { class: "meta" }, e.deepinsight));
      if (e.signals && w) {
        hit.append(sigBar(e, w, run.score_threshold));
        const vals = SIGNALS.map((k) => h("span", { data: { signal: k } }, `${k} ${fmt(e.signals[k])}${w[k] ? ` ×${w[k]} = ${fmt(w[k] * e.signals[k])}` : ""}`));
        for (const k of ["sentence", "anchor"]) {
          if (e.signals[k] > 0) vals.push(h("span", { data: { signal: k } }, `${k} +${fmt(e.signals[k])}`));
        }
        hit.append(h("div", { class: "legend sigvals" }, vals));
      }
      box.append(hit);
    });

    box.append(h("h3", null, "entities by tier"));
    if (!r.memory_entities.length) box.append(h("p", { class: "muted" }, "none"));
    for (const t of [1, 2, 3, 4]) {
      const ents = r.memory_entities.filter((n) => n.tier === t);
      if (!ents.length) continue;
      const tier = h("div", { class: "tier", data: { tier: t } }, h("div", null, h("b", null, `tier ${t}`), " ", h("span", { class: "muted" }, TIERS[t])));
      for (const n of ents) {
        tier.append(h("div", { class: "hit entity" },
          h("div", { class: "meta" }, `${n.kind} · ${n.entity_name} · evidence ${fmt(n.score, 3)} · ${n.updatetime}`),
          h("div", { class: "text" }, n.description),
          h("div", { class: "chips" }, "matched: ", n.matched_keywords.map((m) => h("span", { class: "chip" }, m)))));
      }
      box.append(tier);
    }
    box.append(h("h3", null, "prompt (as the chat gets it)"), h("pre", { class: "prompt" }, run.prompt || "(empty: nothing recalled)"));
    const timings = Object.entries(info["检索耗时"]);
    const top = Math.max(1e-9, ...timings.map(([, v]) => v));
    box.append(h("h3", null, "stage timings (ms)"), h("table", { class: "timings" }, h("tbody", null, timings.map(([k, v]) => {
      const bar = h("div", { class: "sigbar" });
      const seg = h("div", { class: "seg kw" });
      seg.style.left = "0";
      seg.style.width = `${(100 * v) / top}%`;
      bar.append(seg);
      return h("tr", null, h("td", null, k), h("td", { class: "num" }, fmt(v, 2)), h("td", { class: "barcol" }, bar));
    }))));
    return box;
  }

  // -- memory browser ---------------------------------------------------------------------
  let listed = null; // {scope, kind, filters, key, cursor}: the listing "Load more" goes on with

  // One memory's URL. URL rules resolve an empty id and the dot segments "." and ".." away
  // (/v1/memories/./history is /v1/memories/history; a DELETE of /v1/memories/. reached the
  // scope delete), so such an id is an error here, never a request.
  function memoryUrl(id, tail) {
    if (id === "" || id === "." || id === "..") {
      throw new Error(`memory id ${JSON.stringify(id)} cannot be named in a URL; use the Memory API from code`);
    }
    return `/v1/memories/${encodeURIComponent(id)}${tail}`;
  }

  function scopeQuery(scope, extra) {
    const q = new URLSearchParams({ agent_id: scope.agent_id, db: scope.db });
    if (scope.user_id) q.set("user_id", scope.user_id);
    for (const [k, v] of Object.entries(extra || {})) if (v !== "" && v !== null && v !== undefined) q.set(k, v);
    return q.toString();
  }

  function browse(row) {
    $("mem-agent").value = row.agent_id;
    $("mem-user").value = row.user_id || "";
    $("mem-db").value = row.db;
    $("ex-agent").value = row.agent_id;
    if (row.user_id) $("ex-user").value = row.user_id;
    show("memories");
    listMemories();
  }

  // The listing the form asks for: its scope, kind and filters (a cursor is only good for the
  // listing it came from; the server refuses it for another).
  function formListing() {
    let filters = $("mem-filters").value.trim();
    if (filters) {
      try { filters = JSON.stringify(JSON.parse(filters)); } catch (_) { throw new Error("filters: not valid JSON"); }
    }
    const scope = { agent_id: $("mem-agent").value.trim(), user_id: $("mem-user").value.trim(), db: $("mem-db").value };
    const kind = $("mem-kind").value;
    return { scope, kind, filters, key: JSON.stringify([scope, kind, filters]) };
  }

  // "Load more" goes on with the listing shown; after the form changed it starts the form's.
  const listMemories = guarded(async (ev, more) => {
    if (ev) ev.preventDefault();
    const listing = formListing();
    const { scope, kind, filters } = listing;
    more = more && listed !== null && listed.key === listing.key;
    const cursor = more ? listed.cursor : "";
    const page = await api("GET", "/v1/memories?" + scopeQuery(scope, { kind, filters, limit: $("mem-limit").value, cursor }));
    showError("");
    const body = $("mem-table").tBodies[0];
    if (!more) { clear(body); clear($("mem-detail")); }
    for (const m of page.results) {
      const text = m.kind === "entities" ? `${m.entity_name}：${m.text}` : m.text;
      body.append(h("tr", { data: { id: m.id } }, h("td", null, m.kind), h("td", { class: "text" }, text.length > 140 ? text.slice(0, 140) + "…" : text),
        h("td", { class: "num" }, fmt(m.strength, 1)), h("td", null, m.updatetime || m.created_at || ""),
        h("td", null, h("button", { type: "button", class: "open", onclick: () => openMemory(scope, m) }, "open"))));
    }
    if (!body.rows.length) body.append(h("tr", null, h("td", { colspan: 5, class: "muted" }, "no memories in this scope")));
    listed = { ...listing, cursor: page.next_cursor };
    $("mem-more").hidden = !page.next_cursor;
  });

  const openMemory = guarded(async (scope, m) => {
    for (const tr of $("mem-table").tBodies[0].rows) tr.classList.toggle("open", tr.dataset.id === m.id);
    const box = clear($("mem-detail"));
    const fields = ["id", "kind", "db", "agent_id", "user_id", "session_id", "text", "deepinsight", "keywords", "place", "scene",
      "created_at", "entity_name", "entity_type", "entity_kind", "keyword", "updatetime", "strength", "recall_count", "last_recalled_at", "metadata"];
    const dl = h("dl", { id: "mem-fields" });
    for (const f of fields) {
      let v = m[f];
      if (v === null || v === undefined || v === "") continue;
      if (typeof v === "object" && Object.keys(v).length === 0) continue; // [] or {}
      if (typeof v === "object") v = Array.isArray(v) ? v.join("、") : JSON.stringify(v);
      dl.append(h("dt", null, f), h("dd", { data: { field: f } }, v));
    }
    box.append(h("h2", null, "memory"), dl);
    const del = h("div", { class: "delete" });
    const ask = h("button", { type: "button", class: "danger", id: "mem-delete" }, "delete…");
    ask.addEventListener("click", () => {
      clear(del).append(h("span", null, "Delete this memory? It stays in its history. "),
        h("button", { type: "button", class: "danger really", id: "mem-delete-confirm", onclick: guarded(async () => {
          await api("DELETE", memoryUrl(m.id, "?") + scopeQuery(scope, { kind: m.kind, refresh: "true" }));
          for (const tr of [...$("mem-table").tBodies[0].rows]) if (tr.dataset.id === m.id) tr.remove();
          clear(del).append(h("span", { class: "muted", id: "mem-deleted" }, "deleted"));
          await loadHistory(scope, m, hist);
        }) }, "delete"),
        " ", h("button", { type: "button", onclick: () => clear(del).append(ask) }, "cancel"));
    });
    del.append(ask);
    const hist = h("div", { id: "mem-history" });
    box.append(del, h("h2", null, "history"), hist);
    await loadHistory(scope, m, hist);
  });

  async function loadHistory(scope, m, hist) {
    const data = await api("GET", memoryUrl(m.id, "/history?") + scopeQuery(scope));
    clear(hist).append(h("table", null,
      h("thead", null, h("tr", null, ["at", "event", "actor", "reason", "before", "after"].map((c) => h("th", null, c)))),
      h("tbody", null, data.results.length ? data.results.map((e) => h("tr", { data: { event: e.event } },
        h("td", null, e.at), h("td", null, e.event), h("td", null, e.actor), h("td", null, e.reason || (e.similarity ? fmt(e.similarity) : "")),
        h("td", { class: "text" }, e.old_text || ""), h("td", { class: "text" }, e.new_text || "")))
        : h("tr", null, h("td", { colspan: 6, class: "muted" }, "no recorded changes")))));
  }

  // -- start ------------------------------------------------------------------------------
  document.addEventListener("DOMContentLoaded", () => {
    for (const id of ["ex-mode", "ex-mode-b"]) {
      const sel = $(id);
      if (id === "ex-mode-b") sel.append(h("option", { value: "" }, "(none)"));
      for (const m of MODES) sel.append(h("option", { value: m }, m));
    }
    for (const b of document.querySelectorAll(".tab")) b.addEventListener("click", () => show(b.dataset.tab));
    $("key-save").addEventListener("click", () => {
      const v = $("api-key").value.trim();
      if (v) sessionStorage.setItem(KEY, v);
      $("api-key").value = "";
      keyState();
      showError("");
      show(document.querySelector(".tab.active").dataset.tab);
    });
    $("key-forget").addEventListener("click", () => { sessionStorage.removeItem(KEY); keyState(); });
    $("ex-form").addEventListener("submit", runExplorer);
    $("mem-form").addEventListener("submit", (e) => listMemories(e, false));
    $("mem-more").addEventListener("click", () => listMemories(null, true));
    keyState();
    show("overview");
    pollMetrics();
    setInterval(pollMetrics, 5000);
  });
})();
