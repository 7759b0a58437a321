// The inspector page (/scenarios/{id}) and its chrome-less twin (/embed/{id}).
// Boot: read the configuration from the URL, create a session, open its WebSocket, draw every
// frame it sends. The URL always holds the current state (a permalink), so reload restores it.

import {bindControls, copyText, toast} from "./controls.js";
import {h} from "./dom.js";
import {makeLayout, timelineOf} from "./layout.js";
import {SessionPlayer} from "./player.js";
import {api, ApiError, configFromQuery, configToQuery, moverOf} from "./trace.js";
import {RunView} from "./view.js";

const boot = JSON.parse(document.getElementById("boot").textContent);
const scenario = boot.scenario;
const root = document.getElementById("inspector");
const embed = boot.page === "embed";
const form = document.getElementById("config");
const toastNode = root.querySelector(".toast");
const transport = root.querySelector("#transport");
const manualBox = document.getElementById("manual-mode");

let config = configFromQuery(scenario, location.search);
let player = null;
let controls = null;
let picks = [];
let urlTimer = null;
const view = new RunView(root.querySelector('[data-run="main"]'), {
  onSeek: (step) => player && player.seek(step),
  onMove: (agent) => player && player.step(agent),
});

// ------------------------------------------------------------------------ the config form

function fillForm() {
  if (!form) return;
  for (const [name, spec] of Object.entries(scenario.parameters)) {
    form.elements[name].value = config.params[name] ?? spec.default;
  }
  form.elements.schedule.value = config.schedule;
  form.elements.seed.value = config.seed;
  form.querySelector(".seed").hidden = config.schedule !== "random";
  for (const box of form.querySelectorAll('input[name="bugs"]')) box.checked = config.bugs.includes(box.value);
}

function readForm() {
  const params = {};
  for (const [name, spec] of Object.entries(scenario.parameters)) {
    const value = Number(form.elements[name].value);
    if (value !== spec.default) params[name] = value;
  }
  return {
    scenario: scenario.id, params,
    bugs: [...form.querySelectorAll('input[name="bugs"]:checked')].map((b) => b.value),
    schedule: form.elements.schedule.value,
    seed: Number(form.elements.seed.value) || 0,
    moves: [], picks: [], step: 0,
  };
}

function showFormError(err) {
  const box = form ? form.querySelector(".form-error") : null;
  for (const input of form ? form.querySelectorAll("[aria-invalid]") : []) input.removeAttribute("aria-invalid");
  const text = err ? `${err.field ? `${err.field}: ` : ""}${err.message}` : "";
  if (box) box.textContent = text;
  else if (err) toast(toastNode, text, "error");
  if (err && err.field && form && form.elements[err.field] && form.elements[err.field].setAttribute) {
    form.elements[err.field].setAttribute("aria-invalid", "true");
  }
}

// --------------------------------------------------------------------------- the session

async function load(next) {
  let session;
  try {
    session = await api.createSession(next);
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    showFormError(err);
    if (player) return;
    if (err.field === "step" || err.field === "picks" || err.field === "moves") {
      return load({...next, step: 0, picks: [], moves: []});
    }
    return;
  }
  showFormError(null);
  config = next;
  if (player) player.close();
  root.dataset.session = session.id;
  view.setLayout(makeLayout(session.layout, session.scenario));
  view.setDiagnostics(session.diagnostics);
  picks = session.picks;
  player = new SessionPlayer(session, {speed: Number(transport?.querySelector('[data-control="speed"]').value || 4)});
  if (controls) controls.detach();
  controls = transport ? bindControls(transport, player) : null;
  player.on("frame", (frame) => {
    root.dataset.session = player.id;
    view.update(frame);
    if (controls) controls.update(frame);
    scheduleUrl(frame.step);
  });
  player.on("run", (message) => {
    root.dataset.session = player.id;
    view.setDiagnostics(message.diagnostics);
    picks = message.picks || [];
    refreshTimeline(player.id);
  });
  player.on("error", (message) => {
    if (message.field === "session_id") { load({...config, step: player.frame.step}); return; }
    toast(toastNode || document.querySelector(".toast"), message.message, "error");
    flashRefusal(message);
  });
  view.update(player.frame);
  if (controls) controls.update(player.frame);
  setManual(manualBox ? manualBox.checked || config.schedule === "manual" : false);
}

async function refreshTimeline(id) {
  try {
    const doc = await api.sessionTrace(id, {snapshots: false});
    view.setTimeline(timelineOf(doc));
  } catch (err) {
    view.setTimeline(null);
  }
}

function flashRefusal(message) {
  const match = /^(\S+) is waiting/.exec(message.message || "");
  const lane = match && root.querySelector(`.lane[data-agent="${CSS.escape(match[1])}"]`);
  if (lane) { lane.classList.remove("refused"); void lane.offsetWidth; lane.classList.add("refused"); }
}

function setManual(on) {
  if (manualBox) manualBox.checked = on;
  view.setManual(on);
}

// --------------------------------------------------------------------------- permalinks

/** The configuration that recreates this exact state: a manual schedule's moves, or the
 *  steps where the student chose the mover (picks), and the step. */
function stateConfig(step) {
  const manual = config.schedule === "manual";
  return {...config, step, picks: manual ? [] : picks, moves: manual ? picks.map((p) => p.agent) : []};
}

function scheduleUrl(step) {
  clearTimeout(urlTimer);
  urlTimer = setTimeout(() => {
    const query = configToQuery(stateConfig(step), {extra: embed ? embedExtras() : {}});
    const url = `${location.pathname}${query ? `?${query}` : ""}`;
    if (url !== location.pathname + location.search) history.replaceState(null, "", url);
    const full = document.getElementById("open-full");
    if (full) full.href = `/scenarios/${scenario.id}?${configToQuery(stateConfig(step))}`;
  }, 150);
}

function embedExtras() {
  const query = new URLSearchParams(location.search);
  const extras = {};
  for (const name of ["panels", "theme"]) if (query.get(name)) extras[name] = query.get(name);
  return extras;
}

function embedCode() {
  const dialog = document.getElementById("embed-dialog");
  const panels = [...dialog.querySelectorAll('input[name="panels"]:checked')].map((b) => b.value);
  const query = configToQuery(stateConfig(player ? player.frame.step : 0), {
    extra: panels.length && panels.length < 6 ? {panels: panels.join(",")} : {}});
  const src = `${location.origin}/embed/${scenario.id}${query ? `?${query}` : ""}`;
  const title = `${scenario.title}: mbarrier-inspector`;
  return `<iframe src="${src.replaceAll("&", "&amp;")}" title="${title}" width="100%" height="640" ` +
    'style="border:0" loading="lazy"></iframe>';
}

// ------------------------------------------------------------------------ the check button

async function runCheck() {
  const box = document.getElementById("check-result");
  const button = document.getElementById("check-button");
  box.hidden = false;
  box.replaceChildren(Object.assign(document.createElement("p"), {textContent: "Exploring every schedule…"}));
  button.disabled = true;
  try {
    const result = await api.check({scenario: scenario.id, params: config.params, bugs: config.bugs,
                                    max_states: 200000, timeout_s: 10});
    showCheck(box, result);
  } catch (err) {
    box.replaceChildren(Object.assign(document.createElement("p"), {
      className: "error", textContent: err.status === 404 ? "This server has no schedule checker."
        : `The check failed: ${err.field ? `${err.field}: ` : ""}${err.message}`}));
  } finally {
    button.disabled = false;
  }
}

function showCheck(box, result) {
  const verdicts = {safe: "✓ safe under every schedule", unsafe: "✗ unsafe: some schedule breaks it",
                    inconclusive: "? inconclusive: a limit stopped the search"};
  const items = result.violations.map((v) => {
    const failing = (v.trace.diagnostics.find((d) => d.kind === v.kind) || {}).step || v.steps;
    return h("li", {dataset: {violation: v.kind}}, h("b", {}, v.kind), ` in ${v.steps} steps `,
      h("button", {type: "button", onclick: () => loadCounterexample(v.trace, failing)},
        "Load this counterexample"));
  });
  box.replaceChildren(
    h("p", {class: `verdict verdict-${result.verdict}`, dataset: {verdict: result.verdict}},
      h("b", {}, verdicts[result.verdict] || result.verdict),
      ` — ${result.states_explored.toLocaleString("en-US")} states in ${result.elapsed_s.toFixed(2)} s`),
    items.length ? h("ul", {class: "violations"}, items) : null);
}

function loadCounterexample(trace, step) {
  const moves = trace.steps.map(moverOf);
  setManual(true);
  fillForm();
  load({...config, schedule: "manual", moves, picks: [], step});
}

// ------------------------------------------------------------------------------- wiring

if (form) {
  fillForm();
  form.elements.schedule.addEventListener("change", () => {
    form.querySelector(".seed").hidden = form.elements.schedule.value !== "random";
  });
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const next = readForm();
    if (next.schedule === "manual") setManual(true);
    load(next);
  });
}
if (manualBox) manualBox.addEventListener("change", () => setManual(manualBox.checked));
const copyLink = document.getElementById("copy-link");
if (copyLink) {
  copyLink.addEventListener("click", async () => {
    const ok = await copyText(location.href);
    toast(toastNode, ok ? "Link copied: it restores this exact state" : location.href);
  });
}
const compareLink = document.getElementById("compare-link");
if (compareLink) {
  compareLink.addEventListener("click", (event) => {
    const bugs = config.bugs.length ? config.bugs : scenario.bugs.slice(0, 1);
    const query = configToQuery({...config, bugs, picks: [], moves: [],
                                 schedule: config.schedule === "manual" ? "round_robin" : config.schedule,
                                 step: player ? player.frame.step : 0});
    compareLink.href = `/compare/${scenario.id}?${query}`;
    void event;
  });
}
const embedButton = document.getElementById("copy-embed");
if (embedButton) {
  const dialog = document.getElementById("embed-dialog");
  const area = document.getElementById("embed-code");
  const refresh = async () => { area.value = embedCode(); await copyText(area.value); };
  embedButton.addEventListener("click", async () => {
    dialog.showModal();
    await refresh();
    toast(toastNode, "Embed code copied");
  });
  dialog.addEventListener("change", refresh);
  document.getElementById("embed-copy-again").addEventListener("click", refresh);
}
const checkButton = document.getElementById("check-button");
if (checkButton) checkButton.addEventListener("click", runCheck);

load(config);
