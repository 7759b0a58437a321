"""Expanding one stored state: the moves the search tries from it and the states they reach,
made on one reused machine (`Machine.step`), put back between moves part by part
(state_codec.restore) and, from the previous expansion's last state, before the first one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.sim.machine import RUNNING, UNDEFINED

from .model import close
from .state_codec import restore, share

if TYPE_CHECKING:
    from .engine import Explorer


def successors(explorer: Explorer, frozen: tuple, pend: list[int], numbers: tuple | None = None,
               at: tuple | None = None):
    """Every (move, edge cost, record, closing diagnostics, machine, pending counts,
    state reached) from a state, in move order, but a twin agent's move
    (model.Canonical.twins: it leads to the key an identical agent's move leads to); in the
    persistent pass, only the moves of a persistent set (app/check/por.py), or every move
    where one of those stops the run with undefined behaviour. The machine is reused: read
    it before asking for the next one. The state reached is `machine.freeze()` with each
    part the move left unchanged shared with `frozen` (state_codec.share); between two
    moves the machine is put back by rebuilding only the parts the last one changed
    (state_codec.restore). `numbers`: `frozen`'s part numbers in the search's table (the
    persistent set is remembered by them, `Independence.persistent_of`). `at`: the state the
    machine is known to be in (the last one the previous call reached, `explorer.settled`),
    from which it is put back part by part instead of thawed."""
    machine = explorer.machine
    fast = explorer.fast_restore
    if fast and at is not None:
        restore(machine, frozen, at)
    else:
        machine.thaw(frozen)
    n_agents = machine.n_agents
    twins = skipped = explorer.canonical.twins(frozen, pend)
    ready = list(machine.ready)
    chosen = (explorer.independence.persistent_of(machine, frozen, ready, numbers)
              if explorer.persistent else None)
    if chosen is not None:
        tried = set(chosen)
        # a twin is skipped only where every lower member of its group is tried (its
        # twin, whichever it is, then is)
        twins = {z for z in twins if all(a in tried for g in explorer.canonical.groups
                                          if z in g for a in g if a < z)}
        order = chosen
    else:
        order = ready
    now = None
    stopped = False
    done = set()
    while True:
        for move in order:
            if move in twins or move in done:
                continue
            done.add(move)
            if now is not None:
                if fast:
                    restore(machine, frozen, now)
                else:
                    machine.thaw(frozen)
            record = machine.step(move)
            if machine.status == UNDEFINED:
                stopped = True
            after = list(pend)
            if move < n_agents:
                cost = 1 + after[move]
                after[move] = 0
            else:
                cost = 1
            closing = (close(machine, explorer.local, after, None, explorer.reads, explorer.guard)
                       if machine.status == RUNNING else [])
            now = share(machine.freeze(), frozen)
            yield move, cost, record, closing, machine, after, now
        if order is ready or not (stopped or explorer.widen):
            if chosen is not None and any(m not in done and m not in skipped
                                          for m in ready):
                explorer.pruned += 1
            explorer.settled = frozen if now is None else now
            return
        order = ready  # a chosen move stops every mover, or the proviso: expand fully
