// sturdy status page, the helpers: building DOM nodes (always with
// textContent, never HTML: see app.js) and formatting figures. app.js and
// demo.js use them; the page loads this file first.
"use strict";

// ---- small DOM helpers ----------------------------------------------------

function el(tag, attrs, ...kids) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k === "title") e.title = v;
    else e.setAttribute(k, v);
  }
  for (const k of kids.flat(Infinity)) {
    if (k === undefined || k === null || k === false) continue;
    e.append(k instanceof Node ? k : document.createTextNode(String(k)));
  }
  return e;
}

function replace(id, ...kids) {
  const node = document.getElementById(id);
  node.replaceChildren(...kids.flat(Infinity).filter((k) => k !== null && k !== undefined));
  return node;
}

function badge(state, text) {
  return el("span", { class: "badge s-" + state, "data-state": state }, text || state);
}

// ---- formatting -------------------------------------------------------------

function sum(m) {
  let n = 0;
  for (const v of Object.values(m || {})) n += v;
  return n;
}

function dur(ms) {
  if (!(ms >= 0)) return "";
  let s = Math.floor(ms / 1000);
  const d = Math.floor(s / 86400); s -= d * 86400;
  const h = Math.floor(s / 3600); s -= h * 3600;
  const m = Math.floor(s / 60); s -= m * 60;
  if (d) return d + "d " + h + "h";
  if (h) return h + "h " + m + "m";
  if (m) return m + "m " + s + "s";
  return s + "s";
}

function clock(iso) {
  const t = new Date(iso);
  return t.toLocaleTimeString([], { hour12: false });
}

function isSet(iso) {
  return iso && !iso.startsWith("0001-");
}

// since renders "for 4m 12s" measured on the server's clock, with the exact
// time on hover, so that a skewed laptop clock cannot mislead.
function since(iso, now) {
  if (!isSet(iso)) return null;
  return el("span", { class: "since", title: new Date(iso).toString() },
    "for " + dur(Date.parse(now) - Date.parse(iso)) + " (since " + clock(iso) + ")");
}

function rate(v) {
  if (v === null || v === undefined || isNaN(v)) return "–";
  if (v === 0) return "0";
  if (v < 0.1) return v.toFixed(3);
  if (v < 10) return v.toFixed(1);
  return Math.round(v).toLocaleString();
}

function pct(part, whole) {
  if (!whole) return "–";
  const p = (100 * part) / whole;
  return (p < 1 && p > 0 ? p.toFixed(2) : p.toFixed(1)) + "%";
}

function bytes(v) {
  if (v === null || v === undefined || isNaN(v)) return "–";
  const units = ["B", "KB", "MB", "GB"];
  let i = 0;
  while (v >= 1000 && i < units.length - 1) { v /= 1000; i++; }
  return (i && v < 10 ? v.toFixed(1) : Math.round(v)) + " " + units[i];
}

function seconds(s) {
  if (s === null || s === undefined) return "–";
  if (s < 0) return "> " + seconds(-s);
  if (s < 1) return Math.round(s * 1000) + " ms";
  return s.toFixed(1) + " s";
}
