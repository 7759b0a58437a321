"""The answer bookkeeping of a search: the shortest counterexample found of each kind, and when
one is proven shortest, so that a bounded or `stop_at_first` search may stop (engine.py's
`Explorer` and parallel.py's search share it)."""

from __future__ import annotations

import time

from .budget import Limits
from .graph import Exploration, Found


def answered(out: Exploration, limits: Limits, targets: set[str] | None, any_first: bool,
             current: int) -> bool:
    """Whether the search is answered before it expands the states of cost `current`:
    every kind of `targets` proven shortest, or (`any_first`, `stop_at_first`) a first
    violation found; `stopped_by` says which."""
    if targets is not None and proven_all(out, targets, current):
        return True
    if (any_first and out.found) or (
            limits.stop_at_first and any(f.steps <= current for f in out.found.values())):
        out.stopped_by = "first_violation"
        return True
    return False


def proven_all(out: Exploration, targets: set[str], current: int) -> bool:
    """Whether every kind of `targets` has a counterexample proven shortest, with the
    states of cost `current` about to be expanded (see `proven`)."""
    for kind in targets:
        found = out.found.get(kind)
        if found is None or found.steps > current + (found.child is not None):
            return False
    out.proven.update(targets)
    return True


def proven(out: Exploration, current: int) -> bool:
    """Stop at the first violation (`Limits.stop_at_first`) if one is already shortest.

    While states of cost `current` are expanded, every cheaper state was expanded, so no
    state left can raise a move's diagnostic in fewer than current + 1 steps, nor reach a
    deadlock (charged to the deadlocked state, not a move) in fewer than current."""
    kinds = [kind for kind, found in out.found.items()
             if found.steps <= current + (found.child is not None)]
    if not kinds:
        return False
    out.proven.update(kinds)
    out.stopped_by = "first_violation"
    return True


def record(out: Exploration, kind: str, steps: int, node: int, child: bytes | None) -> None:
    """Keep the cheapest counterexample of `kind` found so far (`child`: the key reached; None
    for a deadlock, charged to the state itself)."""
    best = out.found.get(kind)
    if out.first_found_s is None:
        out.first_found_s = time.perf_counter() - out.started
    if best is None or steps < best.steps:
        out.found[kind] = Found(kind, steps, node, child)
