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


def fair_cycle_reachable(cfg: PipelineConfig, max_states: int = 50_000) -> bool:
    """Is a livelock reachable? Every concrete state by `Machine.step` alone (no reduction, no
    app.check code), Kosaraju's strongly connected components, and weak fairness per mover
    (agents and the tensor core by name, a copy by its name, its hold move included): some
    component with an internal edge where every mover enabled in all its states moves in it."""
    machine = Machine(cfg)

    def mover(names: list[str], move: int) -> str:
        name = names[move]
        return name[:-len(":hold")] if name.endswith(":hold") else name

    start = machine.freeze()
    index = {start: 0}
    states, enabled, edges = [start], [], []
    for frozen in states:
        if len(states) > max_states:
            raise AssertionError(f"more than {max_states} states: too big for the brute force")
        machine.thaw(frozen)
        names = machine.moves()
        ready = list(machine.ready) if machine.status == "running" else []
        enabled.append({mover(names, m) for m in ready})
        out = []
        for move in ready:
            machine.thaw(frozen)
            machine.step(move)
            if machine.status != "running":
                continue
            child = machine.freeze()
            if child not in index:
                index[child] = len(states)
                states.append(child)
            out.append((index[child], mover(names, move)))
        edges.append(out)
    n = len(states)
    order, seen = [], [False] * n
    for root in range(n):  # first pass: finishing order
        if seen[root]:
            continue
        seen[root] = True
        stack = [(root, iter(edges[root]))]
        while stack:
            v, it = stack[-1]
            for w, _ in it:
                if not seen[w]:
                    seen[w] = True
                    stack.append((w, iter(edges[w])))
                    break
            else:
                stack.pop()
                order.append(v)
    reverse: list[list[int]] = [[] for _ in range(n)]
    for v in range(n):
        for w, _ in edges[v]:
            reverse[w].append(v)
    component = [-1] * n
    for root in reversed(order):  # second pass on the reversed graph
        if component[root] >= 0:
            continue
        members, todo = [], [root]
        component[root] = root
        while todo:
            v = todo.pop()
            members.append(v)
            for w in reverse[v]:
                if component[w] < 0:
                    component[w] = root
                    todo.append(w)
        inner = [(v, w, who) for v in members for w, who in edges[v] if component[w] == root]
        if not inner:
            continue
        always = set.intersection(*(enabled[v] for v in members))
        if always <= {who for _, _, who in inner}:
            return True
    return False
