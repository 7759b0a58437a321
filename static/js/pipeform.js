// The configuration form of an authored pipeline, generated from what it declares
// (`POST /api/v1/pipelines/validate`: parameters with default, range and doc; toggles with their
// description, or the error that keeps one from applying) plus the schedule. Values the student
// typed survive a re-declaration as long as the parameter or toggle still exists.

import {h} from "./dom.js";

export class PipelineForm {
  /** `root` is a <form>; `onChange()` fires on every edit. */
  constructor(root, {onChange = () => {}} = {}) {
    this.root = root;
    this.onChange = onChange;
    this.info = {parameters: {}, toggles: []};
    this.params = root.querySelector("[data-params]");
    this.toggles = root.querySelector("[data-toggles]");
    this.schedule = root.querySelector('select[name="schedule"]');
    this.seed = root.querySelector('input[name="seed"]');
    root.addEventListener("input", () => this.changed());
    root.addEventListener("change", () => this.changed());
  }

  changed() {
    this.seed.closest("label").hidden = this.schedule.value !== "random";
    this.onChange();
  }

  /** Draw the fields for `info` ({parameters, toggles}), keeping `values` ({params, bugs}) or
   *  what is typed now. */
  set(info, values = null) {
    const keep = values || this.read();
    this.info = {parameters: info.parameters || {}, toggles: info.toggles || []};
    const params = Object.entries(this.info.parameters).map(([name, spec]) => h("label", {title: spec.doc},
      h("span", {}, name),
      h("input", {type: "number", name, min: spec.min, max: spec.max, value: keep.params[name] ?? spec.default,
                  required: true, inputmode: "numeric", "aria-describedby": `pdoc-${name}`, "data-param": name}),
      h("small", {class: "pdoc", id: `pdoc-${name}`}, `${spec.doc || ""} (${spec.min}..${spec.max}, default ${spec.default})`)));
    this.params.replaceChildren(...(params.length ? params : [h("p", {class: "muted"}, "This pipeline declares no parameters.")]));
    const toggles = this.info.toggles.map((t) => h("label", {class: `toggle bug-toggle${t.error ? " unusable" : ""}`},
      h("input", {type: "checkbox", name: "bugs", value: t.name, checked: keep.bugs.includes(t.name) && !t.error,
                  disabled: Boolean(t.error), "aria-describedby": `tdoc-${t.name}`}),
      h("span", {}, t.name),
      h("small", {class: "tdoc", id: `tdoc-${t.name}`}, t.error ? `cannot apply: ${t.error.message || t.error}` : t.description || "")));
    this.toggles.replaceChildren(...(toggles.length ? toggles : [h("p", {class: "muted"}, "No bug toggles: declare one with bug NAME \"description\" { replace ... }.")]));
    if (values) {
      this.schedule.value = values.schedule === "random" ? "random" : "round_robin";
      this.seed.value = values.seed || 0;
    }
    this.seed.closest("label").hidden = this.schedule.value !== "random";
  }

  /** {params (those that differ from the default), bugs, schedule, seed}. */
  read() {
    const params = {};
    for (const input of this.root.querySelectorAll("input[data-param]")) {
      const spec = this.info.parameters[input.name];
      const value = Number(input.value);
      if (spec && input.value !== "" && Number.isInteger(value) && value !== spec.default) params[input.name] = value;
    }
    return {
      params,
      bugs: [...this.root.querySelectorAll('input[name="bugs"]:checked')].map((b) => b.value),
      schedule: this.schedule ? this.schedule.value : "round_robin",
      seed: this.seed ? Number(this.seed.value) || 0 : 0,
    };
  }

  /** Mark the field an API error names (or clear every mark). */
  markField(field) {
    for (const input of this.root.querySelectorAll("[aria-invalid]")) input.removeAttribute("aria-invalid");
    const input = field && this.root.querySelector(`[name="${CSS.escape(field)}"]`);
    if (input) input.setAttribute("aria-invalid", "true");
  }
}
