// A lesson exported as one file (GET /export/{id}): the trace is inside the page (gzip + base64),
// inflated with DecompressionStream and walked by a LocalPlayer, with the same panels, keys,
// callouts and prediction mode as the embed. No network at all.

import {CalloutCaption, calloutsFor} from "./callouts.js";
import {bindControls, bindKeys} from "./controls.js";
import {makeLayout, timelineOf} from "./layout.js";
import {watchHeight} from "./learn.js";
import {LocalPlayer, docFrame} from "./player.js";
import {Predictor} from "./predict.js";
import {RunView} from "./view.js";

const boot = JSON.parse(document.getElementById("boot").textContent);

async function inflate(base64) {
  const bytes = Uint8Array.from(atob(base64.trim()), (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return JSON.parse(await new Response(stream).text());
}

async function main() {
  const doc = await inflate(document.getElementById("trace-data").textContent);
  const root = document.getElementById("inspector");
  const player = new LocalPlayer(doc.total_steps, {step: boot.step || 0, status: doc.status});
  const view = new RunView(root.querySelector('[data-run="main"]'), {onSeek: (s) => player.seek(s)});
  view.setLayout(makeLayout(doc.layout, doc.scenario));
  view.setDiagnostics(doc.diagnostics);
  view.setTimeline(timelineOf(doc));
  const caption = new CalloutCaption(root.querySelector("[data-callout]"), {
    onSeek: (s) => player.seek(s), onSet: (list) => view.setCallouts(list.map((c) => c.step))});
  const config = {bugs: doc.scenario.bugs, params: {}, schedule: doc.scenario.schedule.kind};
  const defaults = boot.scenario.parameters;
  for (const [name, value] of Object.entries(doc.scenario.params)) {
    if (defaults[name] && defaults[name].default !== value) config.params[name] = value;
  }
  caption.set(calloutsFor(boot.lesson, config, {anyRun: Boolean(boot.lesson && boot.lesson.any_run)}));
  const frameAt = (step) => ({...docFrame(doc, step), ready: []});
  const predictor = new Predictor(root.querySelector("[data-predict-panel]"), {
    toggle: root.querySelector("[data-predict-toggle]"),
    scoreNode: root.querySelector("[data-predict-score]"),
    peek: async (step) => (step > doc.total_steps ? null : frameAt(step)),
    advance: () => player.step(),
  });
  const transport = root.querySelector("#transport");
  const step = () => predictor.step({...player.frame, ...frameAt(player.frame.step)});
  const controls = transport ? bindControls(transport, player, {step}) : null;
  if (!transport) {
    bindKeys({step, back: () => player.back(), play: () => player.toggle(), reset: () => player.home(),
              end: () => player.end()});
  }
  const draw = (frame) => {
    predictor.follow(frame);
    view.update({...frame, ...frameAt(frame.step)});
    caption.update(frame.step);
    if (controls) controls.update({...frame, diagnostics: doc.diagnostics.length});
  };
  player.on("frame", draw);
  draw(player.frame);
  if (boot.predict) predictor.setOn(true);
  root.dataset.ready = "true";
  watchHeight();  // in an iframe (an LMS, a notebook cell): the host can size the frame
}

main().catch((err) => {
  const box = document.getElementById("export-error");
  box.hidden = false;
  box.textContent = `This lesson could not start: ${err.message}`;
});
