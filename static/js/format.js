// Steps and events in plain words, for the line under the controls. Reads trace fields only.

const bytes = (n) => `${n.toLocaleString("en-US")} B`;

export function eventText(event) {
  switch (event.kind) {
    case "init": return `${event.barrier} initialized for ${event.count} arrival${event.count === 1 ? "" : "s"}`;
    case "arrive": return `arrived on ${event.barrier}`;
    case "expect_tx": return `${event.barrier} now expects ${bytes(event.bytes)} more`;
    case "complete_tx": return `${bytes(event.bytes)} landed (complete_tx on ${event.barrier})`;
    case "phase_completed":
      return `${event.barrier} completed a phase: parity flips to ${event.parity} (${event.phase} completed)`;
    case "wait_returned": return `the wait on ${event.barrier} for parity ${event.parity} returned`;
    case "tma_issued":
      return event.direction === "load"
        ? `TMA load of tile ${event.tile} into ${event.stage} issued (${bytes(event.bytes)})`
        : `TMA store of ${event.stage} (tile ${event.tile}) to global memory issued`;
    case "chunk_landed": return `chunk ${event.chunk} of tile ${event.tile} landed in ${event.stage}`;
    case "chunk_stored": return `chunk ${event.chunk} of ${event.stage} read out by the TMA store`;
    case "smem_read":
      return event.chunks_ok === event.chunks
        ? `read tile ${event.tile} from ${event.stage}: all ${event.chunks} chunks are tile ${event.tile}`
        : `read tile ${event.tile} from ${event.stage}: only ${event.chunks_ok} of ${event.chunks} chunks hold it`;
    case "smem_write": return `threads wrote tile ${event.tile} into ${event.stage} (st.shared)`;
    case "proxy_fence": return "fence.proxy.async: the TMA will see the threads' writes";
    case "bulk_commit": return `bulk store group ${event.group} committed`;
    case "bulk_wait_returned": return "every store has finished reading shared memory";
    case "mma_issued": return `MMA on ${event.stage} (K-block ${event.tile}) queued on the tensor core`;
    case "mma_done": return `the tensor core finished the MMA on ${event.stage}`;
    case "mma_commit": return event.barrier ? `tcgen05.commit arrives on ${event.barrier}` : "tcgen05.commit (routed nowhere)";
    case "tmem_read": return `read the accumulator (${event.mma_done} of ${event.mma_needed} MMAs done)`;
    case "register": {
      // The event names the register that changed (`phase`, `s`, `pipe_state`); a struct names
      // its fields. One vocabulary: an agent's `phase` is its phase register (the parity it
      // waits for next).
      const v = event.value || {};
      const name = event.name || "a register";
      const fields = Object.entries(v);
      const phaseNote = (k) => (k === "phase" ? " (the phase register: the parity its next wait asks for)" : "");
      if (fields.length === 1 && fields[0][0] === name) return `${name} is now ${fields[0][1]}${phaseNote(name)}`;
      const field = ([k, x]) => `${k} ${x}${k === "phase" ? " (its phase register)" : ""}`;
      return `${name} is now ${fields.map(field).join(", ")}`;
    }
    default: return event.kind;
  }
}

/** "thread: mbarrier.try_wait.parity" and its events, for the step just made. */
export function stepText(record) {
  if (!record) return {who: "", what: "The initial state. Step (→) runs the first move.", events: []};
  const who = record.agent === "tma" ? "TMA engine" : record.agent === "tensor_core" ? "tensor core" : record.agent;
  const events = record.events.map(eventText);
  if (!events.length) events.push(quietStepText(record));
  return {who, what: record.op, events};
}

/** A step that changed no barrier, stage or register still gets a sentence. */
function quietStepText(record) {
  const o = record.operands || {};
  if (record.op.startsWith("tcgen05.commit")) {
    return o.barrier ? `queued on the tensor core: it arrives on ${o.barrier} once every earlier MMA of this thread has finished`
      : "queued on the tensor core, routed to no barrier: nothing will arrive anywhere";
  }
  if (record.op.startsWith("tcgen05.fence")) return "orders the accumulator read after the wait (no state changes)";
  return "nothing visible changed at this step";
}

export function statusText(agent) {
  if (agent.status === "done") return "done";
  if (agent.status === "running") return "running";
  const w = agent.waiting_on;
  if (w && w.barrier) return `waiting on ${w.barrier} parity ${w.parity}`;
  if (w) return `waiting for ${w.bulk_groups} bulk store group${w.bulk_groups === 1 ? "" : "s"} to read smem`;
  return "waiting";
}

export function formatNs(ns) {
  if (Math.abs(ns) >= 1e6) return `${(ns / 1e6).toFixed(2)} ms`;
  if (Math.abs(ns) >= 1e3) return `${(ns / 1e3).toFixed(1)} µs`;
  return `${Math.round(ns)} ns`;
}
