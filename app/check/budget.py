"""What one check may spend, and the one place every CPU loop of the checker asks whether it may
go on: the search between expansions, `close` inside a long run of local moves, the livelock
analysis and the counterexample rebuild. A check ends within its `timeout_s` (plus the time one
look takes), at `max_states`, at its memory estimate, when cancelled, or at a runaway closure."""

from __future__ import annotations

import time
from dataclasses import dataclass
from threading import Event

MAX_LOCAL_MOVES = 20_000
"""Local moves one closure may make (a program's own runs of local lines are a few moves; a
`while (1)` that issues bulk stores and never waits makes them forever)."""


@dataclass(frozen=True)
class Limits:
    max_states: int = 1_000_000
    timeout_s: float = 20.0
    max_memory: int = 1 << 30
    """Bytes the stored states may take (an estimate: key bytes plus a fixed cost per state)."""
    stop_at_first: bool = False
    """Stop once one kind's counterexample is known to be a shortest one (SPIN stops at its
    first error too): the verdict `unsafe` with that counterexample, `complete` false."""
    max_local_moves: int = MAX_LOCAL_MOVES
    """Moves one closure of local moves may make before the search stops as a runaway."""


class Stop(Exception):  # noqa: N818 - a stop, not an error
    """A limit was hit inside a loop that cannot return a partial answer itself."""

    def __init__(self, reason: str, message: str | None = None):
        super().__init__(reason, message)
        self.reason = reason
        self.message = message


class Budget:
    """The clock, the memory estimate and the cancel flag of one check."""

    def __init__(self, limits: Limits, cancel: Event | None = None,
                 start: float | None = None):
        self.limits = limits
        self.cancel = cancel
        self.start = time.perf_counter() if start is None else start
        self.deadline = self.start + limits.timeout_s
        self.memory = lambda: 0
        """The search's estimate of what it stores (set by the search)."""
        self.states = lambda: 0

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def reason(self, states: int | None = None, memory: int | None = None) -> str | None:
        """Why the check must stop now, or None."""
        if self.cancel is not None and self.cancel.is_set():
            return "cancelled"
        if (self.states() if states is None else states) >= self.limits.max_states:
            return "max_states"
        if time.perf_counter() >= self.deadline:
            return "timeout"
        if (self.memory() if memory is None else memory) >= self.limits.max_memory:
            return "memory"
        return None

    def check(self) -> None:
        """Raise `Stop` when a limit is hit (for loops with no partial answer to give)."""
        reason = self.reason()
        if reason is not None:
            raise Stop(reason)

    def extended(self, grace_s: float) -> Budget:
        """The same flags with the deadline moved to `grace_s` after now and no state limit:
        the work after a stopped search (its counterexamples) gets a short time of its own."""
        out = Budget(Limits(10 ** 12, self.limits.timeout_s, self.limits.max_memory),
                     self.cancel, self.start)
        out.deadline = max(self.deadline, time.perf_counter() + grace_s)
        out.memory = self.memory
        return out


class CloseGuard:
    """What `closure.close` consults every few moves past its first ones: the budget, and the
    bound on one closure's moves (a runaway: `Stop("runaway")`, its message naming the agent)."""

    __slots__ = ("budget", "max_moves", "cyclic")

    def __init__(self, budget: Budget, max_moves: int, cyclic: bool = True):
        self.budget = budget
        self.max_moves = max_moves
        self.cyclic = cyclic
        """Whether the program can repeat a state (else `close` need not look for a loop)."""

    def tick(self, moves: int, who: str) -> None:
        if moves >= self.max_moves:
            raise Stop("runaway", f"One closure ran away: {who} made {moves:,} moves in a row "
                                  "that no other mover sees (local lines, bulk-store reads) "
                                  "without its state repeating: the program may not terminate")
        reason = self.budget.reason()
        if reason is not None:
            raise Stop(reason, f"The limit came while {who} had made {moves:,} moves in a row "
                               "that no other mover sees: the program may not terminate")
