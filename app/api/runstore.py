"""The one per-process cache of built runs, shared by traces and sessions.

A run is a pure function of its `RunKey` (scenario, canonical params and bugs, schedule, picks,
step limit), so any worker process or host rebuilds any run; the store only saves time. Builds go
to the build pool (`app.api.work.builds`): never on the event loop nor under its GIL. Concurrent
requests for one run wait for one build. The store is bounded in runs and in bytes and drops
idle runs; only the event loop's thread touches it.
"""

from __future__ import annotations

import asyncio
import itertools
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass, replace
from functools import lru_cache

from app.api.work import builds
from app.core.clients import build_admit, build_charge
from app.core.config import settings
from app.core.flight import shared
from app.scenarios import ParamError, Scenario, from_source
from app.scenarios import get as get_scenario
from app.sim.machine import Machine, MoveError
from app.sim.schedule import Schedule
from app.sim.trace import CHECKPOINT_EVERY, STEP_LIMIT, Run

SESSION_STEP_LIMIT = 100_000
"""A session's run stops here (status `step_limit`); GET /traces serves longer runs in windows."""
ENTRY_OVERHEAD = 64 << 10
"""Bytes an entry costs besides its run: its kept positions, its scratch machine."""


def cache_budget(config=settings) -> int:
    """Bytes the runs of this process may take: the host's budget (`MBI_RUN_CACHE_MB`) shared
    by its server processes (`MBI_WORKERS`): every process keeps its own runs."""
    return (config.run_cache_mb << 20) // max(1, config.workers)


def deep_size(value, limit: int = 200_000) -> int:
    """Bytes of a nested structure of tuples, lists, dicts and scalars (what a checkpoint or a
    diagnostic is), counted object by object; shared objects count each time."""
    total, stack, seen = 0, [value], 0
    while stack and seen < limit:
        item = stack.pop()
        seen += 1
        total += sys.getsizeof(item)
        if isinstance(item, tuple | list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
    return total


def run_bytes(run: Run) -> int:
    """What a built run keeps in memory, estimated from one checkpoint and one diagnostic."""
    choices = len(run.choices) * getattr(run.choices, "itemsize", 1)
    checkpoints = len(run.checkpoints) * (deep_size(run.checkpoints[-1]) + 64)
    diagnostics = len(run.diagnostics) * (deep_size(run.diagnostics[-1])
                                          if run.diagnostics else 0)
    return ENTRY_OVERHEAD + choices + checkpoints + diagnostics
POSITIONS_PER_RUN = 64
"""Machine states kept per run near where clients stand, so a step costs one move, not 255."""


def find_scenario(scenario_id: str, field: str = "scenario") -> Scenario:
    """The one scenario lookup: `ParamError` naming `field` for an unknown id."""
    try:
        return get_scenario(scenario_id)
    except (KeyError, TypeError):
        from app.scenarios import catalogue

        raise ParamError(field, f"no scenario {str(scenario_id)[:80]!r}; scenarios: "
                                f"{', '.join(catalogue())}") from None


@dataclass(frozen=True, slots=True)
class RunKey:
    """What fixes a run: the configuration (canonical params and bugs), the schedule, the picks
    and the step limit (sessions stop at `SESSION_STEP_LIMIT`, traces at the engine's)."""

    scenario: str
    params: tuple[tuple[str, int], ...]
    bugs: tuple[str, ...]
    schedule: Schedule
    picks: tuple[tuple[int, int], ...] = ()
    """(step, move number): at `step` the named mover moved instead of the schedule's choice."""
    limit: int = SESSION_STEP_LIMIT
    source: str | None = None
    """A pipeline text (docs/language.md) in place of a built-in (`scenario` is then "")."""


def scenario_of(scenario_id: str | None, source: str | None = None,
                field: str = "scenario") -> Scenario:
    """The scenario a request names: a built-in by id, or a pipeline text (checked)."""
    if source is not None:
        return from_source(source)
    return find_scenario(scenario_id, field)


@lru_cache(maxsize=512)
def _resolve(scenario_id: str, params: tuple, bugs: tuple, source: str | None = None):
    scenario = scenario_of(scenario_id, source)
    cfg = scenario.resolve(dict(params), ",".join(bugs))
    return scenario, cfg, scenario.describe(cfg)


def canonical_key(scenario_id: str | None, params: dict, bugs, schedule: Schedule,
                  limit: int = SESSION_STEP_LIMIT, field: str = "scenario",
                  source: str | None = None) -> RunKey:
    """A key whose params and bugs are the scenario's own spelling (defaults filled in), so two
    spellings of one configuration share one run. `ParamError` names a bad field."""
    scenario = scenario_of(scenario_id, source, field)
    cfg = scenario.resolve(params, bugs)
    described = scenario.describe(cfg)
    return RunKey(scenario.id or "", tuple(sorted(described["params"].items())),
                  tuple(described["bugs"]), schedule, (), limit, source)


def build_run(key: RunKey, named: list[tuple[int, str]] | None = None) -> tuple[Run, RunKey]:
    """The run of `key`: the schedule's choices, except at each pick. Runs in a build worker.
    `named` are picks by mover name (from a permalink), validated one by one and returned in
    `key.picks` as move numbers; `ParamError` names the bad one."""
    scenario, cfg, described = _resolve(key.scenario, key.params, key.bugs, key.source)
    run = Run(cfg, key.schedule, described, step_limit=key.limit)
    chooser = key.schedule.chooser()
    picks, field = (named, "picks") if named is not None else (list(key.picks), "session_id")
    resolved = []
    for i, (step, mover) in enumerate(picks):
        where = f"pick {i + 1} (step {step})"
        if step <= run.total_steps:
            raise ParamError(field, f"{where}: picks must name increasing steps, from 1")
        run.extend(chooser, step - 1 - run.total_steps)
        if run.total_steps != step - 1:
            raise ParamError(field, f"{where}: the run stops at step {run.total_steps} "
                                    f"({run.status})")
        machine = run.machine
        try:
            move = machine.resolve(mover) if isinstance(mover, str) else mover
        except MoveError as err:
            raise ParamError(field, f"{where}: {err}") from None
        if move not in machine.ready:
            raise ParamError(field, f"{where}: {machine.why_not(move)}")
        run.append(move)
        resolved.append((step, move))
    try:
        run.extend(chooser, key.limit)
    except MoveError as err:  # a manual schedule's list of moves, from the traces API spelling
        raise ParamError("moves", str(err)) from None
    return run, replace(key, picks=tuple(resolved))


_serials = itertools.count()


class Entry:
    """One built run and a few machine states near where its clients stand."""

    __slots__ = ("key", "run", "positions", "scratch", "used", "serial", "bytes", "blob")

    def __init__(self, key: RunKey, run: Run):
        self.key = key
        self.run = run
        self.bytes = run_bytes(run)
        self.serial = next(_serials)
        self.positions: OrderedDict[int, tuple] = OrderedDict()
        self.scratch = Machine(run.cfg)
        self.used = time.monotonic()
        self.blob: bytes | None = None
        """The run pickled for the window worker (app.api.windows.run_blob), once."""

    def machine_at(self, step: int, machine: Machine | None = None) -> Machine:
        """A machine after `step` moves, from the nearest kept state (at most 255 moves away)."""
        run = self.run
        machine = machine or self.scratch
        base = step // CHECKPOINT_EVERY * CHECKPOINT_EVERY
        start, frozen = base, run.checkpoints[step // CHECKPOINT_EVERY]
        for near in (step, step - 1):
            kept = self.positions.get(near)
            if kept is not None and near >= base:
                start, frozen = near, kept
                break
        machine.thaw(frozen, start)
        for move in run.choices[start:step]:
            machine.step(move)
        return machine

    def frame(self, step: int) -> tuple[dict | None, dict, list[str]]:
        """(the step record of `step` or None at 0, the snapshot after it, the movers ready)."""
        if step == 0:
            machine = self.machine_at(0)
            record = None
        else:
            machine = self.machine_at(step - 1)
            record = machine.step(self.run.choices[step - 1])
            self.remember(step, machine)
        return record, machine.snapshot(), ready_names(machine)

    def remember(self, step: int, machine: Machine) -> None:
        positions = self.positions
        positions[step] = machine.freeze()
        positions.move_to_end(step)
        if len(positions) > POSITIONS_PER_RUN:
            positions.popitem(last=False)


def ready_names(machine: Machine) -> list[str]:
    names = machine.moves()
    return [names[m] for m in machine.ready]


class RunStore:
    """Built runs of this process by key: least recently used first, bounded in runs and in
    bytes (`cache_budget`), idle ones dropped."""

    def __init__(self) -> None:
        self.entries: OrderedDict[RunKey, Entry] = OrderedDict()
        self.steps = 0
        self.bytes = 0
        self.building: dict[tuple, asyncio.Future] = {}

    def peek(self, key: RunKey) -> Entry | None:
        entry = self.entries.get(key)
        if entry is not None:
            entry.used = time.monotonic()
            self.entries.move_to_end(key)
        return entry

    async def get(self, key: RunKey, named: list[tuple[int, str]] | None = None,
                  clients: tuple[str, ...] = ()) -> Entry:
        """The entry of `key` (with `named` picks: of the key they resolve to), built in the
        build pool if no one has it; `ParamError`, `Busy` as the build raises them. A build is
        charged to `clients` (app.core.clients): one past its share of build time gets
        `TooMany` before its build starts."""
        entry = None if named else self.peek(key)
        if entry is not None:
            return entry
        async def build() -> Entry:
            build_admit(clients)
            started = time.monotonic()
            try:
                run, built = await builds.run(build_run, key, named)
                return self.put(built, run)
            finally:
                build_charge(clients, time.monotonic() - started)

        return await shared(self.building, (key, tuple(named or ())), build)

    def put(self, key: RunKey, run: Run) -> Entry:
        old = self.peek(key)
        if old is not None:
            return old
        entry = self.entries[key] = Entry(key, run)
        self.steps += run.total_steps
        self.bytes += entry.bytes
        self.evict()
        return entry

    def evict(self) -> None:
        idle_before = time.monotonic() - settings.session_idle_s
        entries = self.entries
        budget = cache_budget(settings)
        while len(entries) > 1 and (len(entries) > settings.max_sessions
                                    or self.bytes > budget
                                    or next(iter(entries.values())).used < idle_before):
            _, entry = entries.popitem(last=False)
            self.steps -= entry.run.total_steps
            self.bytes -= entry.bytes


store = RunStore()

TRACE_LIMIT = STEP_LIMIT
