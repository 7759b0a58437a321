// Diagnostics pinned to their step, one plain sentence each. Those the cursor has reached are
// shown (and the one at this very step stands out); later ones are only counted, so the lesson's
// failure is not given away before it happens.

import {h} from "../dom.js";

export function render(root, frame, diagnostics, ctx) {
  const list = root.querySelector(".diagnostics");
  const ahead = root.querySelector(".ahead");
  const shown = diagnostics.filter((d) => d.step <= frame.step);
  const key = `${shown.length}:${frame.step}:${diagnostics.length}`;
  if (root.dataset.key === key) return;
  root.dataset.key = key;
  list.replaceChildren(...shown.map((d) => h("li", {class: `diagnostic kind-${d.kind}${d.step === frame.step ? " now" : ""}`,
                                                  dataset: {diagnostic: d.kind, step: d.step}},
    h("button", {type: "button", class: "step-link", onclick: () => ctx.onSeek(d.step),
                 "aria-label": `Go to step ${d.step}`}, `step ${d.step}`),
    h("span", {class: "kind"}, h("span", {class: "shape", "aria-hidden": "true"}, "⚠"), d.kind),
    h("span", {class: "message"}, d.message))));
  if (!shown.length) list.append(h("li", {class: "muted none"}, frame.step === 0 ? "None yet." : "None so far: every wait, read and arrival up to here was correct."));
  const later = diagnostics.filter((d) => d.step > frame.step);
  ahead.replaceChildren();
  if (later.length) {
    ahead.append(`${later.length} more later in this run `,
      h("button", {type: "button", class: "link", onclick: () => ctx.onSeek(later[0].step)}, `(next at step ${later[0].step})`));
  }
}
