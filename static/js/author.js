// /author: write a pipeline, see it run, pin lesson notes to its steps, share it.
// The editor validates as you type (debounced); "Run" (Ctrl+Enter) posts the source to
// POST /api/v1/traces and plays the whole trace in memory. The URL fragment always holds the
// editor's text, the form, the step and the notes (share.js), so a reload restores them.

import {bindCheck, bindShareBar, FragmentWriter, runTrace, validate, windowNote} from "./authored.js";
import {CalloutEditor} from "./callout-editor.js";
import {DocRun, sourceMarks} from "./docrun.js";
import {SourceEditor} from "./editor.js";
import {getJson} from "./learn.js";
import {PipelineForm} from "./pipeform.js";
import {decodeState, FragmentError} from "./share.js";

const boot = JSON.parse(document.getElementById("boot").textContent);
const root = document.getElementById("inspector");
const formNode = document.getElementById("pipe-config");
const formError = formNode.querySelector(".form-error");
const stateLine = root.querySelector("[data-editor-state]");
const titleInput = formNode.querySelector("[data-title-input]");
const EMPTY = `// A pipeline: parameters, memory, barriers, agents (see /reference/language).
param tiles = 2 in 1..100 "iterations";

tensor  tile[tiles] bytes 1024;
smem    smem bytes 1024 chunk 256;
barrier bar = 1;

agent thread {
    int phase = 0;
    for (int i = 0; i < tiles; ++i) {
        mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], 1024;
        cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [smem], [tile[i]], 1024, [bar];
        mbarrier.try_wait.parity.shared::cta.b64 p, [bar], phase;
        ld.shared x, [smem], tile[i];
        phase ^= 1;
    }
}
`;

let ran = null;           // the state of the run shown: {source, params, bugs, schedule, seed}
let validated = null;     // the source the form was generated from
let validateTimer = null;
let validateSeq = 0;
let runSeq = 0;
let restoreText = null;

const run = new DocRun(root, {
  onFrame: (frame, doc) => {
    drawMarks(frame, doc);
    notes.update(frame.step);
    fragment.schedule();
  },
});
const editor = new SourceEditor(root.querySelector("[data-editor-root]"), {
  onInput: () => { scheduleValidate(); markDirty(); fragment.schedule(); },
  onRun: () => runNow(),
  message: root.querySelector("[data-error]"),
});
const form = new PipelineForm(formNode, {onChange: () => { markDirty(); fragment.schedule(); }});
const notes = new CalloutEditor(root.querySelector("[data-callout-editor]"), {
  getStep: () => run.step,
  seek: (step) => run.seek(step),
  onChange: (list) => { run.setCallouts(list); fragment.schedule(); },
});
const fragment = new FragmentWriter(root, () => editorState());

/** What "Copy link" and the URL carry: the editor as it is. */
function editorState() {
  return {source: editor.value, title: titleInput.value.trim(), ...form.read(), moves: [],
          step: run.step, callouts: notes.callouts};
}

/** The run shown (the inspector link, the embed and the lesson file carry it). */
function viewState() {
  if (!ran) return null;
  return {...ran, title: titleInput.value.trim(), step: run.step, callouts: notes.callouts};
}

function drawMarks(frame, doc) {
  // The lines are the run's: once the text is edited they may have moved, so they go.
  if (ran && editor.value === ran.source) {
    const {current, ran: last} = sourceMarks(doc, frame);
    editor.setMarks(current, last);
  } else {
    editor.setMarks(null, null);
  }
}

function same(a, b) { return JSON.stringify(a) === JSON.stringify(b); }

function markDirty() {
  const now = {source: editor.value, ...form.read()};
  const dirty = !ran || now.source !== ran.source || !same(now.params, ran.params) ||
    !same([...now.bugs].sort(), [...ran.bugs].sort()) || now.schedule !== ran.schedule ||
    (now.schedule === "random" && now.seed !== ran.seed);
  formNode.querySelector("[data-unapplied]").hidden = !dirty;
  root.classList.toggle("dirty", dirty);
  if (ran && editor.value !== ran.source) drawMarks({step: run.step}, run.doc);
}

// -------------------------------------------------------------------------- validation

function scheduleValidate() {
  clearTimeout(validateTimer);
  stateLine.textContent = "Checking…";
  validateTimer = setTimeout(() => check(editor.value), 300);
}

/** Validate `source`: mark its error, or regenerate the form from what it declares. */
async function check(source, values = null) {
  const seq = ++validateSeq;
  try {
    const info = await validate(source);
    if (seq !== validateSeq) return info;
    editor.setError(null);
    form.set(info, values);
    validated = source;
    const agents = info.agents.map((a) => a.name).join(", ");
    stateLine.textContent = `✓ Compiles: ${info.agents.length} agent${info.agents.length === 1 ? "" : "s"} (${agents}), ` +
      `${info.barriers.length} barrier${info.barriers.length === 1 ? "" : "s"}, ${info.stages.length} stage${info.stages.length === 1 ? "" : "s"}.`;
    markDirty();
    return info;
  } catch (err) {
    if (seq !== validateSeq) return null;
    if (err.status === 0 || err.status >= 500) {
      stateLine.textContent = `Could not check the source: ${err.message}`;
      return null;
    }
    editor.setError(located(err, source));
    form.markField(err.field && err.field !== "source" ? err.field : null);
    stateLine.textContent = "✗ Does not compile: see the message above.";
    return null;
  }
}

/** An error at its line: a parameter's value (`chunk_bytes` = 1000) is marked where the text
 *  declares that parameter, and the message names it. */
function located(err, source) {
  if (err.line || !err.field || err.field === "source") {
    return {line: err.line, column: err.column, msg: err.message, hint: err.hint};
  }
  const lines = source.split("\n");
  const at = lines.findIndex((text) => new RegExp(`^\\s*param\\s+${err.field}\\b`).test(text));
  const value = form.read().params[err.field];
  return {line: at >= 0 ? at + 1 : null, column: at >= 0 ? lines[at].indexOf(err.field) + 1 : null,
          msg: `parameter ${err.field}${value !== undefined ? ` = ${value}` : ""}: ${err.message}`, hint: err.hint};
}

// -------------------------------------------------------------------------------- running

async function runNow(step = 0) {
  clearTimeout(validateTimer);
  const seq = ++runSeq;
  const source = editor.value;
  if (validated !== source) {
    const info = await check(source);
    if (!info || seq !== runSeq) return;
  }
  const state = {source, ...form.read(), moves: []};
  formError.textContent = "Running…";
  form.markField(null);
  let doc;
  try {
    doc = await runTrace(state);
  } catch (err) {
    if (seq !== runSeq) return;
    formError.textContent = `${err.field && err.field !== "source" ? `${err.field}: ` : ""}${err.message}`;
    if (err.line || (err.field && err.field !== "source")) editor.setError(located(err, source));
    form.markField(err.field);
    return;
  }
  if (seq !== runSeq) return;
  formError.textContent = "";
  // A run replaces what a link that did not open left on the page.
  root.classList.remove("failed");
  root.querySelector("[data-fragment-error]").hidden = true;
  ran = {source, params: state.params, bugs: state.bugs, schedule: state.schedule,
         seed: state.schedule === "random" ? state.seed : 0, moves: []};
  windowNote(root.querySelector("[data-window-note]"), doc);
  run.show(doc, step);
  run.setCallouts(notes.callouts);
  markDirty();
  root.dataset.ran = doc.scenario.source_sha256;
}

// --------------------------------------------------------------------------- start from

/** Load the chosen built-in (with its lesson's notes when `notes`) or the empty pipeline. */
async function loadStart({notes: withNotes = true} = {}) {
  const id = root.querySelector("[data-start-from]").value;
  editor.area.readOnly = true;  // what is typed while the built-in loads would be overwritten
  try {
    await loadSource(id, withNotes);
  } finally {
    editor.area.readOnly = false;
  }
}

async function loadSource(id, withNotes) {
  let source = EMPTY;
  let callouts = [];
  if (!id && titleInput.dataset.auto === "true") titleInput.value = "";
  if (id) {
    const scenario = await getJson(`/api/v1/scenarios/${encodeURIComponent(id)}`);
    source = scenario.source;
    try {
      // The built-in lesson's notes for the correct run pin to the same steps of this text.
      if (!withNotes) throw new Error("no notes asked for");
      const lesson = await getJson(`/lessons/${encodeURIComponent(id)}`);
      callouts = lesson.callouts.filter((c) => !(c.bugs || []).length).map((c) => ({step: c.step, text: c.text}));
    } catch (err) { callouts = []; }
    if (!titleInput.value || titleInput.dataset.auto === "true") {
      titleInput.value = scenario.title;
      titleInput.dataset.auto = "true";
    }
  }
  if (editor.value.trim() && editor.value !== source) {
    restoreText = {source: editor.value, callouts: notes.callouts};
    root.querySelector("[data-restore]").hidden = false;
  }
  editor.value = source;
  notes.set(callouts);
  await check(source, {params: {}, bugs: [], schedule: "round_robin", seed: 0});
  await runNow(0);
}

// -------------------------------------------------------------------------------- wiring

formNode.addEventListener("submit", (event) => { event.preventDefault(); runNow(); });
document.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && (event.ctrlKey || event.metaKey) && !event.target.closest("[data-editor-root]")) {
    event.preventDefault();
    runNow();
  }
});
titleInput.addEventListener("input", () => { titleInput.dataset.auto = "false"; fragment.schedule(); });
root.querySelector("[data-load-start]").addEventListener("click", () => loadStart());
root.querySelector("[data-clear-callouts]").addEventListener("click", () => {
  notes.set([]);
  run.setCallouts([]);
  fragment.schedule();
});
root.querySelector("[data-restore]").addEventListener("click", async (event) => {
  if (!restoreText) return;
  editor.value = restoreText.source;
  notes.set(restoreText.callouts);
  restoreText = null;
  event.target.hidden = true;
  await check(editor.value);
  await runNow(0);
});
bindShareBar(root, {linkPath: "/author", linkState: editorState, viewState, doc: () => run.doc});
bindCheck(root, {state: () => ran, show: (doc, step) => run.show(doc, step)});

function showFragmentError(message) {
  const box = root.querySelector("[data-fragment-error]");
  box.hidden = false;
  box.replaceChildren(Object.assign(document.createElement("b"), {textContent: "This link does not open: "}),
    `${message}. Nothing was run. `, Object.assign(document.createElement("a"), {href: "/author", textContent: "Start a new pipeline"}));
}

async function main() {
  if (location.hash.length > 1) {
    let state;
    try {
      state = await decodeState(location.hash);
    } catch (err) {
      if (!(err instanceof FragmentError)) throw err;
      showFragmentError(err.message);
      root.dataset.fragment = "error";
      root.classList.add("failed");
      return;
    }
    editor.value = state.source;
    titleInput.value = state.title;
    notes.set(state.callouts);
    if (state.schedule === "manual") {
      formError.textContent = "This link asks for a manual schedule, which needs a session: showing round robin.";
    }
    const info = await check(state.source, state);
    if (info) await runNow(state.step);
    return;
  }
  // A first visit starts from a built-in's text; its notes come with an explicit "Load".
  root.querySelector("[data-start-from]").value = boot.start || "";
  await loadStart({notes: false});
}

// Another pipeline link pasted into this tab changes only the fragment: open it. An in-page
// link (the skip link's #main, a note's #anchor) leaves the state: put it back in the URL.
addEventListener("hashchange", () => {
  if (location.hash.startsWith("#v1.")) location.reload();
  else if (root.dataset.fragment !== "error") fragment.schedule(true);
});
main();
