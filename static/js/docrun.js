// A whole trace document held in memory and played by a LocalPlayer (no session): the panels,
// the transport bar or the keys, the callout caption, prediction mode. What the exported lesson
// does, for the pages of authored pipelines (/author, /p, /embed/p).

import {CalloutCaption} from "./callouts.js";
import {bindControls, bindKeys} from "./controls.js";
import {makeLayout, timelineOf} from "./layout.js";
import {LocalPlayer, docFrame} from "./player.js";
import {Predictor} from "./predict.js";
import {RunView} from "./view.js";

export class DocRun {
  /** `root` holds `[data-run="main"]` (on /author `[data-run-view="main"]`: there `[data-run]`
   *  is the Run button), and optionally the transport, the caption and the
   *  prediction panel; `onFrame(frame, doc)` after every draw. */
  constructor(root, {onFrame = () => {}, onCallouts = () => {}} = {}) {
    this.root = root;
    this.onFrame = onFrame;
    this.doc = null;
    this.player = null;
    this.controls = null;
    this.keys = null;
    this.view = new RunView(root.querySelector('[data-run="main"], [data-run-view="main"]'), {onSeek: (s) => this.seek(s)});
    const box = root.querySelector("[data-callout]");
    this.caption = box ? new CalloutCaption(box, {
      onSeek: (s) => this.seek(s),
      onSet: (list) => { this.view.setCallouts(list.map((c) => c.step)); onCallouts(list); },
    }) : null;
    this.transport = root.querySelector("#transport");
    const panel = root.querySelector("[data-predict-panel]");
    this.predictor = panel ? new Predictor(panel, {
      toggle: root.querySelector("[data-predict-toggle]"),
      scoreNode: root.querySelector("[data-predict-score]"),
      peek: async (step) => (this.doc && step <= this.last ? this.frameAt(step) : null),
      advance: () => this.player && this.player.step(),
      onChange: () => this.player && this.draw(this.player.frame),
    }) : null;
  }

  /** The last step held (a long run is held up to its window's end). */
  get last() { return this.doc ? (this.doc.window ? this.doc.window.to : this.doc.total_steps) : 0; }
  get step() { return this.player ? this.player.frame.step : 0; }

  frameAt(step) { return {...docFrame(this.doc, step), ready: []}; }

  seek(step) { if (this.player) this.player.seek(step); }

  /** Show `doc` from `step`; the callouts stay as set. */
  show(doc, step = 0) {
    if (this.player) this.player.close();
    if (this.controls) this.controls.detach();
    if (this.keys) this.keys.detach();
    this.doc = doc;
    const status = this.last < doc.total_steps ? "step_limit" : doc.status;
    const player = this.player = new LocalPlayer(this.last, {step: Math.min(step, this.last), status,
                                                             speed: this.player ? this.player.frame.speed : 4});
    this.view.setLayout(makeLayout(doc.layout, doc.scenario));
    this.view.setDiagnostics(doc.diagnostics);
    this.view.setTimeline(timelineOf(doc));
    // The question reads the snapshot at the cursor: the player's frame holds only the cursor.
    const stepOrAsk = () => (this.predictor ? this.predictor.step({...player.frame, ...this.frameAt(player.frame.step)})
      : player.step());
    this.controls = this.transport ? bindControls(this.transport, player, {step: stepOrAsk}) : null;
    this.keys = this.transport ? null : bindKeys({step: stepOrAsk, back: () => player.back(), play: () => player.toggle(),
                                                  reset: () => player.home(), end: () => player.end()});
    player.on("frame", (frame) => this.draw(frame));
    this.draw(player.frame);
  }

  draw(frame) {
    if (this.predictor) this.predictor.follow(frame);
    this.view.update({...frame, ...this.frameAt(frame.step)});
    if (this.caption) this.caption.update(frame.step);
    if (this.controls) this.controls.update({...frame, diagnostics: this.doc.diagnostics.length});
    this.onFrame(frame, this.doc);
  }

  setCallouts(list) {
    if (!this.caption) return;
    this.caption.set([...list].sort((a, b) => a.step - b.step));
    if (this.player) this.caption.update(this.player.frame.step);
  }

  /** Leave no run on screen (a link that did not decode, a pipeline that does not compile). */
  clear() {
    if (this.player) this.player.close();
    if (this.controls) { this.controls.detach(); this.controls = null; }
    if (this.keys) { this.keys.detach(); this.keys = null; }
    this.player = null;
    this.doc = null;
  }
}

/** Which source lines the agents stand on at `frame` (line -> [agents]), and the line that just
 *  ran, from `layout.agents[].source_lines`. */
export function sourceMarks(doc, frame) {
  const current = new Map();
  let ran = null;
  if (!doc) return {current, ran};
  const byName = Object.fromEntries(doc.layout.agents.map((a) => [a.name, a]));
  const {snapshot, record} = docFrame(doc, frame.step);
  for (const agent of snapshot.agents) {
    const lines = (byName[agent.name] || {}).source_lines;
    if (!lines || agent.status === "done" || agent.line === null || agent.line === undefined) continue;
    const line = lines[agent.line];
    if (line) current.set(line, [...(current.get(line) || []), agent.name]);
  }
  if (record && byName[record.agent] && record.line !== null && record.line !== undefined) {
    ran = (byName[record.agent].source_lines || [])[record.line] || null;
  }
  return {current, ran};
}
