"""Runs and traces: the single source of truth that the API, the UI, the checker and replay share.

A `Run` keeps only what it cannot recompute: the move chosen at every step (one byte each), the
frozen machine state every `CHECKPOINT_EVERY` steps, and the diagnostics. Any step's record and
snapshot is rebuilt by thawing the checkpoint before it and replaying at most that many moves, so a
million-step run costs about a megabyte and step 900,000 is as cheap to show as step 9. The trace
document layout is written down in docs/trace-format.md.
"""

from __future__ import annotations

from collections.abc import Callable

from .config import PipelineConfig
from .machine import RUNNING, Machine, MoveError
from .schedule import Schedule

FORMAT = "mbarrier-inspector/trace"
VERSION = 1
ENGINE = "mbarrier-inspector 0.1.0"
STEP_LIMIT = 1_000_000
CHECKPOINT_EVERY = 256
STEP_LIMIT_STATUS = "step_limit"
ROUND_ROBIN = Schedule("round_robin")


class Run:
    """One run of a pipeline under one schedule; grows by `extend()` or `append()`."""

    def __init__(self, cfg: PipelineConfig, schedule: Schedule = ROUND_ROBIN,
                 scenario: dict | None = None, step_limit: int = STEP_LIMIT):
        self.cfg = cfg
        self.schedule = schedule
        self.scenario = scenario or {"id": None, "params": dict(cfg.params),
                                     "bugs": sorted(cfg.bugs),
                                     "source_sha256": cfg.source_sha256}
        self.step_limit = step_limit
        self.machine = Machine(cfg)
        self.choices = bytearray()
        self.checkpoints = [self.machine.freeze()]
        self.diagnostics: list[dict] = list(self.machine.stop_report)
        """A deadlock before the first step is reported at step 0."""

    def __getstate__(self) -> dict:
        """Runs travel between processes (built in a worker, served by the event loop's
        process) without their live machine, whose compiled operands do not pickle: the last
        checkpoint and the choices after it rebuild it."""
        state = {name: getattr(self, name) for name in
                 ("cfg", "schedule", "scenario", "step_limit", "choices", "checkpoints",
                  "diagnostics")}
        state["status_now"] = self.machine.status
        return state

    def __setstate__(self, state: dict) -> None:
        status = state.pop("status_now")
        self.__dict__.update(state)
        self.machine = self.machine_at(self.total_steps)
        self.machine.status = status

    # ------------------------------------------------------------------------------- growing

    @classmethod
    def complete(cls, cfg: PipelineConfig, schedule: Schedule, scenario: dict | None = None,
                 step_limit: int = STEP_LIMIT) -> Run:
        """The whole run under `schedule`, until it ends or reaches the step limit."""
        run = cls(cfg, schedule, scenario, step_limit)
        run.extend(schedule.chooser(), step_limit)
        return run

    @property
    def total_steps(self) -> int:
        return len(self.choices)

    @property
    def status(self) -> str:
        if self.machine.status == RUNNING and self.total_steps >= self.step_limit:
            return STEP_LIMIT_STATUS
        return self.machine.status

    def extend(self, chooser: Callable[[Machine], int | None], max_steps: int) -> int:
        """Make up to `max_steps` moves picked by `chooser`; returns how many were made."""
        machine = self.machine
        choices = self.choices
        diagnostics = self.diagnostics
        checkpoints = self.checkpoints
        limit = min(max_steps, self.step_limit - len(choices))
        made = 0
        while made < limit and machine.status == RUNNING:
            move = chooser(machine)
            if move is None:
                break
            record = machine.step(move)
            choices.append(move)
            made += 1
            if record["diagnostics"]:
                diagnostics.extend(record["diagnostics"])
            if machine.step_no % CHECKPOINT_EVERY == 0:
                checkpoints.append(machine.freeze())
        return made

    def append(self, move: int) -> dict:
        """Make one given move (a student stepping by hand); returns its step record."""
        if self.total_steps >= self.step_limit:
            raise MoveError(f"the run reached its limit of {self.step_limit} steps")
        if move not in self.machine.ready:
            raise MoveError(self.machine.why_not(move))
        record = self.machine.step(move)
        self.choices.append(move)
        self.diagnostics.extend(record["diagnostics"])
        if self.machine.step_no % CHECKPOINT_EVERY == 0:
            self.checkpoints.append(self.machine.freeze())
        return record

    def truncate(self, step: int) -> None:
        """Forget every step after `step` (stepping back, then choosing differently)."""
        step = max(0, min(step, self.total_steps))
        del self.choices[step:]
        del self.checkpoints[step // CHECKPOINT_EVERY + 1:]
        self.diagnostics = [d for d in self.diagnostics if d["step"] <= step]
        self.machine = self.machine_at(step)

    # ------------------------------------------------------------------------------ reading

    def machine_at(self, step: int) -> Machine:
        """A machine positioned after `step` moves (0: the initial state)."""
        if not 0 <= step <= self.total_steps:
            raise IndexError(f"step {step} is outside 0..{self.total_steps}")
        base = step // CHECKPOINT_EVERY
        machine = Machine(self.cfg)
        machine.thaw(self.checkpoints[base], base * CHECKPOINT_EVERY)
        for move in self.choices[base * CHECKPOINT_EVERY:step]:
            machine.step(move)
        return machine

    def snapshot(self, step: int) -> dict:
        return self.machine_at(step).snapshot()

    def steps(self, first: int, last: int, snapshots: bool = True) -> list[dict]:
        """Step records `first..last` (1-based, inclusive), each with its snapshot if asked."""
        first = max(1, first)
        last = min(last, self.total_steps)
        if first > last:
            return []
        machine = self.machine_at(first - 1)
        out = []
        for move in self.choices[first - 1:last]:
            record = machine.step(move)
            if snapshots:
                record["snapshot"] = machine.snapshot()
            out.append(record)
        return out

    def document(self, first: int = 1, last: int | None = None, snapshots: bool = True) -> dict:
        """The trace document (docs/trace-format.md) holding steps `first..last`."""
        last = self.total_steps if last is None else min(last, self.total_steps)
        first = max(1, first)
        machine0 = self.machine_at(0)
        steps = self.steps(first, last, snapshots)
        return {
            "format": FORMAT,
            "version": VERSION,
            "source": {"kind": "simulation", "engine": ENGINE},
            "scenario": {**self.scenario, "schedule": self.schedule.as_dict()},
            "layout": machine0.layout(),
            "initial": machine0.snapshot(),
            "steps": steps,
            "window": {"from": first, "to": max(first - 1, last)},
            "total_steps": self.total_steps,
            "status": self.status,
            "diagnostics": list(self.diagnostics),
        }
