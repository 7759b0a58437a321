"""The oracle: every diagnostic kind a pipeline can reach, and the length of its shortest
schedule, by a breadth-first search over every concrete machine state using `Machine.step` alone
(no reduction, no closure, nothing of app.check). Livelocks come from the fair-cycle search of
tests/check/helpers.py, which is independent of the checker too."""

from __future__ import annotations

from app.sim.config import PipelineConfig
from app.sim.machine import Machine

from .helpers import fair_cycle_reachable


class TooBig(Exception):
    """The state space outgrew the oracle's bound: the caller picks a smaller program."""


def shortest_kinds(cfg: PipelineConfig, max_states: int = 20_000) -> dict[str, int]:
    """Each reachable diagnostic kind (livelock included) and its shortest schedule's length."""
    machine = Machine(cfg)
    found: dict[str, int] = {}
    if machine.status != "running":
        return {diagnostic["kind"]: 0 for diagnostic in machine.stop_report}
    layer = [machine.freeze()]
    seen = set(layer)
    depth = 0
    while layer:
        depth += 1
        following = []
        for frozen in layer:
            machine.thaw(frozen)
            for move in list(machine.ready):
                machine.thaw(frozen)
                record = machine.step(move)
                for diagnostic in record["diagnostics"]:
                    found.setdefault(diagnostic["kind"], depth)
                if machine.status != "running":
                    continue
                child = machine.freeze()
                if child not in seen:
                    if len(seen) >= max_states:
                        raise TooBig(f"more than {max_states} states")
                    seen.add(child)
                    following.append(child)
        layer = following
    if fair_cycle_reachable(cfg, max_states):
        found.setdefault("livelock", -1)
    return found
