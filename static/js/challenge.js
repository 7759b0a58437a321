// Challenge mode (after The Deadlock Empire): on a buggy configuration, choose who moves until a
// diagnostic fires. A move counter runs; the schedule checker (POST /api/v1/check) works out the
// shortest breaking schedule in the background, and its length is revealed only once the student
// has succeeded or given up.

import {h} from "./dom.js";
import {getJson} from "./learn.js";

export class Challenge {
  constructor(box, {scenario, start, loadCounterexample}) {
    this.box = box;
    this.scenario = scenario;
    this.startRun = start;
    this.loadCounterexample = loadCounterexample;
    this.active = false;
    this.result = null;
    this.done = null;
  }

  async begin() {
    const form = document.getElementById("config");
    const ticked = form ? [...form.querySelectorAll('input[name="bugs"]:checked')].map((b) => b.value) : [];
    const bugs = ticked.length ? ticked : this.scenario.bugs.slice(0, 1);
    const params = {};
    if (form) {
      for (const [name, spec] of Object.entries(this.scenario.parameters)) {
        const value = Number(form.elements[name].value);
        if (value !== spec.default) params[name] = value;
      }
    }
    this.active = true;
    this.done = null;
    this.bugs = bugs;
    this.result = null;
    this.box.hidden = false;
    this.box.dataset.state = "playing";
    this.box.replaceChildren(h("p", {}, "Setting up the challenge…"));
    this.check = getJson("/api/v1/check", {method: "POST", body: JSON.stringify({
      scenario: this.scenario.id, params, bugs, max_states: 200000, timeout_s: 10})})
      .then((r) => { this.result = r; this.render(); return r; }, (err) => { this.result = {error: err.message}; this.render(); });
    await this.startRun(bugs, params);
    this.render();
  }

  giveUp() {
    this.done = {gaveUp: true};
    this.box.dataset.state = "gave-up";
    this.render();
  }

  update(frame, diagnostics) {
    if (!this.active) return;
    this.frame = frame;
    if (!this.done) {
      const hit = (diagnostics || []).find((d) => d.step <= frame.step);
      if (hit) {
        this.done = {hit, moves: frame.step};
        this.box.dataset.state = "won";
      }
    }
    this.render();
  }

  render() {
    if (!this.active) return;
    const moves = this.done && this.done.moves !== undefined ? this.done.moves : this.frame ? this.frame.step : 0;
    const r = this.result;
    const kinds = r && r.violations ? [...new Set(r.violations.map((v) => v.kind))] : [];
    const goal = kinds.length ? `reach ${kinds.join(" or ")}` : "reach a diagnostic";
    const parts = [h("h2", {}, `Challenge: break ${this.bugs.join(", ")}`),
      h("p", {}, `Goal: ${goal} by choosing who moves (click a ready agent, a TMA copy or the tensor core). `,
        h("span", {class: "moves", dataset: {moves: String(moves)}}, `Moves: ${moves}`))];
    if (r && r.verdict === "safe") {
      parts.push(h("p", {class: "notice"}, "The checker says this configuration is safe under every schedule: ",
        "there is nothing to break here. Try more tiles or another toggle."));
    }
    const shortest = r && r.violations && r.violations.length ? Math.min(...r.violations.map((v) => v.steps)) : null;
    if (this.done) {
      if (this.done.hit) {
        const d = this.done.hit;
        parts.push(h("p", {class: "challenge-result won", dataset: {challengeResult: "won"}},
          h("b", {}, `✓ You broke it in ${d.step} moves: `), `${d.kind} at step ${d.step}. `, d.message));
      } else {
        parts.push(h("p", {class: "challenge-result gave-up", dataset: {challengeResult: "gave-up"}}, h("b", {}, "You gave up. ")));
      }
      if (shortest !== null) {
        const best = r.violations.find((v) => v.steps === shortest);
        const verdict = this.done.hit ? (this.done.hit.step <= shortest ? " You matched it!" : ` ${this.done.hit.step - shortest} more than the shortest.`) : "";
        parts.push(h("p", {class: "checker-best", dataset: {shortest: String(shortest)}},
          `The checker's shortest breaking schedule takes ${shortest} steps (${best.kind}).${verdict} `,
          h("button", {type: "button", onclick: () => this.loadCounterexample(best.trace, (best.trace.diagnostics.find((x) => x.kind === best.kind) || {}).step || best.steps)},
            "Load the checker's schedule")));
      } else if (!r) {
        parts.push(h("p", {class: "muted"}, "The checker is still looking for the shortest schedule…"));
      } else if (r.error) {
        parts.push(h("p", {class: "muted"}, `The checker could not answer: ${r.error}`));
      } else if (r.verdict === "inconclusive") {
        parts.push(h("p", {class: "muted"}, "The checker hit its limits before finding a breaking schedule."));
      }
      parts.push(h("button", {type: "button", onclick: () => this.begin()}, "Try again"));
    } else {
      parts.push(h("button", {type: "button", dataset: {challengeGiveUp: ""}, onclick: () => this.giveUp()}, "Give up and show the checker's answer"));
    }
    this.box.replaceChildren(...parts);
  }
}
