"""Livelock: a reachable cycle of states the movers can follow forever, fairly, while the program
never finishes (docs/checker.md, "Livelock").

Fairness is weak fairness (justice) over the movers of app.sim.livelock: every mover that stays
enabled moves again. A strongly connected component C of non-terminal states with an internal
edge holds a fair infinite run exactly when every mover is disabled in some state of C or moves
on some edge inside C (a run that goes round every state and edge of C forever is fair; the
states a fair run visits forever lie in one component and pass the test). So a livelock is
reachable iff some reachable component passes it.

The stored graph is a quotient (identical agents renamed, copies sorted), where a mover's name
does not survive an edge. The analysis is therefore in two stages:

1. *Coarse, on the quotient* (`cycles.sccs`, `_coarse_fair`): classes of movers (identical agents as
   one, copy names with agents renamed the same way): a class passes when some member moves
   inside C or some state of C does not enable every member (`Movers.enabled`). A fair
   concrete run maps onto C and makes every class pass, so no livelock is dropped here.
2. *Exact, on the concrete lift* (`_lift`): from the concrete state the prefix reaches, every
   concrete state whose key is in C, every move tried (no twins skipped). From any lifted state
   a renaming of any other is reachable, so the lift holds a fair component iff C lifts to a
   fair run at all; that component gives the lasso's cycle, on concrete machines, with the
   names the trace replays.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.sim.livelock import enabled_ids, mover_id, unfair_movers
from app.sim.machine import PC, RUNNING, Machine

from . import counterexample
from .budget import Budget, CloseGuard
from .closure import close
from .cycles import fair_cycle, fair_part, path, sccs
from .graph import LIVELOCK, Found
from .model import pending_total

if TYPE_CHECKING:
    from .engine import Exploration, Explorer



class Movers:
    """Mover names and their classes under the search's symmetry (identical agents as one)."""

    def __init__(self, explorer: Explorer):
        machine = explorer.machine
        self.rep: dict[str, str] = {}
        for group in explorer.canonical.groups:
            for a in group:
                self.rep[machine.agents[a].name] = machine.agents[group[0]].name

    def enabled(self, machine: Machine) -> set[str]:
        """The classes whose every member is enabled now (a class some of whose members are
        disabled here passes the coarse test in any component holding this state)."""
        ids = enabled_ids(machine)
        out = {self.coarse(m) for m in ids}
        for name, rep in self.rep.items():
            if name not in ids:
                out.discard(rep)
        return out

    def coarse(self, ident: str) -> str:
        if not self.rep:
            return ident
        if ident in self.rep:
            return self.rep[ident]
        return ":".join(self.rep.get(part, part) for part in ident.split(":"))


def loop_fair(explorer: Explorer, frozen: tuple, pend: list, looped: list[int]) -> int:
    """For a stored state with self-loops (`looped`: the moves, `~move` where the loop comes
    back to a renaming of the state rather than to the state itself): the fairness test of a
    one-state component. The twins' moves the search skipped are tried here. Where every loop
    is exact, the concrete lift is this one state and the test is exact, per mover; else it is
    per class (coarse). A mover enabled in a stored state stands on an ordinary line, so only
    its own move can move it there, unless a closure left it mid-loop on a local line (then
    this says maybe, and the lift, which counts what closures move, decides)."""
    machine = explorer.machine
    looped = list(looped)
    key = explorer.canonical.key(frozen, pend)
    for twin in explorer.canonical.twins(frozen, pend):
        machine.thaw(frozen)
        if twin not in machine.ready:
            continue
        machine.step(twin)
        after = list(pend)
        after[twin] = 0
        if machine.status == RUNNING:
            close(machine, explorer.local, after, None, explorer.reads, explorer.guard)
        if machine.status != RUNNING:
            continue
        if machine.freeze() == frozen and after == pend:
            looped.append(twin)
        elif explorer.canonical.key(machine.freeze(), after) == key:
            looped.append(~twin)
    machine.thaw(frozen)
    regs = machine.regs
    if any(a < machine.n_agents and explorer.local[a][regs[a][PC]] for a in machine.ready):
        return 1  # an agent a closure left mid-loop: closures move it too; the lift decides
    names = machine.moves()
    if all(m >= 0 for m in looped):
        enabled = {mover_id(machine, m, names) for m in machine.ready}
        return int(enabled <= {mover_id(machine, m, names) for m in looped})
    movers = Movers(explorer)
    enabled = movers.enabled(machine)
    moved = {movers.coarse(mover_id(machine, m if m >= 0 else ~m, names)) for m in looped}
    return int(enabled <= moved)


def analyse(explorer: Explorer, out: Exploration, budget: Budget,
            stutters: bool = False) -> None:
    """Find the fair component with the shortest prefix and record its lasso as the `livelock`
    counterexample (`out.found`); `budget.check` may stop it (`budget.Stop`). `stutters`: the
    graph kept no exact self-loop (the persistent pass); each state that had one is a
    component of its own too."""
    movers = Movers(explorer)
    n_agents = explorer.machine.n_agents
    guard = CloseGuard(budget, explorer.guard.max_moves if explorer.guard else 10 ** 5,
                       explorer.cyclic)
    candidates = []
    components = sccs(out, budget)
    if stutters:
        loops = [[v] for v, fair in enumerate(out.loop_fair) if fair]
        components = (c for part in (components, loops) for c in part)
    for component in components:
        if len(component) == 1:
            if not out.loop_fair[component[0]]:
                continue
        elif not _coarse_fair(explorer, out, component, movers, guard):
            continue
        lengths = {n: out.cost[n] + pending_total(explorer.canonical.decode(out.keys[n])[1],
                                                  n_agents) for n in component}
        entry = min(component, key=lambda n: (lengths[n], n))
        candidates.append((lengths[entry], entry, component))
    decode = explorer.canonical.decode
    for _, entry, component in sorted(candidates):
        frozen, pend = decode(out.keys[entry])  # a renaming of the state: as good to decide on
        machine = Machine(explorer.cfg)
        machine.thaw(frozen)
        if fair_part(*_lift(explorer, machine, tuple(pend), {out.keys[n] for n in component},
                             guard), guard.budget) is None:
            continue
        lasso = _lasso(explorer, out, entry, component, guard)
        if lasso is not None:
            moves, cycle_from = shorten(explorer.cfg, *lasso)
            out.found[LIVELOCK] = Found(LIVELOCK, len(moves), entry, None, moves, cycle_from)
            if out.first_found_s is None:
                out.first_found_s = budget.elapsed()
            return


def shorten(cfg, moves: list[str], cycle_from: int) -> tuple[list[str], int]:
    """The lasso cut at its first state that repeats with a fair cycle between (a closure
    that went round a local loop many times before it was found comes back to its state long
    before the lasso does): a prefix of the same schedule, itself a lasso."""
    machine = Machine(cfg)
    seen = {machine.freeze(): 0}
    enabled: list[frozenset] = [enabled_ids(machine)]
    moved: list[str] = []
    for step, name in enumerate(moves, 1):
        move = machine.resolve(name)
        moved.append(mover_id(machine, move))
        machine.step(move)
        frozen = machine.freeze()
        first = seen.get(frozen)
        if first is not None and not unfair_movers(enabled[first:], set(moved[first:])):
            return moves[:step], first + 1
        seen.setdefault(frozen, step)
        enabled.append(enabled_ids(machine))
    return moves, cycle_from


def _expand(explorer: Explorer, machine: Machine, frozen: tuple, pend: tuple, guard):
    """Every move from a state, each with its closure: (move names, movers that moved, the
    machine after, its pending counts); names are None where a name does not lead back to
    its move (two copies of one name, until the engine names every copy apart)."""
    machine.thaw(frozen)
    n_agents = machine.n_agents
    for move in list(machine.ready):
        machine.thaw(frozen)
        names = machine.moves()
        name = names[move]
        nameable = machine.resolve(name) == move
        moved = {mover_id(machine, move, names)}
        machine.step(move)
        after = list(pend)
        if move < n_agents:
            after[move] = 0
        log: list[tuple] = []
        if machine.status == RUNNING:
            close(machine, explorer.local, after, log, explorer.reads, guard)
        made = [name]
        for entry in log:
            if entry[0] == "local":
                moved.add(entry[2])
                made.append(entry[2])
            elif entry[0] == "read":
                moved.add(entry[3])
                made.append(entry[3])
        yield (tuple(made) if nameable else None), moved, machine, after


def _coarse_fair(explorer: Explorer, out: Exploration, component: list[int], movers: Movers,
                 guard) -> bool:
    """Stage 1 on a component of two or more stored states."""
    inside = {out.keys[n] for n in component}
    key_of, decode = explorer.canonical.key, explorer.canonical.decode
    machine = Machine(explorer.cfg)
    always: set[str] | None = None
    moved: set[str] = set()
    for node in component:
        frozen, pend = decode(out.keys[node])
        machine.thaw(frozen)
        here = movers.enabled(machine)
        always = here if always is None else always & here
        for _, by, after_machine, after in _expand(explorer, machine, frozen, pend, guard):
            if (after_machine.status == RUNNING
                    and key_of(after_machine.freeze(), after) in inside):
                moved.update(movers.coarse(m) for m in by)
    return not (always or set()) - moved


def _lasso(explorer: Explorer, out: Exploration, entry: int, component: list[int], guard):
    """Stage 2: the lasso through the concrete lift of a component, or None if it has no
    fair cycle: (mover names, cycle_from)."""
    machine, pend, prefix = counterexample.lead_in(explorer, out, entry)
    inside = {out.keys[n] for n in component}
    states, enabled, edges = _lift(explorer, machine, tuple(pend), inside, guard)
    members = fair_part(states, enabled, edges, guard.budget)
    if members is None:
        return None
    lead = [] if 0 in members else path(edges, 0, lambda w, _: w in members)
    if lead is None:
        return None
    at = lead[-1][0] if lead else 0
    cycle = fair_cycle(at, members, edges, enabled)
    if cycle is None:
        return None
    names = list(prefix)
    for _, _, made in lead:
        names.extend(made)
    cycle_from = len(names) + 1
    for _, _, made in cycle:
        names.extend(made)
    return names, cycle_from


def _lift(explorer: Explorer, machine: Machine, pend: tuple, inside: set, guard):
    """The concrete states reachable from (machine, pend) through states whose canonical key
    is in `inside`: their enabled movers, and per state its edges (child or -1, movers that
    moved, names or None)."""
    key_of = explorer.canonical.key
    first = machine.freeze()
    if key_of(first, list(pend)) not in inside:
        raise AssertionError("the replayed prefix does not reach the livelock's component")
    states = [(first, pend)]
    index = {states[0]: 0}
    enabled: list[frozenset] = []
    edges: list[list] = []
    work = Machine(explorer.cfg)
    v = -1
    while v + 1 < len(states):
        v += 1
        if v % 256 == 0:
            guard.budget.check()
        frozen, state_pend = states[v]
        work.thaw(frozen)
        enabled.append(enabled_ids(work))
        out_edges = []
        for made, by, after_machine, after in _expand(explorer, work, frozen, state_pend, guard):
            child = -1
            if after_machine.status == RUNNING:
                state = (after_machine.freeze(), tuple(after))
                if key_of(state[0], after) in inside:
                    child = index.get(state)
                    if child is None:
                        child = index[state] = len(states)
                        states.append(state)
            out_edges.append((child, frozenset(by), made))
        edges.append([e for e in out_edges if e[0] >= 0])
    return states, enabled, edges
