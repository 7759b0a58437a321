// /barrier: one mbarrier driven by hand. The page keeps only the list of ops; every change
// replays the whole list through POST /api/v1/mbarrier/run (SEMANTICS.md) and draws the states
// it answers: the card with its byte bar, the token list, the history, undefined behaviour as a
// red stop naming the rule. The history lives in the URL fragment, so reload keeps it.

import {h, setAttr} from "./dom.js";
import {getJson} from "./learn.js";

const lab = document.getElementById("barrier-lab");
const form = document.getElementById("ops");
const errorBox = lab.querySelector("[data-lab-error]");
const TOKEN_OPS = new Set(["test_wait", "try_wait", "pending_count"]);
let ops = [];
let states = [];
let tokenSupport = true;

const int = (name) => Number(form.elements[name].value);
const tokenName = (name) => form.elements[name].value.trim();

const noComplete = (op, box) => (form.elements[box].checked ? {...op, no_complete: true} : op);

function opFrom(kind) {
  const withToken = (op, field) => (tokenName(field) ? {...op, token: tokenName(field)} : op);
  switch (kind) {
    case "init": return {op: "init", count: int("init_count")};
    // `.noComplete` (PTX 9.7.13.15.13): its token is the one pending_count is defined for.
    case "arrive": return noComplete(withToken({op: "arrive", count: int("arrive_count")}, "arrive_token"), "arrive_no_complete");
    case "arrive_drop": return noComplete(withToken({op: "arrive_drop", count: int("drop_count")}, "drop_token"), "drop_no_complete");
    case "arrive_expect_tx": return withToken({op: "arrive_expect_tx", bytes: int("aetx_bytes")}, "aetx_token");
    case "expect_tx": return {op: "expect_tx", bytes: int("etx_bytes")};
    case "complete_tx": return {op: "complete_tx", bytes: int("ctx_bytes")};
    case "test_wait_parity": case "try_wait_parity": return {op: kind, parity: int("parity")};
    case "test_wait": case "try_wait": case "pending_count": return {op: kind, token: form.elements.token.value};
    default: return {op: kind};
  }
}

export function opText(op) {
  const args = [];
  if (op.count !== undefined) args.push(`count ${op.count}`);
  if (op.bytes !== undefined) args.push(`${op.bytes.toLocaleString("en-US")} B`);
  if (op.parity !== undefined) args.push(`parity ${op.parity}`);
  if (op.token) args.push(TOKEN_OPS.has(op.op) ? `token ${op.token}` : `→ token ${op.token}`);
  return `${op.op}${op.no_complete ? ".noComplete" : ""}${args.length ? ` (${args.join(", ")})` : ""}`;
}

async function replay(next) {
  try {
    const body = await getJson("/api/v1/mbarrier/run", {method: "POST", body: JSON.stringify({ops: next})});
    ops = next;
    states = body.states;
    errorBox.textContent = "";
    saveToUrl();
    draw();
    return true;
  } catch (err) {
    const usesTokens = next.some((op) => op.token !== undefined);
    if (err.status === 422 && usesTokens && /token|extra|op|discriminator|tag/i.test(`${err.field} ${err.message}`)) {
      tokenSupport = false;
      errorBox.textContent = "This server's barrier API does not take state tokens yet (test_wait, try_wait, " +
        "pending_count and \"keep token as\" need them): the op was not added. The parity ops work.";
      lab.dataset.tokens = "unsupported";
      draw();
    } else {
      errorBox.textContent = err.status === 422
        ? `Refused: ${err.field ? `${err.field}: ` : ""}${err.message}`
        : `The server cannot be reached (${err.message}).`;
    }
    return false;
  }
}

function saveToUrl() {
  const text = ops.length ? `#ops=${encodeURIComponent(JSON.stringify(ops))}` : "";
  history.replaceState(null, "", `${location.pathname}${location.search}${text}`);
}

function loadFromUrl() {
  const match = /^#ops=(.*)$/.exec(location.hash);
  if (!match) return [];
  try {
    const list = JSON.parse(decodeURIComponent(match[1]));
    return Array.isArray(list) ? list.slice(0, 10000).filter((op) => op && typeof op.op === "string") : [];
  } catch (err) {
    errorBox.textContent = "The ops in this link could not be read; starting over.";
    return [];
  }
}

function card(state) {
  const last = state || {phase: 0, parity: 0, pending_arrivals: 0, expected_arrivals: 0, tx_count: 0, valid: false};
  const announced = Math.max(1, ...ops.filter((o) => o.bytes !== undefined).map((o) => o.bytes), Math.abs(last.tx_count));
  const tx = last.tx_count;
  const text = tx > 0 ? `◔ ${tx.toLocaleString("en-US")} B still to land`
    : tx < 0 ? `⚡ ${(-tx).toLocaleString("en-US")} B landed before expect_tx` : "✓ no bytes pending";
  const node = h("article", {class: "barrier-card lab-card", dataset: {barrier: "bar"}, "aria-label": "mbarrier bar"},
    h("header", {}, h("h4", {}, "bar"), h("span", {class: "role"}, last.valid ? "valid" : "not initialized (or invalidated)")),
    h("div", {class: "card-body"},
      h("div", {class: "parity-bit", role: "img", "aria-label": `parity ${last.parity}`, dataset: {parity: last.parity}},
        h("span", {class: "bit"}, last.valid ? String(last.parity) : "–"), h("span", {class: "cap"}, "parity")),
      h("dl", {class: "facts"},
        h("dt", {}, "completed phases"), h("dd", {class: "phase"}, String(last.phase)),
        h("dt", {}, "arrivals pending"), h("dd", {class: "arrivals"}, `${last.pending_arrivals} of ${last.expected_arrivals}`),
        h("dt", {}, "tx-count"), h("dd", {class: "tx"}, String(tx)))),
    h("div", {class: "bytes", role: "img", "aria-label": text.slice(2), dataset: {state: tx > 0 ? "pending" : tx < 0 ? "early" : "clear"}},
      h("div", {class: "bar"},
        h("span", {class: "landed", style: null}), h("span", {class: "pending"})),
      h("span", {class: "bytes-text"}, text)));
  const bar = node.querySelector(".bar");
  bar.querySelector(".pending").style.width = `${(Math.max(tx, 0) / announced) * 100}%`;
  bar.querySelector(".landed").style.width = tx > 0 ? `${((announced - tx) / announced) * 100}%` : tx < 0 ? `${(-tx / announced) * 100}%` : "100%";
  for (const [key, value] of Object.entries({phase: last.phase, parity: last.parity, pendingArrivals: last.pending_arrivals,
    expectedArrivals: last.expected_arrivals, txCount: last.tx_count, valid: last.valid})) node.dataset[key] = String(value);
  return node;
}

/** Each named token: the phase its arrive was in (the phase before the op), and what it means now. */
function tokens() {
  const list = [];
  ops.forEach((op, i) => {
    if (!op.token || TOKEN_OPS.has(op.op) || !states[i]) return;
    const before = i > 0 ? states[i - 1] : null;
    const phase = before ? before.phase : 0;
    list.push({name: op.token, phase, at: i + 1});
  });
  const now = states.length ? states[states.length - 1].phase : 0;
  const latest = new Map();
  for (const t of list) latest.set(t.name, t);
  return [...latest.values()].map((t) => ({...t,
    meaning: now > t.phase + 1 ? "stale: two or more phases old (using it is undefined behaviour)"
      : now === t.phase + 1 ? "its phase has completed: a wait on it returns true"
      : "its phase is the current one: a wait on it returns false"}));
}

function draw() {
  const last = states[states.length - 1] || null;
  lab.querySelector("[data-card]").replaceChildren(card(last));
  const ub = lab.querySelector("[data-ub]");
  const rule = last && last.undefined_behavior;
  ub.hidden = !rule;
  setAttr(ub, "data-ub", rule || "");
  ub.replaceChildren(...(rule ? [h("b", {}, `■ Undefined behaviour: ${rule}. `),
    `PTX leaves op ${states.length} (${opText(ops[states.length - 1])}) undefined, so the barrier stops here. Undo it to go on.`] : []));
  for (const button of form.querySelectorAll("button[data-op]")) {
    button.disabled = Boolean(rule) || (!tokenSupport && TOKEN_OPS.has(button.dataset.op));
  }
  const note = lab.querySelector("[data-token-note]");
  note.hidden = tokenSupport;
  note.textContent = tokenSupport ? "" : "State tokens are not available: this server's POST /api/v1/mbarrier/run answered 422 to an op with a token.";
  const lastLine = lab.querySelector("[data-last]");
  if (last && !rule) {
    const bits = [`${opText(ops[states.length - 1])}:`];
    if (last.wait_complete !== null && last.wait_complete !== undefined) bits.push(last.wait_complete ? "wait_complete = true (the phase it names has completed)." : "wait_complete = false (the phase it names is still current).");
    if (last.phase_completed) bits.push(`the phase completed: parity flips to ${last.parity}.`);
    if (last.pending_count !== undefined) bits.push(`pending_count = ${last.pending_count}.`);
    if (bits.length === 1) bits.push("no phase completed.");
    lastLine.textContent = bits.join(" ");
  } else lastLine.textContent = last ? "" : "Start with init: a barrier must be initialized before any other op.";
  const known = tokens();
  const select = form.elements.token;
  const chosen = select.value;
  select.replaceChildren(...(known.length ? known.map((t) => new Option(t.name, t.name)) : [new Option("(arrive with a token first)", "")]));
  if (known.some((t) => t.name === chosen)) select.value = chosen;
  lab.querySelector("[data-tokens]").replaceChildren(...(known.length ? known.map((t) =>
    h("li", {dataset: {token: t.name, phase: String(t.phase)}}, h("code", {}, t.name), ` from op ${t.at}, phase ${t.phase}: ${t.meaning}`))
    : [h("li", {class: "muted"}, "No tokens yet: give an arrive a token name to keep its phase.")]));
  lab.querySelector("[data-history]").replaceChildren(...ops.map((op, i) => {
    const s = states[i];
    const note = !s ? "not run" : s.undefined_behavior ? `undefined behaviour: ${s.undefined_behavior}`
      : `phase ${s.phase}, parity ${s.parity}, ${s.pending_arrivals}/${s.expected_arrivals} pending, tx ${s.tx_count}` +
        (s.wait_complete === true ? ", wait → true" : s.wait_complete === false ? ", wait → false" : "") +
        (s.phase_completed ? ", phase completed" : "");
    return h("li", {class: s && s.undefined_behavior ? "ub" : "", dataset: {historyOp: op.op}}, h("code", {}, opText(op)), ` → ${note}`);
  }));
  lab.querySelector('[data-action="undo"]').disabled = !ops.length;
}

form.addEventListener("click", async (event) => {
  const button = event.target.closest("button");
  if (!button) return;
  if (button.dataset.op) {
    const op = opFrom(button.dataset.op);
    if (TOKEN_OPS.has(op.op) && !op.token) { errorBox.textContent = `${op.op} needs a token: arrive with "keep token as" first.`; return; }
    if (!form.reportValidity()) return;
    await replay([...ops, op]);
  } else if (button.dataset.action === "undo") {
    await replay(ops.slice(0, -1));
  } else if (button.dataset.action === "clear") {
    await replay([]);
  }
});
document.addEventListener("keydown", (event) => {
  if ((event.ctrlKey || event.metaKey) && event.key === "z" && !/INPUT|SELECT|TEXTAREA/.test(event.target.tagName)) {
    event.preventDefault();
    if (ops.length) replay(ops.slice(0, -1));
  }
});

const initial = loadFromUrl();
if (initial.length) replay(initial).then((ok) => { if (!ok) replay([]); });
else draw();
lab.dataset.ready = "true";
