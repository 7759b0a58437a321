"""What the GPU's collective lines say, checked against the engine (`app.replay.gpu_order`):
`bar.sync` and `bar.red` on a named barrier, `elect.sync` and `bar.warp.sync` among a warp's lanes.

A thread logs such a line after it returned, at the clock read before it (its arrival is the
engine's move): the engine may park the agent there until the last arrival restarts it, and only
then writes what the line returns (`bar.red`'s reduction, `elect.sync`'s leader). So the check
waits for the agent's next record, or is made at once where the arrival completed the line: the
engine must have let the agent pass, with the value the GPU logged.

`Collectives` is one side of `GpuOrderReplay`, which inherits it: it uses the replay's state
(`m`, `parked`) and its moves (`step_agent`, `move`, `observe`). `apply` dispatches a record of
kind K to `_K`, and calls `passed(a)` before each record of agent `a`."""

from __future__ import annotations

from app.sim.families.named_barrier import PARKED as BAR_PARKED
from app.sim.families.warp import PARKED as WARP_PARKED
from app.sim.program import SINK

from .gpu_end import Divergence
from .gpu_log import GpuRecord


class Collectives:
    def _collective(self, a: int, rec: GpuRecord, gpu: dict) -> None:
        self.step_agent(a)
        self.parked[a] = (rec, gpu)
        if not self.waits_in_engine(a):  # the arrival completed it: check now
            self.passed(a)

    def waits_in_engine(self, a: int) -> bool:
        """Whether the engine parks agent `a` on a named barrier or a warp collective (it may
        stand on the same node again after a restart: a loop of one line)."""
        m = self.m
        return any(m.regs[a][m.hidden[k]] for k in (BAR_PARKED, WARP_PARKED) if k in m.hidden)

    def passed(self, a: int) -> None:
        """Agent `a` returned from the collective line it last arrived at on the GPU: the
        engine must have restarted it there (a restart it can still make, after a lane or warp
        it waited for exited, is made now), and give the values the GPU logged."""
        entry = self.parked.pop(a, None)
        if entry is None:
            return
        rec, gpu = entry
        m = self.m
        if self.waits_in_engine(a) and m.agent_enabled(a):
            self.move(a)
        line = m.code[a].nodes[rec.node]
        word = line.op.split()[0] if getattr(line, "op", None) else rec.kind
        if self.waits_in_engine(a):
            raise Divergence(f"{m.agents[a].name} returned from `{word}` on the GPU; the "
                             f"engine says {m.blocked_reason(a)}")
        args = m.code[a].prepared[rec.node]
        engine = {"returned": True}
        for key, reg in self._destinations(rec.kind, args):
            engine[key] = m.regs[a][reg]
        gpu = {"returned": True, **{k: v for k, v in gpu.items() if k in engine}}
        self.observe(rec, f"returned from {word}", gpu, engine, gpu == engine)

    @staticmethod
    def _destinations(kind: str, args) -> list[tuple[str, int]]:
        if kind == "bar_red":
            return [("value", args[1])] if args[1] != SINK else []
        if kind == "elect":
            return [(k, r) for k, r in (("leader", args[0]), ("elected", args[1])) if r != SINK]
        return []

    def _bar_sync(self, a: int, rec: GpuRecord) -> None:
        self._collective(a, rec, {})

    def _bar_red(self, a: int, rec: GpuRecord) -> None:
        self._collective(a, rec, {"value": rec.words[2]})

    def _elect(self, a: int, rec: GpuRecord) -> None:
        self._collective(a, rec, {"leader": rec.words[0], "elected": rec.words[1]})

    def _warp_sync(self, a: int, rec: GpuRecord) -> None:
        self._collective(a, rec, {})
