// The compare view (/compare/{id}): the correct run and the buggy run on the same schedule.

import {api, configFromQuery, configToQuery} from "./trace.js";
import {showPair} from "./pair.js";

const boot = JSON.parse(document.getElementById("boot").textContent);
const scenario = boot.scenario;
const page = document.getElementById("compare");
const form = document.getElementById("compare-config");
const config = configFromQuery(scenario, location.search);
if (!config.bugs.length && scenario.bugs.length) config.bugs = [scenario.bugs[0]];
if (config.schedule === "manual") config.schedule = "round_robin";

form.elements.bugs.value = config.bugs[0] || "";
for (const [name, spec] of Object.entries(scenario.parameters)) form.elements[name].value = config.params[name] ?? spec.default;
form.elements.schedule.value = config.schedule;
form.elements.seed.value = config.seed;
form.querySelector(".seed").hidden = config.schedule !== "random";
form.elements.schedule.addEventListener("change", () => {
  form.querySelector(".seed").hidden = form.elements.schedule.value !== "random";
});
const openInspector = document.getElementById("open-inspector");
const inspectorAt = (step) => { openInspector.href = `/scenarios/${scenario.id}?${configToQuery({...config, step})}`; };
inspectorAt(config.step);
form.addEventListener("submit", (event) => {
  event.preventDefault();
  const params = {};
  for (const [name, spec] of Object.entries(scenario.parameters)) {
    const value = Number(form.elements[name].value);
    if (value !== spec.default) params[name] = value;
  }
  const next = {...config, params, bugs: [form.elements.bugs.value], schedule: form.elements.schedule.value,
                seed: Number(form.elements.seed.value) || 0, step: 0};
  location.search = configToQuery(next);
});

async function main() {
  const note = document.getElementById("divergence");
  try {
    const [good, bad] = await Promise.all([api.trace({...config, bugs: []}), api.trace(config)]);
    showPair(page, {doc: good, title: "Correct"}, {doc: bad, title: `With ${config.bugs.join(", ")}`},
             {step: config.step, onFrame: (frame) => inspectorAt(frame.step)});
  } catch (err) {
    note.textContent = `Cannot compare: ${err.field ? `${err.field}: ` : ""}${err.message}`;
    note.classList.add("error");
  }
}

main();
