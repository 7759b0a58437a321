// The timeline: every barrier's parity over the whole run as a waveform (SVG), with wait returns
// (▼), phase completions (●) and diagnostics (◆ and a red rule) as markers. Click or drag to jump.
// GPU traces carry `time_ns` per step: then the x axis is real time, not the step number.

import {svg} from "../svg.js";
import {formatNs} from "../format.js";

const ROW = 30;
const TOP = 24;
const AXIS = 22;
const MARKER_LIMIT = 3000;

function geometry(model, width, ctx = {}) {
  // A lane of lesson-note flags under the diagnostics lane when the run has callouts.
  const top = TOP + ((ctx.callouts || []).length ? 14 : 0);
  // Wide enough for the longest barrier name (11.5 px monospace: about 7 px a character).
  const longest = Math.max(0, ...model.rows.map((row) => row.name.length));
  const gutter = Math.min(Math.floor(width * 0.4), Math.max(width < 520 ? 100 : 138, 6 + longest * 7 + 26));
  const inner = Math.max(40, width - gutter - 14);
  const total = Math.max(1, model.scaleTotal || model.shown || model.total);
  let x;
  if (model.times) {
    const t0 = model.times[0];
    const span = Math.max(1, model.times[model.times.length - 1] - t0);
    x = (step) => gutter + ((model.times[Math.min(step, model.times.length - 1)] - t0) / span) * inner;
  } else {
    x = (step) => gutter + (Math.min(step, total) / total) * inner;
  }
  const stepAt = (px) => {
    if (!model.times) return Math.round(((px - gutter) / inner) * total);
    let best = 0;
    for (let s = 0; s < model.times.length; s++) {
      if (Math.abs(x(s) - px) < Math.abs(x(best) - px)) best = s;
    }
    return best;
  };
  return {gutter, inner, total, x, stepAt, height: top + model.rows.length * ROW + AXIS, top};
}

function ticks(model, g) {
  const out = [];
  const count = g.inner > 500 ? 8 : 4;
  if (model.times) {
    const t0 = model.times[0];
    const span = model.times[model.times.length - 1] - t0;
    for (let i = 0; i <= count; i++) {
      const px = g.gutter + (i / count) * g.inner;
      out.push([px, formatNs((i / count) * span)]);
    }
    return out;
  }
  const stepSize = Math.max(1, Math.ceil(g.total / count));
  for (let s = 0; s <= g.total; s += stepSize) out.push([g.x(s), String(s)]);
  if (out[out.length - 1][1] !== String(g.total)) out.push([g.x(g.total), String(g.total)]);
  return out;
}

function build(root, model, ctx) {
  const width = Math.max(300, Math.floor(root.clientWidth || 800));
  const g = geometry(model, width, ctx);
  const label = `Timeline of ${model.rows.length} barrier${model.rows.length === 1 ? "" : "s"} over ` +
    `${model.total} steps${model.times ? ", in GPU time" : ""}; ${model.diagnostics.length} diagnostic(s). ` +
    "Click to jump to a step; the scrubber does the same from the keyboard.";
  const root_ = svg("svg", {class: "timeline-svg", viewBox: `0 0 ${width} ${g.height}`, width, height: g.height,
                            role: "group", "aria-label": label});
  const markers = model.total <= MARKER_LIMIT;
  // The diagnostics lane on top, with a rule through every row.
  root_.append(svg("text", {x: 6, y: 16, class: "lane-label"}, "diagnostics"));
  for (const d of model.diagnostics) {
    const x = g.x(d.step);
    root_.append(svg("line", {x1: x, x2: x, y1: TOP - 4, y2: g.height - AXIS, class: `diag-rule kind-${d.kind}`}));
    root_.append(svg("path", {d: `M${x} ${5}l6 7-6 7-6-7z`, class: `diag-mark kind-${d.kind}`},
      svg("title", {}, `step ${d.step}: ${d.kind}. ${d.message}`)));
  }
  // Lesson callouts: a small note flag on the top lane at each pinned step.
  if ((ctx.callouts || []).length) root_.append(svg("text", {x: 6, y: TOP + 10, class: "lane-label"}, "lesson notes"));
  for (const step of ctx.callouts || []) {
    const x = g.x(step);
    root_.append(svg("path", {d: `M${x} ${TOP + 12}v-12h8l-2 3.5 2 3.5h-8`, class: "callout-mark", "data-callout-mark": step},
      svg("title", {}, `step ${step}: a lesson note`)));
  }
  model.rows.forEach((row, r) => {
    const y0 = g.top + r * ROW;
    const hi = y0 + 7;
    const lo = y0 + ROW - 7;
    const yOf = (p) => (p ? hi : lo);
    root_.append(svg("rect", {x: 0, y: y0, width, height: ROW, class: `row-band ${r % 2 ? "odd" : "even"}`}));
    root_.append(svg("text", {x: 6, y: y0 + ROW / 2 + 4, class: "row-label"}, row.name));
    root_.append(svg("text", {x: g.gutter - 12, y: hi + 4, class: "level"}, "1"));
    root_.append(svg("text", {x: g.gutter - 12, y: lo + 4, class: "level"}, "0"));
    const start = row.initAt === null ? g.total : row.initAt;
    if (start > 0) {
      root_.append(svg("line", {x1: g.x(0), x2: g.x(start), y1: (hi + lo) / 2, y2: (hi + lo) / 2, class: "uninit"}));
    }
    if (row.initAt !== null) {
      let parity = 0;
      let d = `M${g.x(start)} ${yOf(row.initAt === 0 ? row.parity : 0)}`;
      parity = row.initAt === 0 ? row.parity : 0;
      for (const [step, p] of row.changes) {
        if (p === parity) continue;
        d += `H${g.x(step)}V${yOf(p)}`;
        parity = p;
      }
      d += `H${g.x(model.shown || model.total)}`;
      root_.append(svg("path", {d, class: "wave"}));
    }
    if (markers) {
      for (const step of row.completions) {
        const p = row.changes.find(([s]) => s === step);
        root_.append(svg("circle", {cx: g.x(step), cy: yOf(p ? p[1] : 0), r: 3.2, class: "completion"},
          svg("title", {}, `step ${step}: ${row.name} completed a phase`)));
      }
      for (const [step, agent] of row.waits) {
        const x = g.x(step);
        root_.append(svg("path", {d: `M${x - 4} ${y0 + 1}h8l-4 6z`, class: "wait"},
          svg("title", {}, `step ${step}: ${agent}'s wait on ${row.name} returned`)));
      }
    }
  });
  const axisY = g.height - AXIS + 14;
  const all = ticks(model, g);
  all.forEach(([x, text], i) => {
    root_.append(svg("line", {x1: x, x2: x, y1: g.height - AXIS, y2: g.height - AXIS + 4, class: "tick"}));
    // The last label ends at its tick, so it is never clipped by the right edge.
    const last = i === all.length - 1 && x + text.length * 3.5 > width - 2;
    root_.append(svg("text", {x, y: axisY, class: last ? "tick-label end" : "tick-label"}, text));
  });
  root_.append(svg("text", {x: 6, y: axisY, class: "lane-label"}, model.times ? "GPU time" : "step"));
  // The label sits on the axis row, beside the rule, clear of the diagnostic markers on top.
  const divergence = svg("g", {class: "divergence-mark", visibility: "hidden"},
    svg("line", {y1: TOP - 4, y2: g.height - AXIS}), svg("text", {y: g.top + 11, x: 4}, "first divergence"));
  const cursor = svg("g", {class: "cursor"}, svg("line", {y1: TOP - 6, y2: g.height - AXIS}),
    svg("rect", {y: g.height - AXIS, height: 16, width: 44, rx: 4}), svg("text", {y: g.height - AXIS + 12}));
  // Prediction mode hides the run past the cursor: parity changes and diagnostics ahead would
  // answer the question.
  const veil = svg("rect", {class: "future-veil", y: TOP - 6, height: g.height - AXIS - TOP + 6, x: 0, width: 0,
                            visibility: "hidden"});
  root_.append(veil, divergence, cursor);
  let dragging = false;
  const seekAt = (event) => {
    const box = root_.getBoundingClientRect();
    const px = ((event.clientX - box.left) / box.width) * width;
    ctx.onSeek(Math.max(0, Math.min(g.total, g.stepAt(px))));
  };
  root_.addEventListener("pointerdown", (event) => { dragging = true; root_.setPointerCapture(event.pointerId); seekAt(event); });
  root_.addEventListener("pointermove", (event) => { if (dragging) seekAt(event); });
  root_.addEventListener("pointerup", () => { dragging = false; });
  root.replaceChildren(root_);
  return {g, cursor, divergence, veil, model, width};
}

/** Draw `model` (from layout.timelineOf) once; later calls only move the cursor. */
export function render(root, frame, model, ctx) {
  if (!model) return;
  const width = Math.max(300, Math.floor(root.clientWidth || 800));
  if (!root.built || root.built.model !== model || Math.abs(root.built.width - width) > 4) {
    root.built = build(root, model, ctx);
    root.built.divergenceStep = null;
  }
  const {g, cursor, divergence, veil} = root.built;
  const x = g.x(Math.min(frame.step, model.shown || model.total));
  const hide = document.body.classList.contains("predict-on");
  veil.setAttribute("visibility", hide ? "visible" : "hidden");
  if (hide) {
    veil.setAttribute("x", x + 1);
    veil.setAttribute("width", Math.max(0, root.built.width - x - 1));
  }
  cursor.setAttribute("transform", `translate(${x} 0)`);
  const [, box, text] = cursor.children;
  const label = model.times
    ? formatNs(model.times[Math.min(frame.step, model.times.length - 1)] - model.times[0])
    : String(frame.step);
  const w = 10 + label.length * 6.6;
  const left = Math.max(2 - x, Math.min(-w / 2, root.built.width - 2 - x - w));  // stay inside
  box.setAttribute("x", left);
  box.setAttribute("width", w);
  text.setAttribute("x", left + w / 2);
  text.textContent = label;
  const mark = ctx.divergence;
  if (mark !== undefined && mark !== null) {
    divergence.setAttribute("visibility", "visible");
    divergence.setAttribute("transform", `translate(${g.x(mark)} 0)`);
  } else {
    divergence.setAttribute("visibility", "hidden");
  }
}
