// sturdy status page, the demo panel: shown only when the admin listener
// answers api/demo (sturdy demo). app.js polls it with the status;
// the DOM helpers (el, replace, clock) are util.js's.
"use strict";

// In `sturdy demo` the admin listener also answers api/demo: the demo's
// backends, visitors and scanner, and POST controls guarded by the admin
// token. The demo prints a link whose fragment carries the token
// (#token=...); the page keeps it for this tab and drops it from the
// address bar. A fragment never reaches a server or a log.

let demo = undefined; // undefined: not asked yet; null: not a demo; else the last state
let demoToken = "";

function initToken() {
  const m = /(?:^#|&)token=([0-9A-Za-z._~-]+)/.exec(location.hash);
  try {
    if (m) {
      demoToken = m[1];
      sessionStorage.setItem("sturdy-admin-token", demoToken);
      history.replaceState(null, "", location.pathname + location.search);
    } else {
      demoToken = sessionStorage.getItem("sturdy-admin-token") || "";
    }
  } catch (e) {
    if (m) demoToken = m[1];
  }
}

async function pollDemo() {
  if (demo === null) return;
  try {
    const resp = await fetch("api/demo", { cache: "no-store", headers: { Accept: "application/json" } });
    if (resp.status === 404 || resp.status === 405) { demo = null; return; }
    if (!resp.ok) return;
    demo = await resp.json();
    renderDemo();
  } catch (e) {
    // The status poll reports an unreachable admin listener.
  }
}

function demoButton(action, label, attrs) {
  return el("button", Object.assign({ type: "button", "data-action": action }, attrs || {}), label);
}

function buildDemo(sec) {
  const input = el("input", { id: "demo-token", type: "password", autocomplete: "off", spellcheck: "false",
    placeholder: "the admin token the demo printed" });
  input.value = demoToken;
  input.addEventListener("input", () => {
    demoToken = input.value.trim();
    try { sessionStorage.setItem("sturdy-admin-token", demoToken); } catch (e) { /* private mode */ }
  });
  sec.replaceChildren(
    el("h2", { id: "h-demo" }, "Demo: break things", el("span", { class: "hint" }, "then watch the rest of this page")),
    el("div", { class: "demo-token" }, el("label", { for: "demo-token" }, "admin token"), input,
      el("span", { id: "demo-msg", class: "demo-msg", role: "status" })),
    el("div", { class: "demo-grid" },
      el("div", {}, el("h3", {}, "Backends"), el("table", { id: "demo-backends" })),
      el("div", {}, el("h3", {}, "Clients and requests"), el("div", { id: "demo-traffic" }))),
    el("details", {}, el("summary", {}, "The same from a shell"), el("pre", { id: "demo-commands" })));
  sec.addEventListener("click", (ev) => {
    const b = ev.target.closest("button[data-action]");
    if (b) demoAction(b.dataset.action, b);
  });
  sec.dataset.ready = "1";
}

function renderDemo() {
  const sec = document.getElementById("demo");
  if (!sec.dataset.ready) buildDemo(sec);
  sec.hidden = false;
  const modes = demo.modes || [];
  replace("demo-backends", el("tbody", {}, (demo.backends || []).map((b) => el("tr", { "data-backend": b.name, "data-mode": b.mode },
    el("td", {}, el("b", {}, b.name), " ", el("span", { class: "since" }, b.addr)),
    el("td", { class: "modes" }, modes.map((m) => demoButton("backends/" + b.name + "/" + m.name, m.name,
      { title: m.does, "aria-pressed": m.name === b.mode ? "true" : "false", class: m.name === "ok" ? "heal" : "" }))),
    el("td", { class: "since" }, b.waf_refused ? "WAF refused " + b.waf_refused : "")))));
  const sc = demo.scanner || {};
  const vi = demo.visitors || {};
  const counts = (t) => t.sent + " sent: " + t.ok + " ok, " + t.refused_4xx + " 4xx, " + t.failed + " failed";
  const lines = [
    el("div", { class: "demo-row", "data-scanner": sc.running ? "running" : "stopped" },
      el("b", {}, "Scanner " + ((sc.clients || [])[0] || "")), " ",
      sc.running ? demoButton("scanner/stop", "stop") : demoButton("scanner/start", "start"), " ",
      el("span", { class: "since" }, (sc.running ? "running until " + clock(sc.until) + " · " : "") + counts(sc))),
    el("div", { class: "demo-row" }, el("b", {}, "Malformed URLs"), " ", demoButton("malformed", "send 15"), " ",
      el("span", { class: "since" }, "raw UTF-8, a Latin-1 byte, dot segments, a broken %-escape, a control byte")),
  ];
  if ((vi.clients || []).length) lines.push(el("div", { class: "demo-row" },
    el("b", {}, (vi.clients || []).length + " visitors"), " ",
    vi.running ? demoButton("visitors/stop", "pause") : demoButton("visitors/start", "resume"), " ",
    el("span", { class: "since", title: (vi.clients || []).join(", ") }, counts(vi))));
  lines.push(el("div", { class: "demo-row" }, demoButton("heal", "heal everything", { class: "heal" }),
    el("span", { class: "since" }, " every backend ok, scanner stopped")));
  if ((demo.malformed || []).length) lines.push(el("ul", { class: "demo-results" }, demo.malformed.map((m) =>
    el("li", {}, el("code", {}, m.target), " ", m.what, ": ", el("b", {}, m.error || String(m.status))))));
  replace("demo-traffic", lines);
  const cmds = (demo.commands || []).map((c) => "# " + c.what + "\n" + c.run).join("\n\n");
  document.getElementById("demo-commands").textContent = "T=" + (demoToken || "<the admin token the demo printed>") + "\n\n" + cmds;
}

function demoMessage(ok, text) {
  const m = document.getElementById("demo-msg");
  m.className = "demo-msg " + (ok ? "ok" : "bad");
  m.textContent = text;
}

async function demoAction(action, button) {
  if (!demoToken) {
    demoMessage(false, "paste the admin token the demo printed first");
    return;
  }
  button.disabled = true;
  try {
    const resp = await fetch("api/demo/" + action, { method: "POST", cache: "no-store", headers: { Authorization: "Bearer " + demoToken } });
    const body = await resp.json().catch(() => ({}));
    demoMessage(resp.ok, resp.ok ? body.message || "done" : body.error || "HTTP " + resp.status);
  } catch (err) {
    demoMessage(false, String(err));
  }
  button.disabled = false;
  pollDemo();
}
