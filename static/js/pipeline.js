// /p and /embed/p: an authored pipeline opened from a link. The fragment (share.js) carries the
// source, parameters, toggles, schedule, step and lesson notes; the page runs it through
// POST /api/v1/traces, plays the trace in memory and keeps the fragment at the cursor.
// A fragment that does not decode shows what was wrong and runs nothing.

import {bindCheck, bindShareBar, FragmentWriter, runTrace, validate, windowNote} from "./authored.js";
import {DocRun, sourceMarks} from "./docrun.js";
import {SourceEditor} from "./editor.js";
import {watchHeight} from "./learn.js";
import {PipelineForm} from "./pipeform.js";
import {decodeState, encodeState, FragmentError} from "./share.js";

const boot = JSON.parse(document.getElementById("boot").textContent);
const embed = boot.page === "pipeline-embed";
const root = document.getElementById("inspector");
const formNode = document.getElementById("pipe-config");
const sourceRoot = root.querySelector("[data-source-root]");

let state = null;   // the run shown: {source, title, params, bugs, schedule, seed, moves, callouts}
let seq = 0;

const viewer = sourceRoot ? new SourceEditor(sourceRoot, {label: "Pipeline source (read only)"}) : null;
const run = new DocRun(root, {
  onFrame: (frame, doc) => {
    if (viewer) {
      const {current, ran} = sourceMarks(doc, frame);
      viewer.setMarks(current, ran);
    }
    fragment.schedule();
    updateLinks();
  },
});
const form = formNode ? new PipelineForm(formNode, {onChange: () => markDirty()}) : null;
const fragment = new FragmentWriter(root, () => viewState());

function viewState() {
  return state ? {...state, step: run.step, predict: Boolean(run.predictor && run.predictor.on)} : null;
}

function markDirty() {
  if (!form || !state) return;
  const now = form.read();
  const dirty = JSON.stringify(now.params) !== JSON.stringify(state.params) ||
    [...now.bugs].sort().join() !== [...state.bugs].sort().join() || now.schedule !== state.schedule ||
    (now.schedule === "random" && now.seed !== state.seed);
  formNode.querySelector("[data-unapplied]").hidden = !dirty;
}

let linkTimer = null;
function updateLinks() {
  clearTimeout(linkTimer);
  linkTimer = setTimeout(async () => {
    const frag = await encodeState(viewState());
    const edit = root.querySelector("[data-edit-link]");
    if (edit) edit.href = `/author#${frag}`;
    const full = document.getElementById("open-full");
    if (full) full.href = `/p#${frag}`;
  }, 200);
}

function fail(message, {fragmentError = false} = {}) {
  const box = root.querySelector("[data-fragment-error]");
  box.hidden = false;
  box.replaceChildren(Object.assign(document.createElement("b"), {
    textContent: fragmentError ? "This link does not open: " : "This pipeline does not run: "}), message);
  if (fragmentError) root.dataset.fragment = "error";
  if (!state) root.classList.add("failed");
}

async function show(next, step) {
  const mine = ++seq;
  const formError = formNode ? formNode.querySelector(".form-error") : null;
  let doc;
  try {
    doc = await runTrace(next);
  } catch (err) {
    if (mine !== seq) return;
    const where = err.line ? ` (line ${err.line}${err.column ? `, column ${err.column}` : ""})` : "";
    const text = `${err.field && err.field !== "source" ? `${err.field}: ` : ""}${err.message}${where}`;
    if (formError && state) { formError.textContent = text; if (form) form.markField(err.field); } else fail(text);
    return;
  }
  if (mine !== seq) return;
  if (formError) formError.textContent = "";
  if (form) form.markField(null);
  state = next;
  const title = state.title || "A shared pipeline";
  for (const node of document.querySelectorAll("[data-title], [data-crumb]")) node.textContent = title;
  document.title = `${title} · mbarrier-inspector`;
  if (viewer && viewer.value !== state.source) viewer.value = state.source;
  windowNote(root.querySelector("[data-window-note]"), doc);
  run.show(doc, step);
  run.setCallouts(state.callouts);
  markDirty();
  root.dataset.ran = doc.scenario.source_sha256;
}

async function main() {
  let decoded;
  try {
    decoded = await decodeState(location.hash);
  } catch (err) {
    if (!(err instanceof FragmentError)) throw err;
    fail(`${err.message}. Nothing was run.`, {fragmentError: true});
    return;
  }
  if (decoded.schedule === "manual" && !decoded.moves.length) decoded.schedule = "round_robin";
  if (decoded.predict && run.predictor) run.predictor.setOn(true);
  if (form) {
    validate(decoded.source).then((info) => {
      form.set(info, decoded);
      formNode.hidden = false;
      markDirty();
    }, () => { formNode.hidden = true; });
  }
  await show(decoded, decoded.step);
}

if (formNode) {
  formNode.addEventListener("submit", (event) => {
    event.preventDefault();
    if (!state) return;
    const values = form.read();
    show({...state, ...values, moves: []}, 0);
  });
}
bindCheck(root, {state: () => state, show: (doc, step) => run.show(doc, step)});
bindShareBar(root, {linkPath: "/p", linkState: viewState, viewState, doc: () => run.doc,
                    predict: () => Boolean(run.predictor && run.predictor.on)});
if (embed) watchHeight();
// Another pipeline link pasted into this tab changes only the fragment: open it. An in-page
// link (the skip link's #main, a note's #anchor) leaves the state: put it back in the URL.
addEventListener("hashchange", () => {
  if (location.hash.startsWith("#v1.")) location.reload();
  else if (root.dataset.fragment !== "error") fragment.schedule(true);
});
main();
