"""Shared helpers for the checker's tests: explore a configuration, replay a schedule, and a
brute-force search over every schedule up to a length that uses nothing of app.check."""

from __future__ import annotations

from app.check.engine import Exploration, Explorer, Limits
from app.scenarios import get
from app.sim.config import PipelineConfig
from app.sim.machine import Machine
from app.sim.schedule import Schedule
from app.sim.trace import Run


def config(scenario: str, bugs=(), **params) -> PipelineConfig:
    return get(scenario).resolve(params, list(bugs))


STATE_BOUND = Limits(max_states=1_000_000, timeout_s=3600.0)
"""Tests bound a search by states, not by the clock: a busy machine must not turn a verdict
into `inconclusive`."""


def explore(scenario: str, bugs=(), reduce: bool = True, limits: Limits | None = None,
            **params) -> tuple[Explorer, Exploration]:
    explorer = Explorer(config(scenario, bugs, **params), reduce)
    return explorer, explorer.explore(limits or STATE_BOUND)


def lengths(out: Exploration) -> dict[str, int]:
    """Each reachable diagnostic kind and the length of its shortest schedule."""
    return {kind: found.steps for kind, found in out.found.items()}


def replay(cfg: PipelineConfig, moves: list[str]) -> Run:
    """The run that makes exactly these moves, checked move by move by the engine."""
    return Run.complete(cfg, Schedule("manual", moves=tuple(moves)))


def kinds_at_last_step(run: Run) -> set[str]:
    return {d["kind"] for d in run.diagnostics if d["step"] == run.total_steps}


def reachable_within(cfg: PipelineConfig, kind: str, max_steps: int) -> bool:
    """Does any schedule of at most `max_steps` moves raise `kind`? Depth-first over every
    enabled move, remembering the largest budget each state was already searched with."""
    machine = Machine(cfg)
    searched: dict[tuple, int] = {}

    def search(frozen: tuple, budget: int) -> bool:
        if budget == 0 or searched.get(frozen, -1) >= budget:
            return False
        searched[frozen] = budget
        machine.thaw(frozen)
        for move in list(machine.ready):
            machine.thaw(frozen)
            record = machine.step(move)
            if any(d["kind"] == kind for d in record["diagnostics"]):
                return True
            if machine.status == "running" and search(machine.freeze(), budget - 1):
                return True
        return False

    return search(machine.freeze(), max_steps)
