// What the pages of authored pipelines share (/author, /p, /embed/p): the API calls
// (validate, run, export), the URL fragment kept at the state shown, and the share bar (links,
// embed code, the lesson file, the JSON trace).

import {copyText, toast} from "./controls.js";
import {h} from "./dom.js";
import {getJson} from "./learn.js";
import {encodeState, normalState} from "./share.js";

/** The longest stretch of a run held in the page (its snapshots travel with it). */
export const WINDOW_STEPS = 2000;  // what POST /traces holds in one window with snapshots

const post = (path, body) => getJson(path, {method: "POST", body: JSON.stringify(body)});

/** `POST /author/validate` (the API's validate, with a text that does not compile as a 200,
 *  so typing logs no 4xx); a thrown error carries `.line`, `.column`, `.hint`. */
export async function validate(source) {
  let answer;
  try {
    answer = await post("/author/validate", {source});
  } catch (err) {
    throw sourceError(err);
  }
  if (answer && answer.valid === false) {
    const first = answer.detail[0] || {};
    const err = new Error(first.msg || "this pipeline does not compile");
    err.status = 422;
    err.field = first.loc ? first.loc[first.loc.length - 1] : null;
    err.body = answer;
    throw sourceError(err);
  }
  return answer;
}

function sourceError(err) {
  const first = err.body && Array.isArray(err.body.detail) ? err.body.detail[0] : null;
  if (first) {
    err.line = first.line || null;
    err.column = first.column || null;
    err.hint = first.hint || null;
    err.limit = first.limit || null;
  }
  if (err.status === 413) err.message = "this source is over 64 KiB, the most a pipeline may be";
  return err;
}

/** The run of a state: `POST /api/v1/traces` with snapshots, its first WINDOW_STEPS steps. */
export async function runTrace(state) {
  const body = {source: state.source, params: state.params || {}, bugs: state.bugs || [],
                schedule: state.schedule || "round_robin", snapshots: true, to: WINDOW_STEPS};
  if (body.schedule === "random") body.seed = state.seed || 0;
  if (body.schedule === "manual") body.moves = state.moves || [];
  try {
    return await post("/api/v1/traces", body);
  } catch (err) {
    throw sourceError(err);
  }
}

/** "Check every schedule" for the pipeline shown: `POST /check` with its text; each violation's
 *  shortest schedule is a whole trace document, played in the page by `show(doc, step)`. */
export function bindCheck(root, {state, show}) {
  const button = root.querySelector("[data-check]");
  const box = root.querySelector("[data-check-result]");
  if (!button || !box) return;
  const say = (...nodes) => { box.hidden = false; box.replaceChildren(...nodes); };
  button.addEventListener("click", async () => {
    const s = state();
    if (!s) { say(h("p", {}, "Run the pipeline first.")); return; }
    say(h("p", {}, "Exploring every schedule…"));
    button.disabled = true;
    try {
      const result = await post("/api/v1/check", {source: s.source, params: s.params || {},
                                                  bugs: s.bugs || [], max_states: 200000,
                                                  timeout_s: 10});
      const verdicts = {safe: "✓ safe under every schedule",
                        unsafe: "✗ unsafe: some schedule breaks it",
                        inconclusive: "? inconclusive: a limit stopped the search"};
      const items = result.violations.map((v) => {
        const at = (v.trace.diagnostics.find((d) => d.kind === v.kind) || {}).step || v.steps;
        return h("li", {dataset: {violation: v.kind}}, h("b", {}, v.kind), ` in ${v.steps} steps `,
          h("button", {type: "button", onclick: () => show(v.trace, at)}, "Play this schedule"));
      });
      const cut = result.complete === false
        ? h("p", {class: "stopped-by"}, `A limit (${result.stopped_by}) stopped the search: other kinds may be reachable.`)
        : null;
      say(...[h("p", {class: `verdict verdict-${result.verdict}`, dataset: {verdict: result.verdict}},
                h("b", {}, verdicts[result.verdict] || result.verdict),
                ` — ${result.states_explored.toLocaleString("en-US")} states in ${result.elapsed_s.toFixed(2)} s`),
              cut, items.length ? h("ul", {class: "violations"}, items) : null].filter(Boolean));
    } catch (err) {
      say(h("p", {class: "error"}, `The check failed: ${err.field ? `${err.field}: ` : ""}${err.message}`));
    } finally {
      button.disabled = false;
    }
  });
}

/** `POST /export` for a state: the lesson file, downloaded. */
export async function downloadLesson(state, {panels = [], predict = false} = {}) {
  const body = {source: state.source, params: state.params || {}, bugs: state.bugs || [],
                schedule: state.schedule || "round_robin", step: state.step || 0,
                callouts: state.callouts || [], panels, predict};
  if (state.title) body.title = state.title;
  if (body.schedule === "random") body.seed = state.seed || 0;
  if (body.schedule === "manual") body.moves = state.moves || [];
  const response = await fetch("/export", {method: "POST", headers: {"content-type": "application/json"},
                                            body: JSON.stringify(body)});
  if (!response.ok) {
    let message = response.statusText;
    try {
      const detail = (await response.json()).detail;
      message = Array.isArray(detail) ? `${(detail[0].loc || []).slice(-1)[0] || ""}: ${detail[0].msg}` : String(detail);
    } catch (err) { /* keep the status text */ }
    throw new Error(message);
  }
  const name = (/filename="([^"]+)"/.exec(response.headers.get("content-disposition") || "") || [])[1] || "lesson.html";
  saveBlob(await response.blob(), name);
  return name;
}

export function saveBlob(blob, name) {
  const url = URL.createObjectURL(blob);
  const a = h("a", {href: url, download: name});
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 5000);
}

/** Keeps `location.hash` at `state()`: at most every 300 ms, always the last; the root says
 *  `data-fragment="ready"` once the URL holds the latest state (tests and "Copy link" wait). */
export class FragmentWriter {
  constructor(root, state) {
    this.root = root;
    this.state = state;
    this.timer = null;
    this.seq = 0;
    this.last = 0;
  }

  schedule(now = false) {
    clearTimeout(this.timer);
    this.root.dataset.fragment = "pending";
    const wait = now ? 0 : Math.max(0, 300 - (Date.now() - this.last));
    this.timer = setTimeout(() => this.write(), wait);
  }

  async write() {
    const seq = ++this.seq;
    this.last = Date.now();
    const state = this.state();
    if (!state) return;
    const fragment = await encodeState(state);
    if (seq !== this.seq) return;
    if (location.hash !== `#${fragment}`) history.replaceState(null, "", `${location.pathname}${location.search}#${fragment}`);
    this.root.dataset.fragment = "ready";
  }
}

/** A link to `path` carrying `state`. */
export async function linkTo(path, state) {
  return `${location.origin}${path}#${await encodeState(state)}`;
}

/** The `<iframe>` for /embed/p with `state`, and the host page's snippet that sizes it. */
export async function embedCode(state, panels) {
  const query = panels.length && panels.length < 6 ? `?panels=${panels.join(",")}` : "";
  const src = `${location.origin}/embed/p${query}#${await encodeState(state)}`;
  const title = `${state.title || "A pipeline"}: mbarrier-inspector`.replace(/[&<>"]/g, "");
  return `<iframe src="${src.replaceAll("&", "&amp;")}" title="${title}" width="100%" height="480" ` +
    'style="border:0" loading="lazy" data-mbarrier-inspector></iframe>\n' +
    `<script>addEventListener("message",function(e){if(e.origin!=="${location.origin}"||!e.data||e.data.type!=="mbarrier-inspector:height")return;` +
    'document.querySelectorAll("iframe[data-mbarrier-inspector]").forEach(function(f){if(f.contentWindow===e.source)f.style.height=e.data.height+"px";});});</script>';
}

/** Wire the share bar: `linkState()` is what "Copy link" carries (to `linkPath`), `viewState()`
 *  the run shown (inspector link, embed, lesson file), `doc()` the trace in memory. */
export function bindShareBar(root, {linkPath, linkState, viewState, doc, predict = () => false}) {
  const bar = root.querySelector(".share-bar");
  if (!bar) return;
  const toastNode = bar.querySelector(".toast");
  const out = root.querySelector("[data-share-out]");
  const area = out.querySelector("[data-share-url]");
  const what = out.querySelector("[data-share-what]");
  const panelsBox = out.querySelector("[data-embed-panels]");
  const show = async (label, text, embed = false) => {
    out.hidden = false;
    what.textContent = label;
    panelsBox.hidden = !embed;
    area.value = text;
    const ok = await copyText(text);
    toast(toastNode, ok ? `${label} copied` : `${label} is in the box below: copy it from there`);
  };
  const embedPanels = () => [...panelsBox.querySelectorAll("input:checked")].map((b) => b.value);
  const makeEmbed = async () => embedCode(normalState(viewState()), embedPanels());
  bar.addEventListener("click", async (event) => {
    const button = event.target.closest("button");
    if (!button || !viewState()) return;
    try {
      if (button.dataset.copy === "link") await show("Link", await linkTo(linkPath, linkState()));
      else if (button.dataset.copy === "inspector") await show("Inspector link", await linkTo("/p", viewState()));
      else if (button.dataset.copy === "embed") await show("Embed code", await makeEmbed(), true);
      else if (button.dataset.download === "lesson") {
        button.disabled = true;
        try {
          const name = await downloadLesson(viewState(), {predict: predict()});
          toast(toastNode, `Saved ${name}: it opens from a file, with no network`);
        } finally { button.disabled = false; }
      } else if (button.dataset.download === "json" && doc()) {
        const state = viewState();
        saveBlob(new Blob([JSON.stringify(doc())], {type: "application/json"}),
                 `pipeline-${(doc().scenario.source_sha256 || "").slice(0, 12)}${state.bugs.length ? `-${state.bugs.join("-")}` : ""}.trace.json`);
      }
    } catch (err) {
      toast(toastNode, err.message, "error");
    }
  });
  panelsBox.addEventListener("change", async () => {
    area.value = await makeEmbed();
    await copyText(area.value);
  });
}

/** A short line for a run held only in part. */
export function windowNote(node, doc) {
  if (!node) return;
  const held = doc.window ? doc.window.to : doc.total_steps;
  node.hidden = held >= doc.total_steps;
  node.dataset.stepLimit = held < doc.total_steps ? String(held) : "";
  node.textContent = held < doc.total_steps
    ? `This run has ${doc.total_steps.toLocaleString("en-US")} steps; the page holds the first ${held.toLocaleString("en-US")} ` +
      "(every step comes with its full snapshot). Fewer tiles show the whole run."
    : "";
}
