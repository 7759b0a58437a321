"""Instruction families: each module of app/sim/families registers, in one `FAMILY` value, every
part of the engine its instructions need (line handlers, the tests that block a line, what a
blocked agent waits for and how a deadlock report says it, its snapshot part, its rows of the
instruction table), and `app.sim.families.FAMILIES` finds them all, so adding a family is adding
one module (docs/engine.md, "How to add an instruction family"). This module only says what a
family registers; it imports nothing of the engine.

A family's per-agent state lives in hidden registers it names (`registers`): the machine gives
every agent of a program that uses the family's lines those registers, so freezing a state, the
checker's symmetry between identical agents and every replay see them with no change of theirs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class Movers:
    """Movers a family adds after the built-in ones (agents, the tensor core, TMA copies and
    their holds), for work that goes on after the line that started it."""

    names: Callable
    """(machine) -> the names of the movers that exist now, in a fixed order."""
    ready: Callable
    """(machine) -> the indices (into `names`) of those that can move now."""
    step: Callable
    """(machine, index, record) -> None: make one move."""
    why_not: Callable = lambda m, k: "it cannot move now"
    """(machine, index) -> why that mover cannot move, in one phrase."""


@dataclass(frozen=True, slots=True)
class Family:
    """One instruction family: what the engine needs to run, block, report and show its lines.

    Every mapping is keyed by line kind (`Line.kind`, the `kind` of the family's `Form`s)."""

    name: str
    """How the instruction reference (docs/language.md) titles the family."""
    order: int
    """Where the family stands in the instruction reference (lower first)."""
    handlers: dict = field(default_factory=dict)
    """kind -> (machine, agent, registers, operands, record) -> None, or `STAY`: the agent
    stays on the line, parked (a `bar.sync` that waits for the barrier to complete), and
    whoever completes it moves the agent on (`Machine.advance`)."""
    blockers: dict = field(default_factory=dict)
    """kind -> (machine, agent, registers, operands) -> whether the agent can move now."""
    waiting: dict = field(default_factory=dict)
    """kind -> (machine, agent, registers, operands) -> what the line waits for (a dict, shown
    as the agent's `waiting_on`): for every kind in `blockers`."""
    explain: dict = field(default_factory=dict)
    """kind -> (machine, agent, waiting) -> the deadlock report's phrase for an agent blocked
    there (`waiting` is what `waiting` returned)."""
    arrives: tuple[str, ...] = ()
    """Kinds that arrive on their mbarrier operand (for "nothing left will arrive on it")."""
    deadlock: Callable | None = None
    """(machine) -> diagnostics the family adds to a deadlock report (before `deadlock`)."""
    snapshot: Callable | None = None
    """(machine) -> {key: value} the family adds to every snapshot (docs/trace-format.md)."""
    snapshot_inputs: Callable | None = None
    """(machine) -> a value, cheaper than `snapshot`, that is equal in two states whose
    snapshot parts are equal: consecutive snapshots (`app.sim.snapshot.Snapshots`, a trace
    window) reuse the part while it stays equal. None: the part is built at every step."""
    registers: tuple[str, ...] = ()
    """Hidden per-agent registers (start at 0) that a program using the family's lines gets;
    `Machine.hidden[name]` is the register's index in each agent's register list."""
    movers: Movers | None = None
    holds: Callable | None = None
    """(machine, agent, stages) -> the stages (a bit each), of those an arrive of the agent on
    their release barrier releases, that the agent still holds: an asynchronous read of them
    is not known to be complete (a `wgmma.mma_async` before its `wgmma.wait_group`). The family
    releases them itself later (`core.discharge`)."""
    forget: Callable | None = None
    """(machine, knowledge bits) -> None: a new write into these chunks (ordering.forget); a
    family that keeps knowledge bits in its own state drops them there."""
    reads: Callable | None = None
    """(machine, agent, registers, name) -> None: a line reads the value named `name` (the
    value of `st.global`); a family that writes it asynchronously checks the read."""
    slots: Callable | None = None
    """(program) -> how many knowledge slots (ordering.py) the family keeps: what its
    synchronizations release, carried to whoever they order (`Machine.slot_base[name]` is the
    first one's index in `Machine.carried`)."""
    exits: bool = False
    """Whether an agent's exit can let another agent's line move (a barrier that waits only
    for threads that have not exited): the checker then never makes a move that ends an agent
    as a local one (app/check/model.py)."""
    forms: tuple = ()
    """The family's rows of the instruction table (app/sim/isa.py: `Form`s and `Gap`s)."""
    writes_smem: frozenset | None = None
    """The kinds of the family whose moves may write shared memory (a TMA load's landing
    chunks, `st.shared`), so that every other kind of it never does; None (the default): not
    declared, every kind is taken to write. The checker makes bulk-store reads at once only
    in programs whose kinds all declare they write nothing (app/check/model.py)."""
    fused: dict = field(default_factory=dict)
    """kind -> (line, code) -> (the Python expression, over `m`, `a` and `r`, of the line's
    `blockers` test with its operands written in (`code(operand)`: an operand's expression
    over `r`, None where it has none), the functions it calls by name), or None: the line
    keeps the generic test. One
    function per line instead of a test calling an operand function per operand: the tests
    run for every agent at every step (app/sim/agent_code.py)."""


STAY = "stay"
"""A handler's answer that keeps the agent on its line (see `Family.handlers`)."""
