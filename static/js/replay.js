// A real-GPU trace (GET /api/v1/replays/{id}) beside the simulation of the same configuration,
// with the GPU's nanoseconds on its timeline.

import {api} from "./trace.js";
import {formatNs} from "./format.js";
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
    const passes = s.conformance && s.conformance.passes;
    lesson.textContent = s.lesson + (s.conformance ? (passes
      ? " Conformance: every logged token and wait agrees with the barrier model."
      : " Conformance: some logged results diverge from the barrier model (see diagnostics).") : "");
    lesson.hidden = false;
  }
  let sim;
  try {
    sim = await api.trace({scenario: scenario.id, params: scenario.params, bugs: scenario.bugs,
                           schedule: "round_robin"});
  } catch (err) {
    sim = null;
  }
  if (!sim) {
    sim = {...gpu, steps: [], total_steps: 0, diagnostics: []};
  }
  const step = Number(new URLSearchParams(location.search).get("step") || 0);
  showPair(page, {doc: gpu, title: `Real GPU: ${s.device || "GPU"}`}, {doc: sim, title: "Simulation (round robin)"},
           {step, names: ["GPU", "simulation"]});
}

main();
