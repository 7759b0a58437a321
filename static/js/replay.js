// A real-GPU trace (GET /api/v1/replays/{id}) beside the simulation of the same configuration,
// with the GPU's nanoseconds on its timeline.

import {api} from "./trace.js";
import {formatNs} from "./format.js";
import {downloadTimelineSvg} from "./learn.js";
import {showPair} from "./pair.js";

const boot = JSON.parse(document.getElementById("boot").textContent);
const page = document.getElementById("replay");
const source = document.getElementById("replay-source");

async function main() {
  let gpu;
  try {
    gpu = await api.replay(boot.replay);
  } catch (err) {
    source.textContent = err.status === 404
      ? "This server has no GPU trace by that name (or no GPU traces at all)."
      : `The GPU trace could not be loaded: ${err.message}`;
    source.classList.add("error");
    page.querySelector(".side-by-side").hidden = true;
    page.querySelector("#transport").hidden = true;
    return;
  }
  const s = gpu.source || {};
  const scenario = gpu.scenario;
  const span = gpu.steps.length > 1 ? gpu.steps[gpu.steps.length - 1].time_ns - gpu.steps[0].time_ns : 0;
  const params = Object.entries(scenario.params).map(([k, v]) => `${k}=${v}`).join(", ");
  source.textContent = `${scenario.id} (${params}${scenario.bugs.length ? `; bugs: ${scenario.bugs.join(", ")}` : ""}) ` +
    `captured on ${s.device || "a GPU"}${s.driver ? `, driver ${s.driver}` : ""}${s.cuda ? `, CUDA ${s.cuda}` : ""}` +
    `${s.captured_at ? ` at ${s.captured_at}` : ""}: ${gpu.total_steps} events over ${formatNs(span)}, ` +
    `ending ${gpu.status.replace("_", " ")}.`;
  const lesson = document.getElementById("replay-lesson");
  if (s.lesson) {
    lesson.textContent = s.lesson;  // the conformance verdict has its own line below
    lesson.hidden = false;
  }
  let sim;
  let simError = null;
  try {
    // Only the parameters the scenario takes (a GPU trace may record more, e.g. stages=1 for
    // single_barrier, which the simulation refuses).
    const known = (boot.scenarios[scenario.id] || {}).parameters || scenario.params;
    const params = Object.fromEntries(Object.entries(scenario.params).filter(([k]) => k in known));
    sim = await api.trace({scenario: scenario.id, params, bugs: scenario.bugs, schedule: "round_robin"});
  } catch (err) {
    sim = null;
    simError = err.message;
  }
  if (!sim) {
    sim = {...gpu, steps: [], total_steps: 0, diagnostics: []};
  }
  const step = Number(new URLSearchParams(location.search).get("step") || 0);
  showPair(page, {doc: gpu, title: `Real GPU: ${s.device || "GPU"}`}, {doc: sim, title: "Simulation (round robin)"},
           {step, names: ["GPU", "simulation"], divergence: false});
  showConformance(document.getElementById("divergence"), s.conformance, simError);
  downloads(gpu);
}

/** The replay's verdict is its conformance (the model replayed in the GPU's recorded order),
 *  not a step-by-step diff with a round-robin simulation, which orders moves differently. */
function showConformance(note, c, simError) {
  note.classList.remove("error");
  if (!c) {
    note.textContent = "This trace carries no conformance check.";
    note.dataset.conformance = "none";
  } else {
    const ub = (c.model_undefined_behavior || []).length;
    note.replaceChildren(
      Object.assign(document.createElement("b"), {textContent: c.passes ? "✓ Matches the barrier model. " : "✗ Diverges from the barrier model. "}),
      `Replayed in the GPU's recorded order: ${c.observations_checked} logged waits and tokens checked, ` +
      `${c.divergences} divergence${c.divergences === 1 ? "" : "s"}` +
      (c.concurrent_arrives_reordered ? `, ${c.concurrent_arrives_reordered} concurrent arrives reordered` : "") +
      (ub ? `, undefined behaviour in the model: ${c.model_undefined_behavior.join(", ")}` : "") +
      ". The simulation beside it runs round robin, so its steps come in another order.");
    note.dataset.conformance = c.passes ? "passes" : "diverges";
  }
  if (simError) note.append(` (The simulation could not run: ${simError}.)`);
}

function downloads(gpu) {
  const bar = document.getElementById("replay-downloads");
  if (!bar) return;
  const json = bar.querySelector('[data-download="json"]');
  json.href = `/api/v1/replays/${encodeURIComponent(boot.replay)}`;
  json.download = `${boot.replay}.trace.json`;
  const perfetto = bar.querySelector('[data-download="perfetto"]');
  perfetto.href = `/api/v1/replays/${encodeURIComponent(boot.replay)}/perfetto`;
  perfetto.hidden = !boot.features.replay_perfetto;
  bar.querySelector('[data-download="svg"]').addEventListener("click", () => {
    const svgNode = page.querySelector('[data-run="left"] .timeline svg');
    if (svgNode) downloadTimelineSvg(svgNode, `${boot.replay}-timeline.svg`);
  });
  bar.hidden = false;
  void gpu;
}

main();
