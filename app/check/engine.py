"""Exhaustive exploration of every schedule of one pipeline configuration: which diagnostic kinds
some interleaving of the agents, the tensor core and the TMA engine's chunk moves can reach, and
the shortest schedule that reaches each.

The search is a shortest-path search over engine states (`Machine.freeze()`), deduplicated by a
canonical key. Every move is made by `Machine.step`; the checker never computes an effect itself.
Two reductions shrink the state graph, and neither changes the verdict, the set of reachable
diagnostic kinds, or the length of the shortest counterexample of any kind:

1. **Local moves are made at once (a persistent-set reduction).** A purely local line
   (model.LOCAL_KINDS: `++pipe_state`, `commit_group`, a `wait_group` that can return, ...)
   touches only its agent's own registers; it emits no diagnostic but `deadlock`, never enables
   or disables another mover, stays enabled until made, and commutes with every other move. So
   {that move} is a persistent set, and after every move the search makes all enabled local
   moves (closure.close). Every schedule of the full graph is a reordering of a reduced one
   with the local moves moved earlier, plus local moves the schedule never made (the agent never
   moved again). Once a program has a `while` loop the state graph has cycles; the cycle
   proviso holds because `close` never stores the states between its moves, so every cycle of
   the stored graph passes a state where every move was tried, except a cycle of local moves
   inside one closure, which `close` finds (Brent) and hands back as ordinary moves. Where no
   loop can bring an agent back (`app.sim.livelock.can_cycle`: only counted `for` loops) the
   graph is acyclic and no edge is kept.

   **Shortest counterexamples are kept exact by charging local moves late.** Moving a local move
   earlier does not change a schedule's length, but the reduced search also makes local moves no
   schedule needs (an agent that never moves again). So a local move costs nothing when made; it
   is charged to its agent's next move (which then costs 1 + the agent's pending local moves).
   The search is Dijkstra's algorithm with those costs (a bucket queue: costs are small
   integers). For a diagnostic raised by a move of agent A from a state at cost d, the shortest
   schedule has d + 1 + pending(A) steps: the counterexample is the reduced path with every
   other agent's trailing, uncharged local moves dropped (they commute with everything, so what
   is left is still a schedule, and it raises the same diagnostic). A deadlock needs every move
   that was ever enabled, so its length is the cost of the deadlocked state plus all pending
   local moves. Conversely every full schedule maps to a reduced path of cost equal to its
   length, so these minima are the true shortest lengths. The reduced search and the unreduced
   breadth-first search are compared by tests/check/test_reduction.py.

   Bulk-store issues and chunk reads are made at once too where they are invisible
   (model.store_reads_invisible); a read is charged only when a `wait_group` of its agent needs
   its group (docs/checker.md, "Reduction 1b").

2. **Symmetry and canonical order.** States are keyed with their in-flight TMA copies sorted and
   identical agents (the consumers of a ring, any number of them) renamed into a canonical order
   by one sort on each agent's full signature (model.Canonical).
   Renamed states are bisimilar: they reach the same diagnostic kinds in the same number of steps.
   A counterexample is rebuilt on concrete states by replaying, at each edge of the path, the move
   whose successor has the recorded key.

3. **A twin's move is not tried.** Identical agents with equal full signatures in a state move
   to states with the same key, at the same cost, raising the same kinds; only the lowest-numbered
   one's move is made (model.Canonical.twins).

**Livelock** (app/check/livelock.py): after the search, a fair strongly connected component of
the stored graph (weak fairness: every mover enabled in all its states moves in it) is a
livelock; it is checked exactly on its concrete states and answered with a lasso.

Bounded work: the search stops at `max_states` states, `timeout_s` seconds, an estimate of
`max_memory` bytes, when cancelled, or at a runaway closure (app/check/budget.py), and reports
how far it got. With `stop_at_first` it also
stops as soon as one kind's counterexample is proven shortest (`shortest.proven`), the answer a
client wanting only the verdict needs, as SPIN gives it.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Callable
from threading import Event

from app.sim.config import PipelineConfig
from app.sim.detectors import deadlock_diagnostics
from app.sim.livelock import can_cycle
from app.sim.machine import RUNNING, Machine

from . import counterexample, expand, livelock, parallel, passes, shortest
from .budget import Budget, CloseGuard, Limits, Stop
from .graph import LIVELOCK, Exploration, Found, Progress
from .layout import F_STATUS
from .memory import release_memory
from .model import (
    Canonical,
    close,
    local_lines,
    new_pend,
    pending_total,
    store_reads_invisible,
)
from .por import Independence, applies
from .state_codec import fits

__all__ = ["Exploration", "Explorer", "Found", "Limits", "Progress", "release_memory"]

DEADLOCK = "deadlock"
NODE_OVERHEAD = 160
"""Bytes per stored state besides its key's bytes: the bytes object's header, dict slot, list
slot, cost and parent arrays. The parts keys name are counted by `Canonical.part_bytes`."""
EDGE_BYTES = 8
"""Bytes per kept edge (cyclic programs only), plus 16 a state for where its edges start."""
CHECK_EVERY = 128
"""Expansions between looks at the clock, the memory estimate and the cancel flag."""
PROGRESS_EVERY_S = 0.2
DEFAULT_LIMITS = Limits()
EARLY_ANALYSIS = 1024
"""With `stop_at_first`, expansions before the first look for a livelock in what was expanded
so far (then after twice as many, and so on: at most twice the work of one analysis at the
end)."""


class Explorer:
    """One search over one configuration (see the module docstring)."""

    def __init__(self, cfg: PipelineConfig, reduce: bool = True, por: bool = True,
                 por_cycles: bool = False):
        self.cfg = cfg
        self.reduce = reduce
        self.machine = Machine(cfg)
        self.local = local_lines(self.machine, reduce)
        self.reads = store_reads_invisible(self.machine, reduce)
        self.canonical = Canonical(self.machine, symmetry=reduce)
        if not reduce:
            self.canonical.key = self.canonical.plain
            self.canonical.form = _as_it_is
        self.cyclic = can_cycle(cfg.program)
        self.independence = (Independence(self.machine, self.cyclic)
                             if reduce and por and applies(self.machine, self.cyclic, por_cycles)
                             else None)
        """The partial-order reduction (app/check/por.py) where it applies to this program: on a
        program that can cycle only with `por_cycles` (off by default: measured, it saved no
        state on the polling rings and doubled the cost of an unsafe one; docs/checker.md)."""
        self.persistent = False
        """Whether `successors` tries only a persistent set (the first pass of `explore`)."""
        self.widen = False
        """Set by the search while `successors` runs: the cycle proviso failed, so the state
        is expanded fully once the chosen moves are made (`_explore`)."""
        self.pruned = 0
        """States whose expansion in the persistent pass left out a move the full search
        would try: where none did, that pass was the full search (`passes.two_passes`)."""
        self.guard: CloseGuard | None = None
        """What `close` consults in a long closure (set for each search)."""
        self.lent: parallel.Lent | None = None
        self.helpers = 0
        """Slots for helper processes, and how many at most (set for each `explore`)."""
        self.fast_restore = fits(self.machine)
        """Whether `successors` may put the machine back part by part (state_codec)."""
        self.settled: tuple | None = None
        """The state `successors` left the machine in (its last successor's)."""

    def root(self, moves: list | None = None) -> tuple[Machine, list[int], list[dict]]:
        """A machine in the initial state, local moves made; its pending counts; diagnostics."""
        machine = Machine(self.cfg)
        pend = new_pend(machine.n_agents)
        diagnostics = close(machine, self.local, pend, moves, self.reads, self.guard)
        return machine, pend, diagnostics

    def successors(self, frozen: tuple, pend: list[int], numbers: tuple | None = None,
                   at: tuple | None = None):
        """`expand.successors` from this explorer's machine (see there)."""
        return expand.successors(self, frozen, pend, numbers, at)

    # ---------------------------------------------------------------------------- search

    def _explore(self, limits: Limits, progress: Callable[[Progress], None] | None,
                 cancel: Event | None, targets: set[str] | None = None,
                 any_first: bool = False, start: float | None = None) -> Exploration:
        """One search. `targets`: stop once each of these kinds has a counterexample proven
        shortest (the bounded second pass). `any_first`: stop at the first violation found,
        whatever its length (the persistent pass with `stop_at_first`)."""
        if start is None:
            start = time.perf_counter()
        if self.lent is not None and self.helpers > 0:
            out = parallel.run(self, limits, progress, cancel, self.lent, self.helpers,
                               targets, any_first, start)
            if out is not None:
                return out
        out = Exploration(self.cfg, self.reduce, started=start, cyclic=self.cyclic)
        budget = Budget(limits, cancel, start)
        self.guard = CloseGuard(budget, limits.max_local_moves, self.cyclic)
        key_of = self.canonical.key
        decode = self.canonical.decode_numbers
        try:
            machine, pend, _ = self.root()
        except Stop as stop:
            return passes.stopped(self, out, stop, start)
        root_key = key_of(machine.freeze(), pend)
        keys, parent = out.keys, out.parent
        index = {root_key: 0}
        keys.append(root_key)
        parent.append(-1)
        cost = out.cost
        cost.append(0)
        cyclic = self.cyclic
        proviso = cyclic and self.persistent
        edge_start, edge_stop, edges, loop_fair = (out.edge_start, out.edge_stop, out.edges,
                                                   out.loop_fair)
        if cyclic:
            edge_start.append(-1)
            edge_stop.append(-1)
            loop_fair.append(0)
        terminal = bytearray([machine.status != RUNNING])
        buckets: dict[int, list[int]] = {0: [0]}
        memory = len(root_key) + NODE_OVERHEAD
        budget.states = keys.__len__
        canonical = self.canonical  # not `self`: the explorer holds the budget (no cycle)
        budget.memory = lambda: (memory + canonical.part_bytes
                                 + EDGE_BYTES * len(edges) + 16 * len(edge_start))
        expanded = 0
        early = EARLY_ANALYSIS if cyclic and (limits.stop_at_first or any_first) else 0
        next_report = start + PROGRESS_EVERY_S
        at = None  # the machine's state, where nothing but `successors` moved it since
        try:
            while buckets:
                current = min(buckets)
                bucket = buckets.pop(current)
                out.depth = current
                if shortest.answered(out, limits, targets, any_first, current):
                    return passes.finish(self, out, start)
                for position, node in enumerate(bucket):
                    if cost[node] != current:
                        continue  # queued again at a lower cost, and expanded then
                    frozen, node_pend, numbers = decode(keys[node])
                    if terminal[node]:
                        if frozen[F_STATUS] == DEADLOCK:
                            at = None
                            self.machine.thaw(frozen)
                            for diagnostic in deadlock_diagnostics(self.machine):
                                shortest.record(out, diagnostic["kind"], current + pending_total(
                                    node_pend, self.machine.n_agents), node, None)
                            if limits.stop_at_first and shortest.proven(out, current):
                                return passes.finish(self, out, start)
                        continue
                    expanded += 1
                    if early and expanded == early:  # stop_at_first: a fair cycle found so far
                        early *= 2
                        at = None
                        out.index = index
                        livelock.analyse(self, out, budget, stutters=self.persistent)
                        if LIVELOCK in out.found:
                            out.stopped_by = "first_violation"
                            return passes.finish(self, out, start)
                    if expanded % CHECK_EVERY == 0:
                        now = time.perf_counter()
                        stop = budget.reason()
                        if stop:
                            out.stopped_by = stop
                            return passes.finish(self, out, start, budget, index)
                        if progress is not None and now >= next_report:
                            next_report = now + PROGRESS_EVERY_S
                            queued = sum(map(len, buckets.values())) + len(bucket) - position
                            progress(Progress(len(keys), out.transitions, current, queued,
                                              now - start,
                                              {k: f.steps for k, f in out.found.items()}))
                    children = [] if cyclic else None
                    looped: list[int] = []
                    self.widen = proviso  # until a chosen move leaves the state (proviso)
                    for move, step_cost, record, closing, machine, after, reached_state in \
                            self.successors(frozen, node_pend, numbers, at):
                        out.transitions += 1
                        reached = current + step_cost
                        key = key_of(reached_state, after, frozen, numbers)
                        at_stop = machine.stop_report if machine.status == DEADLOCK else ()
                        for diagnostic in record["diagnostics"]:
                            if not any(diagnostic is d for d in at_stop):
                                shortest.record(out, diagnostic["kind"], reached, node, key)
                        if limits.stop_at_first and out.found and shortest.proven(out, current):
                            return passes.finish(self, out, start)
                        if closing and any(not any(c is d for d in at_stop) for c in closing):
                            raise AssertionError(f"a local move raised {closing}: LOCAL_KINDS "
                                                 "does not match this engine")
                        child = index.get(key)
                        if child is None:
                            child = len(keys)
                            index[key] = child
                            keys.append(key)
                            parent.append(node)
                            cost.append(reached)
                            terminal.append(machine.status != RUNNING)
                            memory += len(key) + NODE_OVERHEAD
                            if cyclic:
                                edge_start.append(-1)
                                edge_stop.append(-1)
                                loop_fair.append(0)
                        elif reached < cost[child]:
                            cost[child] = reached
                            parent[child] = node
                        else:
                            child = ~child  # known at no higher cost: not queued again
                        if cyclic:
                            real = child if child >= 0 else ~child
                            stutter = (real == node and reached_state == frozen
                                       and after == node_pend)
                            if not (proviso and stutter):
                                children.append(real)
                            if proviso and not stutter:
                                self.widen = False  # a chosen move leaves the state
                            if real == node:  # exact (the same state) or renamed
                                looped.append(move if stutter else ~move)
                        if child >= 0:
                            buckets.setdefault(reached, []).append(child)
                    at = self.settled
                    if cyclic:
                        edge_start[node] = len(edges)
                        edges.extend(children)
                        edge_stop[node] = len(edges)
                        if looped:
                            at = None
                            loop_fair[node] = livelock.loop_fair(self, frozen, node_pend,
                                                                 looped)
        except Stop as stop:
            return passes.stopped(self, out, stop, start, budget, index)
        out.complete = True
        out.depth += 1
        return passes.finish(self, out, start, budget, index)

    def explore(self, limits: Limits = DEFAULT_LIMITS, progress: Callable[[Progress], None] | None
                = None, cancel: Event | None = None, lent: parallel.Lent | None = None,
                helpers: int = 0) -> Exploration:
        """Expand states cheapest first until none is left or a limit is hit.

        Where the partial-order reduction applies (`self.independence`), two passes
        (`passes.two_passes`, docs/checker.md, "Reduction 4").

        With `lent` and `helpers`, where it applies, the search runs on up to `helpers` more
        processes, borrowed from `lent` (app/check/parallel.py: the same states, costs and
        parents; `Exploration.workers` says how many ran).

        The cyclic garbage collector is paused meanwhile: the search makes millions of
        short-lived tuples and no cycles, and each collection would walk them all. What it
        keeps is frozen out of the collector's sight before it comes back (`gc.freeze`): the
        first collection after the search walked it all, 9% of a parallel check's time on the
        16-core host; `release_memory` thaws it once the answer is dropped."""
        enabled = gc.isenabled()
        gc.disable()
        try:
            self.lent, self.helpers = lent, helpers
            if self.independence is None:
                return self._explore(limits, progress, cancel)
            return passes.two_passes(self, limits, progress, cancel)
        finally:
            self.persistent = False
            self.lent, self.helpers = None, 0
            if enabled:
                gc.freeze()
                gc.enable()

    # ----------------------------------------------------------------- counterexamples

    def schedule(self, out: Exploration, kind: str) -> list[str]:
        """The shortest schedule found for `kind`, as mover names (`Schedule('manual')` form);
        see app.check.counterexample."""
        return counterexample.schedule(self, out, kind)


def _as_it_is(frozen: tuple, pend: list) -> tuple[tuple, list]:
    """The unreduced search's canonical form: the state as it is."""
    return frozen, pend
