// sturdy status page: polls api/status every 2 s and renders it. Rates are
// computed here from counter deltas over the last few snapshots, so the
// server keeps nothing per viewer; the last minute's error rates and their
// verdicts (ok, warning, critical) come from the server, which judges every
// snapshot alike (internal/view/judge.go). Every value from the snapshot is
// put in the page with textContent, never as HTML: client keys, messages
// and evidence may hold anything a client sent.
"use strict";

const POLL_MS = 2000;
const WINDOW = 6; // snapshots kept for rates: about 10 s
const snaps = []; // [{t: ms, st}] oldest first
let lastOK = null; // time of the last successful poll
let failing = null; // error text while polls fail

// ---- rates from counter deltas ------------------------------------------

function oldest() {
  return snaps.length > 1 ? snaps[0] : null;
}

function windowSeconds() {
  const o = oldest();
  if (!o) return 0;
  return (Date.parse(snaps[snaps.length - 1].st.time) - Date.parse(o.st.time)) / 1000;
}

function findRoute(st, name) {
  return (st.routes || []).find((r) => r.name === name);
}

function findHost(st, pool, addr) {
  const p = (st.pools || []).find((x) => x.name === pool);
  return p && (p.hosts || []).find((h) => h.addr === addr);
}

// delta returns now-then per second over the window, or null without one.
function delta(now, then) {
  const w = windowSeconds();
  if (!w || then === undefined) return null;
  return Math.max(0, now - then) / w;
}

// quantile estimates the q-quantile of the observations between two
// cumulative histograms, interpolating inside the bucket like PromQL.
function quantile(q, h, prev) {
  if (!h || !h.bounds || !h.bounds.length) return null;
  const counts = h.counts.map((c, i) => c - ((prev && prev.counts && prev.counts[i]) || 0));
  const total = h.count - ((prev && prev.count) || 0);
  if (total <= 0) return null;
  const rank = q * total;
  let lower = 0, below = 0;
  for (let i = 0; i < counts.length; i++) {
    if (counts[i] >= rank) {
      const inBucket = counts[i] - below;
      return lower + (h.bounds[i] - lower) * (inBucket ? (rank - below) / inBucket : 1);
    }
    lower = h.bounds[i];
    below = counts[i];
  }
  return -h.bounds[h.bounds.length - 1]; // above the last bound: negative marks "more than"
}

// ---- sections -------------------------------------------------------------

const recoveries = new Set(["host_restored", "host_up", "host_ready", "pool_restored", "panic_left",
  "client_released", "route_recovered", "stale_ended", "reload_applied", "dns_recovered"]);

// problems are the server's (internal/ops/status/problems.go): one per
// cause, worst first, each with the pools and routes it reaches. The page
// only draws them, so the JSON's readers see the same list.
function problems(st) {
  return st.problems || [];
}

// lastProbe tells how the latest probe of a host out of rotation failed,
// when that is news: a host's evidence is what took it out, and a host
// down for a 503 may time out by now.
function lastProbe(h) {
  if (h.state === "healthy" || h.last_check_ok || !isSet(h.last_check) || !h.check_detail || h.check_detail === h.evidence) return "";
  return "last probe: " + h.check_detail;
}

// hostWhy is the hosts table's Why: the operator's wording (as Needs
// attention), with the recorded reason and evidence as small print.
function hostWhy(h) {
  const probe = lastProbe(h);
  if (!h.why) {
    return [h.reason || (h.state === "healthy" ? "" : "–"), h.evidence ? el("span", { class: "evidence" }, h.evidence) : null,
      probe ? el("span", { class: "evidence" }, probe) : null];
  }
  const raw = [h.reason, h.evidence, probe].filter(Boolean).join(" — ");
  return [h.why, raw ? el("span", { class: "evidence" }, raw) : null];
}

function renderProblems(st, list) {
  if (!list.length) {
    replace("problems", el("li", { class: "ok" }, el("span", { class: "what" }, "Nothing needs attention"),
      el("span", { class: "detail" }, "every route answers normally and every host is healthy")));
    return;
  }
  replace("problems", list.map((p) => el("li", { class: p.level, "data-level": p.level, "data-kind": p.kind, "data-subject": p.subject },
    el("span", { class: "what" }, p.title), since(p.since, st.time),
    p.why ? el("span", { class: "detail" }, p.why) : null,
    (p.affects || []).length ? el("ul", { class: "affects" }, p.affects.map((a) =>
      el("li", { "data-level": a.level, "data-affects": a.kind + "/" + a.name },
        badge(a.level, a.kind + " " + a.name), " ", a.what))) : null,
    p.detail ? el("span", { class: "evidence" }, p.detail) : null)));
}

function renderHeader(st, list) {
  const crit = list.filter((p) => p.level === "critical").length;
  const warn = list.filter((p) => p.level === "warning").length;
  const v = document.getElementById("verdict");
  // The headline names the worst problem (the list comes worst first),
  // so what fails clients is in the first words anyone reads.
  const worst = list.length ? ": " + list[0].title : "";
  if (crit) { v.className = "verdict critical"; v.textContent = crit + (crit === 1 ? " critical problem" : " critical problems") + worst; }
  else if (warn) { v.className = "verdict warning"; v.textContent = warn + (warn === 1 ? " warning" : " warnings") + worst; }
  else { v.className = "verdict ok"; v.textContent = "All good"; }
  document.title = (crit ? "✖ " : warn ? "▲ " : "✔ ") + v.textContent + " · sturdy";
  replace("meta",
    el("b", {}, st.version || "sturdy"), " · up ", dur(Date.parse(st.time) - Date.parse(st.started)),
    " · config ", el("b", { title: st.config_file || "" }, st.config_hash || "–"),
    st.ready ? " · ready" : " · not ready");
}

function card(label, value, cls, title) {
  return el("div", { class: "card " + (cls || ""), title }, el("div", { class: "label" }, label), el("div", { class: "value" }, value));
}

function renderSummary(st) {
  const o = oldest();
  let req = 0, reqPrev = 0, err = 0, errPrev = 0, deg = 0, degPrev = 0;
  for (const r of st.routes || []) {
    req += sum(r.requests); err += (r.requests || {})["5xx"] || 0; deg += sum(r.answers);
    const p = o && findRoute(o.st, r.name);
    if (p) { reqPrev += sum(p.requests); errPrev += (p.requests || {})["5xx"] || 0; degPrev += sum(p.answers); }
  }
  let hosts = 0, avail = 0;
  for (const p of st.pools || []) { hosts += (p.hosts || []).length; avail += p.available; }
  const rps = o ? delta(req, reqPrev) : null;
  const eps = o ? delta(err, errPrev) : null;
  const dps = o ? delta(deg, degPrev) : null;
  const clients = (st.attributed_clients || []).length;
  replace("summary",
    card("Requests / s", rate(rps)),
    card("5xx answers", rps ? pct(eps, rps) : "–", eps > 0 ? "bad" : "good", "share of answers with a 5xx status"),
    card("Degraded answers / s", rate(dps), dps > 0 ? "warn" : "", "panic, fallback, stale, sorry or shed"),
    card("Hosts available", avail + " / " + hosts, avail < hosts ? (avail === 0 ? "bad" : "warn") : "good"),
    card("Attributed clients", String(clients), clients ? "warn" : ""),
    card("Recent events", String((st.events || []).length)));
}

function renderRoutes(st) {
  const o = oldest();
  const head = el("tr", {}, ["Route", "Pool", "Answering", "Last minute", "Req/s", "5xx", "p95", "In flight", "Degraded/s", "Cache hits", "Origin errors/s", "Notes"]
    .map((h, i) => el("th", { class: i >= 3 && i <= 10 ? "num" : "" }, h)));
  const rows = (st.routes || []).map((r) => {
    const p = o && findRoute(o.st, r.name);
    const rps = p ? delta(sum(r.requests), sum(p.requests)) : null;
    const e5 = p ? delta((r.requests || {})["5xx"] || 0, (p.requests || {})["5xx"] || 0) : null;
    const dps = p ? delta(sum(r.answers), sum(p.answers)) : null;
    const p95 = quantile(0.95, r.duration, p && p.duration);
    const cacheTotal = sum(r.cache);
    const oe = p ? delta(r.origin_errors || 0, p.origin_errors || 0) : null;
    const hidden = p ? delta(r.origin_errors_hidden_by_stale || 0, p.origin_errors_hidden_by_stale || 0) : null;
    const serving = r.serving || "normal";
    const answers = Object.entries(r.answers || {}).filter(([, v]) => v > 0).map(([k, v]) => k + " " + v).join(", ");
    return el("tr", { class: "row-" + serving, "data-route": r.name, "data-verdict": (r.verdict || {}).level },
      el("td", {}, el("b", {}, r.name), r.default ? [" ", badge("default", "default")] : null),
      el("td", {}, r.pool),
      el("td", {}, badge(serving), " ", serving !== "normal" ? since(r.serving_since, st.time) : null),
      lastMinute(r),
      el("td", { class: "num" }, rate(rps)),
      el("td", { class: "num" + (e5 > 0 ? " bad-text" : "") }, rps ? pct(e5, rps) : "–"),
      el("td", { class: "num" }, seconds(p95)),
      el("td", { class: "num" }, String(r.in_flight || 0)),
      el("td", { class: "num" + (dps > 0 ? " warn-text" : ""), title: answers ? "since start: " + answers : "" }, rate(dps)),
      el("td", { class: "num" }, r.cache ? pct((r.cache.hit || 0) + (r.cache.revalidated || 0), cacheTotal) : "–"),
      el("td", { class: "num" + (oe > 0 ? " bad-text" : ""), title: "counted even when a stale copy hid the error" },
        r.cache || r.origin_errors ? rate(oe) + (hidden > 0 ? " (" + rate(hidden) + " hidden)" : "") : "–"),
      el("td", { class: "why" }, r.degraded ? [badge("degraded"), " ", r.degraded_reason || "", " ", since(r.degraded_since, st.time)] : null));
  });
  replace("routes", el("thead", {}, head), el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { class: "empty", colspan: 12 }, "no routes"))));
}

// lastMinute is the route's 5xx share over the server's last minute, in
// the colour of its verdict.
function lastMinute(r) {
  const rec = r.recent || {};
  const v = r.verdict || {};
  const answers = sum(rec.requests) - ((rec.requests || {})["499"] || 0);
  const level = answers ? v.level || "ok" : "idle";
  const client = rec["5xx_to_attributed_clients"] || 0;
  const title = v.reason || (answers ? answers + " answers in the last " + Math.round(rec.seconds || 0) + " s" +
    (client ? "; " + client + " 5xx to attributed clients left out" : "") : "no answers in the last minute");
  return el("td", { class: "num", title },
    badge(level, answers ? pct(rec.error_ratio || 0, 1) + " 5xx" : "idle"));
}

const stateColor = { healthy: "--ok", suspect: "--warn", ejected: "--bad", down: "--crit", drained: "--info", maintenance: "--maint" };

function stateBar(hosts) {
  const bar = el("span", { class: "bar", title: hosts.map((h) => h.addr + ": " + h.state).join("\n") });
  for (const h of hosts) {
    const s = el("span");
    s.style.width = 100 / hosts.length + "%";
    s.style.background = "var(" + (stateColor[h.state] || "--muted") + ")";
    bar.append(s);
  }
  return bar;
}

function renderPools(st) {
  const o = oldest();
  const cards = (st.pools || []).map((p) => {
    const hosts = p.hosts || [];
    const head = el("div", { class: "pool-head" },
      el("span", { class: "name" }, p.name),
      stateBar(hosts),
      el("span", { class: "facts" }, p.available + " of " + hosts.length + " available · " + (p.balance || "") +
        (p.active_check ? " · active check " + p.active_check : " · passive checks only")),
      p.empty ? [badge("empty", "EMPTY"), since(p.empty_since, st.time)] : null,
      p.panic ? badge("panic", "PANIC ROUTING") : null);
    const th = el("tr", {}, ["Host", "State", "Why", "In flight", "Attempts/s", "Failed/s", "Failed, last min", "Headers p95", "Received/s", "Window", "Ejections", "Last check"]
      .map((h, i) => el("th", { class: i >= 3 && i <= 10 ? "num" : "" }, h)));
    const rows = hosts.map((h) => {
      const prev = o && findHost(o.st, p.name, h.addr);
      const att = sum(h.attempts);
      const fail = att - ((h.attempts || {}).ok || 0) - ((h.attempts || {}).client_cancel || 0);
      let pAtt, pFail;
      if (prev) {
        pAtt = sum(prev.attempts);
        pFail = pAtt - ((prev.attempts || {}).ok || 0) - ((prev.attempts || {}).client_cancel || 0);
      }
      const fps = prev ? delta(fail, pFail) : null;
      const rec = h.recent || {};
      const hv = (h.verdict || {}).level || "ok";
      const p95 = quantile(0.95, h.response_header_time, prev && prev.response_header_time);
      return el("tr", { class: "row-" + h.state, "data-host": p.name + "/" + h.addr, "data-state": h.state, "data-verdict": hv },
        el("td", { class: "addr" }, h.addr, h.weight > 1 ? el("span", { class: "since" }, " ×" + h.weight) : null),
        el("td", {}, badge(h.state), " ", h.state !== "healthy" ? since(h.since, st.time) : null),
        el("td", { class: "why" }, hostWhy(h)),
        el("td", { class: "num" }, String(h.in_flight || 0)),
        el("td", { class: "num" }, rate(prev ? delta(att, pAtt) : null)),
        el("td", { class: "num" + (fps > 0 ? " bad-text" : "") }, rate(fps)),
        el("td", { class: "num" + (hv !== "ok" && rec.attempts ? " warn-text" : ""), title: (h.verdict || {}).reason ||
          (rec.failures || 0) + " of " + (rec.attempts || 0) + " attempts failed in the last " + Math.round(rec.seconds || 0) + " s, whoever they were attributed to" },
          rec.attempts ? pct(rec.failures || 0, rec.attempts) : "–"),
        el("td", { class: "num", title: "time to response headers, over the last ~10 s" }, seconds(p95)),
        el("td", { class: "num", title: "response body bytes read from the host, per second; sent: " +
          bytes(prev ? delta(h.bytes_sent || 0, prev.bytes_sent || 0) : null) + "/s" },
          prev ? bytes(delta(h.bytes_received || 0, prev.bytes_received || 0)) + "/s" : "–"),
        el("td", { class: "num", title: "passive window: host-attributed failures / requests" },
          h.window_requests ? h.window_failures + " / " + h.window_requests : "–"),
        el("td", { class: "num" }, String(h.ejections || 0)),
        el("td", { title: h.check_detail || "" }, isSet(h.last_check) ?
          [badge(h.last_check_ok ? "healthy" : "down", h.last_check_ok ? "pass" : "fail"), " ", el("span", { class: "since" }, clock(h.last_check))] : "–"));
    });
    return el("div", { class: "pool" + (p.empty ? " is-empty" : ""), "data-pool": p.name }, head,
      el("div", { class: "scroll" }, el("table", {}, el("thead", {}, th), el("tbody", {}, rows))));
  });
  replace("pools", cards.length ? cards : el("div", { class: "empty" }, "no pools"));
}

function renderEvents(st) {
  const evs = st.events || [];
  if (!evs.length) {
    replace("events", el("li", { class: "empty" }, "no events since start"));
    return;
  }
  replace("events", evs.map((e) => {
    const subject = [e.pool, e.host, e.route, e.client].filter(Boolean).join(" ");
    const evidence = Object.entries(e.evidence || {}).map(([k, v]) => k + "=" + (typeof v === "object" ? JSON.stringify(v) : v)).join("  ");
    const dot = recoveries.has(e.type) ? "recovered" : e.severity;
    return el("li", { "data-event-type": e.type, "data-seq": e.seq },
      el("time", { datetime: e.time, title: new Date(e.time).toString() }, clock(e.time)),
      el("span", { class: "dot " + dot, title: e.severity }),
      el("div", {}, el("span", { class: "type" }, e.type), subject ? el("span", { class: "subject" }, subject) : null,
        el("div", {}, e.message), evidence ? el("span", { class: "evidence" }, evidence) : null));
  }));
}

function renderClients(st) {
  const cs = st.attributed_clients || [];
  const head = el("tr", {}, ["Client", "Since", "Evidence", "Shed"].map((h) => el("th", {}, h)));
  const rows = cs.map((c) => el("tr", { "data-client": c.key },
    el("td", { class: "key" }, c.key), el("td", {}, since(c.since, st.time)), el("td", { class: "why" }, c.evidence),
    el("td", {}, c.shed ? badge("shed", "shed") : "no")));
  replace("clients", el("thead", {}, head), el("tbody", {}, rows.length ? rows : el("tr", {}, el("td", { class: "empty", colspan: 4 }, "none: no client's failures are its own"))));
}

function dl(pairs) {
  return el("dl", {}, pairs.filter(Boolean).map(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
}

function renderOps(st) {
  const rl = st.reloads || {};
  const blocks = [
    el("div", {}, el("h3", {}, "Process"), dl([
      ["version", st.version || "–"], ["started", isSet(st.started) ? new Date(st.started).toLocaleString() : "–"],
      ["config", (st.config_file || "–") + " (" + (st.config_hash || "–") + ")"], ["ready", st.ready ? "yes" : "no"],
      ["draining", st.draining ? "yes" : "no"]])),
    el("div", {}, el("h3", {}, "Config reloads"), dl([
      ["applied", String(rl.ok || 0)], ["refused", String(rl.failed || 0)],
      ["last", isSet(rl.last) ? new Date(rl.last).toLocaleString() : "never"],
      rl.last_error ? ["last error", rl.last_error] : null])),
  ];
  const retries = (st.retries && st.retries.made) || {};
  const refused = (st.retries && st.retries.refused_by_budget) || {};
  const pools = Object.keys(Object.assign({}, retries, refused)).sort();
  blocks.push(el("div", {}, el("h3", {}, "Retries (since start)"),
    pools.length ? dl(pools.map((p) => [p, (retries[p] || 0) + " made, " + (refused[p] || 0) + " refused by budget"])) : el("div", { class: "empty" }, "none")));
  const attr = st.attributed_failures || {};
  blocks.push(el("div", {}, el("h3", {}, "Failures by attribution (since start)"),
    dl(["host", "client", "request", "route"].map((k) => [k, String(attr[k] || 0)]))));
  for (const w of st.webhooks || []) {
    blocks.push(el("div", { "data-webhook": w.name }, el("h3", {}, "Webhook " + w.name + " (" + w.format + ")"), dl([
      ["sent", String(w.sent)], ["queued", String(w.queued)], ["retries", String(w.retries)],
      ["failed", String(w.failed)], ["dropped", String(w.dropped)],
      w.last_error ? ["last error", w.last_error] : null])));
  }
  const edge = st.edge || {};
  blocks.push(el("div", {}, el("h3", {}, "Edge (since start)"), dl([
    ["denied (403)", String(edge.denied || 0)], ["rejected as malformed (400)", String(edge.rejected || 0)],
    ["re-encoded raw bytes", String(edge.reencoded || 0)], ["dot segments resolved", String(edge.normalized || 0)]])));
  const al = st.access_log || {};
  blocks.push(el("div", {}, el("h3", {}, "Access log"), al.enabled ?
    dl([["written", String(al.written)], ["dropped", String(al.dropped)], ["write errors", String(al.errors)]]) :
    el("div", { class: "empty" }, "off")));
  replace("ops", blocks);
}

// ---- polling --------------------------------------------------------------

function render(st) {
  const list = problems(st);
  renderHeader(st, list);
  renderProblems(st, list);
  renderSummary(st);
  renderRoutes(st);
  renderPools(st);
  renderEvents(st);
  renderClients(st);
  renderOps(st);
  const w = windowSeconds();
  for (const n of document.querySelectorAll(".window")) n.textContent = w ? Math.round(w) + " s" : "…";
}

function renderConn() {
  const c = document.getElementById("conn");
  document.body.classList.toggle("offline", failing !== null);
  if (failing !== null) {
    c.className = "conn down";
    c.textContent = "admin unreachable (" + failing + ")" + (lastOK ? "; showing data from " + dur(Date.now() - lastOK) + " ago" : "");
    if (!lastOK) {
      const v = document.getElementById("verdict");
      v.className = "verdict critical";
      v.textContent = "no data";
    }
  } else {
    c.className = "conn";
    c.textContent = "live · every " + POLL_MS / 1000 + " s";
  }
}

async function poll() {
  try {
    const resp = await fetch("api/status", { cache: "no-store", headers: { Accept: "application/json" } });
    if (!resp.ok) throw new Error("HTTP " + resp.status);
    const st = await resp.json();
    const last = snaps[snaps.length - 1];
    // A restarted process starts its counters again: forget the old ones.
    if (last && last.st.started !== st.started) snaps.length = 0;
    snaps.push({ t: Date.now(), st });
    while (snaps.length > WINDOW) snaps.shift();
    lastOK = Date.now();
    failing = null;
    render(st);
    await pollDemo();
  } catch (err) {
    failing = err && err.message ? err.message : String(err);
  }
  renderConn();
  setTimeout(poll, POLL_MS);
}

initToken();
poll();
