// The inspector page (/scenarios/{id}) and its chrome-less twin (/embed/{id}).
// Boot: read the configuration from the URL, create a session, open its WebSocket, draw every
// frame it sends. The URL always holds the current state (a permalink), so reload restores it.

import {CalloutCaption, calloutsFor, toursOf} from "./callouts.js";
import {bindControls, bindKeys, copyText, toast} from "./controls.js";
import {h} from "./dom.js";
import {downloadTimelineSvg, getJson, permalinkProblems, watchHeight} from "./learn.js";
import {makeLayout, timelineOf} from "./layout.js";
import {SessionPlayer} from "./player.js";
import {Predictor} from "./predict.js";
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

const startQuery = new URLSearchParams(location.search);
let config = configFromQuery(scenario, location.search);
let player = null;
let controls = null;
let keys = null;
let picks = [];
let urlTimer = null;
let urlLast = 0;
let lesson = {callouts: []};
let runDiagnostics = [];
const problems = permalinkProblems(scenario, location.search);
const view = new RunView(root.querySelector('[data-run="main"]'), {
  onSeek: (step) => player && player.seek(step),
  onMove: (agent) => player && player.step(agent),
});
const caption = new CalloutCaption(root.querySelector("[data-callout]"), {
  onSeek: (step) => player && player.seek(step),
  onSet: (list) => view.setCallouts(list.map((c) => c.step)),
});
const predictor = new Predictor(root.querySelector("[data-predict-panel]"), {
  toggle: root.querySelector("[data-predict-toggle]"),
  scoreNode: root.querySelector("[data-predict-score]"),
  peek: async (step) => {
    if (!player || step > player.frame.total_steps) return null;
    const at = await getJson(`/api/v1/sessions/${player.id}/snapshots/${step}`);
    return {record: at.record, snapshot: at.snapshot};
  },
  advance: () => player && player.step(),
  onChange: () => { if (player) { view.update(player.frame); scheduleUrl(player.frame.step, true); } },
});
// Challenge mode: its module loads when "Challenge: break it" is first pressed.
const challengeBox = document.getElementById("challenge");
let challenge = null;
document.querySelector("[data-challenge-start]")?.addEventListener("click", async () => {
  if (!challenge && challengeBox) {
    const {Challenge} = await import("./challenge.js");
    challenge = new Challenge(challengeBox, {
      scenario,
      start: (bugs, params) => {
        setManual(true);
        const next = {...config, params, bugs, schedule: "manual", moves: [], picks: [], step: 0};
        fillForm(next);
        return load(next, {push: true});
      },
      loadCounterexample: (trace, step) => loadCounterexample(trace, step),
    });
  }
  if (challenge) challenge.begin();
});

// ------------------------------------------------------------------------ the config form

function fillForm(shown = config) {
  if (!form) return;
  for (const [name, spec] of Object.entries(scenario.parameters)) {
    form.elements[name].value = shown.params[name] ?? spec.default;
  }
  form.elements.schedule.value = shown.schedule;
  form.elements.seed.value = shown.seed;
  form.querySelector(".seed").hidden = shown.schedule !== "random";
  for (const box of form.querySelectorAll('input[name="bugs"]')) box.checked = shown.bugs.includes(box.value);
  markUnapplied();
}

/** A ticked but unapplied toggle (or any edited field) is marked until Apply. */
function markUnapplied() {
  if (!form) return;
  const next = readForm();
  const same = (a, b) => JSON.stringify(a) === JSON.stringify(b);
  // Compare what runs, not how it was written: a parameter given at its default is unchanged.
  const effective = (params) => Object.entries(scenario.parameters)
    .map(([name, spec]) => Number(params[name] ?? spec.default));
  let dirty = !same(effective(next.params), effective(config.params)) ||
    next.schedule !== config.schedule ||
    (next.schedule === "random" && next.seed !== (config.seed || 0)) ||
    !same([...next.bugs].sort(), [...config.bugs].sort());
  for (const box of form.querySelectorAll('input[name="bugs"]')) {
    const pending = box.checked !== config.bugs.includes(box.value);
    box.closest("label").classList.toggle("pending", pending);
    box.closest("label").dataset.pending = pending ? (box.checked ? "on" : "off") : "";
  }
  for (const [name, spec] of Object.entries(scenario.parameters)) {
    const input = form.elements[name];
    const pending = Number(input.value) !== (config.params[name] ?? spec.default);
    input.closest("label").classList.toggle("pending", pending);
  }
  if (!form.checkValidity()) dirty = true;
  form.classList.toggle("dirty", dirty);
  form.querySelector("[data-unapplied]").hidden = !dirty;
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

async function load(next, {push = false} = {}) {
  let session;
  try {
    session = await api.createSession(next);
  } catch (err) {
    if (!(err instanceof ApiError)) throw err;
    if (!player && (err.field === "step" || err.field === "picks" || err.field === "moves")) {
      problems.push(`${err.field}: ${err.message}; showing the run from step 0 instead`);
      showProblems();
      return load({...next, step: 0, picks: [], moves: []});
    }
    if (!player && err.field && next.params[err.field] !== undefined) {
      problems.push(`${err.field}=${next.params[err.field]}: ${err.message}; using the default instead`);
      showProblems();
      const params = {...next.params};
      delete params[err.field];
      return load({...next, params});
    }
    if (!player && ["bugs", "schedule", "seed"].includes(err.field)) {
      const fallback = err.field === "bugs" ? {bugs: []} : {schedule: "round_robin", seed: 0, moves: []};
      problems.push(`${err.field}: ${err.message}; ${err.field === "bugs" ? "no bug toggles" : "a round-robin schedule"} instead`);
      showProblems();
      return load({...next, ...fallback});
    }
    showFormError(err);
    return;
  }
  showFormError(null);
  if (push && player) history.pushState(null, "", urlFor(next, next.step || 0));
  config = next;
  fillForm();
  const checkBox = document.getElementById("check-result");
  if (checkBox) { checkBox.hidden = true; checkBox.replaceChildren(); }
  if (player) player.close();
  root.dataset.session = session.id;
  timelineDoc = null;
  timelineGen += 1;
  view.setLayout(makeLayout(session.layout, session.scenario));
  setDiagnostics(session.diagnostics, session);
  picks = session.picks;
  caption.set(calloutsFor(lesson, config));
  const speedBox = transport?.querySelector('[data-control="speed"]');
  const speed = Number(startQuery.get("speed")) || Number(speedBox?.value || 4);
  player = new SessionPlayer(session, {speed});
  if (controls) controls.detach();
  if (keys) keys.detach();
  const step = () => predictor.step(player.frame);
  controls = transport ? bindControls(transport, player, {step}) : null;
  keys = transport ? null : bindKeys({step, back: () => player.back(), play: () => player.toggle(),
                                      reset: () => player.home(), end: () => player.end()});
  player.on("frame", (frame) => {
    root.dataset.session = player.id;
    // Local play's own measure: frames drawn, on time (within 100 ms of due), the worst delay.
    root.dataset.playFrames = player.stats.frames;
    root.dataset.playOnTime = player.stats.onTime;
    predictor.follow(frame);
    view.update(frame);
    if (controls) controls.update({...frame, diagnostics: runDiagnostics.length});
    caption.update(frame.step);
    if (challenge) challenge.update(frame, runDiagnostics);
    scheduleUrl(frame.step);
  });
  player.on("run", (message) => {
    root.dataset.session = player.id;
    setDiagnostics(message.diagnostics, message);
    picks = message.picks || [];
    refreshTimeline(player.id);
  });
  player.on("error", (message) => {
    if (message.field === "session_id") { load({...config, step: player.frame.step}); return; }
    toast(toastNode || document.querySelector(".toast"), message.message, "error");
    flashRefusal(message);
  });
  view.update(player.frame);
  if (controls) controls.update({...player.frame, diagnostics: runDiagnostics.length});
  caption.update(player.frame.step);
  setManual(manualBox ? manualBox.checked || config.schedule === "manual" : false);
  if (challenge) challenge.update(player.frame, runDiagnostics);
}

function setDiagnostics(list, session) {
  runDiagnostics = list || [];
  view.setDiagnostics(runDiagnostics);
  const limit = document.getElementById("step-limit-note") || null;
  if (limit) limit.remove();
  if (session && session.status === "step_limit") {
    const note = h("p", {class: "notice", id: "step-limit-note", role: "status", dataset: {stepLimit: session.total_steps}},
      `This run stopped at the step limit: ${session.total_steps.toLocaleString("en-US")} steps is as far as one run goes. ` +
      "The pipeline did not finish, fail or deadlock there; fewer tiles show the whole run.");
    root.querySelector('[data-run="main"]').before(note);
  }
}

function showProblems() {
  const box = document.getElementById("permalink-notice");
  if (!box || !problems.length) return;
  box.hidden = false;
  box.replaceChildren(h("b", {}, "This link had problems: "),
    h("ul", {}, problems.map((p) => h("li", {dataset: {problem: ""}}, p))),
    "Everything else in the link was kept.");
}

let timelineDoc = null;   // the run's steps without snapshots, as the timeline last drew them
let timelineGen = 0;      // a new run (load) starts a new generation: older answers are dropped
let timelineFrom = null;  // the earliest step a move changed since the last fetch began
let timelineId = null;    // the session to fetch: each move names a new one
let timelineBusy = false;

/** The timeline after the run changed. A move (a pick, a manual step) changes the run from the
 *  cursor's step on: the steps before it are kept and only the rest is fetched (a challenge's
 *  114 moves re-fetched the whole trace each time: 3.6 MB). One fetch at a time: moves made
 *  while it is out are gathered into the next one, from the earliest step they changed. */
async function refreshTimeline(id) {
  const at = player ? player.frame.step : 1;
  timelineFrom = timelineFrom === null ? at : Math.min(timelineFrom, at);
  timelineId = id;
  if (timelineBusy) return;
  timelineBusy = true;
  try {
    while (timelineFrom !== null) {
      const gen = timelineGen;
      const base = timelineDoc;
      const from = base ? Math.max(1, Math.min(timelineFrom, base.total_steps + 1)) : 1;
      timelineFrom = null;
      try {
        const doc = await api.sessionTrace(timelineId, {from, snapshots: false});
        if (gen !== timelineGen) continue;
        const whole = from === 1 ? doc : {...doc, initial: base.initial, window: undefined,
                                          steps: base.steps.filter((s) => s.step < from).concat(doc.steps)};
        timelineDoc = {...whole, diagnostics: runDiagnostics};
        view.setTimeline(timelineOf(timelineDoc));
      } catch (err) {
        if (gen !== timelineGen) continue;
        timelineDoc = null;
        view.setTimeline(null);
      }
    }
  } finally {
    timelineBusy = false;
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

/** What the URL carries beside the run: manual mode, speed, prediction mode (and, in an
 *  embed, its panels and theme). */
function viewExtras() {
  const extras = {};
  if (embed) {
    const query = new URLSearchParams(location.search);
    for (const name of ["panels", "theme"]) if (query.get(name)) extras[name] = query.get(name);
  }
  if (manualBox && manualBox.checked && config.schedule !== "manual") extras.manual = "1";
  const speed = player ? player.frame.speed : Number(startQuery.get("speed")) || 4;
  if (speed && speed !== 4) extras.speed = String(speed);
  if (predictor.on) extras.predict = "1";
  return extras;
}

function urlFor(cfg, step) {
  const keep = cfg === config ? stateConfig(step) : {...cfg, step};
  const query = configToQuery(keep, {extra: viewExtras()});
  return `${location.pathname}${query ? `?${query}` : ""}`;
}

/** Keep the URL at the cursor: at most every 300 ms while playing, and always the last step. */
function scheduleUrl(step, now = false) {
  clearTimeout(urlTimer);
  const write = () => {
    urlLast = Date.now();
    const url = urlFor(config, step);
    if (url !== location.pathname + location.search) history.replaceState(null, "", url);
    const full = document.getElementById("open-full");
    if (full) full.href = `/scenarios/${scenario.id}?${configToQuery(stateConfig(step))}`;
    updateDownloads(step);
  };
  if (now || Date.now() - urlLast > 300) write();
  else urlTimer = setTimeout(write, 120);
}

function currentUrl() {
  return `${location.origin}${urlFor(config, player ? player.frame.step : config.step || 0)}`;
}

function embedSrc() {
  const dialog = document.getElementById("embed-dialog");
  const panels = [...dialog.querySelectorAll('input[name="panels"]:checked')].map((b) => b.value);
  const extra = panels.length && panels.length < 6 ? {panels: panels.join(",")} : {};
  if (predictor.on) extra.predict = "1";
  const query = configToQuery(stateConfig(player ? player.frame.step : 0), {extra});
  return `${location.origin}/embed/${scenario.id}${query ? `?${query}` : ""}`;
}

// ------------------------------------------------------------------------ the check button

/** "Check every schedule": its module (the request and the verdict) loads on first use. */
async function runCheck() {
  const {runCheck: run} = await import("./checkview.js");
  return run({scenario, config, box: document.getElementById("check-result"),
              button: document.getElementById("check-button"), load: loadCounterexample});
}

function loadCounterexample(trace, step) {
  const moves = trace.steps.map(moverOf);
  setManual(true);
  const next = {...config, schedule: "manual", moves, picks: [], step};
  fillForm(next);
  return load(next, {push: true});
}

// ------------------------------------------------------------------------------ downloads

/** The /traces query of the state shown (picks become a manual schedule of every mover). */
async function traceQueryNow() {
  const st = stateConfig(player ? player.frame.step : 0);
  if (st.schedule !== "manual" && st.picks.length && player) {
    const doc = await api.sessionTrace(player.id, {snapshots: false, to: player.frame.total_steps});
    return {...st, schedule: "manual", moves: doc.steps.map(moverOf), picks: []};
  }
  return st;
}

function traceParams(st) {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(st.params || {})) query.set(name, value);
  if (st.bugs.length) query.set("bugs", st.bugs.join(","));
  if (st.schedule !== "round_robin") query.set("schedule", st.schedule);
  if (st.schedule === "random") query.set("seed", st.seed || 0);
  if (st.schedule === "manual") query.set("moves", st.moves.join(","));
  return query;
}

function updateDownloads(step) {
  const json = document.getElementById("download-json");
  if (!json || !player) return;
  json.href = `/api/v1/sessions/${player.id}/trace?from=1&snapshots=true`;
  json.download = `${scenario.id}${config.bugs.length ? `-${config.bugs.join("-")}` : ""}.trace.json`;
  void step;
}

/** Past this many characters a download's query goes in a POST body: a manual schedule of
 *  thousands of moves is past the server's URL limit (64 KiB) and many proxies' (8 KiB). */
const LONGEST_URL = 8000;

/** POST /traces/{id}/perfetto with the query as its body (docs/perfetto.md); the file is
 *  saved under the name the server gives it. */
async function downloadPosted(st) {
  const body = {...(st.params || {}), bugs: st.bugs, schedule: st.schedule};
  if (st.schedule === "random") body.seed = st.seed || 0;
  if (st.schedule === "manual") body.moves = st.moves;
  const response = await fetch(`/api/v1/traces/${scenario.id}/perfetto`, {
    method: "POST", headers: {"content-type": "application/json"}, body: JSON.stringify(body)});
  if (!response.ok) {
    toast(toastNode, `The Perfetto file could not be made (${response.status})`, "error");
    return;
  }
  const named = /filename="([^"]+)"/.exec(response.headers.get("content-disposition") || "");
  const href = URL.createObjectURL(await response.blob());
  const a = h("a", {href, download: named ? named[1] : `${scenario.id}.perfetto.json`});
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(href), 10_000);
}

async function downloadVia(kind) {
  const st = await traceQueryNow();
  const query = traceParams(st);
  let url;
  if (kind === "perfetto") {
    url = `/api/v1/traces/${scenario.id}/perfetto?${query}`;
    if (url.length > LONGEST_URL) return downloadPosted(st);
  } else {
    if (st.step) query.set("step", st.step);
    if (predictor.on) query.set("predict", "1");
    url = `/export/${scenario.id}?${query}`;
  }
  const a = h("a", {href: url, download: ""});
  document.body.append(a);
  a.click();
  a.remove();
}

// ------------------------------------------------------------------------------- wiring

if (form) {
  fillForm();
  form.elements.schedule.addEventListener("change", () => {
    form.querySelector(".seed").hidden = form.elements.schedule.value !== "random";
  });
  form.addEventListener("input", markUnapplied);
  form.addEventListener("change", markUnapplied);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const next = readForm();
    if (next.schedule === "manual") setManual(true);
    load(next, {push: true});
  });
}
// Back and Forward walk the configurations applied (Apply pushes a history entry).
addEventListener("popstate", () => {
  const next = configFromQuery(scenario, location.search);
  fillForm(next);
  load(next);
});
if (manualBox) {
  manualBox.checked = startQuery.get("manual") === "1";
  manualBox.addEventListener("change", () => { setManual(manualBox.checked); if (player) scheduleUrl(player.frame.step, true); });
}
const copyLink = document.getElementById("copy-link");
if (copyLink) {
  copyLink.addEventListener("click", async () => {
    const url = currentUrl();
    const ok = await copyText(url);
    toast(toastNode, ok ? "Link copied: it restores this exact state" : url);
  });
}
document.getElementById("download-svg")?.addEventListener("click", () => {
  const svgNode = root.querySelector('[data-run="main"] .timeline svg');
  if (svgNode) downloadTimelineSvg(svgNode, `${scenario.id}-timeline.svg`);
});
document.getElementById("download-perfetto")?.addEventListener("click", (event) => { event.preventDefault(); downloadVia("perfetto"); });
document.getElementById("download-lesson")?.addEventListener("click", (event) => { event.preventDefault(); downloadVia("lesson"); });
if (boot.features.perfetto) document.getElementById("download-perfetto")?.removeAttribute("hidden");
if (embed) watchHeight();
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
  // "Copy embed code" loads its module (the snippet, the height measure) on first use only.
  let loaded = null;
  embedButton.addEventListener("click", async () => {
    loaded = loaded || import("./embedcode.js").then(({bindEmbedDialog}) => bindEmbedDialog({
      dialog: document.getElementById("embed-dialog"), src: embedSrc, title: `${scenario.title}: mbarrier-inspector`,
      copy: copyText, done: () => toast(toastNode, "Embed code copied")}));
    (await loaded).open();
  });
}
const checkButton = document.getElementById("check-button");
if (checkButton) checkButton.addEventListener("click", runCheck);

async function loadLesson() {
  try { lesson = await getJson(`/lessons/${encodeURIComponent(scenario.id)}`); } catch (err) { lesson = {callouts: []}; }
  caption.set(calloutsFor(lesson, config));
  if (player) caption.update(player.frame.step);
  const tours = root.querySelector("[data-tours]");
  if (tours && !embed) {
    tours.replaceChildren(...toursOf(lesson).map((t) => h("a", {
      class: "button tour-link", dataset: {tour: t.bugs.join(",") || "correct"},
      href: `/scenarios/${scenario.id}?${configToQuery({params: {}, bugs: t.bugs, schedule: "round_robin", step: t.first})}`,
    }, t.bugs.length ? `Guided tour: with ${t.bugs.join(", ")}` : "Guided tour: the correct run")));
  }
}

showProblems();
if (startQuery.get("predict") === "1") predictor.setOn(true);
loadLesson();
load(config);
