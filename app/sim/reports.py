"""What the machine says of its movers: their names and numbers, why one cannot move, what a
blocked agent waits for, its snapshot, layout and frozen state, round robin's next move, and
the steps of movers that are not agents (a mixin of `app.sim.machine.Machine`, which keeps the
agents' steps and the settling after each move)."""

from __future__ import annotations

from . import snapshot
from .barrier import BARRIER_FIELDS, Mbarrier
from .core import op_name
from .families import copies, merged, sync, tensor_core
from .program import Line, ProgramError

PC = 0
RUNNING, DONE, DEADLOCK, UNDEFINED = "running", "done", "deadlock", "undefined_behavior"
WAITING = merged("waiting")
EXPLAIN = merged("explain")
WAIT_AT = sync.FAMILY.waiting
"""The mbarrier waits, which a snapshot shows per agent (`wait`) blocked or not."""


class MoveError(ValueError):
    """A move that cannot be made now (unknown mover, a blocked agent, a finished run)."""


class Reports:
    """`Machine`'s reports of its movers (see the module's docstring), its frozen state and
    round robin's choice among its movers."""

    def moves(self) -> list[str]:
        """Every mover that exists now, by number: agents, the tensor core, in-flight TMA ops,
        then each in-flight load's hold move."""
        names = [a.name for a in self.agents]
        names.append("tensor_core")
        names.extend(f"tma:{op_name(self, op)}" for op in self.tma)
        names.extend(f"tma:{op_name(self, op)}:hold" for op in self.tma)
        for movers in self.extra_movers:
            names.extend(movers.names(self))
        return names

    def _extra(self, move: int):
        """The family movers and index of a move number past the built-in ones, or None."""
        k = move - self.hold_base - len(self.tma)
        for movers in self.extra_movers:
            n = len(movers.names(self))
            if 0 <= k < n:
                return movers, k
            k -= n
        return None

    def resolve(self, mover: str) -> int:
        """A move number from a mover's name; `tma` alone means the oldest in-flight copy."""
        names = self.moves()
        if mover == "tma":
            if not self.tma:
                raise MoveError("the TMA engine has no copy in flight")
            return self.n_agents + 1
        if mover in names:
            return names.index(mover)
        raise MoveError(f"no mover named {mover!r}; movers now: {', '.join(names)}")

    def why_not(self, move: int) -> str:
        """Why a move number is not enabled now, in one phrase."""
        if self.status != RUNNING:
            return f"the run has ended ({self.status})"
        if move < self.n_agents:
            return self.blocked_reason(move)
        if move == self.n_agents:
            return "the tensor core has nothing queued"
        extra = self._extra(move)
        if extra is not None:
            return extra[0].why_not(self, extra[1])
        if move >= self.hold_base:
            return "a hold needs a later chunk in flight to the same barrier"
        return "no such TMA copy in flight"

    def current_line(self, a: int) -> Line | None:
        pc = self.regs[a][PC]
        code = self.code[a]
        return code.nodes[pc] if pc < len(code.nodes) else None

    def blocked_reason(self, a: int) -> str:
        name = self.agents[a].name
        if self.current_line(a) is None:
            return f"{name} is done"
        waiting = self.waiting_on(a)
        if waiting and "parity" in waiting:
            return f"{name} is waiting on {waiting['barrier']} parity {waiting['parity']}"
        if waiting and "bulk_groups" in waiting:
            return f"{name} is waiting for its bulk stores ({waiting['bulk_groups']} pending)"
        if waiting:
            return f"{name} {EXPLAIN[self.current_line(a).kind](self, a, waiting)}"
        return f"{name} can move"

    def waiting_on(self, a: int) -> dict | None:
        """What a blocked agent waits for (None if it can move or is done)."""
        line = self.current_line(a)
        if line is None or self.agent_enabled(a):
            return None
        pc = self.regs[a][PC]
        return WAITING[line.kind](self, a, self.regs[a], self.code[a].prepared[pc])

    def wait_at(self, a: int) -> dict | None:
        """The wait the agent's current line makes (blocked or not), as `waiting_on` shows it."""
        line = self.current_line(a)
        if line is None or line.kind not in WAIT_AT:
            return None
        pc = self.regs[a][PC]
        return WAIT_AT[line.kind](self, a, self.regs[a], self.code[a].prepared[pc])

    def snapshot(self) -> dict:
        return snapshot.snapshot(self)

    def layout(self) -> dict:
        return snapshot.layout(self)

    def freeze(self) -> tuple:
        """The whole state as nested tuples: immutable, hashable, canonical (no step number).

        Built with `map` over C callables (no generator frames): the checker freezes once per
        move, so this is one of its hottest lines."""
        owed, waits = self.owed, self.waits
        return (
            tuple(map(BARRIER_FIELDS, self.barriers)),
            tuple(map(tuple, self.chunks)),
            tuple(self.stage_tile),
            tuple(sorted(owed.items())) if owed else (),
            tuple(map(tuple, self.regs)),
            tuple(map(tuple, self.tma)),
            tuple(self.bulk_committed),
            tuple(self.tensor_core),
            (tuple(self.observed), tuple(map(tuple, self.tx_ledger)), tuple(self.held),
             tuple(sorted(zip(waits, map(tuple, waits.values()), strict=True))) if waits else (),
             tuple(self.stage_bars), self.acc_dirty, tuple(self.acc_cover), tuple(self.know),
             tuple(self.carried), tuple(self.generic_reads)),
            self.status,
        )

    def thaw(self, frozen: tuple, step_no: int = 0) -> None:
        """Put the machine into a state `freeze()` returned."""
        (barriers, chunks, stage_tile, owed, regs, tma, bulk, tensor_core, meta,
         status) = frozen
        self.barriers = list(map(Mbarrier.thaw, barriers))
        self.chunks = list(map(list, chunks))
        self.stage_tile = list(stage_tile)
        self.owed = dict(owed)
        self.regs = list(map(list, regs))
        self.tma = list(map(list, tma))
        self.bulk_committed = list(bulk)
        self.tensor_core = list(tensor_core)
        (observed, ledger, held, waits, stage_bars, self.acc_dirty, cover, know, carried,
         generic_reads) = meta
        self.know = list(know)
        self.carried = list(carried)
        self.generic_reads = list(generic_reads)
        self.observed = list(observed)
        self.tx_ledger = list(map(list, ledger))
        self.held = list(held)
        self.waits = {k: list(v) for k, v in waits}
        self.stage_bars = list(stage_bars)
        self.acc_cover = list(cover)
        self.status = status
        self.step_no = step_no
        self._ready = None
        self._picked = -1

    def _agent_ready(self, a: int) -> bool:
        """Whether agent `a` can move now: `enabled()`'s test of one agent."""
        end, blockers, prepared = self._rows[a]
        r = self.regs[a]
        pc = r[0]
        if pc >= end:
            return False
        test = blockers[pc]
        if test is None:
            return True
        try:
            return bool(test(self, a, r, prepared[pc]))
        except ProgramError:  # the step stops the run at this line (`_can_move`)
            return True

    def round_robin_move(self, last: int) -> int | None:
        """Round robin's next move (schedule.RoundRobin): the first enabled move after `last`
        in move order that is not a hold, else the first enabled move; None when none is.

        Where `ready` is not known and no family adds movers, it tests the movers in order
        and stops at the one it takes (every in-flight copy can move, and the tensor core
        with something queued), so the agents after it and the holds are never tested."""
        if self._ready is not None or self.extra_movers or self.status != RUNNING:
            ready = self.ready
            if not ready:
                return None
            holds = self.n_agents + 1 + len(self.tma)  # `hold_base`
            tail = holds + len(self.tma)
            for move in ready:
                if self.extra_movers:
                    if holds <= move < tail:
                        continue  # a family's movers come after the holds
                elif move >= holds:
                    break
                if move > last:
                    return move
            return ready[0]
        n = self.n_agents
        for a in range(last + 1 if last >= 0 else 0, n):
            if self._agent_ready(a):
                self._picked = a
                return a
        if self.tensor_core and last < n:
            return n
        copies_in_flight = len(self.tma)
        if copies_in_flight and last < n + copies_in_flight:
            return last + 1 if last >= n else n + 1
        for a in range(min(last + 1, n)):  # around again: the first enabled move
            if self._agent_ready(a):
                self._picked = a
                return a
        if self.tensor_core:
            return n
        return n + 1 if copies_in_flight else None

    def _other_step(self, move: int, record: dict) -> None:
        """`step` for every move but an agent's (the tensor core, a copy, a family's mover),
        and for a move number that is no agent's (a `MoveError`, or a negative one)."""
        n_agents = self.n_agents
        if move < n_agents:
            if not self.agent_enabled(move):
                self.step_no -= 1
                raise MoveError(self.blocked_reason(move))
            self._agent_step(move, record)
        elif move == n_agents:
            if not self.tensor_core:
                self.step_no -= 1
                raise MoveError("the tensor core has nothing queued")
            tensor_core.retire(self, record)
        elif self.extra_movers and move >= self.hold_base + len(self.tma):
            extra = self._extra(move)
            if extra is None or extra[1] not in extra[0].ready(self):
                self.step_no -= 1
                raise MoveError(self.why_not(move) if extra else f"no move {move}")
            extra[0].step(self, extra[1], record)
        else:
            tma = self.tma
            k = move - n_agents - 1
            hold = k >= len(tma)
            if hold:
                k -= len(tma)
            if not 0 <= k < len(tma) or (hold and not copies.can_hold(self, k)):
                self.step_no -= 1
                raise MoveError(self.why_not(move))
            copies.tma_step(self, k, hold, record)

    def cta_exited(self, cta: int) -> bool:
        """A CTA exits when all its agents are done; its shared memory, barriers included, is
        gone (docs/semantics.md, "CTA lifetime")."""
        regs, code = self.regs, self.code
        return all(regs[a][PC] >= code[a].end for a in range(self.n_agents)
                   if self.agent_cta[a] == cta)
