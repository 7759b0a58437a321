"""A counterexample rebuilt on concrete machines: the search (`app.check.engine`) stores only
keys, costs and parents, so the shortest schedule for a kind is found again by replaying, at each
edge of the path, the move whose successor has the recorded key, then dropping the local moves no
later move needs (the engine's module docstring says why that keeps the schedule shortest)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from app.sim.machine import RUNNING, Machine

from .model import close, new_pend

if TYPE_CHECKING:
    from .engine import Exploration, Explorer


def schedule(explorer: Explorer, out: Exploration, kind: str) -> list[str]:
    """The shortest schedule found for `kind`, as mover names (`Schedule('manual')` form).

    Replays the path of keys on concrete machines (a key may name a renamed state, so at
    each edge the move whose successor has the next key is looked for), then drops the local
    moves no later move needs (see the module docstring). A livelock's lasso was built on
    concrete machines already (app/check/livelock.py).
    """
    found = out.found[kind]
    if found.moves is not None:
        return list(found.moves)
    path = _path(out, found.node)
    if found.child is not None:
        path.append((found.child, found.steps, kind))
    _, _, log = _replay(explorer, path)
    if found.child is None:  # reported at a deadlock: every pending move counts
        return _every_move(log)
    return _drop_unneeded_locals(log)


def lead_in(explorer: Explorer, out: Exploration, node: int) -> tuple[Machine, list, list[str]]:
    """A concrete machine in the stored state `node` (or a renaming of it), its pending
    counts, and every move that leads there, local moves included (the cycle that follows
    starts from the state with them made, as a deadlock's schedule keeps them)."""
    machine, pend, log = _replay(explorer, _path(out, node))
    return machine, pend, _every_move(log)


def _path(out: Exploration, node: int) -> list[tuple[bytes, int, str | None]]:
    """(key, cost, kind the move must raise) from the root to `node`."""
    path = []
    while node != -1:
        path.append((out.keys[node], out.cost[node], None))
        node = out.parent[node]
    path.reverse()
    return path


def _replay(explorer: Explorer, path: list) -> tuple[Machine, list, list[tuple]]:
    """Follow a path of keys on concrete machines. A move is taken only where its name leads
    back to it (`Machine.resolve`), so the names replay by identity: a move that two copies'
    shared name cannot tell apart is not used."""
    key_of = explorer.canonical.key
    log: list[tuple] = []  # ("move", name, agent or None) and what `close` made
    machine = Machine(explorer.cfg)
    pend = new_pend(machine.n_agents)
    _close_logged(explorer, machine, pend, log)
    if key_of(machine.freeze(), pend) != path[0][0]:
        raise AssertionError("the initial state does not match the search's root")
    at_cost = 0
    for target, target_cost, raises in path[1:]:
        frozen = machine.freeze()
        names = machine.moves()
        for move in list(machine.ready):
            name = names[move]
            if names.index(name) != move:
                continue
            trial = Machine(explorer.cfg)
            trial.thaw(frozen, machine.step_no)
            trial_pend, trial_log = list(pend), []
            is_agent = move < trial.n_agents
            trial_log.append(("move", name, move if is_agent else None))
            record = trial.step(move)
            step_cost = 1
            if is_agent:
                step_cost += trial_pend[move]
                trial_pend[move] = 0
            if at_cost + step_cost != target_cost:
                continue
            if raises and not any(d["kind"] == raises for d in record["diagnostics"]):
                continue
            _close_logged(explorer, trial, trial_pend, trial_log)
            if key_of(trial.freeze(), trial_pend) == target:
                machine, pend, at_cost = trial, trial_pend, target_cost
                log.extend(trial_log)
                break
        else:
            raise AssertionError("no move whose name identifies it leads to the next state of "
                                 "the counterexample")
    return machine, pend, log


def _every_move(log: list[tuple]) -> list[str]:
    return [entry[-1] if entry[0] == "read" else entry[1] if entry[0] == "move"
            else entry[2] for entry in log if entry[0] != "charge"]


def _close_logged(explorer: Explorer, machine: Machine, pend: list, log: list) -> None:
    if machine.status != RUNNING:
        return
    close(machine, explorer.local, pend, log, explorer.reads, explorer.guard)


def _drop_unneeded_locals(log: list[tuple]) -> list[str]:
    """Drop each agent's local moves made after its last other move (no later move needs them),
    and each store read that no kept `wait_group` needed.

    The last move (the one that raised the diagnostic) is never local, so it is kept.
    """
    last_other: dict[int, int] = {}
    for i, entry in enumerate(log):
        if entry[0] == "move" and entry[2] is not None:
            last_other[entry[2]] = i
    needed_at: dict[int, int] = {}  # read's index -> index of the wait_group that charged it
    uncharged: dict[int, list[tuple[int, int]]] = {}  # agent -> [(read's index, group)]
    for i, entry in enumerate(log):
        if entry[0] == "read":
            uncharged.setdefault(entry[1], []).append((i, entry[2]))
        elif entry[0] == "charge":
            _, agent, limit = entry
            rest = []
            for index, group in uncharged.get(agent, []):
                if group < limit:
                    needed_at[index] = i + 1  # the wait_group's own entry comes next
                else:
                    rest.append((index, group))
            uncharged[agent] = rest
    out = []
    for i, entry in enumerate(log):
        kind = entry[0]
        if kind == "move":
            out.append(entry[1])
        elif kind == "local":
            if i < last_other.get(entry[1], -1):
                out.append(entry[2])
        elif kind == "read":
            if i in needed_at and needed_at[i] < last_other.get(entry[1], -1):
                out.append(entry[3])
    return out
