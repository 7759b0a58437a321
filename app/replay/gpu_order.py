"""Replays a generated kernel's GPU log through the engine in the order the GPU ran it.

A generated kernel (`app.capture.codegen`) logs every line each agent executed: the program node,
the `%clock64` before and after it, and what the hardware returned (an arrive's token and its
pending count, whether a bounded wait returned or gave up, which chunks of a stage held the words a
read expected). This module turns that log into the engine's own moves and checks the engine
against it:

1. The logged lines of CTA 0 (of cluster 0: `gpu_log.align_clocks` puts its CTAs on one clock)
   are merged into one order by clock: an operation that changes state
   (arrive, copy issue, write) at the clock read *before* it, an observation (wait, read,
   `wait_group`) at the clock read *after* it returned. All warps of a CTA share one SM's clock,
   and an effect is always ordered before an observation that depends on it.
2. Each logged line becomes a move of its agent in a `Run` (`Schedule("manual", moves=...)`): the
   agent first steps over register-only lines (`++pipe_state;`, which are not logged) until it
   stands on the logged node; standing anywhere else is a control-flow divergence.
3. TMA landings, which no thread sees, are inferred between a copy's issue and the observation
   that needs them: a wait that returned lands the fewest chunks that complete the phase, one at
   a time; a read lands as many chunks of its tile as it found right; an arrive whose token names
   a later phase lands what completed the earlier one; a wait that gave up lands every chunk in
   flight to its barrier, holding complete-tx where the engine offers it (the grouping that steps
   the count over zero, as the H200 does: traces/probes.json), and the engine must still block.
4. At the end, agents the GPU finished must be able to finish; a kernel that trapped must have an
   engine move that is undefined behaviour next; agents that timed out must stay blocked.

The observations of step 3 are `gpu_observe.Observations`, the checks of step 4
`gpu_end.RunEnd`; `GpuOrderReplay` inherits both. `conformance(raw)` answers
`{"matches": bool, "first_divergence": null | {"step", "why"}}` plus figures;
`GpuOrderReplay.schedule` is the manual schedule that reproduces the run.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.sim.core import LOAD, OP_DIR, OP_NEXT, OP_STAGE, OP_TILE, OP_WRITING, STORE
from app.sim.machine import UNDEFINED, Machine
from app.sim.program import Line
from app.sim.schedule import Schedule
from app.sim.trace import Run

from .gpu_collective import Collectives
from .gpu_end import Divergence, RunEnd
from .gpu_log import (  # noqa: F401 - ReplayError, config_of, gpu_records, merged: this module's API
    CLOCK_GHZ,
    OBSERVATIONS,
    GpuRecord,
    ReplayError,
    config_of,
    gpu_records,
    merged,
)
from .gpu_observe import Observations

WAITS = ("wait_parity", "wait_token")
REORDER_WINDOW = 1000
"""Cycles within which two warps' logged operations may have happened in either order: an
effect's clock is read before it, an observation's after it returned, and a try_wait call
itself takes hundreds of cycles."""
LOOKBACK = 4
ARRIVES = ("arrive", "arrive_drop", "arrive_expect_tx")


@dataclass
class GpuOrderReplay(RunEnd, Observations, Collectives):
    """The engine driven by a GPU log; build with `replay(raw)`."""

    raw: dict
    cfg: object = None
    run: Run = None
    moves: list[str] = field(default_factory=list)
    checked: int = 0
    landings: int = 0
    held: int = 0
    records: int = 0
    divergence: dict | None = None
    observations: list[dict] = field(default_factory=list)
    gpu_status: str = "done"
    notes: list[str] = field(default_factory=list)
    reordered: int = 0
    cta: int = 0
    step_clock: list[int] = field(default_factory=list)
    """Per engine step, the clock (`%clock64`) of the GPU record that made or needed it."""
    clock: int = 0
    stored: dict = field(default_factory=dict)
    """Engine tile id of each store destination -> {chunk: tile id the store read there}."""
    parked: dict = field(default_factory=dict)
    """Agent -> (record, what the GPU logged) of the collective line it arrived at last."""

    def mark(self) -> tuple:
        """What `restore` needs to come back to this point."""
        return (self.run.total_steps, len(self.moves), self.checked, self.landings, self.held,
                len(self.observations), self.gpu_status, len(self.notes), self.clock,
                {k: dict(v) for k, v in self.stored.items()}, dict(self.parked))

    def restore(self, mark: tuple) -> None:
        steps, moves, checked, landings, held, observations, status, notes, clock, stored, \
            self.parked = mark[:10] + (dict(mark[10]),)
        if self.run.total_steps != steps:
            self.run.truncate(steps)
        del self.moves[moves:]
        del self.step_clock[steps:]
        self.clock = clock
        self.stored = {k: dict(v) for k, v in stored.items()}
        self.checked, self.landings, self.held = checked, landings, held
        del self.observations[observations:]
        self.gpu_status = status
        del self.notes[notes:]

    # ------------------------------------------------------------------------------ moves

    @property
    def m(self) -> Machine:
        return self.run.machine

    @property
    def schedule(self) -> Schedule:
        return Schedule("manual", moves=tuple(self.moves))

    def move(self, number: int) -> dict:
        m = self.m
        name = m.moves()[number]
        k = number - m.n_agents - 1
        if 0 <= k < len(m.tma) and m.tma[k][OP_DIR] == STORE and not m.tma[k][OP_WRITING]:
            op = m.tma[k]  # a store reads a chunk: what it will write to global memory
            chunk = op[OP_NEXT]
            self.stored.setdefault(op[OP_TILE], {})[chunk] = m.chunks[op[OP_STAGE]][chunk][0]
        record = self.run.append(number)
        self.moves.append(name)
        self.step_clock.append(self.clock)
        return record

    def agent_index(self, slot: int) -> int:
        return slot

    def advance(self, a: int, node: int) -> None:
        """Step agent `a` over register-only lines until it stands on `node`."""
        m = self.m
        code = m.code[a]
        for _ in range(10_000):
            pc = m.regs[a][0]
            if pc == node:
                return
            if pc >= code.end:
                raise Divergence(f"{m.agents[a].name} ran node {node} on the GPU; in the engine "
                                 "it has finished its program")
            if code.kinds[pc] != "assign":
                raise Divergence(f"{m.agents[a].name} ran node {node} on the GPU; the engine "
                                 f"stands on node {pc} (`{code.nodes[pc].text}`): the control "
                                 "flow differs")
            self.move(a)
            self.stop_if_ended()
        raise Divergence(f"{m.agents[a].name} did not reach node {node}")

    def stop_if_ended(self) -> None:
        if self.m.status == UNDEFINED:
            diag = self.run.diagnostics[-1] if self.run.diagnostics else {}
            raise Divergence(f"the engine stopped with {diag.get('kind')} "
                             f"({diag.get('message', '')}) where the GPU went on")

    # ---------------------------------------------------------------------------- landings

    def loads(self, barrier: int | None = None, stage: int | None = None,
              tile: int | None = None) -> list[int]:
        """Indices of in-flight loads (oldest first) matching the filters."""
        out = []
        for k, op in enumerate(self.m.tma):
            if op[OP_DIR] != LOAD:
                continue
            if barrier is not None and op[3] != barrier:
                continue
            if stage is not None and op[OP_STAGE] != stage:
                continue
            if tile is not None and op[OP_TILE] != tile:
                continue
            out.append(k)
        return out

    def land(self, k: int, hold: bool = False) -> None:
        m = self.m
        k = self.reads_before_landing(k)
        number = (m.hold_base + k) if hold else (m.n_agents + 1 + k)
        self.move(number)
        self.landings += 1
        self.held += int(hold)
        self.stop_if_ended()

    def land_until(self, barrier: int, done) -> bool:
        """Land chunks for `barrier` one at a time, oldest copy first, until `done()`; then
        the families' own movers (an asynchronous arrive, an `st.async` landing), which the
        GPU does not log, first pending first."""
        for _ in range(100_000):
            if done():
                return True
            ks = self.loads(barrier=barrier)
            if ks:
                self.land(ks[0])
            elif not self.family_move():
                return done()
        return done()

    def arrive_async_until(self, b: int, parity: int, pending: int) -> None:
        """An arrive whose token counts fewer pending arrivals than the engine's: the families'
        asynchronous arrives (`cp.async.mbarrier.arrive`'s, once its copies completed), which
        the GPU does not log, came first; make them until the counts agree, or none of them."""
        barrier = self.m.barriers[b]
        if (barrier.phase & 1) != parity or barrier.pending_arrivals <= pending:
            return
        mark = self.mark()
        for _ in range(64):
            if not self.family_move() or (barrier.phase & 1) != parity:
                break
            if barrier.pending_arrivals == pending:
                return
        self.restore(mark)

    def family_move(self) -> bool:
        """Make the first ready move of a family's movers (after the built-in ones), if any."""
        m = self.m
        first = m.hold_base + len(m.tma)
        ready = [n for n in m.ready if n >= first]
        if not ready:
            return False
        self.move(ready[0])
        self.landings += 1
        self.stop_if_ended()
        return True

    def land_deferring(self, barrier: int) -> None:
        """Land every chunk in flight to `barrier`, holding each chunk's complete-tx wherever the
        engine offers it (a later landing then applies the bytes together): the grouping that
        completes a phase latest, or never, as the H200 does when a count steps over zero."""
        from app.sim.families.copies import can_hold

        for _ in range(100_000):
            ks = self.loads(barrier=barrier)
            if not ks:
                return
            self.land(ks[0], hold=can_hold(self.m, ks[0]))

    # ------------------------------------------------------------------------------ records

    def apply(self, rec: GpuRecord) -> None:
        m = self.m
        a = self.agent_index(rec.slot)
        name = m.agents[a].name
        self.clock = max(self.clock, rec.key)
        if rec.kind == "start":
            return
        self.passed(a)
        if rec.kind == "end":
            self.end_agent(a, rec)
            return
        if rec.kind == "error":
            self.notes.append(f"{name} stopped: operand error {rec.words[0]} "
                              f"(value {rec.words[1]})")
            self.gpu_status = "undefined_behavior"
            pc = m.regs[a][0]
            while pc < m.code[a].end and m.code[a].kinds[pc] == "assign":
                self.move(a)
                pc = m.regs[a][0]
            self.move(a)
            if m.status != UNDEFINED:
                raise Divergence(f"{name} stopped on an operand out of range on the GPU; the "
                                 "engine's move is defined")
            return
        self.advance(a, rec.node)
        line: Line = m.code[a].nodes[rec.node]
        if line.kind != rec.kind:
            raise Divergence(f"{name}: node {rec.node} is `{line.kind}` in the engine, "
                             f"`{rec.kind}` on the GPU")
        handler = getattr(self, "_" + rec.kind, None)
        if handler is None:
            self.step_agent(a)
        else:
            handler(a, rec)

    def step_agent(self, a: int) -> dict:
        m = self.m
        if not m.agent_enabled(a):
            raise Divergence(f"the GPU ran {m.agents[a].name}'s line; the engine says "
                             f"{m.blocked_reason(a)}")
        record = self.move(a)
        self.stop_if_ended()
        return record

    # -------------------------------------------------------------------------------- report

    def summary(self) -> dict:
        return {
            "matches": self.divergence is None,
            "first_divergence": self.divergence,
            "method": "the engine replayed in the GPU's order (app.replay.gpu_order)",
            "gpu_records": self.records,
            "observations_checked": self.checked,
            "engine_steps": self.run.total_steps if self.run else 0,
            "landings_inferred": self.landings,
            "landings_held": self.held,
            "reordered": self.reordered,
            "status": {"gpu": self.gpu_status,
                       "engine": self.run.status if self.run else None},
            "notes": self.notes,
        }


def document(state: GpuOrderReplay, snapshots: bool = True) -> dict:
    """The replay as a trace document (docs/trace-format.md) whose `source` says it came from
    the GPU: the engine's steps in the GPU's order, each with `time_ns` from its record's clock
    (1.98 GHz; inferred landings take the time of the observation that needed them), what the
    hardware returned (`source.observed`) and `source.conformance`."""
    raw = state.raw
    doc = state.run.document(snapshots=snapshots)
    ghz = CLOCK_GHZ
    first = min((c for c in state.step_clock if c), default=0)
    for step in doc["steps"]:
        clock = state.step_clock[step["step"] - 1] if step["step"] <= len(state.step_clock) \
            else state.clock
        step["time_ns"] = int(max(0, clock - first) / ghz)
    doc["source"] = {
        "kind": "gpu", "engine": doc["source"]["engine"], "generator": raw.get("generator"),
        "capture": raw.get("name"), "kernel": f"traces/raw/{raw.get('name')}.cu",
        "cta": state.cta, "device": raw.get("device", {}), "captured_at": raw.get("captured_at"),
        "launch": raw.get("launch", {}), "error": raw.get("error"), "clock_ghz": ghz,
        "observed": state.observations, "conformance": state.summary(),
    }
    doc["scenario"] = {**doc["scenario"], "id": (raw.get("pipeline") or {}).get("id")}
    return doc


def replay(raw: dict, cta: int = 0) -> GpuOrderReplay:
    """Drive the engine by CTA `cta`'s log; stops at the first divergence."""
    per_agent = gpu_records(raw, cta)
    cfg = config_of(raw)
    if len(per_agent) != len(cfg.program.agents):
        raise ReplayError(f"the log has {len(per_agent)} agents; the pipeline "
                          f"{len(cfg.program.agents)}")
    state = GpuOrderReplay(raw, cfg, Run(cfg, Schedule("manual")), cta=cta)
    order = merged(per_agent)
    state.records = len(order)
    marks: list[tuple] = []
    i = 0
    try:
        while i < len(order):
            del marks[i:]
            marks.append(state.mark())
            try:
                state.apply(order[i])
                i += 1
            except Divergence as div:
                first = {"step": state.run.total_steps + 1, "why": div.why}
                fixed = _reorder(state, order, i, marks)
                if fixed is None:
                    state.restore(marks[i])
                    state.divergence = first
                    return state
                order = fixed
                i += 1
        state.finish()
    except Divergence as div:
        state.divergence = {"step": state.run.total_steps + 1, "why": div.why}
    return state


def _reorder(state: GpuOrderReplay, order: list[GpuRecord], i: int,
             marks: list[tuple]) -> list[GpuRecord] | None:
    """Record `i` disagrees: try it before up to LOOKBACK records of other agents logged within
    REORDER_WINDOW cycles before it (the clocks of two warps' operations that close cannot say
    which came first). Returns the order that agrees, with the state advanced past record `i`,
    or None (the state is then somewhere past `marks[i]`; the caller restores it)."""
    rec = order[i]
    for d in range(1, LOOKBACK + 1):
        j = i - d
        if j < 0:
            return None
        other = order[j]
        if other.slot == rec.slot or other.key < rec.key - REORDER_WINDOW:
            return None
        candidate = order[:j] + [rec] + order[j:i] + order[i + 1:]
        state.restore(marks[j])
        try:
            for k in range(j, i + 1):
                state.apply(candidate[k])
        except Divergence:
            continue
        state.reordered += 1
        return candidate
    return None


def conformance(raw: dict) -> dict:
    """`{"matches", "first_divergence", ...}` for a generated kernel's raw log: the CTA it names
    in `replay_cta` (the one that trapped, in a log of many CTAs), else CTA 0."""
    cta = int(raw.get("replay_cta", 0))
    return {**replay(raw, cta).summary(), "cta": cta}
