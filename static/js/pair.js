// Two runs side by side under one cursor: correct vs buggy (compare view), or a real-GPU trace
// vs the simulation of the same configuration (replays). The first step where they differ is
// found by reading both traces and marked on both timelines.

import {bindControls} from "./controls.js";
import {makeLayout, timelineOf} from "./layout.js";
import {LocalPlayer, docFrame} from "./player.js";
import {moverOf} from "./trace.js";
import {RunView} from "./view.js";

const FIELDS = ["phase", "pending_arrivals", "expected_arrivals", "tx_count"];

/** The first step at which two traces differ, with a sentence saying how; null if never.
 *  The first step whose mover or line differs wins: a state difference before it is a
 *  consequence folded into an earlier step (the loop counter a deleted `phase ^= 1` lets step
 *  early), not where the runs part. With the same lines all along, the first state difference. */
export function firstDivergence(a, b, names = ["correct", "buggy"]) {
  const n = Math.min(a.steps.length, b.steps.length);
  for (let i = 0; i < n; i++) {
    const why = lineDifference(a, b, a.steps[i], b.steps[i], names);
    if (why) return {step: a.steps[i].step, why};
  }
  for (let i = 0; i < n; i++) {
    const why = difference(a.steps[i], b.steps[i], names);
    if (why) return {step: a.steps[i].step, why};
  }
  if (a.total_steps !== b.total_steps) {
    const [short, long] = a.total_steps < b.total_steps ? [names[0], names[1]] : [names[1], names[0]];
    return {step: Math.min(a.total_steps, b.total_steps) + 1,
            why: `the ${short} run ends after step ${Math.min(a.total_steps, b.total_steps)}; the ${long} run goes on`};
  }
  return null;
}

/** The line a step ran: its agent's program line (and source line), or the engine's op. */
function lineOf(doc, record) {
  const agent = doc.layout.agents.find((x) => x.name === record.agent);
  if (!agent || record.line === null || record.line === undefined) return {text: record.op, source: null};
  return {text: agent.program[record.line] ?? record.op, source: (agent.source_lines || [])[record.line] ?? null};
}

function lineDifference(a, b, x, y, [left, right]) {
  if (moverOf(x) !== moverOf(y)) return `${left}: ${moverOf(x)} moves; ${right}: ${moverOf(y)} moves`;
  const lx = lineOf(a, x);
  const ly = lineOf(b, y);
  if (lx.text === ly.text) return null;
  const at = (l) => (l.source ? ` (line ${l.source})` : "");
  let why = `${x.agent} runs \`${lx.text}\`${at(lx)} in the ${left} run but \`${ly.text}\`${at(ly)} in the ${right} run`;
  const agent = b.layout.agents.find((g) => g.name === y.agent);
  const gone = ((agent && agent.deleted_lines) || []).find((d) => lx.text.startsWith(d.text) || d.text.startsWith(lx.text));
  if (gone) why += `: the bug deleted \`${gone.text}\` (${gone.note})`;
  return why;
}

function difference(x, y, names) {
  const [left, right] = names;
  if (moverOf(x) !== moverOf(y)) return `${left}: ${moverOf(x)} moves; ${right}: ${moverOf(y)} moves`;
  const state = stateDifference(x, y, names);
  if (x.op !== y.op) {
    const ops = `${x.agent} runs ${x.op} (${left}) but ${y.op} (${right})`;
    return state ? `${ops}, so ${state}` : ops;
  }
  return state;
}

function stateDifference(x, y, [left, right]) {
  const sx = x.snapshot;
  const sy = y.snapshot;
  if (!sx || !sy) return null;
  for (let i = 0; i < sx.barriers.length; i++) {
    for (const field of FIELDS) {
      if (sx.barriers[i][field] !== (sy.barriers[i] || {})[field]) {
        return `${sx.barriers[i].name}'s ${field} is ${sx.barriers[i][field]} (${left}) but ${(sy.barriers[i] || {})[field]} (${right})`;
      }
    }
  }
  for (let i = 0; i < sx.agents.length; i++) {
    const ax = sx.agents[i];
    const ay = sy.agents[i] || {registers: {}};
    for (const [name, value] of Object.entries(ax.registers)) {
      if (ay.registers[name] !== value) {
        return `${ax.name}'s ${name} register is ${value} (${left}) but ${ay.registers[name]} (${right})`;
      }
    }
    if (ax.status !== ay.status) return `${ax.name} is ${ax.status} (${left}) but ${ay.status} (${right})`;
  }
  for (let s = 0; s < sx.stages.length; s++) {
    const cx = sx.stages[s].chunks.map((c) => c.tile).join();
    const cy = (sy.stages[s] || {chunks: []}).chunks.map((c) => c.tile).join();
    if (cx !== cy) return `${sx.stages[s].name} holds different data`;
  }
  if (x.diagnostics.length !== y.diagnostics.length) {
    const d = (x.diagnostics[0] || y.diagnostics[0]);
    return `${d.kind} at this step in the ${x.diagnostics.length ? left : right} run only`;
  }
  return null;
}

/** Draw two trace documents side by side; returns the player. With `divergence: false` the
 *  timelines mark the step `marked` (a replay's own first divergence) instead of a diff. */
export function showPair(page, left, right, {step = 0, names = ["correct", "buggy"], divergence: markDivergence = true,
                                           marked = null, onFrame = () => {}} = {}) {
  const total = Math.max(left.doc.steps.length, right.doc.steps.length);
  const player = new LocalPlayer(total, {step, status: right.doc.status});
  const views = [left, right].map((side, i) => {
    const root = page.querySelector(`[data-run="${i ? "right" : "left"}"]`);
    const view = new RunView(root, {onSeek: (s) => player.seek(s)});
    view.setLayout(makeLayout(side.doc.layout, side.doc.scenario));
    view.setDiagnostics(side.doc.diagnostics);
    const model = timelineOf(side.doc);
    model.scaleTotal = total;  // one x scale for both runs, so the same step lines up
    view.setTimeline(model);
    const title = root.querySelector(".run-title");
    if (title && side.title) title.textContent = side.title;
    return view;
  });
  const divergence = markDivergence ? firstDivergence(left.doc, right.doc, names) : null;
  const note = page.querySelector("#divergence");
  if (note && markDivergence) {
    note.replaceChildren();
    if (divergence) {
      const jump = document.createElement("button");
      jump.type = "button";
      jump.className = "link";
      jump.textContent = `Jump to step ${divergence.step}`;
      jump.addEventListener("click", () => player.seek(divergence.step));
      const strong = document.createElement("b");
      strong.textContent = `First divergence at step ${divergence.step}: `;
      note.append(strong, `${divergence.why}. `, jump);
      note.dataset.divergence = divergence.step;
    } else {
      note.textContent = "The two runs take exactly the same steps.";
      note.dataset.divergence = "none";
    }
  }
  for (const view of views) view.setDivergence(divergence ? divergence.step : marked);
  const controls = bindControls(page.querySelector("#transport"), player);
  const draw = (frame) => {
    [left, right].forEach((side, i) => {
      const at = docFrame(side.doc, frame.step);
      views[i].update({...frame, ...at, step: frame.step > side.doc.total_steps ? side.doc.total_steps : at.step,
                       ready: [], time_ns: at.record ? at.record.time_ns : undefined});
    });
    controls.update(frame);
    const url = new URL(location.href);
    url.searchParams.set("step", frame.step);
    history.replaceState(null, "", url.toString().replaceAll("%2C", ","));
    onFrame(frame);
  };
  player.on("frame", draw);
  draw(player.frame);
  return player;
}
