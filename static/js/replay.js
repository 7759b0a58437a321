// A real-GPU replay (GET /api/v1/replays/{id}): the engine driven in the GPU's order, with the
// GPU's nanoseconds on its timeline, its verdict (source.conformance), what the whole launch
// reported and its lesson; beside it the simulation of the same pipeline (round robin), and
// the tx-count probes measured on the same GPU.

import {h} from "./dom.js";
import {formatNs} from "./format.js";
import {downloadTimelineSvg} from "./learn.js";
import {showPair} from "./pair.js";
import {renderProbes} from "./probes.js";
import {api} from "./trace.js";

const boot = JSON.parse(document.getElementById("boot").textContent);
const page = document.getElementById("replay");
const source = document.getElementById("replay-source");
const TX_BUGS = ["expect_tx_short", "expect_tx_long"];

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
  describe(gpu);
  const {sim, simError} = await simulation(gpu);
  const c = s.conformance || null;
  const marked = c && c.first_divergence ? c.first_divergence.step : null;
  const step = Number(new URLSearchParams(location.search).get("step") || 0);
  const player = showPair(page, {doc: gpu, title: `Real GPU: ${deviceName(s)}`},
                          {doc: sim, title: "Simulation (round robin)"},
                          {step, names: ["GPU", "simulation"], divergence: false, marked});
  showPills(gpu, sim, simError);
  showVerdict(document.getElementById("divergence"), c, simError, player);
  showFigures(c, s.ctas, s.error);
  downloads(s);
  probes(scenario.bugs || []);
}

/** Two runs, two endings: the GPU's and the model's, each in its own pill (one pill would give
 *  the simulation's "undefined behavior" for a GPU run that finished). */
function showPills(gpu, sim, simError) {
  const one = document.querySelector("#transport .status-pill");
  const gpuStatus = (gpu.source && gpu.source.conformance && gpu.source.conformance.status
    && gpu.source.conformance.status.gpu) || gpu.status;
  const pill = (who, status, text) => h("span", {class: "status-pill", dataset: {status, pill: who}},
    h("span", {class: "shape", "aria-hidden": "true"}), h("span", {class: "text"}, text));
  const words = (status) => String(status).replaceAll("_", " ");
  one.replaceWith(pill("gpu", gpuStatus, `GPU: ${words(gpuStatus)}`),
                  pill("model", simError ? "undefined_behavior" : sim.status,
                       simError ? "model: could not run" : `model: ${words(sim.status)}`));
}

function deviceName(s) {
  const d = s.device;
  return (d && typeof d === "object" ? d.device : d) || "GPU";
}

function describe(gpu) {
  const s = gpu.source || {};
  const scenario = gpu.scenario;
  if (s.title) document.getElementById("replay-title").textContent = s.title;
  const span = gpu.steps.length > 1 ? gpu.steps[gpu.steps.length - 1].time_ns - gpu.steps[0].time_ns : 0;
  const params = Object.entries(scenario.params).map(([k, v]) => `${k}=${v}`).join(", ");
  const name = scenario.id || "a pipeline of its own";
  const device = s.device && typeof s.device === "object" ? s.device : {};
  const gpuStatus = s.conformance && s.conformance.status ? s.conformance.status.gpu : gpu.status;
  source.textContent = `${name} (${params}${scenario.bugs.length ? `; bugs: ${scenario.bugs.join(", ")}` : ""}) ` +
    `captured on ${deviceName(s)}${device.driver ? `, driver ${device.driver}` : ""}` +
    `${device.cuda ? `, CUDA ${device.cuda}` : ""}${s.captured_at ? ` at ${s.captured_at}` : ""}: ` +
    `CTA ${s.cta || 0}'s ${gpu.total_steps} steps over ${formatNs(span)}; on the GPU it ended ` +
    `${String(gpuStatus).replace("_", " ")}, in the engine ${gpu.status.replace("_", " ")}.`;
  const lesson = document.getElementById("replay-lesson");
  if (s.lesson) {
    lesson.textContent = s.lesson;
    lesson.hidden = false;
  }
}

/** The simulation beside the replay: a built-in by id, any other pipeline by its text. */
async function simulation(gpu) {
  const scenario = gpu.scenario;
  const s = gpu.source || {};
  try {
    let sim;
    if (scenario.id && boot.scenarios[scenario.id]) {
      // Only the parameters the scenario takes (a GPU trace may record more).
      const known = boot.scenarios[scenario.id].parameters || scenario.params;
      const params = Object.fromEntries(Object.entries(scenario.params).filter(([k]) => k in known));
      sim = await api.trace({scenario: scenario.id, params, bugs: scenario.bugs, schedule: "round_robin"});
    } else if (s.pipeline) {
      sim = await api.traceOfSource({source: s.pipeline, params: scenario.params, bugs: scenario.bugs,
                                     schedule: "round_robin"});
    } else {
      throw new Error("the replay does not carry its pipeline text");
    }
    return {sim, simError: null};
  } catch (err) {
    return {sim: {...gpu, steps: [], total_steps: 0, diagnostics: []}, simError: err.message};
  }
}

/** The replay's verdict: does the engine, driven in the GPU's order, explain every observation?
 *  (Not a step-by-step diff with the round-robin simulation, which orders moves differently.) */
function showVerdict(note, c, simError, player) {
  note.classList.remove("error");
  if (!c || typeof c.matches !== "boolean") {
    note.textContent = "This trace carries no conformance check.";
    note.dataset.conformance = "none";
  } else if (c.matches) {
    note.replaceChildren(h("b", {}, "✓ Matches the barrier model. "),
      `Replayed in the GPU's order, the engine explains all ${c.observations_checked} observations ` +
      "(arrive tokens, wait results, reads, stored tiles). The simulation beside it runs round robin, " +
      "so its steps come in another order.");
    note.dataset.conformance = "passes";
  } else {
    const first = c.first_divergence || {};
    const jump = h("button", {type: "button", class: "link", dataset: {jump: first.step},
                              onclick: () => player.seek(first.step)}, `Jump to step ${first.step}`);
    note.replaceChildren(h("b", {}, `✗ Diverges from the barrier model at step ${first.step}: `),
      `${first.why || "no reason given"}. `, jump);
    note.dataset.conformance = "diverges";
    note.dataset.divergence = first.step;
  }
  if (simError) note.append(` (The simulation could not run: ${simError}.)`);
}

function figure(term, value, key) {
  return [h("dt", {}, term), h("dd", {dataset: {figure: key}}, value)];
}

function showFigures(c, ctas, error) {
  const section = document.getElementById("replay-figures");
  const check = document.getElementById("replay-check");
  const launch = document.getElementById("replay-launch");
  const items = [];
  if (c) {
    const n = (x) => (typeof x === "number" ? x.toLocaleString("en-US") : "–");
    items.push(...figure("records replayed", n(c.gpu_records), "records"),
      ...figure("observations checked", n(c.observations_checked), "observations"),
      ...figure("landings inferred", `${n(c.landings_inferred)} (${n(c.landings_held)} held)`, "landings"),
      ...figure("reordered", n(c.reordered), "reordered"));
    if (c.status) items.push(...figure("ended", `GPU ${c.status.gpu}, engine ${c.status.engine}`, "status"));
  }
  check.replaceChildren(...items);
  launch.replaceChildren(...(ctas ? launchTable(ctas, error) : []));
  section.hidden = !items.length && !ctas;
}

/** Why CTAs sent no report: the launch hung and the host ended it, or it trapped. */
function unreported(error) {
  return error && error.name === "launch_hung" ? "the launch hung" : "trap";
}

function launchTable(ctas, error) {
  const o = ctas.outcomes || {};
  const n = (x) => (typeof x === "number" ? x.toLocaleString("en-US") : "–");
  const headline = h("p", {class: "launch-line", dataset: {launched: ctas.launched}},
    h("b", {}, `Whole launch: ${n(ctas.launched)} CTA${ctas.launched === 1 ? "" : "s"}`), " — ",
    [`${n(o.finished)} finished`, o.timed_out ? `${n(o.timed_out)} had a wait give up` : null,
     o.operand_error ? `${n(o.operand_error)} stopped on an operand error` : null,
     o.not_reported ? `${n(o.not_reported)} never reported (${unreported(error)})` : null].filter(Boolean).join(", "),
    `; ${n(ctas.reads_wrong)} reads found wrong words in ${n(ctas.ctas_with_wrong_reads)} CTAs.`);
  const agents = Array.isArray(ctas.agents) ? ctas.agents : [];
  if (!agents.length) return [headline];
  const table = h("table", {class: "launch-table"},
    h("thead", {}, h("tr", {}, ...["agent", "lines run", "reads wrong", "finished", "timed out", "not reported"]
      .map((t) => h("th", {scope: "col"}, t)))),
    h("tbody", {}, agents.map((a) => h("tr", {},
      h("th", {scope: "row"}, a.name), ...[a.lines, a.reads_wrong, a.finished, a.timed_out, a.not_reported]
        .map((v) => h("td", {class: "num"}, n(v)))))));
  const stored = Object.entries(ctas.stored || {}).map(([name, d]) =>
    h("p", {class: "muted"}, `${name}: ${n(d.changed)} of ${n(d.elements)} elements written over the launch.`));
  return [headline, h("div", {class: "table-wrap"}, table), ...stored];
}

function downloads(s) {
  const bar = document.getElementById("replay-downloads");
  if (!bar) return;
  const base = `/api/v1/replays/${encodeURIComponent(boot.replay)}`;
  const json = bar.querySelector('[data-download="json"]');
  json.href = base;
  json.download = `${boot.replay}.trace.json`;
  const perfetto = bar.querySelector('[data-download="perfetto"]');
  perfetto.href = `${base}/perfetto`;
  perfetto.hidden = !boot.features.replay_perfetto;
  bar.querySelector('[data-download="svg"]').addEventListener("click", () => {
    const svgNode = page.querySelector('[data-run="left"] .timeline svg');
    if (svgNode) downloadTimelineSvg(svgNode, `${boot.replay}-timeline.svg`);
  });
  const kernel = bar.querySelector('[data-download="kernel"]');
  kernel.href = `${base}/kernel`;
  if (s.generator) {
    fetch(kernel.href).then((r) => { kernel.hidden = !r.ok; }).catch(() => { kernel.hidden = true; });
  }
  bar.hidden = false;
}

/** The probes panel: open on replays of the tx-count bugs, folded on the others. */
async function probes(bugs) {
  const panel = document.getElementById("probes-panel");
  const body = document.getElementById("probes-body");
  if (!panel || !body) return;
  panel.hidden = false;
  if (bugs.some((b) => TX_BUGS.includes(b))) {
    panel.open = true;  // the probes are this replay's evidence: above the runs
    page.insertBefore(panel, document.getElementById("replay-downloads"));
  }
  try {
    renderProbes(body, await api.probes());
    panel.dataset.probes = "shown";
  } catch (err) {
    body.replaceChildren(h("p", {class: "muted"}, err.status === 404
      ? "No tx-count probes ship with this server."
      : `The tx-count probes could not be loaded: ${err.message}`));
    panel.dataset.probes = "missing";
  }
}

main();
