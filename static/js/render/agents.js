// Agent lanes: each agent's program with its current line, iteration, registers and status,
// like a step-through debugger; then the TMA engine and the tensor core with what they hold.
// In manual mode a ready lane is a button that moves that agent.

import {h, setAttr, setText} from "../dom.js";
import {roleText} from "../layout.js";
import {statusText} from "../format.js";

const SHAPES = {running: "▶", waiting: "‖", done: "✓"};

function build(root, layout, ctx) {
  root.replaceChildren();
  const lanes = {};
  for (const agent of layout.agents) {
    const move = h("button", {type: "button", class: "move", dataset: {mover: agent.name},
                              onclick: () => ctx.onMove(agent.name)}, "Move ", agent.name, " ▸");
    const status = h("span", {class: "badge status"}, h("span", {class: "shape", "aria-hidden": "true"}),
                     h("span", {class: "text"}));
    const regs = h("dl", {class: "regs"});
    const lines = agent.program.map((text, i) =>
      h("li", {dataset: {line: i, sourceLine: (agent.source_lines || [])[i] ?? ""}}, h("span", {class: "marker", "aria-hidden": "true"}), h("code", {}, text)));
    // A line a bug toggle deleted stays in sight, struck through with its `// BUG` note: the
    // student sees the very code that fails. It is not a program line (nothing stands on it).
    const items = [...lines];
    for (const gone of [...(agent.deleted_lines || [])].sort((a, b) => b.before - a.before)) {
      items.splice(gone.before, 0, h("li", {class: "deleted", dataset: {deletedLine: gone.source_line, sourceLine: gone.source_line},
                                            title: "deleted by the bug toggle: this line does not run"},
        h("span", {class: "marker", "aria-hidden": "true"}, "✗"),
        h("code", {}, h("del", {}, gone.text), " ", h("span", {class: "bug-note"}, gone.note))));
    }
    const lane = h("article", {class: "lane", dataset: {agent: agent.name, role: agent.role},
                               "aria-label": `${agent.name}, ${roleText(agent.role)}`},
      h("header", {}, h("h4", {}, agent.name), h("span", {class: "role"}, roleText(agent.role)), status, move),
      regs,
      h("ol", {class: "program", "aria-label": `${agent.name}'s program`}, items));
    lane.addEventListener("click", (event) => {
      if (ctx.manual && !event.target.closest("button") && lane.dataset.ready === "true") ctx.onMove(agent.name);
    });
    lanes[agent.name] = {lane, status, regs, lines, move};
    root.append(lane);
  }
  const engine = h("article", {class: "lane engine", dataset: {agent: "tma"}, "aria-label": "TMA engine"},
    h("header", {}, h("h4", {}, "TMA engine"), h("span", {class: "role"}, "bulk copies in flight")),
    h("ul", {class: "inflight"}));
  root.append(engine);
  let tensor = null;
  if (layout.hasTensorCore) {
    tensor = h("article", {class: "lane engine", dataset: {agent: "tensor_core"}, "aria-label": "Tensor core"},
      h("header", {}, h("h4", {}, "Tensor core"), h("span", {class: "role"}, "queued tcgen05 work"),
        h("button", {type: "button", class: "move", dataset: {mover: "tensor_core"},
                     onclick: () => ctx.onMove("tensor_core")}, "Retire next ▸")),
      h("ul", {class: "inflight"}));
    root.append(tensor);
  }
  return {lanes, engine, tensor, key: layout.key};
}

/** The registers by their own names: the loop variable (`i`, `k`) is one of them, so no
 *  separate "iteration" entry that names a variable the program may not have. */
function registerItems(agent) {
  return Object.entries(agent.registers);
}

export function render(root, frame, layout, ctx) {
  if (!root.built || root.built.key !== layout.key) root.built = build(root, layout, ctx);
  const {lanes, engine, tensor} = root.built;
  const snapshot = frame.snapshot;
  const ready = new Set(frame.ready || []);
  const moved = frame.record ? frame.record.agent : null;
  for (const agent of snapshot.agents) {
    const lane = lanes[agent.name];
    if (!lane) continue;
    setAttr(lane.lane, "data-status", agent.status);
    lane.lane.classList.toggle("just-moved", moved === agent.name);
    setAttr(lane.lane, "data-ready", ready.has(agent.name));
    lane.lane.classList.toggle("clickable", ctx.manual && ready.has(agent.name));
    setText(lane.status.querySelector(".shape"), SHAPES[agent.status] || "•");
    setText(lane.status.querySelector(".text"), statusText(agent));
    setAttr(lane.status, "data-status", agent.status);
    lane.move.hidden = !ctx.manual;
    lane.move.disabled = !ready.has(agent.name);
    lane.move.title = ready.has(agent.name) ? `Move ${agent.name}: run its current line`
      : `${agent.name} cannot move: ${statusText(agent)}`;
    const regs = registerItems(agent);
    if (lane.regs.childElementCount !== regs.length * 2) {
      lane.regs.replaceChildren(...regs.flatMap(([k]) => [h("dt", {}, k), h("dd", {})]));
    }
    regs.forEach(([, value], i) => setText(lane.regs.children[i * 2 + 1], value));
    lane.lines.forEach((li, i) => {
      const current = agent.line === i;
      li.classList.toggle("current", current);
      li.classList.toggle("waiting", current && agent.status === "waiting");
      li.classList.toggle("ran", moved === agent.name && frame.record.line === i);
      if (current) setAttr(li, "aria-current", "step"); else li.removeAttribute("aria-current");
      setText(li.firstChild, current ? (agent.status === "waiting" ? "‖" : "▶") : "");
    });
  }
  // The TMA engine: every copy in flight, with its chunk progress.
  const list = engine.querySelector(".inflight");
  engine.classList.toggle("just-moved", moved === "tma");
  const items = snapshot.tma.map((op) => {
    const mover = `tma:${op.op}`;
    const pips = Array.from({length: op.chunks}, (_, c) =>
      h("span", {class: `pip${c < op.chunk ? " done" : ""}`, "aria-hidden": "true"}));
    const target = op.direction === "load" ? `→ ${op.stage}` : `${op.stage} → global`;
    const text = `${op.direction} tile ${op.tile} ${target}: chunk ${op.chunk} of ${op.chunks} next`;
    const label = h("span", {class: "op"}, h("b", {}, op.op), " ", target,
      op.barrier ? h("small", {}, ` · complete_tx on ${op.barrier}`) : null);
    if (ctx.manual) {
      return h("li", {}, h("button", {type: "button", class: "move inline", dataset: {mover},
        disabled: !ready.has(mover), "aria-label": `Move the TMA engine: ${text}`,
        onclick: () => ctx.onMove(mover)}, label, h("span", {class: "pips"}, pips)));
    }
    return h("li", {"aria-label": text}, label, h("span", {class: "pips"}, pips));
  });
  for (const group of snapshot.bulk_groups || []) {
    if (group.pending_reads) {
      items.push(h("li", {class: "muted"}, `${group.agent}: ${group.pending_reads} store group` +
        `${group.pending_reads === 1 ? "" : "s"} still reading shared memory`));
    }
  }
  if (!items.length) items.push(h("li", {class: "muted idle"}, "idle: no copy in flight"));
  list.replaceChildren(...items);
  if (tensor) {
    tensor.classList.toggle("just-moved", moved === "tensor_core");
    const button = tensor.querySelector(".move");
    button.hidden = !ctx.manual;
    button.disabled = !ready.has("tensor_core");
    const queue = (snapshot.tensor_core || []).map((work) => h("li", {},
      work.kind === "mma" ? `${work.op} reads ${work.stage}` : `commit → arrive on ${work.barrier}`));
    if (!queue.length) queue.push(h("li", {class: "muted idle"}, "idle"));
    tensor.querySelector(".inflight").replaceChildren(...queue);
  }
}
