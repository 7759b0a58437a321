// The callout editor of /author: lesson notes (Markdown) pinned to steps, beside the timeline.
// "Add a note at this step" pins one at the cursor; each note has its step and its text; the
// caption above the panels previews the note at the cursor as it is typed (rendered by
// callouts.js: raw HTML off, unsafe links refused), and the timeline flags every note.

import {h} from "./dom.js";

export class CalloutEditor {
  /** `getStep()` is the cursor, `seek(step)` moves it, `onChange(list)` after every edit. */
  constructor(root, {getStep = () => 0, seek = () => {}, onChange = () => {}} = {}) {
    this.root = root;
    this.getStep = getStep;
    this.seek = seek;
    this.onChange = onChange;
    this.list = root.querySelector("[data-callout-list]");
    this.items = [];
    this.timer = null;
    root.querySelector("[data-add-callout]").addEventListener("click", () => this.add(this.getStep(), ""));
  }

  get callouts() {
    return this.items.map((i) => ({step: i.step, text: i.text})).sort((a, b) => a.step - b.step);
  }

  set(callouts) {
    this.items = (callouts || []).map((c) => ({step: c.step, text: c.text}));
    this.draw();
  }

  add(step, text) {
    const existing = this.items.find((i) => i.step === step);
    if (existing) {
      this.draw();
      this.list.querySelector(`[data-callout-item="${step}"] textarea`)?.focus();
      return;
    }
    this.items.push({step, text});
    this.draw();
    this.list.querySelector(`[data-callout-item="${step}"] textarea`)?.focus();
    this.changed(true);
  }

  changed(now = false) {
    clearTimeout(this.timer);
    if (now) this.onChange(this.callouts);
    else this.timer = setTimeout(() => this.onChange(this.callouts), 250);
  }

  /** Highlight the note at the cursor. */
  update(step) {
    let current = null;
    for (const item of this.items) if (item.step <= step && (!current || item.step > current.step)) current = item;
    for (const node of this.list.children) {
      node.classList.toggle("at-cursor", Boolean(current) && Number(node.dataset.calloutItem) === current.step);
    }
  }

  draw() {
    this.items.sort((a, b) => a.step - b.step);
    const nodes = this.items.map((item) => {
      const id = `callout-text-${item.step}`;
      const stepInput = h("input", {type: "number", min: 0, value: item.step, class: "callout-step-input",
                                    "aria-label": "Step this note is pinned to", "data-callout-step-input": ""});
      stepInput.addEventListener("change", () => {
        const step = Number(stepInput.value);
        if (!Number.isInteger(step) || step < 0 || this.items.some((i) => i !== item && i.step === step)) {
          stepInput.setAttribute("aria-invalid", "true");
          return;
        }
        item.step = step;
        this.draw();
        this.changed(true);
      });
      const text = h("textarea", {id, rows: 3, "data-callout-text": "", spellcheck: "true",
                                  placeholder: "Markdown: **bold**, `code`, [links](https://...)"});
      text.value = item.text;
      text.addEventListener("input", () => { item.text = text.value; this.changed(); });
      return h("li", {class: "callout-item", dataset: {calloutItem: item.step}},
        h("div", {class: "callout-item-head"},
          h("label", {}, "Step ", stepInput),
          h("button", {type: "button", class: "link", onclick: () => this.seek(item.step)}, "go there"),
          h("button", {type: "button", class: "link danger", "aria-label": `Delete the note at step ${item.step}`,
                       onclick: () => { this.items = this.items.filter((i) => i !== item); this.draw(); this.changed(true); }},
            "delete")),
        h("label", {for: id, class: "sr-only"}, `Note at step ${item.step} (Markdown)`), text);
    });
    this.list.replaceChildren(...nodes);
    this.root.querySelector("[data-callout-empty]").hidden = nodes.length > 0;
    const clear = this.root.querySelector("[data-clear-callouts]");
    if (clear) clear.hidden = nodes.length === 0;
    this.update(this.getStep());
  }
}
