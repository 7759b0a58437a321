"""How one pass of the search ends, and how the two passes of Reduction 4 make one answer.

A pass ends with the livelock analysis of what it expanded (where the program can cycle) and
drops its edges (`finish`). Where the partial-order reduction applies, `two_passes` runs the
persistent pass and, where it found anything, the bounded full search that gives the shortest
counterexamples (docs/checker.md, "Reduction 4"). The search itself is `engine.Explorer`.
"""

from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING

from . import cycles, livelock
from .budget import Budget, Limits, Stop
from .graph import LIVELOCK, Exploration

if TYPE_CHECKING:
    from .engine import Explorer

GRACE_S = 0.3
"""After a limit stopped the search: time for the livelock analysis of what was expanded."""


def two_passes(explorer: Explorer, limits: Limits, progress, cancel) -> Exploration:
    """The persistent pass decides the verdict and which kinds are reachable; where it found
    any, a second search without that reduction, bounded to stop once each of those kinds has a
    counterexample proven shortest (every kind's length in the first pass bounds it), gives
    the shortest counterexamples (docs/checker.md, "Reduction 4"); a first pass that
    left out no move the full search would try was that search and answers alone
    (`pruned_states` 0). Should a limit stop the
    second pass first, the answer keeps the first pass's counterexamples, not known to be
    shortest."""
    start = time.perf_counter()
    explorer.persistent, explorer.pruned = True, 0
    first = explorer._explore(replace(limits, stop_at_first=False), progress, cancel,
                              any_first=limits.stop_at_first, start=start)
    explorer.persistent = False
    first.persistent_states = first.states
    first.pruned_states = explorer.pruned if first.workers == 1 else None
    if first.pruned_states == 0 and first.stopped_by != "first_violation":
        return first  # every state tried every move: the full search (Reduction 4)
    first.exact = False
    # a cycle of the reduced graph: a livelock may hide in the full one (docs/checker.md)
    loops = bool(first.has_cycle) and first.complete
    if not first.found and not loops:
        return first
    spent = time.perf_counter() - start
    left = replace(limits, timeout_s=max(limits.timeout_s - spent, 0.001),
                   max_states=max(limits.max_states - first.states, 1))
    second = explorer._explore(left, progress, cancel,
                               targets=None if limits.stop_at_first or loops
                               else set(first.found),
                               start=time.perf_counter())
    kinds = set(first.found)
    new = set(second.found) - kinds - ({LIVELOCK} if loops else set())
    if first.complete and new:
        raise AssertionError(f"the partial-order pass missed {new}: "
                             "app/check/por.py's independence does not match this engine")
    if loops:
        return after_loops(first, second, start)
    if limits.stop_at_first:
        shortest = second.stopped_by == "first_violation" and bool(second.proven)
    else:
        shortest = kinds <= second.proven or (second.complete and kinds <= set(second.found))
    if not shortest:
        first.elapsed_s = time.perf_counter() - start
        first.transitions += second.transitions
        return first
    if not limits.stop_at_first:
        second.complete, second.stopped_by = first.complete, first.stopped_by
        second.note = first.note
        second.depth = max(second.depth, first.depth)
    second.persistent_states, second.pruned_states = first.states, first.pruned_states
    second.states += first.states
    second.transitions += first.transitions
    second.first_found_s = first.first_found_s
    second.workers = max(first.workers, second.workers)
    second.started = start
    second.elapsed_s = time.perf_counter() - start
    return second


def after_loops(first: Exploration, second: Exploration, start: float) -> Exploration:
    """The answer where the persistent pass found a cycle: the full search's, which
    alone decides a livelock; should a limit stop it, what either found, not complete."""
    out = second
    if (not second.complete and second.stopped_by != "first_violation"
            and not set(first.found) <= set(second.found)):
        out = first
        out.transitions += second.transitions
        out.complete, out.stopped_by = False, second.stopped_by
    else:
        out.states += first.states
        out.transitions += first.transitions
    out.persistent_states, out.pruned_states = first.states, first.pruned_states
    out.started = start
    out.elapsed_s = time.perf_counter() - start
    return out


def finish(explorer: Explorer, out: Exploration, start: float, budget: Budget | None = None,
           index: dict | None = None) -> Exploration:
    """Close the search: where the program can cycle, look for a livelock in what was
    expanded (the whole graph, or after a limit, within a short grace of its own: a fair
    cycle of expanded states is a real one), then drop the edges."""
    if out.cyclic and explorer.persistent and budget is not None:
        out.has_cycle = cycles.has_cycle(out, budget.extended(GRACE_S))
        if out.complete and (not out.has_cycle or explorer.pruned == 0):
            out.index = index
            try:  # no cycle but exact self-loops, or the pass was the full search: the
                # components of G_r and the one-state ones decide (Reduction 4)
                livelock.analyse(explorer, out, budget, stutters=True)
            except Stop as stop:
                out.complete = False
                out.stopped_by = stop.reason
        elif not out.complete and out.stopped_by not in ("first_violation", "cancelled"):
            out.index = index
            try:  # a fair cycle among what was expanded is a real one (docs/checker.md)
                livelock.analyse(explorer, out, budget.extended(GRACE_S), stutters=True)
            except Stop:
                pass
    elif (out.cyclic and budget is not None and index is not None
            and out.stopped_by not in ("first_violation", "cancelled")):
        out.index = index
        work = budget if out.complete else budget.extended(GRACE_S)
        try:
            livelock.analyse(explorer, out, work)
        except Stop as stop:
            if out.complete:
                out.complete = False
                out.stopped_by = stop.reason
    out.index = None
    out.edges = out.edges[:0]
    out.states = len(out.keys)
    out.elapsed_s = time.perf_counter() - start
    return out


def stopped(explorer: Explorer, out: Exploration, stop: Stop, start: float,
            budget: Budget | None = None, index: dict | None = None) -> Exploration:
    out.stopped_by = stop.reason
    out.note = stop.message
    return finish(explorer, out, start, budget, index)
