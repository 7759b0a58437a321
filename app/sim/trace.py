"""Runs and traces: the single source of truth that the API, the UI, the checker and replay share.

A `Run` keeps only what it cannot recompute: the move chosen at every step (one byte each while
at most 256 movers are ready, wider past that), the
frozen machine state every `CHECKPOINT_EVERY` steps, and the diagnostics. Any step's record and
snapshot is rebuilt by thawing the checkpoint before it and replaying at most that many moves, so a
million-step run costs about a megabyte and step 900,000 is as cheap to show as step 9. The trace
document layout is written down in docs/trace-format.md.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable

from . import livelock
from . import robin as robin_loop
from .config import PipelineConfig
from .machine import RUNNING, Machine, MoveError
from .schedule import Manual, RoundRobin, Schedule, SeededRandom
from .snapshot import Snapshots

FORMAT = "mbarrier-inspector/trace"
VERSION = 1
ENGINE = "mbarrier-inspector 0.1.0"
STEP_LIMIT = 1_000_000
CHECKPOINT_EVERY = 256
STEP_LIMIT_STATUS = "step_limit"
ROUND_ROBIN = Schedule("round_robin")
MAY_NOT_TERMINATE = ("The program may not terminate: it has a loop that need not end, and the run "
                     "reached its step limit without its state repeating (a counter that grows "
                     "forever, such as a `while (1)` that arrives again and again).")


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
        self.cycle_from: int | None = None
        """Where the cycle of a livelocked run starts: the state after its last step equals the
        state after step `cycle_from - 1` (status `livelock`)."""
        self.watch = livelock.can_cycle(cfg.program)
        """Whether the program can come back to a state, so the run looks for a repeat."""
        self._lasso_checked = -1

    def _widen(self) -> array:
        """The choices in 32-bit slots: a move numbered past 255 (a program with more than 256
        movers ready at once, such as hundreds of copies in flight) fits no byte."""
        self.choices = array("I", iter(self.choices))  # not the bytes as raw words
        return self.choices

    def _record(self, choices, move: int):
        """Append `move` to `choices`; the (maybe widened) list it went into."""
        try:
            choices.append(move)
        except (ValueError, OverflowError):
            choices = self._widen()
            choices.append(move)
        return choices

    def __getstate__(self) -> dict:
        """Runs travel between processes (built in a worker, served by the event loop's
        process) without their live machine, whose compiled operands do not pickle: the last
        checkpoint and the choices after it rebuild it."""
        state = {name: getattr(self, name) for name in
                 ("cfg", "schedule", "scenario", "step_limit", "choices", "checkpoints",
                  "diagnostics", "cycle_from", "watch")}
        state["status_now"] = self.machine.status
        return state

    def __setstate__(self, state: dict) -> None:
        status = state.pop("status_now")
        state.setdefault("cycle_from", None)
        state.setdefault("watch", livelock.can_cycle(state["cfg"].program))
        self._lasso_checked = -1
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
        if self.cycle_from is not None:
            return livelock.LIVELOCK
        if self.machine.status == RUNNING and self.total_steps >= self.step_limit:
            return STEP_LIMIT_STATUS
        return self.machine.status

    def extend(self, chooser: Callable[[Machine], int | None], max_steps: int) -> int:
        """Make up to `max_steps` moves picked by `chooser`; returns how many were made.

        In a program that can come back to a state (`livelock.can_cycle`), a round-robin run
        stops with status `livelock` when its state and the chooser's repeat, a random run when
        its state repeats while each state leaves one mover to choose, and a manual run whose
        moves end on a state it was in, with a fair cycle between, is a livelock too
        (app.sim.livelock, docs/trace-format.md)."""
        if self.cycle_from is not None:
            return 0
        if self.watch and isinstance(chooser, RoundRobin | SeededRandom):
            return self._extend_watching(chooser, max_steps)
        made = self._extend(chooser, max_steps)
        if (self.watch and isinstance(chooser, Manual) and chooser.exhausted
                and self.machine.status == RUNNING):
            self._find_lasso()
        return made

    def _extend(self, chooser: Callable[[Machine], int | None], max_steps: int) -> int:
        machine = self.machine
        choices = self.choices
        diagnostics = self.diagnostics
        limit = min(max_steps, self.step_limit - len(choices))
        until_checkpoint = CHECKPOINT_EVERY - machine.step_no % CHECKPOINT_EVERY
        if type(chooser) is RoundRobin and robin_loop.usable(machine):
            made, chooser.last = robin_loop.extend(self, machine, chooser.last, limit,
                                                   until_checkpoint, CHECKPOINT_EVERY)
            return made
        made = 0
        step = machine.step
        append = choices.append
        while made < limit and machine.status == RUNNING:
            move = chooser(machine)
            if move is None:
                break
            record = step(move)
            if move > 255:
                choices = self._record(choices, move)
                append = choices.append
            else:
                append(move)
            made += 1
            if record["diagnostics"]:
                diagnostics.extend(record["diagnostics"])
            until_checkpoint -= 1
            if not until_checkpoint:
                self.checkpoints.append(machine.freeze())
                until_checkpoint = CHECKPOINT_EVERY
        return made

    def append(self, move: int) -> dict:
        """Make one given move (a student stepping by hand); returns its step record."""
        if self.cycle_from is not None:
            raise MoveError("the run has ended (livelock: it repeats forever from step "
                            f"{self.cycle_from})")
        if self.total_steps >= self.step_limit:
            raise MoveError(f"the run reached its limit of {self.step_limit} steps")
        if move not in self.machine.ready:
            raise MoveError(self.machine.why_not(move))
        record = self.machine.step(move)
        self._record(self.choices, move)
        self.diagnostics.extend(record["diagnostics"])
        if self.machine.step_no % CHECKPOINT_EVERY == 0:
            self.checkpoints.append(self.machine.freeze())
        return record

    def truncate(self, step: int) -> None:
        """Forget every step after `step` (stepping back, then choosing differently)."""
        step = max(0, min(step, self.total_steps))
        if step < self.total_steps:
            self.cycle_from = None
            self._lasso_checked = -1
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
        """Step records `first..last` (1-based, inclusive), each with its snapshot if asked
        (`Snapshots`: the snapshots share the parts that did not change; read them only)."""
        first = max(1, first)
        last = min(last, self.total_steps)
        if first > last:
            return []
        machine = self.machine_at(first - 1)
        return self._replay(machine, first, last, Snapshots(machine) if snapshots else None)

    def patched_steps(self, first: int, last: int) -> tuple[dict, list[dict]]:
        """The snapshot after step `first - 1` (the last step, past the run's end) and step
        records `first..last`, each with `patch`, what changed since the step before
        (`snapshot.patch`) in place of its snapshot: a window as the browser plays it."""
        first = max(1, first)
        last = min(last, self.total_steps)
        machine = self.machine_at(min(first - 1, self.total_steps))
        snapshots = Snapshots(machine)
        base = snapshots.take_base()
        records = self._replay(machine, first, last, snapshots, patches=True)
        return base, records

    def _replay(self, machine: Machine, first: int, last: int, snapshots: Snapshots | None,
                patches: bool = False) -> list[dict]:
        out = []
        for move in self.choices[first - 1:last]:
            record = machine.step(move)
            if self.cycle_from is not None and machine.step_no == self.total_steps:
                record["diagnostics"].extend(
                    d for d in self.diagnostics
                    if d["kind"] == livelock.LIVELOCK and d["step"] == machine.step_no)
            if patches:
                record["patch"] = snapshots.patch_next()
            elif snapshots is not None:
                record["snapshot"] = snapshots.take()
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
            **({"cycle_from": self.cycle_from} if self.cycle_from is not None else {}),
            **({"note": MAY_NOT_TERMINATE} if self.watch and self.status == STEP_LIMIT_STATUS
               else {}),
        }

    # ------------------------------------------------------------------------------ livelock

    def _extend_watching(self, chooser, max_steps: int) -> int:
        """`_extend` that looks for a repeat with Brent's algorithm (constant memory, exact).

        Round robin is a function of (state, the chooser's last move), so the first repeat of
        that pair starts a cycle the run would follow forever; a random run is a function of
        its state alone while every state leaves one mover (the search restarts wherever it
        has a choice). The tortoise is compared by registers and barrier phases first (cheap),
        then in full."""
        machine, choices = self.machine, self.choices
        diagnostics, checkpoints = self.diagnostics, self.checkpoints
        robin = isinstance(chooser, RoundRobin)
        made, origin = 0, self.total_steps
        begin = origin
        start_last = chooser.last if robin else None
        power = lam = 1
        regs, barriers = machine.regs, machine.barriers
        t_regs, t_frozen, t_last = _copy_regs(regs), machine.freeze(), start_last
        t_phases = [b.phase for b in barriers]
        limit = min(max_steps, self.step_limit - len(choices))
        while made < limit and machine.status == RUNNING:
            forced = robin or len(machine.ready) <= 1
            move = chooser(machine)
            if move is None:
                break
            record = machine.step(move)
            if move > 255:
                choices = self._record(choices, move)
            else:
                choices.append(move)
            made += 1
            if record["diagnostics"]:
                diagnostics.extend(record["diagnostics"])
            if machine.step_no % CHECKPOINT_EVERY == 0:
                checkpoints.append(machine.freeze())
            if not forced:  # a real choice: the forced sequence starts after it
                origin, power, lam = len(choices), 1, 1
                t_regs, t_frozen = _copy_regs(regs), machine.freeze()
                t_phases = [b.phase for b in barriers]
                continue
            last = move if robin else None
            if (last == t_last and regs == t_regs and [b.phase for b in barriers] == t_phases
                    and machine.freeze() == t_frozen):
                self._close_cycle(origin, start_last if robin else False, lam)
                return self.total_steps - begin
            if power == lam:
                t_regs, t_frozen, t_last = _copy_regs(regs), machine.freeze(), last
                t_phases = [b.phase for b in barriers]
                power <<= 1
                lam = 0
            lam += 1
        return made

    def _close_cycle(self, origin: int, start_last, lam: int) -> None:
        """A repeat with period `lam` was seen after step `origin`: find the first state of the
        cycle (two machines `lam` steps apart, moved on together until their keys agree), cut
        the run after one turn of it, and report the livelock."""
        choices = self.choices

        def key(machine: Machine, step: int):
            if start_last is False:
                return machine.freeze()
            last = start_last if step == origin else choices[step - 1]
            return machine.freeze(), last

        first, ahead = self.machine_at(origin), self.machine_at(origin + lam)
        start = origin
        while key(first, start) != key(ahead, start + lam):
            first.step(choices[start])
            ahead.step(choices[start + lam])
            start += 1
        self.truncate(start + lam)
        self._mark(start + 1)

    def _find_lasso(self) -> None:
        """A manual run that ends on a state it was in, with a fair cycle between, repeats
        forever: mark it a livelock from the first step of the longest such cycle (a longer
        cycle is fair whenever a shorter one is)."""
        n = self.total_steps
        if n == self._lasso_checked or n == 0:
            return
        self._lasso_checked = n
        final = self.machine.freeze()
        final_regs = self.machine.regs
        machine = self.machine_at(0)
        start = None
        for step in range(n):
            if machine.regs == final_regs and machine.freeze() == final:
                start = step
                break
            machine.step(self.choices[step])
        if start is None:
            return
        enabled, moved = [], set()
        for move in self.choices[start:]:
            enabled.append(livelock.enabled_ids(machine))
            moved.add(livelock.mover_id(machine, move))
            machine.step(move)
        if not livelock.unfair_movers(enabled, moved):
            self._mark(start + 1)

    def mark_livelock(self, cycle_from: int) -> None:
        """Declare the run a livelock whose cycle starts at `cycle_from` (the state after the
        last step must equal the state after step `cycle_from - 1`)."""
        if not 1 <= cycle_from <= self.total_steps:
            raise ValueError(f"cycle_from {cycle_from} is outside 1..{self.total_steps}")
        if self.machine_at(cycle_from - 1).freeze() != self.machine.freeze():
            raise ValueError(f"the state after step {self.total_steps} is not the state after "
                             f"step {cycle_from - 1}")
        self._mark(cycle_from)

    def _mark(self, cycle_from: int) -> None:
        machine = self.machine_at(cycle_from - 1)
        movers = set()
        for move in self.choices[cycle_from - 1:]:
            movers.add(livelock.mover_id(machine, move))
            machine.step(move)
        self.cycle_from = cycle_from
        self.diagnostics.append(livelock.diagnostic(self.machine, self.total_steps, cycle_from,
                                                    movers))


def _copy_regs(regs: list[list[int]]) -> list[list[int]]:
    return [list(r) for r in regs]
