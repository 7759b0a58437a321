// "Check every schedule" on the inspector (loaded on first use): POST /check for the
// configuration shown, its verdict, what stopped an inconclusive search, each violation with a
// button that loads its counterexample.

import {h} from "./dom.js";
import {api} from "./trace.js";

/** Run the check of `config` and show its verdict in `box`; `load(trace, step)` plays a
 *  counterexample. */
export async function runCheck({scenario, config, box, button, load}) {
  box.hidden = false;
  box.replaceChildren(Object.assign(document.createElement("p"), {textContent: "Exploring every schedule…"}));
  button.disabled = true;
  try {
    const result = await api.check({scenario: scenario.id, params: config.params, bugs: config.bugs,
                                    max_states: 200000, timeout_s: 10});
    showCheck(box, result, load);
  } catch (err) {
    box.replaceChildren(Object.assign(document.createElement("p"), {
      className: "error", textContent: err.status === 404 ? "This server has no schedule checker."
        : `The check failed: ${err.field ? `${err.field}: ` : ""}${err.message}`}));
  } finally {
    button.disabled = false;
  }
}

function showCheck(box, result, load) {
  const verdicts = {safe: "✓ safe under every schedule", unsafe: "✗ unsafe: some schedule breaks it",
                    inconclusive: "? inconclusive: a limit stopped the search"};
  const items = result.violations.map((v) => {
    const failing = (v.trace.diagnostics.find((d) => d.kind === v.kind) || {}).step || v.steps;
    return h("li", {dataset: {violation: v.kind}}, h("b", {}, v.kind), ` in ${v.steps} steps `,
      h("button", {type: "button", onclick: () => load(v.trace, failing)},
        "Load this counterexample"));
  });
  const limits = {max_states: `the state limit (${((result.limits || {}).max_states || 0).toLocaleString("en-US")} states)`,
                  timeout: `the time limit (${(result.limits || {}).timeout_s} s)`,
                  timeout_s: `the time limit (${(result.limits || {}).timeout_s} s)`,
                  memory: "the memory limit"};
  const stopped = (result.verdict === "inconclusive" || result.complete === false) && result.stopped_by
    ? h("p", {class: "stopped-by", dataset: {stoppedBy: result.stopped_by}},
      `Stopped by ${limits[result.stopped_by] || result.stopped_by}: every schedule of at most ${result.depth} steps was checked, longer ones were not.`)
    : null;
  // replaceChildren() would print a null child as the text "null".
  box.replaceChildren(...[
    h("p", {class: `verdict verdict-${result.verdict}`, dataset: {verdict: result.verdict}},
      h("b", {}, verdicts[result.verdict] || result.verdict),
      ` — ${result.states_explored.toLocaleString("en-US")} states in ${result.elapsed_s.toFixed(2)} s`),
    stopped,
    items.length ? h("ul", {class: "violations"}, items) : null].filter(Boolean));
}
