"""The pipeline machine: it interprets a compiled pipeline program (app.sim.program) one move at
a time, over mbarriers, SMEM stage buffers, the TMA engine and the tensor core.

A *move* is one agent executing its current line, the TMA engine landing (or, for a store,
reading) one chunk of one in-flight bulk copy, or the tensor core retiring its oldest queued
`tcgen05.mma` or `tcgen05.commit`. `moves()` numbers every possible mover in a fixed order and
`ready` lists the ones that can move now (an agent blocked in `try_wait` or `wait_group` cannot),
so a schedule, the UI's student and the exhaustive checker all choose among the same moves. A
landing chunk may also *hold* its complete-tx so that a later landing on the same barrier applies
both at once: the grouping of a copy's bytes is not fixed by the hardware (docs/semantics.md),
and the hold moves let the checker explore every grouping. Detectors run inside the move that
causes a failure, so a diagnostic is pinned to its step. The machine is mutable for speed;
`freeze()` gives an immutable, hashable value of the whole state and `thaw()` rebuilds a machine
from it.

Each instruction family (app/sim/families: mbarrier lines, bulk copies, SMEM provenance, the
tensor core, ...) registers its lines, blockers, deadlock phrases and snapshot part
(app/sim/family.py); the machine runs whatever they register. Shared services are in core.py,
failure reports in detectors.py, snapshots in snapshot.py.
"""

from __future__ import annotations

from .agent_code import ASSIGN, BLOCKERS, HANDLERS, LINE, agent_code  # noqa: F401 (HANDLERS: the line kinds run)
from .barrier import Mbarrier, UndefinedBehavior
from .config import PipelineConfig
from .core import LOAD, NO_TILE, OP_DIR, REGISTER_LIMIT, W_NONE, checked
from .detectors import UB_KINDS, Diagnostic, deadlock_diagnostics
from .families import FAMILIES, copies, smem
from .family import STAY
from .program import ProgramError
from .reports import (  # noqa: F401 (importable here)
    DEADLOCK,
    DONE,
    EXPLAIN,
    RUNNING,
    UNDEFINED,
    WAIT_AT,
    WAITING,
    MoveError,
    Reports,
)

CONTROL_LIMIT = 10_000
"""Control nodes an agent may follow between two steps (an empty infinite loop stops here)."""

PC = 0

ARRIVING_KINDS = frozenset(k for f in FAMILIES for k in f.arrives)


def _can_move(m, test, a: int, r: list, args) -> bool:
    """A blocking line whose operands cannot be computed (an index out of range, a division
    by zero) can move: its step stops the run with `undefined_behavior`, at that line."""
    try:
        return test(m, a, r, args)
    except ProgramError:
        return True


class Machine(Reports):
    """One pipeline, stepped by `step(move)`."""

    def __init__(self, cfg: PipelineConfig):
        self.cfg = cfg
        program = self.program = cfg.program
        self.code = agent_code(program)
        self.explain = EXPLAIN
        self.arriving_kinds = ARRIVING_KINDS
        self.deadlock_reports = tuple(f.deadlock for f in FAMILIES if f.deadlock)
        self.snapshot_parts = tuple(f.snapshot for f in FAMILIES if f.snapshot)
        self.agents = program.agents
        self.agent_names = tuple(a.name for a in program.agents)
        self.n_agents = len(program.agents)
        self._rows = tuple((code.end, code.blockers, code.prepared) for code in self.code)
        """Per agent, what `enabled()` reads of its code (the code never changes)."""
        self.n_stages = len(program.stages)
        self.n_bars = len(program.barriers)
        self.barrier_names = [b.name for b in program.barriers]
        self.stage_names = [s.name for s in program.stages]
        self.chunk_bytes = tuple(s.chunk_bytes for s in program.stages)
        self.stage_cta = tuple(s.cta for s in program.stages)
        release: dict[int, list[int]] = {}
        for i, stage in enumerate(program.stages):
            if stage.release is not None:
                release.setdefault(stage.release, []).append(i)
        self.release_stages = {b: tuple(stages) for b, stages in release.items()}
        """Per release barrier, every stage its arrivals release (a GEMM stage's A and B)."""
        self.agent_cta = tuple(a.cta for a in program.agents)
        self.warp_of = tuple(i if a.warp is None else a.warp for i, a in enumerate(program.agents))
        """Each agent's warp: the agent number of the warp's lane 0 (`lanes`)."""
        lanes: dict[int, list[int]] = {}
        for i, w in enumerate(self.warp_of):
            lanes.setdefault(w, []).append(i)
        self.lanes_of = {w: tuple(movers) for w, movers in lanes.items()}
        """Each warp's movers, lane 0 first."""
        self.clustered = program.cluster > 1
        self.barrier_cta = tuple(b.cta for b in program.barriers)
        self.inits_lines = tuple(b.init_count is None for b in program.barriers)
        """Barriers a program line initializes (`mbarrier.init`): their accesses must be
        ordered after it (core.init_known)."""
        self.releasable = tuple(s.release is not None for s in program.stages)
        """Whether anything can reach another CTA (remote arrives, multicast, mapa)."""
        self.chunk_base, self.chunk_mask, base = [], [], 0
        for stage in program.stages:
            first = base
            if stage.alias is not None and stage.alias[2]:
                # a view shares the bits of the bytes it lies over
                region, offset, _ = stage.alias
                first = self.chunk_base[region] + offset // stage.chunk_bytes
            self.chunk_base.append(first)
            self.chunk_mask.append(((1 << stage.chunks) - 1) << first)
            base = max(base, first + stage.chunks)
        self.aliases = smem.alias_map(program)
        self.aliased = any(v is not None for v in self.aliases)
        """Per stage, per chunk, the chunks of other views over the same bytes (or None)."""
        self.n_chunk_bits = base
        """Knowledge bits (ordering.py): one per SMEM chunk, then one per barrier."""
        self.tensor_names = [t[0] for t in program.tensors]
        self.op_names: dict[int, tuple[list, str]] = {}
        """In-flight copies' names (core.op_name)."""
        self.writes_observed = any(
            kind == "ld_global" or (kind == "wait_group" and not prepared[1])
            for code in self.code for kind, prepared in zip(code.kinds, code.prepared,
                                                            strict=True))
        """Whether any line can tell a store's writes from its reads (plain `wait_group`,
        `ld.global`); where none can, a store completes with its last chunk read."""
        used = set().union(*(code.kinds for code in self.code)) - {None}
        self.stores_read_smem = "store" in used
        """Whether a write to shared memory must look for bulk stores that have not read it
        (core.unread_by_store)."""
        present = [f for f in FAMILIES if used & set(f.handlers)]
        self.extra_movers = tuple(f.movers for f in present if f.movers)
        self.hold_hooks = tuple(f.holds for f in present if f.holds)
        self.forget_hooks = tuple(f.forget for f in present if f.forget)
        self.read_hooks = tuple(f.reads for f in present if f.reads)
        """Families whose state holds stages past a release, or knowledge of chunks, or
        checks reads of values it writes asynchronously."""
        self.exit_sensitive = any(f.exits for f in present)
        """Whether an agent's exit can let another agent move (app/check/model.py)."""
        """Movers of the families this program uses, after the built-in ones."""
        self.slot_base: dict[str, int] = {}
        slots = 4 * self.n_bars
        for f in present:
            if f.slots:
                self.slot_base[f.name] = slots
                slots += f.slots(program)
        self.n_slots = slots
        hidden = [name for f in present for name in f.registers]
        self.n_hidden = len(hidden)
        self.hidden = {name: i - len(hidden) for i, name in enumerate(hidden)}
        """A family's hidden registers, each at the same negative index in every agent's
        register list (after the program's own)."""
        self.reset()

    # ----------------------------------------------------------------------------------- state

    def reset(self) -> None:
        program = self.program
        self.barriers = [Mbarrier() for _ in program.barriers]
        for barrier, decl in zip(self.barriers, program.barriers, strict=True):
            if decl.init_count is not None:
                barrier.init(decl.init_count)
        n_bars = len(self.barriers)
        self.observed = [1] * n_bars
        self.tx_ledger = [[0, 0, 0] for _ in range(n_bars)]
        self.held = [0] * n_bars
        self.waits: dict[tuple[int, int], list[int]] = {}
        self.chunks = [[(NO_TILE, W_NONE)] * s.chunks for s in program.stages]
        self.stage_tile = [NO_TILE] * self.n_stages
        self.stage_bars = [0] * self.n_stages
        """Per stage, the barriers (a bit each) its current tile's loads complete on: a wait that
        returns on one of them takes the tile (`owed`)."""
        self.owed: dict[tuple[int, int], int] = {}
        self.acc_dirty = 0
        """Agents (a bit each) that have not observed, through a wait, the completion of every
        `tcgen05.mma` issued so far (families/tensor_core.py)."""
        self.acc_cover = [0, 0]
        """Barriers (a bit each) whose current phase / last completed phase holds a
        `tcgen05.commit` that covers every MMA issued so far."""
        self.know = [0] * self.n_agents
        self.carried = [0] * self.n_slots
        """What each agent knows, and what each barrier's current and last completed phase
        carry, near and far (ordering.py)."""
        self.generic_reads = [0] * self.n_agents
        """Per agent, the stages (a bit each) it read with `ld.shared` since its last
        `fence.proxy.async` (the warning `async_write_after_read`)."""
        self.regs = [[0, *a.initial, *[0] * self.n_hidden] for a in program.agents]
        self.tma: list[list] = []
        self.bulk_committed = [0] * self.n_agents
        self.tensor_core: list[tuple] = []
        self.status = RUNNING
        self.step_no = 0
        self._ready: list[int] | None = None
        self._picked = -1
        """An agent `round_robin_move` found enabled in this state (-1: none): its step need
        not test it again. Every step forgets it, and so does `thaw`."""
        self.stop_report: list = []
        """The diagnostics the run's deadlock was reported with (`deadlock_diagnostics`)."""
        try:
            for a in range(self.n_agents):
                self._follow(a)
        except ProgramError:
            self.status = UNDEFINED
        self._ready = None
        if self.status == RUNNING:
            self._settle(None)  # a program may be done, or deadlocked, before its first step

    # ----------------------------------------------------------------------------------- moves

    @property
    def hold_base(self) -> int:
        """First hold move: landings that keep their complete-tx for a later one."""
        return self.n_agents + 1 + len(self.tma)

    @property
    def ready(self) -> list[int]:
        """The enabled moves now (`enabled()`, computed once per state)."""
        ready = self._ready
        if ready is None:
            ready = self._ready = self.enabled()
        return ready

    def enabled(self) -> list[int]:
        """The move numbers that can be made now, in move order."""
        if self.status != RUNNING:
            return []
        out = []
        regs = self.regs
        for a, (end, blockers, prepared) in enumerate(self._rows):
            r = regs[a]
            pc = r[0]
            if pc < end:
                test = blockers[pc]
                if test is None:
                    out.append(a)
                    continue
                try:
                    if test(self, a, r, prepared[pc]):
                        out.append(a)
                except ProgramError:  # the step stops the run at this line (`_can_move`)
                    out.append(a)
        base = self.n_agents
        if self.tensor_core:
            out.append(base)
        tma = self.tma
        n = len(tma)
        if n:
            out.extend(range(base + 1, base + 1 + n))
            hold = base + 1 + n
            can_hold = copies.can_hold
            for k in range(n):
                if tma[k][OP_DIR] == LOAD and can_hold(self, k):  # a store never holds
                    out.append(hold + k)
        if self.extra_movers:
            base += 1 + 2 * n
            for movers in self.extra_movers:
                out.extend(base + k for k in movers.ready(self))
                base += len(movers.names(self))
        return out

    def agent_enabled(self, a: int) -> bool:
        r = self.regs[a]
        code = self.code[a]
        pc = r[PC]
        if pc >= len(code.nodes):
            return False
        test = BLOCKERS.get(code.kinds[pc])
        return test is None or _can_move(self, test, a, r, code.prepared[pc])

    def step(self, move: int) -> dict:
        """Make one move and return its step record (trace format: STEP, without snapshot)."""
        if self.status != RUNNING:
            raise MoveError(f"the run has ended ({self.status})")
        step_no = self.step_no = self.step_no + 1
        picked, self._picked = self._picked, -1
        try:
            if 0 <= move < self.n_agents:
                ready = self._ready  # `enabled()` of this state, when known
                if (move != picked and (ready is None or move not in ready)
                        and not self.agent_enabled(move)):
                    self.step_no -= 1
                    raise MoveError(self.blocked_reason(move))
                r = self.regs[move]
                code = self.code[move]
                pc = r[PC]
                record = {"step": step_no, "agent": self.agent_names[move],
                          "op": code.ops[pc], "line": code.line_of[pc], "operands": {},
                          "events": [], "diagnostics": []}
                if code.handlers[pc](self, move, r, code.prepared[pc], record) is not STAY:
                    r[PC] = pc + 1
                    if not code.is_line[pc + 1]:
                        self._follow(move)
            else:
                record = {"step": step_no, "agent": None, "op": None, "line": None,
                          "operands": {}, "events": [], "diagnostics": []}
                k = move - self.n_agents - 1
                if 0 <= k < len(self.tma):  # a copy in flight: a chunk lands, or is read
                    copies.tma_step(self, k, False, record)
                else:
                    self._other_step(move, record)
        except (UndefinedBehavior, ProgramError) as ub:
            self.undefined(ub, record)
            return record
        if self.tma or self.tensor_core:  # `_settle`'s first case, without the call
            self._ready = None
        else:
            self._settle(record)
        return record

    def undefined(self, ub: UndefinedBehavior | ProgramError, record: dict) -> None:
        """The step that raised `ub` stops the run with `undefined_behavior` (or the rule's
        own kind), reported in its record."""
        kind = ub.rule if ub.rule in UB_KINDS else "undefined_behavior"
        barrier = record["operands"].get("barrier")
        who = record["agent"] or "the program"
        tail = " (PTX leaves this undefined)." if isinstance(ub, UndefinedBehavior) else "."
        record["diagnostics"].append(Diagnostic.make(
            kind, self.step_no, f"{who}: {ub.message}{tail}",
            agents=[record["agent"]] if record["agent"] else [], barrier=barrier,
            rule=ub.rule))
        self.status = UNDEFINED
        self._ready = []

    def _settle(self, record: dict | None) -> None:
        """Refresh `ready` after a move and end the run when it is done or deadlocked."""
        if self.status == RUNNING and (self.tma or self.tensor_core):
            self._ready = None  # every copy in flight can move: `ready` is found when asked
            return
        ready = self._ready = self.enabled()
        if ready:
            return
        if self._all_done():
            self.status = DONE
        elif self.status == RUNNING:
            self.status = DEADLOCK
            self.stop_report = deadlock_diagnostics(self)
            if record is not None:
                record["diagnostics"].extend(self.stop_report)

    def _all_done(self) -> bool:
        if self.tma or self.tensor_core:
            return False
        return all(r[PC] >= len(c.nodes) for r, c in zip(self.regs, self.code, strict=True))

    # ---------------------------------------------------------------------------- agent lines

    def _agent_step(self, a: int, record: dict) -> None:
        r = self.regs[a]
        code = self.code[a]
        pc = r[PC]
        line = code.nodes[pc]
        record["agent"] = self.agents[a].name
        record["op"] = line.op
        record["line"] = code.line_of[pc]
        if code.handlers[pc](self, a, r, code.prepared[pc], record) is STAY:
            return
        r[PC] = pc + 1
        if not code.is_line[pc + 1]:
            self._follow(a)

    def advance(self, a: int) -> None:
        """Move agent `a` past the line it is parked on (`STAY`), as the step of whoever
        released it (a named barrier's last arrival restarts its waiters without delay)."""
        r = self.regs[a]
        r[PC] += 1
        if not self.code[a].is_line[r[PC]]:
            self._follow(a)

    def _follow(self, a: int) -> None:
        """Follow control nodes (loops, branches) until the agent stands on a line or ends."""
        r = self.regs[a]
        code = self.code[a]
        end = code.end
        if r[PC] < end and code.chains[r[PC]] is not None:  # the whole chain in one call
            return code.chains[r[PC]](r)
        flow, prepared = code.flow, code.prepared
        for _ in range(CONTROL_LIMIT):
            pc = r[PC]
            if pc >= end:
                return
            target = flow[pc]
            if target is LINE:
                return
            if target is ASSIGN:
                for reg, fn in prepared[pc]:
                    value = fn(r)
                    r[reg] = value if -REGISTER_LIMIT <= value <= REGISTER_LIMIT else checked(value)
                r[PC] = pc + 1
            elif prepared[pc] is None:  # a jump
                r[PC] = target
            else:
                r[PC] = pc + 1 if prepared[pc](r) else target
        raise ProgramError("control_limit", f"{self.agents[a].name} followed {CONTROL_LIMIT} "
                                            "loop and branch nodes without reaching a line")



