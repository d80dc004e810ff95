(function () {
"use strict";
var D = JSON.parse(document.getElementById("tn-data").textContent);
var ROW = 22, LABEL = 230, MARGIN = 6, MAX_LINKS = 60, RIGHT = 70;  /* RIGHT: the last tick's label */
var COLOURS = {safe: "--safe", unsafe: "--unsafe", failed: "--failed", refused: "--refused",
  timeout: "--timeout", unknown: "--unknown", model: "--model"};
var CLASS_NAMES = {safe: "safe (ran with others)", unsafe: "unsafe (ran alone)", failed: "failed",
  refused: "refused (not approved)", timeout: "timed out", unknown: "not recorded",
  model: "model request"};
function el(tag, cls, text) {
  var e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined && text !== null) e.textContent = String(text);
  return e;
}
function ms(v) {
  if (v === null || v === undefined) return "?";
  if (!D.summary.timed) return v.toFixed(0) + " (order)";
  if (v >= 10000) return (v / 1000).toFixed(2) + " s";
  return (Math.round(v * 100) / 100) + " ms";
}
/* -- summary ---------------------------------------------------------------------------- */
var S = D.summary;
function stat(id, label, value, raw) {
  var d = el("div"), dt = el("dt", "", label), dd = el("dd", "", value);
  dd.id = id; dd.setAttribute("data-value", String(raw));
  d.appendChild(dt); d.appendChild(dd);
  document.getElementById("summary").appendChild(d);
}
var tokens = (S.input_tokens === null && S.output_tokens === null) ? "not reported" :
  (S.input_tokens === null ? "?" : S.input_tokens) + " in / " +
  (S.output_tokens === null ? "?" : S.output_tokens) + " out";
stat("s-calls", "calls", S.calls, S.calls);
stat("s-peak", "peak in flight", S.peak, S.peak);
stat("s-wall", "wall time", ms(S.wall_ms), S.wall_ms);
stat("s-sum", "sum of call times", ms(S.sum_ms), S.sum_ms);
stat("s-saved", "running together saved", ms(Math.max(0, S.sum_ms - S.wall_ms)),
  Math.max(0, Math.round((S.sum_ms - S.wall_ms) * 1000) / 1000));
stat("s-failures", "failures", S.failures, S.failures);
stat("s-programs", "programs", S.programs, S.programs);
stat("s-requests", "model requests", S.requests, S.requests);
stat("s-approvals", "approvals asked", S.approvals, S.approvals);
stat("s-tokens", "tokens", tokens, (S.input_tokens || 0) + (S.output_tokens || 0));
var legend = document.getElementById("legend");
Object.keys(COLOURS).forEach(function (k) {
  var s = el("span", "", CLASS_NAMES[k]); s.style.setProperty("--c", "var(" + COLOURS[k] + ")");
  legend.appendChild(s);
});
var w = el("span", "", "hatched: waiting; dashed line: waited for"); w.style.setProperty("--c",
  "repeating-linear-gradient(135deg,#9e9e9e 0 2px,transparent 2px 5px)"); legend.appendChild(w);
var ap = el("span", "", "◆ approval asked (green: approved, purple: refused)");
ap.style.setProperty("--c", "transparent"); legend.appendChild(ap);
var notes = document.getElementById("notes");
D.notes.forEach(function (n) { notes.appendChild(el("div", "", "Note: " + n)); });
/* -- programs and conversation: what ran, what it gave, what was said --------------------- */
function clipText(clip) { return clip ? clip.text + (clip.cut ? "\n… " + clip.cut + " more characters" : "") : ""; }
function section(box, cls, title, clip, open) {
  if (!clip) return;
  var d = el("details", cls); if (open) d.open = true;
  d.appendChild(el("summary", "", title)); d.appendChild(el("pre", "", clipText(clip)));
  box.appendChild(d);
}
var progBox = document.getElementById("programs");
D.groups.forEach(function (g) {
  g.programs.forEach(function (p) {
    var box = el("div", "program-info"); box.setAttribute("data-program", p.id);
    var head = "program " + p.id + (p.language ? " (" + p.language + (p.runtime ? ", " + p.runtime : "") + ")" : "") +
      (p.description && p.description.text ? ": " + p.description.text : "");
    box.appendChild(el("h2", "", head));
    if (p.together) box.appendChild(el("div", "together", "what ran together: " + p.together));
    section(box, "source", "source", p.source, false);
    section(box, "result", p.error ? "error" : "result", p.error || p.result, true);
    section(box, "logs", "logs", p.logs, true);
    progBox.appendChild(box);
  });
});
var talk = document.getElementById("conversation");
D.groups.forEach(function (g) {
  g.requests.forEach(function (r) {
    if (!r.prompt && !(r.text && r.text.text)) return;
    var box = el("div", "exchange");
    if (r.prompt) box.appendChild(el("div", "prompt", "prompt: " + clipText(r.prompt)));
    var used = (r.input_tokens === null || r.input_tokens === undefined) ? "" :
      " (" + r.input_tokens + " in / " + (r.output_tokens === null ? "?" : r.output_tokens) + " out)";
    if (r.text && r.text.text) box.appendChild(el("div", "reply", "model" + used + ": " + clipText(r.text)));
    else box.appendChild(el("div", "reply", "model" + used + ": (tool calls)"));
    talk.appendChild(box);
  });
});
/* -- rows ------------------------------------------------------------------------------- */
/* Everything from the run is looked up in Maps, by key: an id or a name from the run
   ("constructor", "__proto__") is never a property of an object here. */
var rows = [], where = new Map(), end = 0;
D.groups.forEach(function (g, gi) {
  if (D.groups.length > 1 || g.name) rows.push({kind: "group", label: g.name || "(session)"});
  if (g.requests.length) {
    var bars = g.requests.map(function (r, i) {
      return {id: "request:" + gi + ":" + i, key: "request:" + gi + ":" + i, name: "model",
        start: r.start, end: r.end, "class": "model", request: r};
    });
    rows.push({kind: "requests", label: "model requests", calls: bars});
  }
  var programs = new Map(), logged = new Map();
  g.programs.forEach(function (p) { programs.set(p.key, p); logged.set(p.key, p); });
  var shown = new Set();
  g.rows.forEach(function (r) {
    if (r.program_key !== null && !programs.has(r.program_key)) {  /* no code_run in the log */
      programs.set(r.program_key, {id: r.program, key: r.program_key, start: r.calls[0].start,
        end: r.calls[r.calls.length - 1].end, calls: 0, description: {text: "", cut: 0}});
    }
    if (r.program_key !== null && !shown.has(r.program_key)) {
      shown.add(r.program_key);
      var p = programs.get(r.program_key);
      var title = "program " + p.id + (p.description.text ? ": " + p.description.text : "");
      rows.push({kind: "program", label: title, program: p,
        calls: [{id: "program:" + p.id, key: "program:" + p.key, name: title, start: p.start,
          end: p.end, "class": "program", prog: p}]});
    }
    var band = r.program_key !== null ? logged.get(r.program_key) || null : null;
    rows.push({kind: "calls", label: r.label, calls: r.calls, band: band});
  });
});
rows.forEach(function (r, ri) {
  r.index = ri;
  (r.calls || []).forEach(function (c) { where.set(c.key, {row: ri, call: c}); end = Math.max(end, c.end); });
});
var span = Math.max(end, 1e-3);
/* -- drawing (only what is in view) ------------------------------------------------------ */
var scroll = document.getElementById("scroll"), canvas = document.getElementById("canvas");
var axis = document.getElementById("axis"), body = document.getElementById("rows");
var links = document.getElementById("links");
var zoom = 1, scale = 1, selected = null;
function layout(quiet) {
  var width = Math.max(200, scroll.clientWidth - LABEL - 2 * MARGIN);
  scale = width * zoom / span;
  canvas.style.width = (LABEL + 2 * MARGIN + span * scale + RIGHT) + "px";
  canvas.style.height = (20 + rows.length * ROW) + "px";
  if (!quiet) draw();
}
function x(t) { return LABEL + MARGIN + t * scale; }
function firstEnding(calls, t) {  /* first call whose end >= t (ends ascend within a row) */
  var lo = 0, hi = calls.length;
  while (lo < hi) { var mid = (lo + hi) >> 1; if (calls[mid].end < t) lo = mid + 1; else hi = mid; }
  return lo;
}
function draw() {
  var top = scroll.scrollTop, height = scroll.clientHeight;
  var left = scroll.scrollLeft, t0 = (left - MARGIN) / scale, t1 = (left + scroll.clientWidth) / scale;
  var first = Math.max(0, Math.floor((top - 20) / ROW) - 4);
  var last = Math.min(rows.length, Math.ceil((top + height) / ROW) + 4);
  body.textContent = ""; axis.textContent = "";
  var step = niceStep(80 / scale);
  for (var t = Math.floor(Math.max(0, t0) / step) * step; t <= Math.min(span, t1); t += step) {
    var tick = el("div", "tick", ms(t)); tick.style.left = x(t) + "px"; axis.appendChild(tick);
  }
  var drawn = new Map();
  for (var i = first; i < last; i++) drawRow(rows[i], t0, t1, drawn);
  links.textContent = "";
  links.appendChild(arrow());
  links.setAttribute("width", canvas.style.width);
  links.setAttribute("height", String(20 + rows.length * ROW));
  var waiting = [];
  drawn.forEach(function (c) {
    var wf = c.waited_for; if (wf && wf.key && where.has(wf.key)) waiting.push(c);
  });
  var status = document.getElementById("status");
  status.textContent = waiting.length > MAX_LINKS ? " · " + waiting.length +
    " waits in view: zoom in to draw their arrows" : "";
  if (waiting.length > MAX_LINKS) return;
  waiting.forEach(function (c) {
    var wf = c.waited_for;
    var from = where.get(wf.key), to = where.get(c.key);
    /* an arc from the middle of the call waited on to the start of the call that waited */
    var x1 = x((from.call.start + from.call.end) / 2), y1 = 20 + from.row * ROW + 3;
    var x2 = x(c.start), y2 = 20 + to.row * ROW + 3;
    var lift = Math.min(y1, y2) - 9;
    var line = document.createElementNS("http://www.w3.org/2000/svg", "path");
    line.setAttribute("d", "M" + x1 + " " + y1 + " C" + x1 + " " + lift + " " + x2 + " " + lift +
      " " + x2 + " " + y2);
    line.setAttribute("marker-end", "url(#arrow)");
    line.setAttribute("data-from", wf.id); line.setAttribute("data-to", c.id);
    line.setAttribute("class", "link");
    var title = document.createElementNS("http://www.w3.org/2000/svg", "title");
    title.textContent = c.name + " waited for " + waitText(wf);
    line.appendChild(title);
    links.appendChild(line);
  });
}
function arrow() {
  var NS = "http://www.w3.org/2000/svg";
  var defs = document.createElementNS(NS, "defs"), m = document.createElementNS(NS, "marker");
  m.setAttribute("id", "arrow"); m.setAttribute("viewBox", "0 0 6 6"); m.setAttribute("refX", "5");
  m.setAttribute("refY", "3"); m.setAttribute("markerWidth", "6"); m.setAttribute("markerHeight", "6");
  m.setAttribute("orient", "auto");
  var p = document.createElementNS(NS, "path"); p.setAttribute("d", "M0 0 L6 3 L0 6 z");
  p.setAttribute("fill", "#444"); m.appendChild(p); defs.appendChild(m); return defs;
}
function niceStep(raw) {
  var p = Math.pow(10, Math.floor(Math.log10(Math.max(raw, 1e-6))));
  var n = raw / p; return (n <= 1 ? 1 : n <= 2 ? 2 : n <= 5 ? 5 : 10) * p;
}
function drawRow(r, t0, t1, drawn) {
  var div = el("div", "row " + r.kind); div.style.top = (20 + r.index * ROW) + "px";
  div.style.width = canvas.style.width; div.setAttribute("data-row", String(r.index));
  var label = el("span", "label", r.label); label.title = r.label; div.appendChild(label);
  if (r.band) {
    var band = el("div", "band"); band.style.left = x(r.band.start) + "px";
    band.style.width = Math.max(2, (r.band.end - r.band.start) * scale) + "px"; div.appendChild(band);
  }
  var calls = r.calls || [], agg = null;
  for (var k = firstEnding(calls, t0); k < calls.length && calls[k].start <= t1; k++) {
    var c = calls[k], wpx = (c.end - c.start) * scale;
    if (wpx < 3 && calls.length > 200) {  /* too small to tell apart: merge into one mark */
      if (agg && x(c.start) - agg.right <= 3) {
        agg.n += 1; agg.right = x(c.end); agg.div.style.width = Math.max(2, agg.right - agg.left) + "px";
        agg.div.title = agg.n + " calls (zoom in to see each)"; agg.div.textContent = String(agg.n);
        continue;
      }
      var a = el("div", "bar agg"); a.style.left = x(c.start) + "px"; a.style.width = "2px";
      a.setAttribute("data-calls", "1"); a.title = "1 call";
      agg = {div: a, left: x(c.start), right: x(c.end), n: 1}; div.appendChild(a); continue;
    }
    agg = null;
    if (c.admitted !== null && c.admitted !== undefined && c.start - c.admitted > 0 && c.waited_for) {
      var wait = el("div", "wait"); wait.style.left = x(c.admitted) + "px";
      wait.style.width = ((c.start - c.admitted) * scale) + "px";
      wait.title = "waiting for " + waitText(c.waited_for);
      wait.setAttribute("data-waits", c.id); div.appendChild(wait);
    }
    var bar = el("div", "bar " + c["class"], wpx > 40 ? c.name : "");
    bar.style.left = x(c.start) + "px"; bar.style.width = wpx + "px";
    bar.setAttribute("data-id", c.id); bar.setAttribute("data-key", c.key);
    if (c.order !== undefined) bar.setAttribute("data-order", String(c.order));
    bar.setAttribute("data-class", c["class"]);
    if (wpx < 4) bar.classList.add("thin");  /* drawn over its neighbours, not under */
    bar.title = c.name + " · " + (CLASS_NAMES[c["class"]] || c["class"]) + " · " + ms(c.end - c.start);
    if (selected === c.key) bar.classList.add("sel");
    if (c.approval) {  /* when the user was asked, and what they said */
      var mark = el("div", "approval " + (c.approval.approved ? "yes" : "no"));
      mark.style.left = (x(c.approval.asked) - 5) + "px";
      mark.title = "approval asked for " + c.name + ": " + (c.approval.approved ? "approved" :
        "refused") + " after " + ms(c.approval.answered - c.approval.asked);
      mark.setAttribute("data-approval", c.id); div.appendChild(mark);
    }
    div.appendChild(bar); drawn.set(c.key, c);
  }
  body.appendChild(div);
}
function waitText(wf) {
  var on = wf.id ? (wf.name + " (" + wf.id + ")") : "an earlier call";
  return on + (wf.barrier ? " · barrier (an unsafe call runs alone)" : " · resource " + wf.resource);
}
/* -- details ---------------------------------------------------------------------------- */
var PREVIEW = 400;
function block(parent, title, clip, missing) {
  parent.appendChild(el("h3", "", title));
  if (!clip) { parent.appendChild(el("div", "", "(" + (missing || "not in the log") + ")")); return; }
  var pre = el("pre", "", clip.text.length > PREVIEW ? clip.text.slice(0, PREVIEW) + "…" : clip.text);
  parent.appendChild(pre);
  if (clip.text.length > PREVIEW || clip.cut) {
    var more = el("button", "", "show all");
    more.addEventListener("click", function () {
      pre.textContent = clip.text + (clip.cut ? "\n… " + clip.cut + " more characters not in the report" : "");
      more.remove();
    });
    parent.appendChild(more);
  }
}
function show(c) {
  selected = c.key;
  var box = document.getElementById("details"); box.textContent = "";
  box.appendChild(el("h2", "", c.request ? "model request" : c.prog ? "program " + c.prog.id : c.name));
  var dl = el("dl");
  function row(k, v) { if (v === null || v === undefined) return; dl.appendChild(el("dt", "", k)); dl.appendChild(el("dd", "", v)); }
  if (c.request) {
    var q = c.request;
    row("turn", q.turn); row("model", q.model); row("input tokens", q.input_tokens);
    row("output tokens", q.output_tokens); row("start", ms(q.start)); row("duration", ms(q.end - q.start));
    box.appendChild(dl); if (q.prompt) block(box, "prompt", q.prompt);
    block(box, "reply", q.text); draw(); return;
  }
  if (c.prog) {
    var p = c.prog;
    row("language", p.language); row("sub-calls", p.calls); row("start", ms(p.start));
    row("duration", ms(p.end - p.start)); row("what ran together", p.together); box.appendChild(dl);
    block(box, "description", p.description);
    if (p.source) block(box, "source", p.source);
    if (p.error) block(box, "error", p.error); else if (p.result) block(box, "result", p.result);
    if (p.logs) block(box, "logs", p.logs);
    draw(); return;
  }
  row("id", c.id); row("class", CLASS_NAMES[c["class"]] || c["class"]); row("mode", c.mode);
  row("admitted", c.admitted === null ? null : ms(c.admitted)); row("started", ms(c.start));
  row("finished", ms(c.end)); row("duration", ms(c.end - c.start));
  if (c.waited_for) row("waited for", waitText(c.waited_for));
  if (c.approval) row("approval", (c.approval.approved ? "approved" : "refused") + " after " +
    ms(c.approval.answered - c.approval.asked));
  if (c.resources) row("resources", "reads " + JSON.stringify(c.resources.reads) + ", writes " + JSON.stringify(c.resources.writes));
  if (c.program) row("program", c.program);
  if (c.error) row("error", c.error);
  box.appendChild(dl);
  block(box, "arguments", c.arguments);
  block(box, "result", c.result, c.program && !c.error ? "not in the session log: a Code Mode " +
    "sub-call's value goes to its program only" : c.error ? "failed: see error above" : null);
  draw();
}
/* -- zoom and scroll -------------------------------------------------------------------- */
var pending = false;
scroll.addEventListener("scroll", function () {
  if (pending) return; pending = true;
  requestAnimationFrame(function () { pending = false; draw(); });
});
function setZoom(z) {
  var centre = (scroll.scrollLeft + scroll.clientWidth / 2 - LABEL - MARGIN) / scale;
  zoom = Math.min(1e6, Math.max(1, z)); layout(true);
  scroll.scrollLeft = Math.max(0, x(centre) - scroll.clientWidth / 2);
  draw();
}
body.addEventListener("click", function (event) {  /* one listener for every bar */
  var bar = event.target.closest(".bar[data-key]");
  var place = bar ? where.get(bar.getAttribute("data-key")) : undefined;
  if (place) show(place.call);
});
document.getElementById("zoom-in").addEventListener("click", function () { setZoom(zoom * 2); });
document.getElementById("zoom-out").addEventListener("click", function () { setZoom(zoom / 2); });
document.getElementById("zoom-fit").addEventListener("click", function () { setZoom(1); });
window.addEventListener("resize", function () { layout(false); });
layout();
document.body.setAttribute("data-ready-ms", String(Math.round(performance.now())));
})();
