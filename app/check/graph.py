"""What one search keeps: the stored states (keys, costs, parents), the edges between them where
the program can cycle (for the livelock analysis, app/check/livelock.py), and the best
counterexample found of each kind."""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

from app.sim.config import PipelineConfig

LIVELOCK = "livelock"


@dataclass
class Found:
    """The best counterexample of one diagnostic kind seen so far."""

    kind: str
    steps: int
    node: int
    """The state the last move starts from (for a deadlock: the deadlocked state itself)."""
    child: bytes | None
    """The key of the state the last move leads to (None for a deadlock or a livelock)."""
    moves: list[str] | None = None
    """A livelock's whole lasso, as mover names (the prefix, then the cycle)."""
    cycle_from: int | None = None
    """A livelock's first step of the cycle: after the last move the state is the state after
    move `cycle_from - 1`."""


@dataclass
class Progress:
    states: int
    transitions: int
    depth: int
    frontier: int
    elapsed_s: float
    found: dict[str, int] = field(default_factory=dict)
    """Each kind found so far and the length of its best schedule yet: a client knows the
    verdict `unsafe` from the first progress report that lists one."""


@dataclass
class Exploration:
    """What one search found, and enough of the state graph to rebuild its counterexamples."""

    cfg: PipelineConfig
    reduced: bool
    found: dict[str, Found] = field(default_factory=dict)
    states: int = 0
    transitions: int = 0
    depth: int = 0
    """Every state of cost below this was expanded (the whole graph when `complete`)."""
    complete: bool = False
    stopped_by: str | None = None
    elapsed_s: float = 0.0
    first_found_s: float | None = None
    """When the first violation was found: from then on the verdict is `unsafe` whatever the
    rest of the search finds (a client with a shorter `timeout_s` gets it then)."""
    started: float = field(default=0.0, repr=False)
    keys: list[bytes] = field(default_factory=list, repr=False)
    parent: array = field(default_factory=lambda: array("q"), repr=False)
    cost: array = field(default_factory=lambda: array("q"), repr=False)
    cyclic: bool = False
    """The program can come back to a state (`app.sim.livelock.can_cycle`): the search keeps
    its edges, and the livelock analysis runs over them."""
    edge_start: array = field(default_factory=lambda: array("q"), repr=False)
    """Per stored state, where its successors start in `edges` (-1: not expanded)."""
    edge_stop: array = field(default_factory=lambda: array("q"), repr=False)
    edges: array = field(default_factory=lambda: array("l"), repr=False)
    """The successors of each expanded state, by state number (cyclic programs only)."""
    loop_fair: bytearray = field(default_factory=bytearray, repr=False)
    """Per state: it has a self-loop and every class of mover enabled there has one (the
    coarse fairness of a one-state cycle, app/check/livelock.py)."""
    index: dict | None = field(default=None, repr=False)
    """Key -> state number while the livelock analysis needs it."""
    note: str | None = None
    """Why a limit stopped the search, where `stopped_by` alone does not say (a runaway)."""

    @property
    def verdict(self) -> str:
        """`unsafe` as soon as anything was found, even when a limit stopped the search (every
        counterexample is a real schedule); `inconclusive` only when a limit stopped a search
        that had found nothing. `complete` says whether the whole graph was explored."""
        if self.found:
            return "unsafe"
        return "safe" if self.complete else "inconclusive"

    proven: set[str] = field(default_factory=set)
    """Kinds whose counterexample is known shortest before `depth` says so: one found while
    expanding states of cost d with length d + 1, the least any unexpanded state can give."""

    exact: bool = True
    """Whether the search's costs are the true lengths of schedules (false for the persistent
    pass of the partial-order reduction, app/check/por.py: its paths may be longer)."""
    persistent_states: int | None = None
    """States the persistent pass stored, where the partial-order reduction ran."""
    pruned_states: int | None = None
    """States where the persistent pass tried fewer moves than the full search would (0: it
    was the full search and answered alone; None: no persistent pass, or helpers ran it)."""
    has_cycle: bool | None = None
    """Whether the expanded states hold a cycle (the persistent pass of a cyclic program only:
    where none, no livelock is reachable at all; docs/checker.md, "Reduction 4")."""
    workers: int = 1
    """Processes the search ran on: itself and its helpers (app/check/parallel.py)."""

    def is_shortest(self, kind: str) -> bool:
        """Whether the counterexample for `kind` is known to be a shortest one (for a livelock:
        its prefix, once the whole graph was searched)."""
        if not self.exact:
            return False
        if kind == LIVELOCK:
            return self.complete
        return self.complete or self.found[kind].steps <= self.depth or kind in self.proven
