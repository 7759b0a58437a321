"""One search on several cores: the expensive half of every expansion (the moves, their closures,
freezing and the canonical renaming) in helper processes, the cheap half (keying, deduplication,
costs, parents, diagnostics) in the search itself, exactly as engine.py does it.

The search is level-synchronous on its bucket queue: every state of cost `current` is expanded
before any of cost `current + 1`, and a move costs at least 1, so the expansions of one level
are independent of each other. The level's states go out in chunks, each to a helper with
nothing to do, and the answers are applied **in the level's order**, so every state gets the
number, cost and parent the sequential search gives it: the same verdict, kinds, shortest
lengths, state and transition counts (tests/check/test_parallel.py compares them).

Helpers are forked from the search (they inherit the compiled program, nothing is pickled but
states) and count against the host's check budget: they are borrowed from the pool's idle slots
(`app.core.pool.Lender`) and given back between two chunks as soon as another check needs a
slot, so a queued check never waits for them. It applies where the search keeps no edges
(programs that cannot cycle) and is not asked to stop at the first violation (each pass of
the partial-order reduction runs on its own helpers); `run` answers None elsewhere and the
search runs alone.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import time
from collections.abc import Callable
from multiprocessing.connection import wait
from threading import Event

from app.sim.detectors import deadlock_diagnostics
from app.sim.machine import DEADLOCK, RUNNING

from . import passes, shortest
from .budget import Budget, CloseGuard, Limits, Stop
from .graph import Exploration, Progress
from .layout import F_STATUS
from .model import pending_total
from .parallel_helper import expand, helper

CHUNK = 48
"""States one message to a helper carries."""
MIN_LEVEL = 2 * CHUNK
"""A level with fewer states is expanded by the search itself (no message is worth it)."""
EXPAND_ALONGSIDE = 4
"""With fewer helpers than this the search expands a chunk itself while they are busy; with
more, applying their answers in order keeps it busy, and a chunk of its own would hold up
every later answer."""


class Lent:
    """Helpers' slots: borrowed from a lender (the pool's, or a fixed count on the command
    line), given back when it says so."""

    def __init__(self, borrow: Callable[[int], int], owed: Callable[[], int],
                 give_back: Callable[[int], None]):
        self.borrow, self.owed, self.give_back = borrow, owed, give_back

    @classmethod
    def fixed(cls, helpers: int) -> Lent:
        """`helpers` slots of this machine's own (the command line's `--workers`)."""
        left = [helpers]

        def borrow(want: int) -> int:
            k = max(0, min(want, left[0]))
            left[0] -= k
            return k

        def give_back(k: int) -> None:
            left[0] += k

        return cls(borrow, lambda: 0, give_back)


def applies(explorer, limits: Limits) -> bool:
    return (not explorer.cyclic and not limits.stop_at_first
            and "fork" in multiprocessing.get_all_start_methods())


class _Feed:
    """The search's part table as pickled segments, each pickled once and sent to every helper
    that lacks it (pickling a helper's new parts per helper cost the search a fifth of its time
    with 8 helpers). A segment every helper has is dropped."""

    def __init__(self, canonical, conns: list):
        self.canonical = canonical
        self.end = 0
        """Parts of the table the segments cover."""
        self.blobs: list[bytes] = []
        self.base = 0
        """Segments dropped before `blobs[0]`."""
        self.have = dict.fromkeys(conns, 0)

    def since(self, conn, live: list) -> list[bytes]:
        """The segments `conn`'s helper lacks, the table's newest parts among them (`live`:
        the helpers still running, whose segments are kept)."""
        table = self.canonical.parts
        if len(table) > self.end:
            self.blobs.append(pickle.dumps(table[self.end:], pickle.HIGHEST_PROTOCOL))
            self.end = len(table)
        top = self.base + len(self.blobs)
        out = self.blobs[self.have[conn] - self.base:]
        self.have[conn] = top
        low = min(self.have[c] for c in live)
        if low > self.base:
            del self.blobs[:low - self.base]
            self.base = low
        return out


class _Helpers:
    def __init__(self, explorer, lent: Lent, limits: Limits, want: int):
        self.explorer, self.lent, self.limits = explorer, lent, limits
        self.context = multiprocessing.get_context("fork")
        self.procs: list = []
        self.conns: list = []
        self.most = 0
        self.used = 0
        """The most helpers that had work at once (`Exploration.workers` counts them)."""
        self.grow(want)

    def grow(self, want: int) -> None:
        for _ in range(self.lent.borrow(want)):
            mine, theirs = self.context.Pipe()
            proc = self.context.Process(target=helper, args=(self.explorer, theirs,
                                                               self.limits,
                                                               [mine, *self.conns]),
                                        daemon=True)
            proc.start()
            theirs.close()
            self.procs.append(proc)
            self.conns.append(mine)
        self.most = max(self.most, len(self.procs))

    def shrink(self) -> None:
        """Give back the slots the lender wants back now (between two levels)."""
        for _ in range(min(self.lent.owed(), len(self.procs))):
            self._stop(len(self.procs) - 1)

    def _stop(self, i: int) -> None:
        conn, proc = self.conns.pop(i), self.procs.pop(i)
        try:
            conn.send_bytes(pickle.dumps(None))
        except OSError:
            pass
        conn.close()
        proc.join(1.0)
        if proc.is_alive():
            proc.kill()
            proc.join(1.0)
        self.lent.give_back(1)

    def close(self) -> None:
        while self.procs:
            self._stop(len(self.procs) - 1)


def run(explorer, limits: Limits, progress: Callable[[Progress], None] | None,
        cancel: Event | None, lent: Lent, want: int, targets: set[str] | None = None,
        any_first: bool = False, start: float | None = None) -> Exploration | None:
    """The search of engine.Explorer._explore (one pass: `targets`, `any_first` and `start`
    as there; helpers are forked for each pass, so they see its `persistent` flag) with
    `want` helpers at most (None: it does not apply, or no slot was free; the caller searches
    alone)."""
    if want < 1 or not applies(explorer, limits):
        return None
    helpers = _Helpers(explorer, lent, limits, want)
    if not helpers.procs:
        return None
    try:
        return _search(explorer, limits, progress, cancel, helpers, targets, any_first,
                       time.perf_counter() if start is None else start)
    finally:
        helpers.close()


def _search(explorer, limits: Limits, progress, cancel, helpers: _Helpers, targets,
            any_first: bool, start: float) -> Exploration:
    from .engine import CHECK_EVERY, NODE_OVERHEAD, PROGRESS_EVERY_S

    out = Exploration(explorer.cfg, explorer.reduce, started=start, cyclic=False)
    budget = Budget(limits, cancel, start)
    explorer.guard = CloseGuard(budget, limits.max_local_moves, False)
    canonical = explorer.canonical
    pack, pack_named, decode = canonical.pack, canonical.pack_named, canonical.decode
    feed = _Feed(canonical, helpers.conns)
    try:
        machine, pend, _ = explorer.root()
    except Stop as stop:
        return passes.stopped(explorer, out, stop, start)
    root_key = canonical.key(machine.freeze(), pend)
    keys, parent, cost = out.keys, out.parent, out.cost
    index = {root_key: 0}
    keys.append(root_key)
    parent.append(-1)
    cost.append(0)
    terminal = bytearray([machine.status != RUNNING])
    buckets: dict[int, list[int]] = {0: [0]}
    memory = [len(root_key) + NODE_OVERHEAD]
    budget.states = keys.__len__
    budget.memory = lambda: memory[0] + canonical.part_bytes
    next_report = [start + PROGRESS_EVERY_S]
    n_agents = explorer.machine.n_agents
    expanded = 0

    def apply(node: int, current: int, successors: list, named: bool = False) -> None:
        for step_cost, kinds, raised, ended, *state in successors:
            out.transitions += 1
            reached = current + step_cost
            key = pack_named(state[0]) if named else pack(*state)
            for kind in kinds:
                shortest.record(out, kind, reached, node, key)
            if raised:
                raise AssertionError("a local move raised a diagnostic: LOCAL_KINDS does not "
                                     "match this engine")
            child = index.get(key)
            if child is None:
                child = len(keys)
                index[key] = child
                keys.append(key)
                parent.append(node)
                cost.append(reached)
                terminal.append(ended)
                memory[0] += len(key) + NODE_OVERHEAD
                buckets.setdefault(reached, []).append(child)
            elif reached < cost[child]:
                cost[child] = reached
                parent[child] = node
                buckets.setdefault(reached, []).append(child)

    def deadlocked(node: int, current: int, frozen: tuple, node_pend: list) -> None:
        if frozen[F_STATUS] == DEADLOCK:
            explorer.machine.thaw(frozen)
            for diagnostic in deadlock_diagnostics(explorer.machine):
                shortest.record(out, diagnostic["kind"],
                                current + pending_total(node_pend, n_agents), node, None)

    try:
        while buckets:
            current = min(buckets)
            bucket = buckets.pop(current)
            out.depth = current
            if shortest.answered(out, limits, targets, any_first, current):
                return passes.finish(explorer, out, start)
            order = [node for node in bucket if cost[node] == current]
            helpers.shrink()
            if len(order) < MIN_LEVEL or not helpers.procs:
                for i, node in enumerate(order):
                    frozen, node_pend = decode(keys[node])
                    if terminal[node]:
                        deadlocked(node, current, frozen, node_pend)
                        continue
                    apply(node, current, expand(explorer, canonical.form, frozen, node_pend))
                    expanded += 1
                    if expanded % CHECK_EVERY == 0 and _look(out, budget, progress, buckets,
                                                             len(order) - i, next_report,
                                                             start):
                        return passes.finish(explorer, out, start)
                continue
            chunks = [order[i:i + CHUNK] for i in range(0, len(order), CHUNK)]
            answers: dict[int, tuple[bool, list]] = {}
            busy: dict = {}
            local = None  # the chunk the search expands itself: [index, answers, position]
            sent = applied = 0
            while applied < len(chunks):
                for conn in helpers.conns:
                    if conn not in busy and sent < len(chunks):
                        states = [keys[node] for node in chunks[sent] if not terminal[node]]
                        conn.send_bytes(pickle.dumps((feed.since(conn, helpers.conns), states),
                                                     pickle.HIGHEST_PROTOCOL))
                        busy[conn] = sent
                        sent += 1
                        helpers.used = max(helpers.used, len(busy))
                if (local is None and sent < len(chunks)
                        and len(helpers.procs) < EXPAND_ALONGSIDE):  # every helper is busy
                    local = [sent, [], 0]
                    sent += 1
                if local is not None:  # one state of its own, then a look at the helpers
                    at, mine, position = local
                    node = chunks[at][position]
                    if not terminal[node]:
                        mine.append(expand(explorer, canonical.form, *decode(keys[node])))
                    local[2] += 1
                    if local[2] == len(chunks[at]):
                        answers[at] = (False, mine)
                        local = None
                    ready = wait(list(busy), 0) if busy else []
                else:
                    ready = wait(list(busy)) if busy else []
                for conn in ready:
                    answer = pickle.loads(conn.recv_bytes())
                    if answer[0] == "stop":
                        raise Stop(answer[1], answer[2])
                    if answer[0] == "error":
                        raise AssertionError(f"in a helper of the search: {answer[1]}")
                    answers[busy.pop(conn)] = (True, answer[1])
                while applied in answers:
                    named, expansions = answers.pop(applied)
                    expansions = iter(expansions)
                    for node in chunks[applied]:
                        if terminal[node]:
                            deadlocked(node, current, *decode(keys[node]))
                        else:
                            apply(node, current, next(expansions), named)
                            expanded += 1
                    applied += 1
                    if _look(out, budget, progress, buckets, len(order) - CHUNK * applied,
                             next_report, start):
                        for conn in busy:  # let them finish: their answers are dropped
                            conn.recv_bytes()
                        return passes.finish(explorer, out, start)
    except Stop as stop:
        return passes.stopped(explorer, out, stop, start)
    finally:
        out.workers = 1 + helpers.used
    out.complete = True
    out.depth += 1
    return passes.finish(explorer, out, start)


def _look(out: Exploration, budget: Budget, progress, buckets, left: int, next_report: list,
          start: float) -> bool:
    """The budget and the progress report between two chunks: True when a limit stops it."""
    stop = budget.reason()
    if stop:
        out.stopped_by = stop
        return True
    now = time.perf_counter()
    if progress is not None and now >= next_report[0]:
        next_report[0] = now + 0.2
        queued = sum(map(len, buckets.values())) + max(0, left)
        progress(Progress(len(out.keys), out.transitions, out.depth, queued, now - start,
                          {k: f.steps for k, f in out.found.items()}))
    return False


def cpu_helpers() -> int:
    """Helpers this machine's cores allow besides the search itself."""
    return max(0, (os.cpu_count() or 1) - 1)
