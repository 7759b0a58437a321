// Barrier cards: the arrival counter (pending of expected), the byte bar (red while bytes are
// pending; it fills as complete_tx lands), the parity bit that flips when a phase completes, the
// count of completed phases; and above them the wait formula with the live numbers:
// stage = i mod S, parity = (i / S) mod 2 (the producer waits the opposite parity).

import {h, release, replay, setAttr, setText} from "../dom.js";

const ROLE_TEXT = {full: "full: the tile has landed", empty: "empty: the stage is free",
                   accum: "accumulator ready", bar: "one mbarrier"};

function buildCard(barrier) {
  const bit = h("span", {class: "bit"});
  const card = h("article", {class: "barrier-card", dataset: {barrier: barrier.name, role: barrier.role},
                             "aria-label": `mbarrier ${barrier.name}`},
    h("header", {}, h("h4", {}, barrier.name), h("span", {class: "role"}, ROLE_TEXT[barrier.role] || barrier.role)),
    h("div", {class: "card-body"},
      h("div", {class: "parity-bit", role: "img"}, bit, h("span", {class: "cap"}, "parity")),
      h("dl", {class: "facts"},
        h("dt", {}, "completed phases"), h("dd", {class: "phase"}),
        h("dt", {}, "arrivals pending"), h("dd", {class: "arrivals"}, h("span", {class: "dots", "aria-hidden": "true"}), h("span", {class: "count"})),
        h("dt", {}, "tx-count"), h("dd", {class: "tx"}))),
    h("div", {class: "bytes", role: "img"},
      h("div", {class: "bar"}, h("span", {class: "landed"}), h("span", {class: "pending"})),
      h("span", {class: "bytes-text"})),
    h("p", {class: "waiters"}),
    h("p", {class: "invalid-note"}, "not initialized yet: mbarrier.init has not run"));
  return {card, bit, last: null};
}

function renderCard(entry, barrier, layout, waiters) {
  const {card, bit} = entry;
  setAttr(card, "data-phase", barrier.phase);
  setAttr(card, "data-parity", barrier.parity);
  setAttr(card, "data-pending-arrivals", barrier.pending_arrivals);
  setAttr(card, "data-expected-arrivals", barrier.expected_arrivals);
  setAttr(card, "data-tx-count", barrier.tx_count);
  setAttr(card, "data-valid", barrier.valid);
  const parityBox = bit.parentElement;
  setText(bit, barrier.valid ? barrier.parity : "–");
  setAttr(parityBox, "data-parity", barrier.parity);
  setAttr(parityBox, "aria-label", `parity ${barrier.parity}`);
  if (entry.last && entry.last.phase !== barrier.phase) replay(parityBox, "flipped");
  entry.last = barrier;
  setText(card.querySelector(".phase"), barrier.phase);
  const dots = card.querySelector(".dots");
  const expected = Math.min(barrier.expected_arrivals, 16);
  if (dots.childElementCount !== expected) {
    dots.replaceChildren(...Array.from({length: expected}, () => h("span", {class: "dot"})));
  }
  const arrived = barrier.expected_arrivals - barrier.pending_arrivals;
  [...dots.children].forEach((dot, i) => dot.classList.toggle("arrived", i < arrived));
  setText(card.querySelector(".arrivals .count"), `${barrier.pending_arrivals} of ${barrier.expected_arrivals}`);
  setText(card.querySelector(".tx"), barrier.tx_count);
  // The byte bar: landed bytes fill it; pending bytes are red and shrink as complete_tx lands.
  const tx = barrier.tx_count;
  const scale = Math.max(layout.tileBytes || 1, Math.abs(tx));
  const bytes = card.querySelector(".bytes");
  const usesBytes = barrier.role === "full" || barrier.role === "bar" || tx !== 0;
  bytes.hidden = !usesBytes;
  const state = tx > 0 ? "pending" : tx < 0 ? "early" : "clear";
  setAttr(bytes, "data-state", state);
  bytes.querySelector(".pending").style.width = `${(Math.max(tx, 0) / scale) * 100}%`;
  bytes.querySelector(".landed").style.width = tx > 0 ? `${((scale - tx) / scale) * 100}%`
    : tx < 0 ? `${(-tx / scale) * 100}%` : "100%";
  const text = tx > 0 ? `◔ ${tx.toLocaleString("en-US")} B still to land`
    : tx < 0 ? `⚡ ${(-tx).toLocaleString("en-US")} B landed before expect_tx`
    : "✓ no bytes pending";
  setText(bytes.querySelector(".bytes-text"), text);
  setAttr(bytes, "aria-label", text.slice(2));
  const waiting = waiters.get(barrier.name) || [];
  setText(card.querySelector(".waiters"), waiting.length
    ? `‖ ${waiting.map((w) => `${w.agent} waits for parity ${w.parity}`).join("; ")}` : "");
  card.classList.toggle("has-waiters", waiting.length > 0);
}

/** One line per agent standing at a wait: the barrier and parity it asks for, and the parity
 *  of the completion it needs, both as the trace gives them (`agent.wait`): the engine counts
 *  the completions each wait needs, so nothing here depends on the scenario. The lines differ
 *  when a bug broke the phase register. */
function renderFormula(root, snapshot, record) {
  const rows = [];
  const just = record && record.operands && "phases_needed" in record.operands ? record : null;
  for (const agent of snapshot.agents) {
    let w = agent.wait;
    let returned = false;
    if (just && just.agent === agent.name) {
      const {barrier, parity, phases_needed: needed} = just.operands;
      w = {barrier, parity, phases_needed: needed, parity_needed: (((needed - 1) % 2) + 2) % 2};
      returned = true;
    }
    if (!w) {
      // A row per agent, waiting or not, so the box keeps its height as waits come and go.
      rows.push(h("li", {class: "idle muted", dataset: {agent: agent.name}}, h("b", {}, agent.name),
        agent.status === "done" ? " is done" : " is not at a wait"));
      continue;
    }
    const ok = w.parity === w.parity_needed;
    const needed = w.phases_needed;
    const which = needed === 0 ? "no completion yet (its start state counts phase −1 as done)"
      : `completion #${needed}, the end of phase ${needed - 1}`;
    rows.push(h("li", {class: ok ? "ok" : "bad", dataset: {agent: agent.name}},
      h("b", {}, agent.name), returned ? ` just waited on ${w.barrier} with parity ${w.parity}: `
        : ` waits on ${w.barrier} with parity ${w.parity}: `,
      h("span", {class: "math"}, `it needs ${which}`), " · ",
      h("span", {class: "math"}, `parity = (${needed} − 1) mod 2 = ${w.parity_needed}`), " · ",
      h("span", {class: "verdict"}, ok ? `phase register ${w.parity} ✓`
        : `phase register ${w.parity} ✗ (the wait needs parity ${w.parity_needed})`)));
  }
  // Always there (an empty box says so), so the cards below do not jump as waits come and go.
  root.replaceChildren(h("p", {class: "formula-title"}, "The waits, as the barrier sees them"),
    rows.length ? h("ul", {}, rows) : h("p", {class: "muted formula-none"}, "No agent stands at a wait on this step."));
  void snapshot;
}

export function render(root, frame, layout) {
  const cards = root.querySelector(".barrier-cards");
  const formula = root.querySelector("[data-formula]");
  if (!root.built || root.built.key !== layout.key) {
    const entries = layout.barriers.map(buildCard);
    cards.replaceChildren(...entries.map((e) => e.card));
    if (!layout.barriers.length) {
      cards.replaceChildren(h("p", {class: "muted"}, "This scenario uses no mbarrier: the writer waits on bulk-store groups (cp.async.bulk.wait_group.read)."));
    }
    root.built = {key: layout.key, entries};
  }
  const waiters = new Map();
  for (const agent of frame.snapshot.agents) {
    const w = agent.waiting_on;
    if (agent.status === "waiting" && w && w.barrier) {
      if (!waiters.has(w.barrier)) waiters.set(w.barrier, []);
      waiters.get(w.barrier).push({agent: agent.name, parity: w.parity});
    }
  }
  frame.snapshot.barriers.forEach((barrier, i) => {
    const entry = root.built.entries[i];
    if (entry) renderCard(entry, barrier, layout, waiters);
  });
  groupCards(root, frame, waiters);
  if (formula) renderFormula(formula, frame.snapshot, frame.record);
}

const MANY = 8;

/** Many barriers (33 with 16 stages) would make a page of cards: show those that matter at this
 *  step (waited on, touched by the step, holding bytes) and a button for the rest. */
function groupCards(root, frame, waiters) {
  const entries = root.built.entries;
  let toggle = root.querySelector("[data-show-all-barriers]");
  if (entries.length <= MANY) { if (toggle) toggle.remove(); return; }
  if (!toggle) {
    toggle = h("button", {type: "button", class: "link show-all", dataset: {showAllBarriers: "false"},
      onclick: () => {
        root.built.showAll = !root.built.showAll;
        // The student chose fewer cards: the room the others took goes.
        for (const node of [root.querySelector(".barrier-cards"), root.closest(".grid")]) release(node);
        groupCards(root, root.built.frame, root.built.waiters);
      }});
    root.querySelector(".barrier-cards").after(toggle);
  }
  root.built.frame = frame;
  root.built.waiters = waiters;
  const touched = new Set((frame.record ? frame.record.events : []).map((e) => e.barrier).filter(Boolean));
  let hidden = 0;
  frame.snapshot.barriers.forEach((barrier, i) => {
    const entry = entries[i];
    if (!entry) return;
    const matters = waiters.has(barrier.name) || touched.has(barrier.name) || barrier.tx_count !== 0;
    const hide = !root.built.showAll && !matters;
    entry.card.hidden = hide;
    if (hide) hidden += 1;
  });
  toggle.dataset.showAllBarriers = String(Boolean(root.built.showAll));
  toggle.textContent = root.built.showAll ? "Show only the barriers that matter at this step"
    : `Show all ${entries.length} barriers (${hidden} idle ones hidden: nobody waits on them, this step did not touch them, no bytes pending)`;
}
