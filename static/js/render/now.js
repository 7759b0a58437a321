// The line under the controls: what the step just made did, in words, and what went wrong at it.

import {h} from "../dom.js";
import {stepText} from "../format.js";

export function render(root, frame) {
  const {who, what, events} = stepText(frame.record);
  const parts = [h("span", {class: "step-no"}, `Step ${frame.step}`)];
  if (who) parts.push(" · ", h("b", {class: "who"}, who), " ", h("code", {class: "op"}, what));
  else parts.push(" ", h("span", {}, what));
  if (events.length) parts.push(h("span", {class: "events"}, ` — ${events.join("; ")}.`));
  const diagnostics = frame.record ? frame.record.diagnostics : [];
  for (const d of diagnostics) {
    parts.push(h("span", {class: `alarm kind-${d.kind}`, role: "alert"},
      h("b", {}, `⚠ ${d.kind}: `), d.message));
  }
  if (frame.time_ns !== undefined && frame.time_ns !== null) parts.splice(1, 0, h("span", {class: "time"}, ` @ ${frame.time_ns.toLocaleString("en-US")} ns`));
  root.replaceChildren(...parts);
  root.classList.toggle("has-alarm", diagnostics.length > 0);
}
