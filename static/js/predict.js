// Prediction mode: before a step is shown, one question about what it is about to change (will
// this wait return on the phase it wants? what is the parity after this arrive? how many bytes
// stay pending? does this read see the whole tile?), then the step reveals and marks the answer.
// While a question is open the page hides what would answer it (the wait formula's verdict, the
// timeline past the cursor, the diagnostics ahead): body.predicting / body.predict-on. The question is
// read from the next step's record and snapshot: nothing is simulated here. Score per browser
// session (sessionStorage).

import {h, hold, release, setText} from "./dom.js";

const KEY = "mbi-predict-score";

export function moverLabel(agent) {
  if (agent === "tma" || String(agent).startsWith("tma:")) return "TMA engine";
  if (agent === "tensor_core") return "tensor core";
  return agent;
}

const barrierIn = (snapshot, name) => (snapshot.barriers || []).find((b) => b.name === name);
const fmt = (n) => Number(n).toLocaleString("en-US");

/** The question for the step from `frame` (now) to `next` ({record, snapshot} one step on), or
 *  null when the step changes nothing a question can be about. */
export function question(frame, next) {
  const r = next && next.record;
  if (!r) return null;
  const before = frame.snapshot;
  const after = next.snapshot;
  const events = (kind) => r.events.filter((e) => e.kind === kind);
  const who = moverLabel(r.agent);
  if (/wait\.parity|wait_parity/.test(r.op) && r.operands.barrier) {
    const stale = r.diagnostics.some((d) => d.kind === "stale_wait");
    const b = barrierIn(before, r.operands.barrier);
    return {
      kind: "wait",
      text: `${who} is about to run ${r.op} on ${r.operands.barrier} for parity ${r.operands.parity}` +
        (b ? ` (the barrier's parity is ${b.parity} now, ${b.phase} phase${b.phase === 1 ? "" : "s"} completed)` : "") +
        ". It returns: is that the completion of the phase this iteration needs?",
      choices: [{value: "fresh", label: "Yes: the phase it waits for has completed"},
                {value: "stale", label: "No: it returns on an older completion (a stale wait)"}],
      answer: stale ? "stale" : "fresh",
      explain: stale ? "Stale: the wait names an older completion of this barrier, so it returns before the tile it wants has landed."
        : "The wait's parity names the phase that just completed, so the data it guards is complete.",
    };
  }
  const complete = events("complete_tx")[0];
  const completed = events("phase_completed")[0];
  if (complete && !completed) {
    const b0 = barrierIn(before, complete.barrier);
    const b1 = barrierIn(after, complete.barrier);
    if (b0 && b1) {
      const values = [...new Set([b1.tx_count, b0.tx_count, 0, b1.tx_count - complete.bytes,
                                  b0.tx_count + complete.bytes])].filter((v) => v >= 0).slice(0, 4).sort((a, b) => a - b);
      return {
        kind: "bytes",
        text: `The TMA engine lands a chunk of ${fmt(complete.bytes)} B for ${complete.barrier} (tx-count ${fmt(b0.tx_count)} now). How many bytes stay pending after it?`,
        choices: values.map((v) => ({value: String(v), label: `${fmt(v)} B`})),
        answer: String(b1.tx_count),
        explain: `complete_tx lowers the tx-count by the bytes that landed: ${fmt(b0.tx_count)} − ${fmt(complete.bytes)} = ${fmt(b1.tx_count)}.`,
      };
    }
  }
  const touched = (completed && completed.barrier) || r.operands.barrier ||
    (events("arrive")[0] || {}).barrier || (complete || {}).barrier;
  if (touched && barrierIn(before, touched) && barrierIn(after, touched) && (completed || events("arrive").length || complete)) {
    const b0 = barrierIn(before, touched);
    const b1 = barrierIn(after, touched);
    return {
      kind: "parity",
      text: `${who} runs ${r.op} on ${touched} (parity ${b0.parity}, ${b0.pending_arrivals} arrival${b0.pending_arrivals === 1 ? "" : "s"} and ${fmt(b0.tx_count)} B pending). What is ${touched}'s parity after this step?`,
      choices: [{value: "0", label: "0"}, {value: "1", label: "1"}],
      answer: String(b1.parity),
      explain: completed
        ? `No arrival and no byte was left pending, so the phase completed and the parity flipped to ${b1.parity}.`
        : `The phase is not complete (${b1.pending_arrivals} arrival${b1.pending_arrivals === 1 ? "" : "s"} and ${fmt(b1.tx_count)} B still pending), so the parity stays ${b1.parity}.`,
    };
  }
  // A read: does every chunk hold the tile it wants? (Read from the stage's cells, which show
  // what each chunk holds; no "who moves next": that asks the student to guess the scheduler.)
  const read = events("smem_read")[0];
  if (read) {
    const whole = read.chunks_ok === read.chunks;
    return {
      kind: "read",
      text: `${who} is about to read tile ${read.tile} from ${read.stage} (${read.chunks} chunk${read.chunks === 1 ? "" : "s"}). Does every chunk hold tile ${read.tile}?`,
      choices: [{value: "whole", label: `Yes: all ${read.chunks} chunks are tile ${read.tile}`},
                {value: "torn", label: "No: some chunks hold other bytes"}],
      answer: whole ? "whole" : "torn",
      explain: whole ? `Every chunk of ${read.stage} landed for tile ${read.tile} before the read.`
        : `Only ${read.chunks_ok} of ${read.chunks} chunks hold tile ${read.tile}: the read ran before the rest landed.`,
    };
  }
  return null;
}

export function readScore() {
  try { return JSON.parse(sessionStorage.getItem(KEY)) || {right: 0, asked: 0}; } catch (err) { return {right: 0, asked: 0}; }
}

function saveScore(score) {
  try { sessionStorage.setItem(KEY, JSON.stringify(score)); } catch (err) { /* storage off */ }
}

/** The question panel. `peek(step)` resolves to {record, snapshot} of that step; `advance()` shows
 *  the next step. `step()` is what the Step button and → call while prediction mode is on. */
export class Predictor {
  constructor(panel, {toggle = null, scoreNode = null, peek, advance, onChange = () => {}}) {
    this.panel = panel;
    this.toggle = toggle;
    this.scoreNode = scoreNode;
    this.peek = peek;
    this.advance = advance;
    this.onChange = onChange;
    this.on = false;
    this.pending = null;
    if (toggle) toggle.addEventListener("change", () => this.setOn(toggle.checked));
    this.showScore();
  }

  setOn(on) {
    this.on = Boolean(on);
    if (this.toggle) this.toggle.checked = this.on;
    document.body.classList.toggle("predict-on", this.on);
    if (!this.on) {
      this.setPending(null);
      this.answered = null;
      this.panel.hidden = true;
      this.panel.replaceChildren();
      release(this.panel);
    }
    else this.panel.hidden = false;
    if (this.on && !this.panel.childElementCount) this.intro();
    this.showScore();
    this.onChange(this.on);
  }

  intro() {
    this.panel.replaceChildren(h("p", {class: "muted"}, "Prediction mode: press Step (→) and answer before the step is shown."));
    hold(this.panel);
  }

  setPending(q) {
    this.pending = q;
    document.body.classList.toggle("predicting", Boolean(q));
  }

  /** Every frame drawn: a question about another step than the one it asked (Play, a seek,
   *  Back) closes unanswered, and an answer leaves once the cursor leaves its step. */
  follow(frame) {
    if (this.pending && (frame.playing || frame.step !== this.pending.from)) {
      this.setPending(null);
      this.answered = null;
      this.intro();
    } else if (!this.pending && this.answered !== null && this.answered !== undefined && frame.step !== this.answered) {
      this.answered = null;
      this.intro();
    }
  }

  showScore() {
    if (!this.scoreNode) return;
    const s = readScore();
    setText(this.scoreNode, this.on || s.asked ? `Score this session: ${s.right} / ${s.asked}` : "");
  }

  /** Ask about the step after `frame`; answering shows it. */
  async step(frame) {
    if (!this.on) return this.advance();
    if (this.pending) {
      const first = this.panel.querySelector("[data-choice]");
      if (first) first.focus({preventScroll: true});
      return undefined;
    }
    if (frame.playing) return this.advance();
    if (frame.step >= frame.total_steps && frame.status !== "running") return this.advance();
    let next = null;
    try { next = await this.peek(frame.step + 1); } catch (err) { next = null; }
    const q = next ? question(frame, next) : null;
    if (!q || !this.on) return this.advance();
    this.setPending({...q, from: frame.step});
    const buttons = q.choices.map((c) => h("button", {type: "button", class: "choice", dataset: {choice: c.value},
                                                      onclick: () => this.answer(c.value)}, c.label));
    this.panel.hidden = false;
    this.panel.replaceChildren(
      h("p", {class: "predict-q", dataset: {predict: q.kind}, id: "predict-q"}, h("b", {}, `Predict step ${frame.step + 1}: `), q.text),
      h("div", {class: "choices", role: "group", "aria-labelledby": "predict-q"}, buttons));
    hold(this.panel);
    // Focus for the keys, without scrolling the page to the panel.
    buttons[0].focus({preventScroll: true});
    return undefined;
  }

  answer(value) {
    const q = this.pending;
    if (!q) return;
    this.setPending(null);
    this.answered = q.from + 1;
    const right = value === q.answer;
    const score = readScore();
    score.asked += 1;
    if (right) score.right += 1;
    saveScore(score);
    for (const button of this.panel.querySelectorAll("[data-choice]")) {
      button.disabled = true;
      button.classList.toggle("is-answer", button.dataset.choice === q.answer);
      button.classList.toggle("is-picked", button.dataset.choice === value);
    }
    const label = (q.choices.find((c) => c.value === q.answer) || {}).label || q.answer;
    this.panel.append(h("p", {class: `predict-result ${right ? "right" : "wrong"}`, role: "status",
                              dataset: {predictResult: right ? "right" : "wrong"}},
      h("b", {}, right ? "✓ Right. " : `✗ Not quite: ${label}. `), q.explain));
    hold(this.panel);
    this.showScore();
    this.advance();
  }
}
